// The float4 copy kernel of bench/copy_fidelity.json, launched with the same
// grid and block as kopt's launch plan, with an L2 flush before each launch,
// for Nsight Compute to time (ncu cannot attach to kopt-worker, which uses
// CUPTI itself). Usage: fidelity_target N [repeats]
#include <cstdio>
#include <cstdlib>

extern "C" __global__ void copy4(const float4* __restrict__ x, float4* __restrict__ out, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x)
    out[i] = x[i];
}
__global__ void flush(unsigned* p, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) p[i] = (unsigned)i;
}

int main(int argc, char** argv) {
  const long long n = atoll(argv[1]);
  const int reps = argc > 2 ? atoi(argv[2]) : 7;
  const long long n4 = n / 4;
  float4 *x, *out;
  unsigned* f;
  const long long fl = 2ll * 62914560 / 4;
  if (cudaMalloc(&x, n * 4) || cudaMalloc(&out, n * 4) || cudaMalloc(&f, fl * 4)) { fprintf(stderr, "alloc\n"); return 1; }
  cudaMemset(x, 0, n * 4);
  long long blocks = (n4 + 255) / 256;
  if (blocks > 2112) blocks = 2112;
  for (int r = 0; r < reps; ++r) {
    flush<<<2112, 256>>>(f, fl);
    copy4<<<(unsigned)blocks, 256>>>(x, out, n4);
  }
  if (cudaDeviceSynchronize()) { fprintf(stderr, "failed\n"); return 1; }
  return 0;
}
