// Standalone timing / correctness harness for the block_scaled_mm kernels
// (bench/hopper/bsmm). Includes the kernel file given by -DKFILE and the
// config's reference kernel; per shape: generates data like the config
// (e4m3 of N(0, 160^2) saturated, scales U[0.004, 0.008)), checks the result
// against the reference with the config's tolerance (atol 0.02, rtol 0.002),
// then times prep, main and both after an L2 flush (CUDA events, median).
// Usage: harness "m n k" ... (CTAS from -DHCTAS, default 132; -DHFUSED: the one-launch
// plan, bsmm_fused)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include KFILE
#ifndef STAGE_STRIDE
#define STAGE_STRIDE STAGE_BYTES
#endif
#ifndef EPI_V4
#define EPI_V4 0
#endif
#ifndef HPREP_GRID
#define HPREP_GRID 528
#endif
#ifndef HPREP_SMEM
#define HPREP_SMEM 0
#endif
#ifdef HOLD
#define PREP_OUT out,
#else
#define PREP_OUT
#endif
#include REFFILE
#ifndef HCTAS
#define HCTAS 132
#endif
#define CK(x)                                                              \
  do {                                                                     \
    cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                               \
      printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

__device__ unsigned hsh(unsigned long long x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return (unsigned)x;
}
__global__ void gen_fp8(__nv_fp8_e4m3* p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float u1 = (hsh(i * 2 + seed * 0x9E3779B97F4A7C15ULL) + 1.f) * 2.3283064e-10f,
          u2 = hsh(i * 2 + 1 + seed * 0x9E3779B97F4A7C15ULL) * 2.3283064e-10f;
    float z = sqrtf(-2.f * logf(u1)) * cosf(6.2831853f * u2) * 160.f;
    z = fminf(fmaxf(z, -448.f), 448.f);
    p[i] = __nv_fp8_e4m3(z);
  }
}
__global__ void gen_scale(float* p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    p[i] = 0.004f + 0.004f * (hsh(i + seed * 0x51ED270B27ULL) * 2.3283064e-10f);
}
__global__ void cmp(const float* o, const float* r, long long n, unsigned* bad, unsigned* maxerr) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float e = fabsf(o[i] - r[i]);
    if (!(e <= 0.02f + 0.002f * fabsf(r[i]))) atomicAdd(bad, 1u);
    if (e != e) e = 1e30f;
    atomicMax(maxerr, __float_as_uint(e));
  }
}
__global__ void flush(float* p, long long n, float v) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    p[i] = v;
}

int main(int argc, char** argv) {
  const int ctas = HCTAS;
  const int smem = STAGES * STAGE_STRIDE + 2048 + 16384 * EPI_V4;
  CK(cudaFuncSetAttribute(bsmm_f16_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
#ifdef HFUSED
  CK(cudaFuncSetAttribute(bsmm_fused, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
#endif
  if (HPREP_SMEM > 48 * 1024)
    CK(cudaFuncSetAttribute(bsmm_prep, cudaFuncAttributeMaxDynamicSharedMemorySize, HPREP_SMEM));
  const long long FL = 64ll << 20;  // 256 MB flush buffer
  float* fl;
  CK(cudaMalloc(&fl, FL * 4));
  cudaEvent_t ev[3];
  for (auto& q : ev) CK(cudaEventCreate(&q));
  for (int a = 1; a < argc; ++a) {
    int M, N, K;
    sscanf(argv[a], "%d %d %d", &M, &N, &K);
    const int G = K / 128;
    __nv_fp8_e4m3 *A, *B;
    float *as, *bs, *out, *ref;
    unsigned char *conv, *maps;
    unsigned* st;
    CK(cudaMalloc(&A, (size_t)M * K));
    CK(cudaMalloc(&B, (size_t)N * K));
    CK(cudaMalloc(&as, (size_t)M * G * 4));
    CK(cudaMalloc(&bs, (size_t)(N / 128) * G * 4));
    CK(cudaMalloc(&out, (size_t)M * N * 4));
    CK(cudaMalloc(&ref, (size_t)M * N * 4));
    const int mn = std::min(M, N);
    const size_t convb = 2ull * mn * K + 8ull * G * ((mn + 255) / 256) * 256 + 131072ull * ctas;
    CK(cudaMalloc(&conv, convb));
    CK(cudaMalloc(&maps, 260 * ctas + 4));
    CK(cudaMemset(maps, 0, 260 * ctas + 4));
    CK(cudaMalloc(&st, 8));
    gen_fp8<<<1024, 256>>>(A, (long long)M * K, 1);
    gen_fp8<<<1024, 256>>>(B, (long long)N * K, 2);
    gen_scale<<<256, 256>>>(as, (long long)M * G, 3);
    gen_scale<<<256, 256>>>(bs, (long long)(N / 128) * G, 4);
    block_scaled_mm_ref<<<dim3((N + 63) / 64, (M + 63) / 64), dim3(16, 16)>>>(A, as, B, bs, ref, M,
                                                                              N, K);
    CK(cudaMemset(out, 0xff, (size_t)M * N * 4));
    auto launch = [&](int which) {
#ifdef HFUSED  // one launch: "prep" times nothing, "main" the fused kernel
      if (which & 2) bsmm_fused<<<ctas, 384, smem>>>(A, as, B, bs, out, conv, maps, M, N, K, ctas);
      return;
#endif
      if (which & 1)
        bsmm_prep<<<HPREP_GRID, 256, HPREP_SMEM>>>(A, as, B, PREP_OUT conv, maps, M, N, K, ctas);
      if (which & 2) bsmm_f16_tma<<<ctas, 384, smem>>>(as, bs, out, conv, maps, M, N, K, ctas);
    };
    launch(3);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemset(st, 0, 8));
    const long long n = (long long)M * N;
    cmp<<<1024, 256>>>(out, ref, n, st, st + 1);
    unsigned h[2];
    CK(cudaMemcpy(h, st, 8, cudaMemcpyDeviceToHost));
    float me;
    memcpy(&me, &h[1], 4);
    // timing
    int IT = 40;
    {  // long shapes: fewer samples
      CK(cudaEventRecord(ev[0]));
      launch(3);
      CK(cudaEventRecord(ev[1]));
      CK(cudaEventSynchronize(ev[1]));
      float x;
      cudaEventElapsedTime(&x, ev[0], ev[1]);
      if (x > 1.f)
        IT = 5;
      else if (x > 0.2f)
        IT = 15;
    }
    std::vector<float> t01, t12, t02, tboth, tprep, tmain;
    for (int i = 0; i < IT; ++i) {
      flush<<<1024, 512>>>(fl, FL, (float)i);
      CK(cudaEventRecord(ev[0]));
      launch(1);
      CK(cudaEventRecord(ev[1]));
      launch(2);
      CK(cudaEventRecord(ev[2]));
      CK(cudaEventSynchronize(ev[2]));
      float x, y;
      cudaEventElapsedTime(&x, ev[0], ev[1]);
      cudaEventElapsedTime(&y, ev[1], ev[2]);
      t01.push_back(x * 1e3f);
      t12.push_back(y * 1e3f);
      flush<<<1024, 512>>>(fl, FL, (float)i);
      CK(cudaEventRecord(ev[0]));
      launch(3);
      CK(cudaEventRecord(ev[1]));
      CK(cudaEventSynchronize(ev[1]));
      cudaEventElapsedTime(&x, ev[0], ev[1]);
      tboth.push_back(x * 1e3f);
    }
    auto med = [](std::vector<float> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    double fl_ = 2.0 * M * N * K;
    printf(
        "shape m%d n%d k%d: bad %u maxerr %.3g | both %.2f us (%.3f fp8-SOL) | prep %.2f main %.2f "
        "us\n",
        M, N, K, h[0], me, med(tboth), fl_ / (med(tboth) * 1e-6) / 1979e12, med(t01), med(t12));
#ifdef BSMM_TRACE
    {
      flush<<<1024, 512>>>(fl, FL, 1.f);
      launch(3);
      CK(cudaDeviceSynchronize());
      static unsigned long long tr[8192];
      CK(cudaMemcpyFromSymbol(tr, bsmm_trace, sizeof(tr)));
      unsigned long long p0 = ~0ull, p1 = 0, pe0 = 0;
      for (int b = 0; b < 528; ++b) {
        p0 = std::min(p0, tr[4096 + 2 * b]);
        p1 = std::max(p1, tr[4096 + 2 * b + 1]);
      }
      pe0 = tr[4096 + 1];
      std::vector<double> s0, s1, s2, s3;
      for (int b = 0; b < ctas; ++b) {
        s0.push_back((double)(tr[b * 8] - p0));
        s1.push_back((double)(tr[b * 8 + 1] - p0));
        s2.push_back((double)(tr[b * 8 + 2] - p0));
        s3.push_back((double)(tr[b * 8 + 3] - p0));
      }
      auto mm = [](std::vector<double> v, const char* nm) {
        std::sort(v.begin(), v.end());
        printf("   %s min %.2f med %.2f max %.2f us\n", nm, v[0] / 1e3, v[v.size() / 2] / 1e3,
               v.back() / 1e3);
      };
      printf("  trace (us from prep start): prep block0 end %.2f, prep last end %.2f\n",
             (pe0 - p0) / 1e3, (p1 - p0) / 1e3);
      mm(s0, "main entry   ");
      mm(s1, "first stage  ");
      mm(s2, "loop end     ");
      mm(s3, "epilogue end ");
    }
#endif
    cudaFree(A);
    cudaFree(B);
    cudaFree(as);
    cudaFree(bs);
    cudaFree(out);
    cudaFree(ref);
    cudaFree(conv);
    cudaFree(maps);
    cudaFree(st);
  }
  return 0;
}
