// The float4 copy kernel of bench/copy_fidelity.json, launched with the same
// grid and block as kopt's launch plan, with an L2 flush before each launch,
// for Nsight Compute to time (ncu cannot attach to kopt-worker, which uses
// CUPTI itself). Usage: fidelity_target N [repeats] [write|read] [input sets]
//   write (default): the flush writes its buffer (what ncu's own cache control
//     is compared with, ncu --cache-control all);
//   read: kopt's flush (kopt_l2_flush: __ldcg reads of 2x L2) and rotation
//     over several input sets, as kopt's timing loop does, so that under
//     ncu --cache-control none both tools see the same state before a launch.
#include <cstdio>
#include <cstdlib>

extern "C" __global__ void copy4(const float4* __restrict__ x, float4* __restrict__ out, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x)
    out[i] = x[i];
}
__global__ void read_flush(unsigned* p, long long n) {
  unsigned acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    acc ^= __ldcg(p + i);
  if (acc == 0xFFFFFFFFu) p[0] = acc;
}
__global__ void flush(unsigned* p, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) p[i] = (unsigned)i;
}

int main(int argc, char** argv) {
  const long long n = atoll(argv[1]);
  const int reps = argc > 2 ? atoi(argv[2]) : 7;
  const bool read = argc > 3 && argv[3][0] == 'r';
  const int sets = argc > 4 ? atoi(argv[4]) : 1;
  const long long n4 = n / 4;
  float4* x[16];
  float4* out;
  unsigned* f;
  const long long fl = 2ll * 62914560 / 4;
  if (sets < 1 || sets > 16) { fprintf(stderr, "sets 1..16\n"); return 1; }
  for (int k = 0; k < sets; ++k) {
    if (cudaMalloc(&x[k], n * 4)) { fprintf(stderr, "alloc\n"); return 1; }
    cudaMemset(x[k], k, n * 4);
  }
  if (cudaMalloc(&out, n * 4) || cudaMalloc(&f, fl * 4)) { fprintf(stderr, "alloc\n"); return 1; }
  cudaMemset(f, 0, fl * 4);
  long long blocks = (n4 + 255) / 256;
  if (blocks > 2112) blocks = 2112;
  for (int r = 0; r < reps; ++r) {
    if (read) read_flush<<<65536, 256>>>(f, fl);  // kopt: blocks_for(words), 256 threads
    else flush<<<2112, 256>>>(f, fl);
    copy4<<<(unsigned)blocks, 256>>>(x[r % sets], out, n4);
  }
  if (cudaDeviceSynchronize()) { fprintf(stderr, "failed\n"); return 1; }
  return 0;
}
