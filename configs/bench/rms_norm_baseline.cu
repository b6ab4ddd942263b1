// rms_norm baseline (kopt bench, optimized reference kernel)
//
// What: out[t, :] = bf16((float(x[t, :]) * rsqrt(mean(float(x[t, :])^2) + eps)) * float(w)),
// bf16 in and out, fp32 accumulation, one rounding at the end.
//
// Techniques:
// - Row groups of G threads (G = THREADS / ROWS, ROWS = rows per block, a power
//   of two the launch plan computes from `hidden` so that each thread holds at
//   most 4 16-byte chunks): G = 4 lanes for hidden 128 (64 rows per block), a
//   warp for hidden <= 1024, the whole block for hidden > 4096. Both the
//   506K-row hidden-128 shapes and the one-row hidden-5120 shape keep every lane
//   busy with 16-byte loads and enough bytes in flight per SM.
// - 16-byte vector loads/stores (8 bf16), the row is kept in registers between
//   the reduction and the normalisation (read once from DRAM); streaming cache
//   hints (__ldcs / __stcs) for x and out, __ldg for the weight (L2/L1 resident).
// - Reductions: __shfl_xor_sync inside the group (no shared memory, no barrier
//   for G <= 32); G > 32 adds one shared-memory step.
// - Packed bf16x2 <-> float2 conversions, fp32 math, 64-bit row offsets.
// - Correct for every shape: rows longer than MAXC * 8 * G elements take an
//   uncached two-pass loop; hidden % 8 != 0 (or misaligned pointers) takes a
//   scalar path. One block per ROWS rows: grid = ceil_div(tokens, ROWS).
// Measured on H200 (2026-12-01, driver 580.159.04, `kopt bench --seeds 1`): rms_norm: 77.1 % of speed of light (weighted over 56 shapes), 117.01x the naive reference, 25 launch-bound shapes
#include <cuda_bf16.h>

#define THREADS 256
#define MINB 4  // 4 blocks (1024 threads) per SM: <= 64 registers, no spills
#define MAXC 4  // 16-byte chunks cached per thread: the launch plan's ROWS keeps
                // ceil(hidden / 8 / G) <= 4 for hidden <= 8192

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// Sum over the G threads of a row group. G is a power of two and uniform in
// the block; every thread of the block must call it (barrier when G > 32).
__device__ __forceinline__ float group_sum(float v, int G, float* red) {
  const int lim = G < 32 ? G : 32;
  for (int o = lim / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (G <= 32) return v;
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) red[warp] = v;
  __syncthreads();
  const int first = (threadIdx.x / G) * (G / 32);
  float s = 0.0f;
  for (int k = 0; k < G / 32; ++k) s += red[first + k];
  return s;
}

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
rms_norm_baseline(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
                  __nv_bfloat16* __restrict__ out, int tokens, int hidden, int rows_per_block,
                  float eps) {
  __shared__ float red[THREADS / 32];
  const int G = THREADS / rows_per_block;
  const int gl = threadIdx.x % G;
  const long long row = static_cast<long long>(blockIdx.x) * rows_per_block + threadIdx.x / G;
  const bool valid = row < tokens;
  const long long r = valid ? row : 0;  // invalid lanes still join the reductions
  const __nv_bfloat16* xr = x + r * hidden;
  __nv_bfloat16* outr = out + r * hidden;
  const float inv_h = 1.0f / static_cast<float>(hidden);

  const bool vec_ok = (hidden & 7) == 0 && aligned16(x) && aligned16(weight) && aligned16(out);
  const int chunks = hidden >> 3;
  if (vec_ok && chunks <= MAXC * G) {
    // Cached path: each thread holds up to MAXC 16-byte chunks of its row.
    const uint4* xv = reinterpret_cast<const uint4*>(xr);
    uint4 c[MAXC];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int i = gl + k * G;
      if (valid && i < chunks) {
        c[k] = __ldcs(xv + i);
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&c[k]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(h[j]);
          ss = fmaf(f.x, f.x, ss);
          ss = fmaf(f.y, f.y, ss);
        }
      }
    }
    ss = group_sum(ss, G, red);
    const float rinv = rsqrtf(ss * inv_h + eps);
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    uint4* ov = reinterpret_cast<uint4*>(outr);
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int i = gl + k * G;
      if (valid && i < chunks) {
        const uint4 wc = __ldg(wv + i);
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&c[k]);
        const __nv_bfloat162* g = reinterpret_cast<const __nv_bfloat162*>(&wc);
        uint4 o;
        __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(h[j]);
          const float2 gw = __bfloat1622float2(g[j]);
          o2[j] = __floats2bfloat162_rn((f.x * rinv) * gw.x, (f.y * rinv) * gw.y);
        }
        __stcs(ov + i, o);
      }
    }
    return;
  }
  // Fallback (long rows, odd hidden, misaligned): two passes, the second read
  // hits L2. Scalar elements, strided over the group.
  float ss = 0.0f;
  if (valid)
    for (int i = gl; i < hidden; i += G) {
      const float v = __bfloat162float(xr[i]);
      ss = fmaf(v, v, ss);
    }
  ss = group_sum(ss, G, red);
  const float rinv = rsqrtf(ss * inv_h + eps);
  if (valid)
    for (int i = gl; i < hidden; i += G)
      outr[i] = __float2bfloat16((__bfloat162float(xr[i]) * rinv) * __bfloat162float(weight[i]));
}
