// Where the time between CUPTI Activity and Nsight Compute's
// gpu__time_duration goes (docs/benchmarks.md, "Where the gap comes from").
//
// Runs kopt's sample sequence (reading L2 flush of 2x L2, then the kernel)
// for several kernels and sizes, and reports per kernel, as medians over the
// samples:
//   span   Activity end - start of the kernel (kopt's sample duration),
//   gap    Activity start of the kernel - end of the flush before it (the
//          stream's time between the two: launch processing, wait for idle),
//   event  CUDA events recorded around the kernel alone.
// Modes:
//   activity        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (kopt's), events on
//   activity-noev   the same without events between flush and kernel
//   serial          CUPTI_ACTIVITY_KIND_KERNEL (serialized kernels)
//   plain           no CUPTI: for `ncu --cache-control none` to time
// Usage: launch_gap_probe MODE [samples] [cubin directory]
// With a cubin directory (kopt's cubin cache after `kopt eval` of the three
// fidelity configs), copy4, ffma_chain and smem_walk are the binaries kopt
// compiled with NVRTC, not this file's nvcc build of the same source: the
// two compilers can give different code (smem_walk: 24 registers from NVRTC,
// 32 from nvcc, and a different inner loop).
// Build: nvcc -O3 -arch=sm_90a bench/launch_gap_probe.cu -lcupti -o launch_gap_probe
#include <cupti.h>

#include <filesystem>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)
#define CU(x)                                                                          \
  do {                                                                                 \
    CUptiResult r_ = (x);                                                              \
    if (r_ != CUPTI_SUCCESS) {                                                         \
      const char* s_ = nullptr;                                                        \
      cuptiGetResultString(r_, &s_);                                                   \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?");        \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

// The kernels of bench/copy_fidelity.json, bench/ffma_fidelity.json and
// bench/smem_fidelity.json, source for source, launched with the same grids
// (the CSV gives each one's register count, to compare with kopt's compile).
extern "C" __global__ void probe_empty() {}
extern "C" __global__ void copy4(const float4* __restrict__ x, float4* __restrict__ out, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x)
    out[i] = x[i];
}
extern "C" __global__ void ffma_chain(const float* __restrict__ x, float* __restrict__ out, int iters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float a[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = x[i] + j;
  for (int k = 0; k < iters; ++k)
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = fmaf(a[j], 0.999f, 0.5f);
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += a[j];
  out[i] = s;
}
extern "C" __global__ void smem_walk(const float* __restrict__ x, float* __restrict__ out, int iters) {
  extern __shared__ float sm[];
  const int n = 200 * 1024 / 4;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sm[i] = x[(blockIdx.x * 997 + i) % 4096];
  __syncthreads();
  float acc = 0.f;
  for (int it = 0; it < iters; ++it) acc += sm[(threadIdx.x * 33 + it * 97) % n];
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
extern "C" __global__ void kopt_probe_flush(const unsigned* p, long long n, unsigned* sink) {
  unsigned acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    acc ^= __ldcg(p + i);
  if (acc == 0xFFFFFFFFu) sink[0] = acc;
}

struct rec {
  std::string name;
  unsigned long long start, end;
};
static std::mutex g_mu;
static std::vector<rec> g_recs;
static void CUPTIAPI buf_req(uint8_t** b, size_t* size, size_t* maxr) {
  *size = 16 << 20;
  *b = (uint8_t*)aligned_alloc(8, *size);
  *maxr = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t* b, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  std::lock_guard<std::mutex> l(g_mu);
  while (valid && cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && r->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    auto* k = (CUpti_ActivityKernel10*)r;
    g_recs.push_back({k->name ? k->name : "", k->start, k->end});
  }
  free(b);
}

static double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s activity|activity-noev|serial|plain [samples]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const int samples = argc > 2 ? atoi(argv[2]) : 50;
  const std::string cubin_dir = argc > 3 ? argv[3] : "";
  const bool cupti = mode != "plain";
  const bool events = mode == "activity" || mode == "serial";
  if (cupti) {
    CU(cuptiActivityRegisterCallbacks(buf_req, buf_done));
    CU(cuptiActivityEnable(mode == "serial" ? CUPTI_ACTIVITY_KIND_KERNEL : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  }
  int dev = 0, l2 = 0;
  CK(cudaSetDevice(dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  const long long fwords = 2ll * l2 / 4;
  unsigned *fbuf, *sink;
  CK(cudaMalloc(&fbuf, fwords * 4));
  CK(cudaMemset(fbuf, 0, fwords * 4));
  CK(cudaMalloc(&sink, 4096));
  const long long max_n = 2147483648ll;
  float4 *x, *y;
  CK(cudaMalloc(&x, max_n * 4));
  CK(cudaMalloc(&y, max_n * 4));
  CK(cudaMemset(x, 1, max_n * 4));
  // Kernel handles: this file's, or kopt's cubins.
  const void* fn_copy = (const void*)copy4;
  const void* fn_ffma = (const void*)ffma_chain;
  const void* fn_smem = (const void*)smem_walk;
  if (!cubin_dir.empty()) {
    int found = 0;
    std::error_code ec;
    std::filesystem::directory_iterator dir(cubin_dir, ec);
    if (ec) {
      fprintf(stderr, "%s: %s\n", cubin_dir.c_str(), ec.message().c_str());
      return 1;
    }
    for (const auto& e : dir) {
      if (e.path().extension() != ".cubin") continue;
      cudaLibrary_t lib = nullptr;
      if (cudaLibraryLoadFromFile(&lib, e.path().c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess) {
        cudaGetLastError();
        continue;
      }
      for (auto [name, slot] : {std::pair<const char*, const void**>{"copy4", &fn_copy}, {"ffma_chain", &fn_ffma},
                                {"smem_walk", &fn_smem}}) {
        cudaKernel_t k = nullptr;
        if (cudaLibraryGetKernel(&k, lib, name) == cudaSuccess) {
          *slot = (const void*)k;
          ++found;
          fprintf(stderr, "%s from %s\n", name, e.path().c_str());
        } else {
          cudaGetLastError();
        }
      }
    }
    if (found != 3) {
      fprintf(stderr, "%s: found %d of the 3 kernels (copy4, ffma_chain, smem_walk)\n", cubin_dir.c_str(), found);
      return 1;
    }
  }
  CK(cudaFuncSetAttribute(fn_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  struct job {
    std::string label;
    const char* kernel;
    long long p;
  };
  std::vector<job> jobs = {
      {"empty", "probe_empty", 0},
      {"copy n2m", "copy4", 2097152},         {"copy n8m", "copy4", 8388608},
      {"copy n32m", "copy4", 33554432},       {"copy n128m", "copy4", 134217728},
      {"copy n512m", "copy4", 536870912},     {"copy n2g", "copy4", 2147483648ll},
      {"ffma i128", "ffma_chain", 128},       {"ffma i256", "ffma_chain", 256},
      {"ffma i512", "ffma_chain", 512},       {"ffma i1280", "ffma_chain", 1280},
      {"ffma i25600", "ffma_chain", 25600},   {"ffma i128000", "ffma_chain", 128000},
      {"smem i500", "smem_walk", 500},        {"smem i1000", "smem_walk", 1000},
      {"smem i2000", "smem_walk", 2000},      {"smem i10000", "smem_walk", 10000},
      {"smem i100000", "smem_walk", 100000},
  };
  printf("mode,kernel,regs,samples,span_us,gap_us,span_plus_gap_us,event_us\n");
  for (const auto& j : jobs) {
    const int reps = j.p >= 536870912 ? std::max(5, samples / 5) : samples;
    std::vector<double> ev;
    const std::string k = j.kernel;
    auto launch = [&] {
      if (k == "probe_empty") {
        probe_empty<<<1, 32>>>();
        return;
      }
      long long n4 = j.p / 4;
      int iters = (int)j.p;
      void* xp = x;
      void* yp = y;
      void* a_copy[] = {&xp, &yp, &n4};
      void* a_loop[] = {&xp, &yp, &iters};
      if (k == "copy4")
        CK(cudaLaunchKernel(fn_copy, dim3((unsigned)std::min<long long>((n4 + 255) / 256, 2112)), dim3(256), a_copy, 0, 0));
      else if (k == "ffma_chain") CK(cudaLaunchKernel(fn_ffma, dim3(528), dim3(256), a_loop, 0, 0));
      else CK(cudaLaunchKernel(fn_smem, dim3(132), dim3(256), a_loop, 200 * 1024, 0));
    };
    cudaFuncAttributes fa{};
    CK(cudaFuncGetAttributes(&fa, k == "probe_empty" ? (const void*)probe_empty
                                  : k == "copy4"      ? fn_copy
                                  : k == "ffma_chain" ? fn_ffma
                                                      : fn_smem));
    for (int r = 0; r < reps + 3; ++r) {  // 3 warm-up samples, dropped below
      kopt_probe_flush<<<65536, 256>>>(fbuf, fwords, sink);
      if (events) CK(cudaEventRecord(e0));
      launch();
      if (events) CK(cudaEventRecord(e1));
      CK(cudaGetLastError());
      if (events) {
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 3) ev.push_back(ms * 1e3);
      }
    }
    CK(cudaDeviceSynchronize());
    std::vector<double> span, gap, both;
    if (cupti) {
      CU(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
      std::lock_guard<std::mutex> l(g_mu);
      std::sort(g_recs.begin(), g_recs.end(), [](const rec& a, const rec& b) { return a.start < b.start; });
      unsigned long long fend = 0;
      int seen = 0;
      for (const auto& r : g_recs) {
        if (r.name == "kopt_probe_flush") { fend = r.end; continue; }
        if (r.name != j.kernel || !fend) continue;
        if (seen++ < 3) { fend = 0; continue; }
        span.push_back((r.end - r.start) * 1e-3);
        gap.push_back(((long long)r.start - (long long)fend) * 1e-3);
        both.push_back((r.end - fend) * 1e-3);
        fend = 0;
      }
      g_recs.clear();
    }
    printf("%s,%s,%d,%zu,%.3f,%.3f,%.3f,%.3f\n", mode.c_str(), j.label.c_str(), fa.numRegs,
           cupti ? span.size() : (size_t)reps,
           median(span), median(gap), median(both), median(ev));
    fflush(stdout);
  }
  return 0;
}
