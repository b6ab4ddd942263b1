// fp8_blockscale_fused_moe baseline (helper fp8moe2, 2026-12-02).
// Two paths, chosen per shape by the config (enable arguments; the disabled launches are 1-CTA
// no-ops):
//  * tokens < 64: weight-streaming GEMV. fmoe_gemv1: one CTA per (token slot, 16 intermediate
//  rows),
//    8 warps split the 128-k blocks of hidden, 16-byte fp8 loads of the gate and up rows, exact fp8
//    -> f16 conversion in registers, mma.sync m16n8k16 (fp32 accumulate), per-block scale fc1_scale
//    * a_scale on the fp32 accumulator, SwiGLU, activation stored as f16 (the only intermediate
//    rounding; see bench/hopper/fp8_moe/NOTES.md). fmoe_gemv2: one CTA per (token, 16 output
//    columns), 8 warps split the (slot, 128-k block) units, scale fc2_scale * topk_weight on the
//    accumulator, sum, e4m3 cast.
//  * tokens >= 64: the reference's fp32 tiled kernels (generic, slow; a tensor-core path is future
//  work).
#include <cuda_fp8.h>

#define BM 64
#define BN 64
#define BK 16
#define QB 128  // quantization block

extern "C" __global__ void moe_route_gen(const int* __restrict__ topk_ids, int* __restrict__ lists,
                                         int* __restrict__ counts, int tokens, int top_k,
                                         int enable) {
  if (!enable) return;
  const int e = blockIdx.x;
  if (threadIdx.x != 0) return;
  int cnt = 0;
  const long long n = static_cast<long long>(tokens) * top_k;
  for (long long f = 0; f < n; ++f)
    if (topk_ids[f] == e && cnt < tokens)
      lists[static_cast<long long>(e) * tokens + cnt++] = static_cast<int>(f);
  counts[e] = cnt;
}

extern "C" __global__ void moe_gemm1_gen(const __nv_fp8_e4m3* __restrict__ hidden_states,
                                         const float* __restrict__ a_scale,
                                         const __nv_fp8_e4m3* __restrict__ w1,
                                         const float* __restrict__ fc1_scale,
                                         const int* __restrict__ lists,
                                         const int* __restrict__ counts, float* __restrict__ act,
                                         int tokens, int hidden, int inter, int top_k, int enable) {
  if (!enable) return;
  __shared__ float As[BK][BM], Gs[BK][BN], Us[BK][BN];
  const int e = blockIdx.z;
  const int cnt = counts[e];
  const int row0 = blockIdx.y * BM;
  if (row0 >= cnt) return;
  const int col0 = blockIdx.x * BN;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const int kblocks = hidden / QB, nblocks = 2 * inter / QB;
  float g[4][4] = {}, u[4][4] = {};
  for (int d0 = 0; d0 < hidden; d0 += BK) {
    for (int l = tid; l < BM * BK; l += 256) {
      const int rr = l / BK, kk = l % BK, r = row0 + rr, d = d0 + kk;
      float v = 0.0f;
      if (r < cnt && d < hidden) {
        const long long t = lists[static_cast<long long>(e) * tokens + r] / top_k;
        v = static_cast<float>(hidden_states[t * hidden + d]) * a_scale[t * kblocks + d / QB];
      }
      As[kk][rr] = v;
    }
    for (int l = tid; l < BN * BK; l += 256) {
      const int cc = l / BK, kk = l % BK, i = col0 + cc, d = d0 + kk;
      float gv = 0.0f, uv = 0.0f;
      if (i < inter && d < hidden) {
        const long long ng = static_cast<long long>(e) * 2 * inter + i, nu = ng + inter;
        gv = static_cast<float>(w1[ng * hidden + d]) *
             fc1_scale[(static_cast<long long>(e) * nblocks + i / QB) * kblocks + d / QB];
        uv = static_cast<float>(w1[nu * hidden + d]) *
             fc1_scale[(static_cast<long long>(e) * nblocks + (inter + i) / QB) * kblocks + d / QB];
      }
      Gs[kk][cc] = gv;
      Us[kk][cc] = uv;
    }
    __syncthreads();
    for (int kk = 0; kk < BK; ++kk)
      for (int m = 0; m < 4; ++m) {
        const float a = As[kk][ty * 4 + m];
        for (int n = 0; n < 4; ++n) {
          g[m][n] += a * Gs[kk][tx * 4 + n];
          u[m][n] += a * Us[kk][tx * 4 + n];
        }
      }
    __syncthreads();
  }
  for (int m = 0; m < 4; ++m) {
    const int r = row0 + ty * 4 + m;
    if (r >= cnt) continue;
    const long long f = lists[static_cast<long long>(e) * tokens + r];
    for (int n = 0; n < 4; ++n) {
      const int i = col0 + tx * 4 + n;
      if (i >= inter) continue;
      const float z = g[m][n];
      act[f * inter + i] = z / (1.0f + expf(-z)) * u[m][n];
    }
  }
}

extern "C" __global__ void moe_gemm2_gen(const float* __restrict__ act,
                                         const __nv_fp8_e4m3* __restrict__ w2,
                                         const float* __restrict__ fc2_scale,
                                         const int* __restrict__ lists,
                                         const int* __restrict__ counts, float* __restrict__ y,
                                         int tokens, int hidden, int inter, int enable) {
  if (!enable) return;
  __shared__ float As[BK][BM], Bs[BK][BN];
  const int e = blockIdx.z;
  const int cnt = counts[e];
  const int row0 = blockIdx.y * BM;
  if (row0 >= cnt) return;
  const int col0 = blockIdx.x * BN;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const int kblocks = inter / QB, dblocks = hidden / QB;
  float acc[4][4] = {};
  for (int i0 = 0; i0 < inter; i0 += BK) {
    for (int l = tid; l < BM * BK; l += 256) {
      const int rr = l / BK, kk = l % BK, r = row0 + rr, i = i0 + kk;
      float v = 0.0f;
      if (r < cnt && i < inter)
        v = act[static_cast<long long>(lists[static_cast<long long>(e) * tokens + r]) * inter + i];
      As[kk][rr] = v;
    }
    for (int l = tid; l < BN * BK; l += 256) {
      const int cc = l / BK, kk = l % BK, d = col0 + cc, i = i0 + kk;
      float v = 0.0f;
      if (d < hidden && i < inter)
        v = static_cast<float>(w2[(static_cast<long long>(e) * hidden + d) * inter + i]) *
            fc2_scale[(static_cast<long long>(e) * dblocks + d / QB) * kblocks + i / QB];
      Bs[kk][cc] = v;
    }
    __syncthreads();
    for (int kk = 0; kk < BK; ++kk)
      for (int m = 0; m < 4; ++m) {
        const float a = As[kk][ty * 4 + m];
        for (int n = 0; n < 4; ++n) acc[m][n] += a * Bs[kk][tx * 4 + n];
      }
    __syncthreads();
  }
  for (int m = 0; m < 4; ++m) {
    const int r = row0 + ty * 4 + m;
    if (r >= cnt) continue;
    const long long f = lists[static_cast<long long>(e) * tokens + r];
    for (int n = 0; n < 4; ++n) {
      const int d = col0 + tx * 4 + n;
      if (d < hidden) y[f * hidden + d] = acc[m][n];
    }
  }
}

extern "C" __global__ void moe_combine_gen(const float* __restrict__ y,
                                           const float* __restrict__ topk_weights,
                                           __nv_fp8_e4m3* __restrict__ out, int tokens, int hidden,
                                           int top_k, int enable) {
  if (!enable) return;
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<long long>(tokens) * hidden) return;
  const long long t = idx / hidden, d = idx % hidden;
  float r = 0.0f;
  for (int s = 0; s < top_k; ++s)
    r += y[(t * top_k + s) * hidden + d] * topk_weights[t * top_k + s];
  out[idx] = __nv_fp8_e4m3(r);  // round to nearest even, saturating to +-448
}

// ---------------------------------------------------------------------------------------------
// GEMV path (tokens < 64; enable = 1 there): weight streaming with mma.sync m16n8k16 f16 / fp32.
// fp8 weights and hidden states convert exactly to f16 in registers; the block scales
// (fc * a_scale, fc2 * topk_weight) are applied in fp32 on the accumulator of each 128-k block.
// Only the intermediate activation is rounded (to f16). All 8 mma columns carry the same vector.
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ uint32_t f8x2_to_h2(uint32_t v16) {
  __half2_raw r =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v16 & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(r.x) | (static_cast<uint32_t>(r.y) << 16);
}

__device__ __forceinline__ void mma16816(float* c, uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint4 ldg_stream(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

__device__ __forceinline__ uint32_t u4get(const uint4& v, int m) {
  return m == 0 ? v.x : m == 1 ? v.y : m == 2 ? v.z : v.w;
}

// 16 rows (r0: row g, r1: row g + 8) x 64 k of one thread's chunk (16 bytes each), B from shared
// f16.
__device__ __forceinline__ void tile64(float* acc, const uint4& r0, const uint4& r1,
                                       const __half* bsh) {
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const uint32_t w0 = u4get(r0, m), w1 = u4get(r1, m);
    const uint2 b = *reinterpret_cast<const uint2*>(bsh + 4 * m);
    mma16816(acc, f8x2_to_h2(w0), f8x2_to_h2(w1), f8x2_to_h2(w0 >> 16), f8x2_to_h2(w1 >> 16), b.x,
             b.y);
  }
}

#define GV_WARPS 8

// grid (tokens * top_k, inter / 16), block 256, shared 2 * hidden + 1024 bytes.
extern "C" __global__ void __launch_bounds__(256)
    fmoe_gemv1(const uint8_t* __restrict__ hs, const float* __restrict__ a_scale,
               const uint8_t* __restrict__ w1, const float* __restrict__ fc1_scale,
               const int* __restrict__ topk_ids, __half* __restrict__ act, int tokens, int hidden,
               int inter, int top_k, int enable) {
  if (!enable) return;
  extern __shared__ __align__(16) unsigned char smem[];
  __half* hsh = reinterpret_cast<__half*>(smem);
  float* red = reinterpret_cast<float*>(smem + 2 * hidden);  // [8][32]
  const int f = blockIdx.x, t = f / top_k, e = topk_ids[f];
  const int i0 = blockIdx.y * 16;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  for (int d = tid * 8; d < hidden; d += 256 * 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(hs + static_cast<size_t>(t) * hidden + d);
    uint4 o;
    o.x = f8x2_to_h2(v.x);
    o.y = f8x2_to_h2(v.x >> 16);
    o.z = f8x2_to_h2(v.y);
    o.w = f8x2_to_h2(v.y >> 16);
    *reinterpret_cast<uint4*>(hsh + d) = o;
  }
  __syncthreads();
  const int kblocks = hidden / 128, nblocks = 2 * inter / 128;
  const uint8_t* wg0 = w1 + (static_cast<size_t>(e) * 2 * inter + i0 + g) * hidden + c * 16;
  const uint8_t* wg1 = wg0 + static_cast<size_t>(8) * hidden;
  const uint8_t* wu0 = wg0 + static_cast<size_t>(inter) * hidden;
  const uint8_t* wu1 = wu0 + static_cast<size_t>(8) * hidden;
  const float* sgp = fc1_scale + (static_cast<size_t>(e) * nblocks + i0 / 128) * kblocks;
  const float* sup = fc1_scale + (static_cast<size_t>(e) * nblocks + (inter + i0) / 128) * kblocks;
  const float* asp = a_scale + static_cast<size_t>(t) * kblocks;
  float ag[4] = {0.f, 0.f, 0.f, 0.f}, au[4] = {0.f, 0.f, 0.f, 0.f};
  for (int kb = warp; kb < kblocks; kb += GV_WARPS) {
    const int k0 = kb * 128;
    uint4 G0[2], G1[2], U0[2], U1[2];
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      G0[s] = ldg_stream(wg0 + k0 + s * 64);
      G1[s] = ldg_stream(wg1 + k0 + s * 64);
      U0[s] = ldg_stream(wu0 + k0 + s * 64);
      U1[s] = ldg_stream(wu1 + k0 + s * 64);
    }
    const float as = asp[kb];
    const float sg = sgp[kb] * as, su = sup[kb] * as;
    float tg[4] = {0.f, 0.f, 0.f, 0.f}, tu[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const __half* b = hsh + k0 + s * 64 + c * 16;
      tile64(tg, G0[s], G1[s], b);
      tile64(tu, U0[s], U1[s], b);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      ag[j] += tg[j] * sg;
      au[j] += tu[j] * su;
    }
  }
  if (c == 0) {
    red[warp * 32 + g] = ag[0];
    red[warp * 32 + g + 8] = ag[2];
    red[warp * 32 + 16 + g] = au[0];
    red[warp * 32 + 16 + g + 8] = au[2];
  }
  __syncthreads();
  if (tid < 16) {
    float z = 0.f, u = 0.f;
#pragma unroll
    for (int w = 0; w < GV_WARPS; ++w) {
      z += red[w * 32 + tid];
      u += red[w * 32 + 16 + tid];
    }
    act[static_cast<size_t>(f) * inter + i0 + tid] = __float2half_rn(z / (1.0f + expf(-z)) * u);
  }
}

// grid (tokens, hidden / 16), block 256, shared 2 * top_k * inter + 1024 bytes.
extern "C" __global__ void __launch_bounds__(256)
    fmoe_gemv2(const __half* __restrict__ act, const uint8_t* __restrict__ w2,
               const float* __restrict__ fc2_scale, const int* __restrict__ topk_ids,
               const float* __restrict__ topk_weights, __nv_fp8_e4m3* __restrict__ out, int tokens,
               int hidden, int inter, int top_k, int enable) {
  if (!enable) return;
  extern __shared__ __align__(16) unsigned char smem[];
  __half* ash = reinterpret_cast<__half*>(smem);
  float* red = reinterpret_cast<float*>(smem + 2 * top_k * inter);  // [8][16]
  const int t = blockIdx.x, d0 = blockIdx.y * 16;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int n_act = top_k * inter;
  const __half* ag = act + static_cast<size_t>(t) * n_act;
  for (int i = tid * 8; i < n_act; i += 256 * 8)
    *reinterpret_cast<uint4*>(ash + i) = *reinterpret_cast<const uint4*>(ag + i);
  __syncthreads();
  const int iblocks = inter / 128, dblocks = hidden / 128;
  const int units = top_k * iblocks;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int u0 = warp; u0 < units; u0 += 2 * GV_WARPS) {
    uint4 R0[2][2], R1[2][2];
    float sc[2];
    int kb_[2], s_[2];
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int u = u0 + q * GV_WARPS;
      const bool ok = u < units;
      const int s = ok ? u / iblocks : 0, kb = ok ? u % iblocks : 0;
      s_[q] = s;
      kb_[q] = kb;
      const int e = topk_ids[t * top_k + s];
      const uint8_t* r0 =
          w2 + (static_cast<size_t>(e) * hidden + d0 + g) * inter + kb * 128 + c * 16;
      const uint8_t* r1 = r0 + static_cast<size_t>(8) * inter;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        R0[q][h] = ok ? ldg_stream(r0 + h * 64) : make_uint4(0, 0, 0, 0);
        R1[q][h] = ok ? ldg_stream(r1 + h * 64) : make_uint4(0, 0, 0, 0);
      }
      sc[q] = ok ? fc2_scale[(static_cast<size_t>(e) * dblocks + d0 / 128) * iblocks + kb] *
                       topk_weights[t * top_k + s]
                 : 0.f;
    }
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      float tmp[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int h = 0; h < 2; ++h)
        tile64(tmp, R0[q][h], R1[q][h], ash + s_[q] * inter + kb_[q] * 128 + h * 64 + c * 16);
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[j] += tmp[j] * sc[q];
    }
  }
  if (c == 0) {
    red[warp * 16 + g] = acc[0];
    red[warp * 16 + g + 8] = acc[2];
  }
  __syncthreads();
  if (tid < 16) {
    float r = 0.f;
#pragma unroll
    for (int w = 0; w < GV_WARPS; ++w) r += red[w * 16 + tid];
    out[static_cast<size_t>(t) * hidden + d0 + tid] = __nv_fp8_e4m3(r);  // RNE, saturating to +-448
  }
}
