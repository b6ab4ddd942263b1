// Reference kernel: GEMV for decode, y[N] = W[N, K] . x[K]; bf16 weights and
// activations, fp32 accumulation, bf16 out. The weight matrix is read once and
// dominates the bytes, so this is purely bandwidth-bound.
// Techniques: a warp per output row (ROWS rows per warp, interleaved so each
// lane has ROWS independent 16-byte weight loads in flight), 16-byte loads of W
// (8 bf16 per lane, a warp reads 512 contiguous bytes per step), x read as
// uint4 through the read-only path (it is tiny and L1/L2-resident), fp32 FMAs
// on unpacked bf16x2, a butterfly shuffle reduction per row, no shared memory
// and no __syncthreads; a scalar path when K % 8 != 0.
// Tunable: WARPS (warps per block), ROWS (rows per warp).
// Measured on H200 (2026-12-01): 76.0% of speed of light weighted over the config's workloads, 93.5% on n128256_k4096; 17.1x the naive reference.
#include <cuda_bf16.h>

__device__ __forceinline__ float dot8(uint4 a, uint4 b) {
  const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 fa = __bfloat1622float2(pa[j]), fb = __bfloat1622float2(pb[j]);
    s = fmaf(fa.x, fb.x, s);
    s = fmaf(fa.y, fb.y, s);
  }
  return s;
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_bf16(const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ x,
          __nv_bfloat16* __restrict__ y, int n, int k) {
  const int lane = threadIdx.x & 31;
  const int warp = blockIdx.x * WARPS + (threadIdx.x >> 5);
  const int row0 = warp * ROWS;
  if (row0 >= n) return;  // whole warps leave together
  float acc[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) acc[r] = 0.f;
  if ((k & 7) == 0) {
    const int kv = k / 8;
    const uint4* __restrict__ xv = reinterpret_cast<const uint4*>(x);
#pragma unroll 4
    for (int i = lane; i < kv; i += 32) {
      const uint4 xx = __ldg(xv + i);
      uint4 ww[ROWS];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        const int row = min(row0 + r, n - 1);  // clamp: rows past n are computed, not stored
        ww[r] = reinterpret_cast<const uint4*>(w + (long long)row * k)[i];
      }
#pragma unroll
      for (int r = 0; r < ROWS; ++r) acc[r] += dot8(ww[r], xx);
    }
  } else {
    for (int i = lane; i < k; i += 32) {
      const float xx = __bfloat162float(x[i]);
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        const int row = min(row0 + r, n - 1);
        acc[r] = fmaf(__bfloat162float(w[(long long)row * k + i]), xx, acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
      if (row0 + r < n) y[row0 + r] = __float2bfloat16(acc[r]);
  }
}
