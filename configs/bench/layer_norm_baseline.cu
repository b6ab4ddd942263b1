// layer_norm baseline (kopt bench, optimized reference kernel)
//
// What: per row of length H (all leading dimensions flattened):
// mu = mean(x), var = mean((x - mu)^2) (biased), out = bf16((x - mu) * rsqrt(var + eps)
// * w + b); bf16 in/out, fp32 math.
//
// Techniques:
// - Row groups of G threads (G = THREADS / ROWS; the launch plan computes ROWS,
//   a power of two, from H so that each thread holds at most 4 16-byte chunks):
//   H = 1152 -> 64 threads per row (4 rows per block), H = 2048 -> 64 threads,
//   H = 4096/5120 -> 128/256 threads.
// - One DRAM pass: the row stays in registers, so the variance is an exact
//   two-pass computation over registers (no E[x^2] - mu^2 cancellation) at the
//   cost of one extra reduction, not an extra read.
// - 16-byte loads/stores with streaming hints (__ldcs/__stcs) for x and out,
//   __ldg for weight and bias; packed bf16x2 -> float2 conversions.
// - Shuffle reductions inside the group, one shared-memory step (double
//   buffered, so the two reductions need one barrier each) when G > 32.
// - Every shape handled: long rows, odd H or misaligned pointers take a
//   scalar three-pass path (later passes hit L2).
// Measured on H200 (2026-12-01, driver 580.159.04, `kopt bench --seeds 1`): layer_norm: 31.7 % of speed of light (weighted over 13 shapes), 55.65x the naive reference, 7 launch-bound shapes
#include <cuda_bf16.h>

#define THREADS 256
#define MINB 4  // 4 blocks (1024 threads) per SM: <= 64 registers
#define MAXC 4  // 16-byte chunks cached per thread

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// Sum over the G threads of a row group. G is a power of two and uniform in
// the block; every thread of the block must call it (barrier when G > 32).
// Consecutive calls must use different `red` buffers.
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
layer_norm_baseline(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
                    const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ out,
                    int rows, int hidden, int rows_per_block, float eps) {
  __shared__ float red[2][THREADS / 32];
  const int G = THREADS / rows_per_block;
  const int gl = threadIdx.x % G;
  const long long row = static_cast<long long>(blockIdx.x) * rows_per_block + threadIdx.x / G;
  const bool valid = row < rows;
  const long long off = (valid ? row : 0) * static_cast<long long>(hidden);
  const float inv_h = 1.0f / static_cast<float>(hidden);

  const bool vec_ok = (hidden & 7) == 0 && aligned16(x) && aligned16(weight) &&
                      aligned16(bias) && aligned16(out);
  const int chunks = hidden >> 3;
  if (vec_ok && chunks <= MAXC * G) {
    const uint4* xv = reinterpret_cast<const uint4*>(x + off);
    uint4 c[MAXC];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int i = gl + k * G;
      if (valid && i < chunks) {
        c[k] = __ldcs(xv + i);
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&c[k]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(h[j]);
          s += f.x + f.y;
        }
      }
    }
    const float mu = group_sum(s, G, red[0]) * inv_h;
    float sq = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int i = gl + k * G;
      if (valid && i < chunks) {
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&c[k]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(h[j]);
          const float dx = f.x - mu, dy = f.y - mu;
          sq = fmaf(dx, dx, sq);
          sq = fmaf(dy, dy, sq);
        }
      }
    }
    const float rstd = rsqrtf(group_sum(sq, G, red[1]) * inv_h + eps);
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    const uint4* bv = reinterpret_cast<const uint4*>(bias);
    uint4* ov = reinterpret_cast<uint4*>(out + off);
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int i = gl + k * G;
      if (valid && i < chunks) {
        const uint4 wc = __ldg(wv + i);
        const uint4 bc = __ldg(bv + i);
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&c[k]);
        const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&wc);
        const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&bc);
        uint4 o;
        __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(h[j]);
          const float2 fw = __bfloat1622float2(w2[j]);
          const float2 fb = __bfloat1622float2(b2[j]);
          o2[j] = __floats2bfloat162_rn(fmaf((f.x - mu) * rstd, fw.x, fb.x),
                                        fmaf((f.y - mu) * rstd, fw.y, fb.y));
        }
        __stcs(ov + i, o);
      }
    }
    return;
  }
  // Fallback: scalar, three passes over the row (mean, variance, output).
  const __nv_bfloat16* xr = x + off;
  __nv_bfloat16* outr = out + off;
  float s = 0.0f;
  if (valid)
    for (int i = gl; i < hidden; i += G) s += __bfloat162float(xr[i]);
  const float mu = group_sum(s, G, red[0]) * inv_h;
  float sq = 0.0f;
  if (valid)
    for (int i = gl; i < hidden; i += G) {
      const float d = __bfloat162float(xr[i]) - mu;
      sq = fmaf(d, d, sq);
    }
  const float rstd = rsqrtf(group_sum(sq, G, red[1]) * inv_h + eps);
  if (valid)
    for (int i = gl; i < hidden; i += G)
      outr[i] = __float2bfloat16(fmaf((__bfloat162float(xr[i]) - mu) * rstd,
                                      __bfloat162float(weight[i]), __bfloat162float(bias[i])));
}
