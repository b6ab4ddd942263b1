// silu_and_mul baseline (kopt bench, optimized reference kernel)
//
// What: x is [tokens, 2d]; out[n, j] = bf16(float(bf16(silu(g))) * float(u)) with
// g = x[n, j], u = x[n, d + j], silu(z) = z / (1 + exp(-z)) in fp32 (two roundings,
// as PyTorch's silu(x[:, :d]) * x[:, d:] in bf16).
//
// Techniques:
// - Flat 1-D grid over 16-byte output chunks (8 bf16): each thread loads one
//   16-byte chunk of the gate half and one of the up half and stores one
//   16-byte chunk; fully coalesced, no idle lanes for any d % 8 == 0.
// - Streaming cache hints (__ldcs / __stcs): every byte is touched once.
// - 32-bit index math (row = i / (d/8)) when the chunk count fits in int32,
//   64-bit otherwise; 64-bit row offsets always.
// - Packed bf16x2 <-> float2 conversions; silu with __expf and a fast divide
//   (about 2 ulp in fp32, far inside the bf16 tolerance), so the kernel stays
//   memory-bound (~6 bytes per output element leave ~40 instructions).
// - Small register footprint (2048 threads per SM): 64 KB of loads in flight
//   per SM, enough to cover DRAM latency at 4.8 TB/s.
// - Every shape handled: odd d or misaligned pointers take a scalar
//   grid-stride path over tokens * d elements.
// Measured on H200 (2026-12-01, driver 580.159.04, `kopt bench --seeds 1`): silu_and_mul: 75.2 % of speed of light (weighted over 37 shapes), 2.49x the naive reference, 12 launch-bound shapes
#include <cuda_bf16.h>

#define THREADS 256

__device__ __forceinline__ float silu_f(float g) { return __fdividef(g, 1.0f + __expf(-g)); }

__device__ __forceinline__ unsigned int silu_mul2(unsigned int gw, unsigned int uw) {
  __nv_bfloat162 g2 = *reinterpret_cast<__nv_bfloat162*>(&gw);
  __nv_bfloat162 u2 = *reinterpret_cast<__nv_bfloat162*>(&uw);
  const float2 g = __bfloat1622float2(g2);
  const float2 u = __bfloat1622float2(u2);
  const float2 s = __bfloat1622float2(__floats2bfloat162_rn(silu_f(g.x), silu_f(g.y)));
  __nv_bfloat162 o = __floats2bfloat162_rn(s.x * u.x, s.y * u.y);
  return *reinterpret_cast<unsigned int*>(&o);
}

__device__ __forceinline__ void chunk(const __nv_bfloat16* __restrict__ x,
                                      __nv_bfloat16* __restrict__ out, long long row, int col,
                                      int d, int dv) {
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * 2 * d);
  const uint4 g = __ldcs(xr + col);
  const uint4 u = __ldcs(xr + dv + col);
  uint4 o;
  o.x = silu_mul2(g.x, u.x);
  o.y = silu_mul2(g.y, u.y);
  o.z = silu_mul2(g.z, u.z);
  o.w = silu_mul2(g.w, u.w);
  __stcs(reinterpret_cast<uint4*>(out + row * d) + col, o);
}

extern "C" __global__ void __launch_bounds__(THREADS)
silu_and_mul_baseline(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ out,
                      int tokens, int d) {
  const bool vec_ok = (d & 7) == 0 && (reinterpret_cast<unsigned long long>(x) & 15ull) == 0 &&
                      (reinterpret_cast<unsigned long long>(out) & 15ull) == 0;
  if (vec_ok) {
    const int dv = d >> 3;
    const long long total = static_cast<long long>(tokens) * dv;
    const long long stride = static_cast<long long>(gridDim.x) * THREADS;
    long long i = static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x;
    if (total <= 0x7fffffffLL) {
      const unsigned int udv = static_cast<unsigned int>(dv);
      for (; i < total; i += stride) {
        const unsigned int ui = static_cast<unsigned int>(i);
        const unsigned int row = ui / udv;
        chunk(x, out, row, static_cast<int>(ui - row * udv), d, dv);
      }
    } else {
      for (; i < total; i += stride) {
        const long long row = i / dv;
        chunk(x, out, row, static_cast<int>(i - row * dv), d, dv);
      }
    }
    return;
  }
  // Scalar path (odd d or misaligned pointers).
  const long long total = static_cast<long long>(tokens) * d;
  for (long long i = static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * THREADS) {
    const long long row = i / d;
    const long long col = i - row * d;
    const float g = __bfloat162float(x[row * 2 * d + col]);
    const float u = __bfloat162float(x[row * 2 * d + d + col]);
    const float s = __bfloat162float(__float2bfloat16(silu_f(g)));
    out[i] = __float2bfloat16(s * u);
  }
}
