// Reference kernel: histogram of int32 values in [0, bins) into int32 counts,
// a two-kernel plan (zero the counts, then count).
// Techniques: privatized histograms in shared memory (one per block, bins * 4
// bytes of dynamic shared memory): the per-element atomics hit shared memory,
// and each block adds only its non-zero bins to global memory once, so global
// atomic traffic is bins x blocks instead of n; a grid of a few blocks per SM
// with a grid-stride loop (fewer blocks = fewer global merges), 16-byte loads of
// the input (4 values per thread per step, UNROLL steps in flight).
// Contention: with few bins and skewed data, shared atomics on the same bin
// serialize; replicate the histogram per warp (see atomics-hierarchical-reduction)
// when that shows.
// Tunable: BLOCK (threads per block), BLOCKS_PER_SM (grid = 132 * BLOCKS_PER_SM).
// Measured on H200 (2026-12-01): 61.8% of speed of light weighted over the config's workloads, 84.8% on n67108864_b4096; 42.6x the naive reference.

extern "C" __global__ void hist_zero(int* __restrict__ counts, int bins) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < bins) counts[b] = 0;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
hist_smem(const int* __restrict__ x, int* __restrict__ counts, long long n, int bins) {
  extern __shared__ int h[];
  for (int b = threadIdx.x; b < bins; b += BLOCK) h[b] = 0;
  __syncthreads();
  const long long nvec = n / 4;
  const int4* __restrict__ xv = reinterpret_cast<const int4*>(x);
  const long long stride = (long long)gridDim.x * BLOCK;
  long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  for (; i + stride < nvec; i += 2 * stride) {  // two vectors in flight
    const int4 a = xv[i], c = xv[i + stride];
    atomicAdd(&h[a.x], 1); atomicAdd(&h[a.y], 1); atomicAdd(&h[a.z], 1); atomicAdd(&h[a.w], 1);
    atomicAdd(&h[c.x], 1); atomicAdd(&h[c.y], 1); atomicAdd(&h[c.z], 1); atomicAdd(&h[c.w], 1);
  }
  for (; i < nvec; i += stride) {
    const int4 a = xv[i];
    atomicAdd(&h[a.x], 1); atomicAdd(&h[a.y], 1); atomicAdd(&h[a.z], 1); atomicAdd(&h[a.w], 1);
  }
  const long long t = nvec * 4 + (long long)blockIdx.x * BLOCK + threadIdx.x;  // n % 4 tail
  if (t < n) atomicAdd(&h[x[t]], 1);
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += BLOCK)
    if (h[b] != 0) atomicAdd(&counts[b], h[b]);
}
