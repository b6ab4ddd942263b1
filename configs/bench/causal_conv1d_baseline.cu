// causal_conv1d baseline (kopt bench, optimized reference kernel)
//
// What: depthwise causal conv1d, width 4, layout [dim, tokens] (tokens
// contiguous), with bias and SiLU: per channel c and token t,
// y = bf16(bias[c] + sum_j weight[c, j] * e[c, t + j]) where e is the sequence
// extended on the left by initial_state[0, c, :] (oldest first), and
// out[c, t] = bf16(silu(y)) (two roundings).
//
// Techniques:
// - Flat 1-D view of the [dim, tokens] tensor: each thread produces 8
//   consecutive outputs (one 16-byte chunk). The chunk's inputs are the
//   same 16 bytes of x plus the 3 elements before it, taken from the
//   neighbouring chunk (an L1/L2 hit: the neighbour thread loads it) or from
//   initial_state at the start of a channel. Working on the flat array keeps
//   every x load and out store a 16-byte aligned vector even when tokens is
//   odd (4195, 11027, 14807) and rows are not 16-byte aligned; a chunk that
//   straddles two channels just switches channel inside the thread.
// - The per-channel weights (4 bf16 = one 8-byte load), bias and state are
//   loaded once per channel segment, not per element.
// - fp32 math in the reference's order (fmaf from the oldest tap, starting at
//   the bias), silu with expf and an IEEE division like the reference.
// - Decode (tokens < 8; tokens = 1 is the heaviest-weighted shape): one
//   output per thread, all of its loads independent (one DRAM round trip);
//   the launch plan gives 8x more threads for it. Latency-bound by nature.
// - Scalar path also when the pointers are not 16-byte aligned.
// Measured on H200 (2026-12-01, driver 580.159.04, `kopt bench --seeds 1`): causal_conv1d: 1.3 % of speed of light (weighted over 9 shapes), 1.36x the naive reference, 3 launch-bound shapes
#include <cuda_bf16.h>

#define THREADS 256
#define W 4  // kernel width (the config's const axis); checked at run time

__device__ __forceinline__ float silu_y(float acc) {
  const float y = __bfloat162float(__float2bfloat16(acc));
  return y / (1.0f + expf(-y));
}

// One output: token t of channel c, with taps e[t..t+3]; xm3..x0 are
// x[c, t-3] .. x[c, t] where they exist (t - k >= 0), else taken from state.
__device__ __forceinline__ float conv_one(const __nv_bfloat16* __restrict__ state_c, float4 wc,
                                          float b, long long t, float xm3, float xm2, float xm1,
                                          float x0) {
  const float e0 = t >= 3 ? xm3 : __bfloat162float(state_c[t]);
  const float e1 = t >= 2 ? xm2 : __bfloat162float(state_c[t + 1]);
  const float e2 = t >= 1 ? xm1 : __bfloat162float(state_c[t + 2]);
  float acc = b;
  acc = fmaf(wc.x, e0, acc);
  acc = fmaf(wc.y, e1, acc);
  acc = fmaf(wc.z, e2, acc);
  acc = fmaf(wc.w, x0, acc);
  return silu_y(acc);
}

__device__ __forceinline__ float4 load_w(const __nv_bfloat16* __restrict__ weight, long long c) {
  const uint2 raw = __ldg(reinterpret_cast<const uint2*>(weight + c * W));
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

extern "C" __global__ void __launch_bounds__(THREADS)
causal_conv1d_baseline(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
                       const __nv_bfloat16* __restrict__ bias,
                       const __nv_bfloat16* __restrict__ initial_state,
                       __nv_bfloat16* __restrict__ out, int dim, int tokens, int width) {
  if (width != W) return;  // the launch plan passes the const axis; other widths are not built
  const long long n = static_cast<long long>(dim) * tokens;
  const bool vec_ok = ((reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(out) |
                        reinterpret_cast<unsigned long long>(weight)) & 15ull) == 0;
  const long long stride = static_cast<long long>(gridDim.x) * THREADS;
  if (vec_ok && tokens >= 8) {
    const long long nchunks = (n + 7) / 8;
    for (long long k = static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x; k < nchunks; k += stride) {
      const long long i0 = k * 8;
      // v[0..2] = x[i0-3 .. i0-1] (flat), v[3..10] = x[i0 .. i0+7]
      float v[11];
      if (i0 + 8 <= n) {
        const uint4 cur = __ldcs(reinterpret_cast<const uint4*>(x) + k);
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&cur);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(h[j]);
          v[3 + 2 * j] = f.x;
          v[4 + 2 * j] = f.y;
        }
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) v[3 + j] = i0 + j < n ? __bfloat162float(x[i0 + j]) : 0.0f;
      }
      if (k > 0) {
        // The previous chunk's last 3 elements (its 16 bytes are read by the
        // neighbouring thread: an L1/L2 hit). Only used within a channel.
        const uint2 prev = __ldg(reinterpret_cast<const uint2*>(x + i0 - 4));
        const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&prev.x));
        const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&prev.y));
        v[0] = a.y;
        v[1] = b.x;
        v[2] = b.y;
      } else {
        v[0] = v[1] = v[2] = 0.0f;
      }
      long long c = i0 / tokens;
      long long t = i0 - c * tokens;
      float4 wc = load_w(weight, c);
      float bc = __bfloat162float(bias[c]);
      const __nv_bfloat16* st = initial_state + c * (W - 1);
      float o[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (t == tokens) {  // crossed into the next channel
          ++c;
          t = 0;
          if (i0 + j < n) {
            wc = load_w(weight, c);
            bc = __bfloat162float(bias[c]);
            st = initial_state + c * (W - 1);
          }
        }
        o[j] = i0 + j < n ? conv_one(st, wc, bc, t, v[j], v[j + 1], v[j + 2], v[j + 3]) : 0.0f;
        ++t;
      }
      if (i0 + 8 <= n) {
        uint4 r;
        __nv_bfloat162* r2 = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
        for (int j = 0; j < 4; ++j) r2[j] = __floats2bfloat162_rn(o[2 * j], o[2 * j + 1]);
        __stcs(reinterpret_cast<uint4*>(out) + k, r);
      } else {
        for (int j = 0; j < 8 && i0 + j < n; ++j) out[i0 + j] = __float2bfloat16(o[j]);
      }
    }
    return;
  }
  // One output per thread: decode (tokens < 8, where a thread walking 8
  // channels would serialize 8 dependent load round trips; here every load of
  // an output is independent, so the launch costs one DRAM round trip) and
  // misaligned pointers.
  for (long long i = static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x; i < n; i += stride) {
    const long long c = i / tokens, t = i - c * tokens;
    float acc = __bfloat162float(bias[c]);
    for (int j = 0; j < W; ++j) {
      const long long p = t + j - (W - 1);
      const float e = p >= 0 ? __bfloat162float(x[c * tokens + p])
                             : __bfloat162float(initial_state[c * (W - 1) + p + W - 1]);
      acc = fmaf(__bfloat162float(weight[c * W + j]), e, acc);
    }
    out[i] = __float2bfloat16(silu_y(acc));
  }
}
