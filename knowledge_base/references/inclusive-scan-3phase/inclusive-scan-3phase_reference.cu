// Naive reference: out[i] = x[0] + ... + x[i] (int32), in three sequential
// steps over chunks of 4096 elements so that it finishes in reasonable time:
// one thread per chunk sums it, one thread turns the chunk sums into running
// offsets, one thread per chunk writes the running sum. Every sum is a plain
// sequential loop.
extern "C" __global__ void scan_ref_chunk_sums(const int* x, int* sums, long long n) {
  const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (c * 4096 >= n) return;
  int s = 0;
  for (long long i = c * 4096; i < n && i < (c + 1) * 4096; ++i) s += x[i];
  sums[c] = s;
}

extern "C" __global__ void scan_ref_offsets(int* sums, long long chunks) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  int run = 0;
  for (long long c = 0; c < chunks; ++c) { const int s = sums[c]; sums[c] = run; run += s; }
}

extern "C" __global__ void scan_ref_chunks(const int* x, const int* offsets, int* out, long long n) {
  const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (c * 4096 >= n) return;
  int s = offsets[c];
  for (long long i = c * 4096; i < n && i < (c + 1) * 4096; ++i) { s += x[i]; out[i] = s; }
}
