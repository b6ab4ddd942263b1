// fused_rmsnorm_quant baseline (kopt bench, optimized reference kernel)
//
// What: per row, r = bf16(x + residual) (-> residual_out);
// n = bf16(r * (1 / sqrt(mean(r^2) + eps)) * w) (one rounding);
// scale = amax|n| * fp32(1/448), 1 if that is 0; quantized = e4m3fn(n / scale)
// with an IEEE division, round to nearest even, saturating.
//
// Techniques:
// - Row groups of G threads (G = THREADS / ROWS; the launch plan computes ROWS,
//   a power of two, from `hidden` so that each thread holds at most 4 16-byte
//   chunks): hidden 2048 -> 64 threads per row, 4096 -> 128.
// - One DRAM pass: x and residual read once (16-byte __ldcs), r stored at once
//   and kept in registers; the registers are then overwritten with n (bf16,
//   exactly the value the reference rounds), so the quantization pass needs
//   no reload of the weight or of r.
// - Two reductions (sum of squares, then amax) with __shfl_xor_sync inside the
//   group and a double-buffered shared-memory step for G > 32.
// - Rounding identical to the reference where it matters: sqrt and 1/x are
//   IEEE (__fsqrt_rn, __frcp_rn: independent of fast-math flags), the
//   quantization uses __fdiv_rn, fp8 conversion with the packed
//   cvt.rn.satfinite.e4m3x2.f32 (8 fp8 values -> one 8-byte __stcs).
//   (The sum of squares is a tree sum, not the reference's sequential sum: the
//   last fp32 bits of rinv may differ, which the tolerance absorbs.)
// - Every shape handled: long rows, odd hidden or misaligned pointers take a
//   scalar multi-pass path.
// Measured on H200 (2026-12-01, driver 580.159.04, `kopt bench --seeds 1`): fused_rmsnorm_quant: 52.3 % of speed of light (weighted over 11 shapes), 86.94x the naive reference, 0 launch-bound shapes
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#define THREADS 256
#define MINB 4  // 4 blocks (1024 threads) per SM: <= 64 registers
#define MAXC 4  // 16-byte chunks cached per thread

__device__ __forceinline__ bool aligned(const void* p, unsigned long long a) {
  return (reinterpret_cast<unsigned long long>(p) & (a - 1)) == 0;
}

// Sum or max over the G threads of a row group (G a power of two, uniform in
// the block; every thread must call it; consecutive calls use different `red`).
template <bool IS_MAX>
__device__ __forceinline__ float group_reduce(float v, int G, float* red) {
  const int lim = G < 32 ? G : 32;
  for (int o = lim / 2; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = IS_MAX ? fmaxf(v, w) : v + w;
  }
  if (G <= 32) return v;
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) red[warp] = v;
  __syncthreads();
  const int first = (threadIdx.x / G) * (G / 32);
  float s = red[first];
  for (int k = 1; k < G / 32; ++k) s = IS_MAX ? fmaxf(s, red[first + k]) : s + red[first + k];
  return s;
}

__device__ __forceinline__ unsigned short q2(__nv_bfloat162 n, float s) {
  const float2 f = __bfloat1622float2(n);
  return __nv_cvt_float2_to_fp8x2(make_float2(__fdiv_rn(f.x, s), __fdiv_rn(f.y, s)),
                                  __NV_SATFINITE, __NV_E4M3);
}

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
fused_rmsnorm_quant_baseline(const __nv_bfloat16* __restrict__ x,
                             const __nv_bfloat16* __restrict__ residual,
                             const __nv_bfloat16* __restrict__ weight,
                             __nv_fp8_e4m3* __restrict__ quantized, float* __restrict__ scale,
                             __nv_bfloat16* __restrict__ residual_out, int tokens, int hidden,
                             int rows_per_block, float eps) {
  __shared__ float red[2][THREADS / 32];
  const int G = THREADS / rows_per_block;
  const int gl = threadIdx.x % G;
  const long long row = static_cast<long long>(blockIdx.x) * rows_per_block + threadIdx.x / G;
  const bool valid = row < tokens;
  const long long off = (valid ? row : 0) * static_cast<long long>(hidden);
  const float inv448 = 1.0f / 448.0f;  // folded to the fp32-rounded constant

  const bool vec_ok = (hidden & 7) == 0 && aligned(x, 16) && aligned(residual, 16) &&
                      aligned(weight, 16) && aligned(residual_out, 16) && aligned(quantized, 8);
  const int chunks = hidden >> 3;
  if (vec_ok && chunks <= MAXC * G) {
    const uint4* xv = reinterpret_cast<const uint4*>(x + off);
    const uint4* rv = reinterpret_cast<const uint4*>(residual + off);
    uint4* rov = reinterpret_cast<uint4*>(residual_out + off);
    uint4 c[MAXC];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int i = gl + k * G;
      if (valid && i < chunks) {
        const uint4 a = __ldcs(xv + i);
        const uint4 b = __ldcs(rv + i);
        const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
        const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
        __nv_bfloat162* s2 = reinterpret_cast<__nv_bfloat162*>(&c[k]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 fa = __bfloat1622float2(a2[j]);
          const float2 fb = __bfloat1622float2(b2[j]);
          s2[j] = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
          const float2 r = __bfloat1622float2(s2[j]);
          ss = fmaf(r.x, r.x, ss);
          ss = fmaf(r.y, r.y, ss);
        }
        __stcs(rov + i, c[k]);
      }
    }
    ss = group_reduce<false>(ss, G, red[0]);
    const float rinv = __frcp_rn(__fsqrt_rn(__fdiv_rn(ss, static_cast<float>(hidden)) + eps));
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int i = gl + k * G;
      if (valid && i < chunks) {
        const uint4 wc = __ldg(wv + i);
        __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&c[k]);
        const __nv_bfloat162* g = reinterpret_cast<const __nv_bfloat162*>(&wc);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(h[j]);
          const float2 gw = __bfloat1622float2(g[j]);
          h[j] = __floats2bfloat162_rn((f.x * rinv) * gw.x, (f.y * rinv) * gw.y);  // n
          const float2 n = __bfloat1622float2(h[j]);
          amax = fmaxf(amax, fmaxf(fabsf(n.x), fabsf(n.y)));
        }
      }
    }
    amax = group_reduce<true>(amax, G, red[1]);
    float s = amax * inv448;
    if (s == 0.0f) s = 1.0f;
    if (valid && gl == 0) scale[row] = s;
    uint2* qv = reinterpret_cast<uint2*>(quantized + off);
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int i = gl + k * G;
      if (valid && i < chunks) {
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&c[k]);
        uint2 o;
        o.x = static_cast<unsigned int>(q2(h[0], s)) | (static_cast<unsigned int>(q2(h[1], s)) << 16);
        o.y = static_cast<unsigned int>(q2(h[2], s)) | (static_cast<unsigned int>(q2(h[3], s)) << 16);
        __stcs(qv + i, o);
      }
    }
    return;
  }
  // Fallback: scalar passes; each thread re-reads only what it wrote itself.
  const __nv_bfloat16* xr = x + off;
  const __nv_bfloat16* rr = residual + off;
  __nv_bfloat16* ror = residual_out + off;
  __nv_fp8_e4m3* qr = quantized + off;
  float ss = 0.0f;
  if (valid)
    for (int i = gl; i < hidden; i += G) {
      const __nv_bfloat16 r = __float2bfloat16(__bfloat162float(xr[i]) + __bfloat162float(rr[i]));
      ror[i] = r;
      const float v = __bfloat162float(r);
      ss = fmaf(v, v, ss);
    }
  ss = group_reduce<false>(ss, G, red[0]);
  const float rinv = __frcp_rn(__fsqrt_rn(__fdiv_rn(ss, static_cast<float>(hidden)) + eps));
  float amax = 0.0f;
  if (valid)
    for (int i = gl; i < hidden; i += G) {
      const float n = __bfloat162float(
          __float2bfloat16((__bfloat162float(ror[i]) * rinv) * __bfloat162float(weight[i])));
      amax = fmaxf(amax, fabsf(n));
    }
  amax = group_reduce<true>(amax, G, red[1]);
  float s = amax * inv448;
  if (s == 0.0f) s = 1.0f;
  if (valid && gl == 0) scale[row] = s;
  if (valid)
    for (int i = gl; i < hidden; i += G) {
      const float n = __bfloat162float(
          __float2bfloat16((__bfloat162float(ror[i]) * rinv) * __bfloat162float(weight[i])));
      qr[i] = __nv_fp8_e4m3(__fdiv_rn(n, s));
    }
}
