// The three kernels of bench/counters/*.json, compiled with nvcc and launched
// with the same configurations, for Nsight Compute (bench/run_counters_xcheck.sh).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

extern "C" __global__ void copy4(const float4* x, float4* out, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x)
    out[i] = x[i];
}
extern "C" __global__ void fma_loop(const float* x, float* out, long long n, int iters) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = a + 1.f, c = a + 2.f, d = a + 3.f;
#pragma unroll 8
  for (int j = 0; j < iters; ++j) {
    a = fmaf(a, 0.999f, 1e-3f); b = fmaf(b, 0.999f, 1e-3f); c = fmaf(c, 0.999f, 1e-3f); d = fmaf(d, 0.999f, 1e-3f);
  }
  out[i] = x[i] + 1e-30f * (a + b + c + d);
}
extern "C" __global__ void one_block(const float* x, float* out, long long n) {
  for (long long i = threadIdx.x; i < n; i += blockDim.x) out[i] = x[i];
}

int main() {
  const long long big = 268435456, fman = 270336, onen = 65536;
  float *x, *out;
  if (cudaMalloc(&x, big * 4) != cudaSuccess || cudaMalloc(&out, big * 4) != cudaSuccess) return 1;
  cudaMemset(x, 0, big * 4);
  copy4<<<2112, 256>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(out), big / 4);
  fma_loop<<<(fman + 255) / 256, 256>>>(x, out, fman, 4096);
  one_block<<<1, 32>>>(x, out, onen);
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("%s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
