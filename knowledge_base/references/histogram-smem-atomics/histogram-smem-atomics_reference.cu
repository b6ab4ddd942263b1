// Naive reference: counts[b] = number of i with x[i] == b, bins in [0, bins).
// Zero the counts, then one global atomicAdd per element.
extern "C" __global__ void hist_ref_zero(int* counts, int bins) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < bins) counts[b] = 0;
}
extern "C" __global__ void hist_ref(const int* x, int* counts, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&counts[x[i]], 1);
}
