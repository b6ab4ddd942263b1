// fp8_blockscale_fused_moe baseline (configs/bench/fp8_blockscale_fused_moe.json).
// Measured on H200 (kopt eval --seeds 1 --max-time 0.2, NVIDIA H200, driver 580.159.04, 1980 MHz,
// 2026-12-03 17:34 UTC, the config's defaults: GV_WARPS 8, TC_FP8 1, TC2_V 2, WG_OVL 1,
// TC2_TM 128, TC2_STAGES 3, Y16 1): correct on all 6 workloads, weighted SOL 0.590. s2 (t 1)
// 107.8 us SOL 0.681, s4 (t 1) 51.9 us 0.606, s3 (t 32) 2.40 ms 0.627, s1 (t 3804) 5.66 ms 0.417,
// s5 1.70 ms 0.299, s0 5.54 ms 0.212.
// Earlier (15:54 UTC), the previous defaults (TC2_STAGES 4, WG_OVL 0, TC2_TM 64, Y16 0): 0.578;
// s1 6.20 ms (the mma.sync baseline before it: 13.24 ms), s5 1.75 ms (3.87), s0 6.04 ms (10.75).
// Same session: GV_WARPS 4 with the wgmma path s2 108.5 us, s4 57.6 us; on s1 / s5 / s0 only:
// WG_OVL 1 + TC2_TM 128 + TC2_STAGES 3 + Y16 1 5.63 / 1.68 / 5.42 ms, TC2_TM 128 (stages 3) 5.80
// / 1.70 / 5.52 ms, WG_OVL 1 6.08 / 1.71 / 5.84 ms; WG_PROMO 2 s1 6.37 ms. Earlier (11:52 UTC):
// F8_INT 1 slower on every workload.
// Precision (bench/hopper/fp8_moe/NOTES.md, precision_sim.cpp): every e4m3 value is exact in f16
// and f16 x f16 products are exact in fp32; the fp8 tensor core (wgmma e4m3) multiplies exactly
// but accumulates with a reduced-precision (about 13-bit) adder, so it only ever sums the 128 k
// of one scale block into a fresh temporary, which is then scaled into fp32 totals. The only
// stored intermediates are the SwiGLU activation (f16) and the per-slot y (fp32; f16 with Y16).
// K permutation: a thread loads 4 consecutive bytes k = 4c..4c+3 (c = lane % 4) of a k16 chunk
// and uses bytes 0-1 as the f16 fragment's k pair {2c, 2c+1} and bytes 2-3 as {2c+8, 2c+9}; the
// other operand uses the same map (in the wgmma GEMM 2 through act stored permuted per 16
// columns), so the dot product is unchanged. mma.sync m16n8k32 e4m3 is no alternative on
// Hopper: ptxas emulates it for sm_90a (163 against 105 registers and a 14.2 against 9.0 KB
// cubin on sm_89 for a 16-MMA test kernel). Two paths, chosen by the launch plan (enable
// arguments; a disabled launch is a 1-CTA no-op), 4 launches:
//  * tokens < 64: weight-streaming GEMV. fmoe_stage1 = gemv1: CTA per (token slot, 16
//    intermediate rows), GV_WARPS warps split the 128-k blocks of hidden, 16-byte fp8 loads
//    (ld.global.nc.L1::no_allocate) of the gate and up rows, the token vector (f16) in shared
//    memory as the mma B operand (all 8 columns the same). fmoe_stage4 = gemv2: CTA per (token,
//    16 output columns), warps over the (slot, 128-k block) units, fc2_scale * topk_weight on
//    the accumulator, sum, e4m3 cast.
//  * tokens >= 64: fmoe_stage1 = routing (CTA per expert, ballot scan, ascending slot order),
//    tiles of 64 slot rows of one expert found in each CTA by a warp scan of the counts;
//    fmoe_tc1 (TC_FP8 1): warp-specialized wgmma e4m3 GEMM 1, 64 rows x 128 act columns (256 w1
//    rows) per CTA, SwiGLU in registers, f16 act (TC_FP8 0: the earlier mma.sync f16 kernel);
//    fmoe_tc2 (TC2_V 2): wgmma f16 GEMM 2 with w2 converted to register A fragments, act as the
//    shared-memory B operand, 256 hidden rows x TC2_TM slot rows per CTA, y per slot (TC2_V 0:
//    the earlier mma.sync kernel, 1: its generic-tile version); fmoe_stage4 = combine (sum over
//    slots * topk_weight in slot order, e4m3 saturating cast). Details at the kernels.
#ifndef FMOE_EMU  // FMOE_EMU: bench/hopper/fp8_moe/emu_fmoe.cpp runs the kernels on the CPU
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#define FMOE_SHARED __shared__
#endif

typedef unsigned int u32;
typedef unsigned char u8;
typedef unsigned long long u64;

#define QB 128  // quantization block

#ifndef FMOE_EMU
__device__ __forceinline__ u32 f8x2_to_h2(u32 v16) {
  __half2_raw r =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v16 & 0xffffu), __NV_E4M3);
  return static_cast<u32>(r.x) | (static_cast<u32>(r.y) << 16);
}
#endif

// F8_INT = 1: the 4 bytes of x as two f16x2 by integer ops (e4m3 bits moved into the f16 fields:
// exactly value * 2^-8, subnormals included; F8_UNSCALE is folded into the fp32 scale), spread over
// the integer pipe instead of the conversion unit; F8_INT = 0: cvt.rn.f16x2.e4m3x2 (exact).
#ifndef F8_INT
#define F8_INT 0
#endif
#if F8_INT
#define F8_UNSCALE 256.0f
#else
#define F8_UNSCALE 1.0f
#endif
__device__ __forceinline__ void f8x4_to_h2x2(u32 x, u32& lo, u32& hi) {
#if F8_INT
  const u32 p0 = __byte_perm(x, 0u, 0x1404), p1 = __byte_perm(x, 0u, 0x3424);
  lo = (p0 & 0x80008000u) | ((p0 >> 1) & 0x3f803f80u);
  hi = (p1 & 0x80008000u) | ((p1 >> 1) & 0x3f803f80u);
#else
  lo = f8x2_to_h2(x);
  hi = f8x2_to_h2(x >> 16);
#endif
}

#ifndef FMOE_EMU
__device__ __forceinline__ void mma16816(float* c, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
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
#endif

__device__ __forceinline__ u32 u4get(const uint4& v, int m) {
  return m == 0 ? v.x : m == 1 ? v.y : m == 2 ? v.z : v.w;
}

// ---------------------------------------------------------------------------------------------
// GEMV path (tokens < 64).
// 16 rows (r0: row g, r1: row g + 8) x 64 k of one thread's chunk (16 bytes each), B from shared
// f16 (the thread's 16 k values).
__device__ __forceinline__ void tile64(float* acc, const uint4& r0, const uint4& r1,
                                       const __half* bsh) {
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    u32 a0, a1, a2, a3;
    f8x4_to_h2x2(u4get(r0, m), a0, a2);
    f8x4_to_h2x2(u4get(r1, m), a1, a3);
    const uint2 b = *reinterpret_cast<const uint2*>(bsh + 4 * m);
    mma16816(acc, a0, a1, a2, a3, b.x, b.y);
  }
}

#ifndef GV_WARPS
#define GV_WARPS 8  // warps per GEMV CTA (block 32 * GV_WARPS)
#endif
#ifndef Y16
#define Y16 0  // 1 (TC2_V 2 only): the per-slot y stored as f16 for the combine (half the traffic)
#endif
#define GV_THREADS (32 * GV_WARPS)
#ifndef GV_MINB
#define GV_MINB \
  1  // min CTAs per SM for the register budget (8 with 4 warps: 64 registers, a spill, slower)
#endif

// grid (tokens * top_k, inter / 16), block GV_THREADS, shared 2 * hidden + 1024 bytes.
__device__ __forceinline__ void gemv1_body(
    const u8* __restrict__ hs, const float* __restrict__ a_scale, const u8* __restrict__ w1,
    const float* __restrict__ fc1_scale, const int* __restrict__ topk_ids, __half* __restrict__ act,
    int hidden, int inter, int top_k) {
  extern __shared__ __align__(16) unsigned char smem[];
  __half* hsh = reinterpret_cast<__half*>(smem);
  float* red = reinterpret_cast<float*>(smem + 2 * hidden);  // [GV_WARPS][32]
  const int f = blockIdx.x, t = f / top_k, e = topk_ids[f];
  const int i0 = blockIdx.y * 16;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  for (int d = tid * 8; d < hidden; d += GV_THREADS * 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(hs + static_cast<u64>(t) * hidden + d);
    uint4 o;
    o.x = f8x2_to_h2(v.x);
    o.y = f8x2_to_h2(v.x >> 16);
    o.z = f8x2_to_h2(v.y);
    o.w = f8x2_to_h2(v.y >> 16);
    *reinterpret_cast<uint4*>(hsh + d) = o;
  }
  __syncthreads();
  const int kblocks = hidden / QB, nblocks = 2 * inter / QB;
  const u8* wg0 = w1 + (static_cast<u64>(e) * 2 * inter + i0 + g) * hidden + c * 16;
  const int o8 = 8 * hidden, ou = inter * hidden;  // row g + 8, up rows (< 2^31 here)
  const float* sgp = fc1_scale + (static_cast<u64>(e) * nblocks + i0 / QB) * kblocks;
  const float* sup = fc1_scale + (static_cast<u64>(e) * nblocks + (inter + i0) / QB) * kblocks;
  const float* asp = a_scale + static_cast<u64>(t) * kblocks;
  float ag[4] = {0.f, 0.f, 0.f, 0.f}, au[4] = {0.f, 0.f, 0.f, 0.f};
  for (int kb = warp; kb < kblocks; kb += GV_WARPS) {
    const int k0 = kb * QB;
    uint4 G0[2], G1[2], U0[2], U1[2];
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const u8* p = wg0 + k0 + s * 64;
      G0[s] = ldg_stream(p);
      G1[s] = ldg_stream(p + o8);
      U0[s] = ldg_stream(p + ou);
      U1[s] = ldg_stream(p + ou + o8);
    }
    const float as = asp[kb];
    const float sg = sgp[kb] * as * F8_UNSCALE, su = sup[kb] * as * F8_UNSCALE;
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
    act[static_cast<u64>(f) * inter + i0 + tid] = __float2half_rn(z / (1.0f + expf(-z)) * u);
  }
}

// grid (tokens, hidden / 16), block GV_THREADS, shared 2 * top_k * inter + 1024 bytes.
__device__ __forceinline__ void gemv2_body(
    const __half* __restrict__ act, const u8* __restrict__ w2, const float* __restrict__ fc2_scale,
    const int* __restrict__ topk_ids, const float* __restrict__ topk_weights,
    __nv_fp8_e4m3* __restrict__ out, int hidden, int inter, int top_k) {
  extern __shared__ __align__(16) unsigned char smem[];
  __half* ash = reinterpret_cast<__half*>(smem);
  float* red = reinterpret_cast<float*>(smem + 2 * top_k * inter);  // [GV_WARPS][16]
  const int t = blockIdx.x, d0 = blockIdx.y * 16;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int n_act = top_k * inter;
  const __half* ag = act + static_cast<u64>(t) * n_act;
  for (int i = tid * 8; i < n_act; i += GV_THREADS * 8)
    *reinterpret_cast<uint4*>(ash + i) = *reinterpret_cast<const uint4*>(ag + i);
  __syncthreads();
  const int iblocks = inter / QB, dblocks = hidden / QB;
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
      const u8* r0 = w2 + (static_cast<u64>(e) * hidden + d0 + g) * inter + kb * QB + c * 16;
      const u8* r1 = r0 + static_cast<u64>(8) * inter;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        R0[q][h] = ok ? ldg_stream(r0 + h * 64) : make_uint4(0, 0, 0, 0);
        R1[q][h] = ok ? ldg_stream(r1 + h * 64) : make_uint4(0, 0, 0, 0);
      }
      sc[q] = ok ? fc2_scale[(static_cast<u64>(e) * dblocks + d0 / QB) * iblocks + kb] *
                       topk_weights[t * top_k + s] * F8_UNSCALE
                 : 0.f;
    }
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      float tmp[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int h = 0; h < 2; ++h)
        tile64(tmp, R0[q][h], R1[q][h], ash + s_[q] * inter + kb_[q] * QB + h * 64 + c * 16);
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
    out[static_cast<u64>(t) * hidden + d0 + tid] = __nv_fp8_e4m3(r);  // RNE, saturating to +-448
  }
}

// ---------------------------------------------------------------------------------------------
// Tensor-core path (tokens >= 64).
#define TBM 64  // rows (token slots) per tile
#define TC_STAGES 3
#define SA1 144  // fp8 row stride in shared memory (128 + 16: conflict-free 4-byte loads)
#define SA2 288  // f16 act row stride (256 + 32: conflict-free 8-byte loads)

// grid (num_experts), block GV_THREADS: lists[e][0..cnt) = the flat slots f = t * top_k + s
// routed to e, ascending; counts[e] = cnt.
__device__ __forceinline__ void route_body(const int* __restrict__ topk_ids,
                                           int* __restrict__ lists, int* __restrict__ counts,
                                           int tokens, int top_k) {
  FMOE_SHARED int wsum[GV_WARPS];
  const int e = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n = tokens * top_k;
  int base = 0;
  for (int f0 = 0; f0 < n; f0 += GV_THREADS) {
    const int f = f0 + tid;
    const bool hit = f < n && topk_ids[f] == e;
    const unsigned m = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) wsum[warp] = __popc(m);
    __syncthreads();
    int off = base, tot = 0;
#pragma unroll
    for (int w = 0; w < GV_WARPS; ++w) {
      const int cw = wsum[w];
      off += w < warp ? cw : 0;
      tot += cw;
    }
    if (hit) lists[static_cast<u64>(e) * tokens + off + __popc(m & ((1u << lane) - 1u))] = f;
    base += tot;
    __syncthreads();
  }
  if (tid == 0) counts[e] = base;
}

// grid ceil_div(tokens * hidden, GV_THREADS), block GV_THREADS: out = e4m3(sum over slots, in
// slot order, of y * topk_weight), saturating.
__device__ __forceinline__ void combine_body(const float* __restrict__ y,
                                             const float* __restrict__ topk_weights,
                                             __nv_fp8_e4m3* __restrict__ out, int tokens,
                                             int hidden, int top_k) {
  const long long idx = static_cast<long long>(blockIdx.x) * GV_THREADS + threadIdx.x;
  if (idx >= static_cast<long long>(tokens) * hidden) return;
  const long long t = idx / hidden, d = idx % hidden;
  float r = 0.0f;
#if Y16
  const __half* yh = reinterpret_cast<const __half*>(y);
  for (int s = 0; s < top_k; ++s)
    r += __half2float(yh[(t * top_k + s) * hidden + d]) * topk_weights[t * top_k + s];
#else
  for (int s = 0; s < top_k; ++s)
    r += y[(t * top_k + s) * hidden + d] * topk_weights[t * top_k + s];
#endif
  out[idx] = __nv_fp8_e4m3(r);  // round to nearest even, saturating to +-448
}

// Launch 1: GEMV path (gemv = 1) fmoe_gemv1, else the routing of the tensor-core path.
extern "C" __global__ void __launch_bounds__(GV_THREADS, GV_MINB)
    fmoe_stage1(const u8* __restrict__ hs, const float* __restrict__ a_scale,
                const u8* __restrict__ w1, const float* __restrict__ fc1_scale,
                const int* __restrict__ topk_ids, __half* __restrict__ act, int* __restrict__ lists,
                int* __restrict__ counts, int tokens, int hidden, int inter, int top_k, int gemv) {
  if (gemv)
    gemv1_body(hs, a_scale, w1, fc1_scale, topk_ids, act, hidden, inter, top_k);
  else
    route_body(topk_ids, lists, counts, tokens, top_k);
}

// Launch 4: GEMV path fmoe_gemv2, else the slot combine of the tensor-core path.
extern "C" __global__ void __launch_bounds__(GV_THREADS, GV_MINB)
    fmoe_stage4(const __half* __restrict__ act, const u8* __restrict__ w2,
                const float* __restrict__ fc2_scale, const int* __restrict__ topk_ids,
                const float* __restrict__ topk_weights, const float* __restrict__ y,
                __nv_fp8_e4m3* __restrict__ out, int tokens, int hidden, int inter, int top_k,
                int gemv) {
  if (gemv)
    gemv2_body(act, w2, fc2_scale, topk_ids, topk_weights, out, hidden, inter, top_k);
  else
    combine_body(y, topk_weights, out, tokens, hidden, top_k);
}

// Tile j of the tensor-core GEMMs: the experts' row ranges cut into TBM-row tiles, expert by
// expert. Warp 0 scans ceil(counts / TBM) (32 experts per step); returns false past the last tile.
template <int TM = TBM>
__device__ __forceinline__ bool find_tile(const int* __restrict__ counts, int num_experts, int tile,
                                          int& e_out, int& row0_out) {
  FMOE_SHARED int st[2];
  const int lane = threadIdx.x & 31;
  if (threadIdx.x < 32) {
    if (lane == 0) st[0] = -1;
    __syncwarp();
    int base = 0;
    for (int e0 = 0; e0 < num_experts && base <= tile; e0 += 32) {
      const int e = e0 + lane;
      const int nt = e < num_experts ? (counts[e] + TM - 1) / TM : 0;
      int v = nt;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int x = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += x;
      }
      const int excl = base + v - nt;
      if (tile >= excl && tile < excl + nt) {
        st[0] = e;
        st[1] = (tile - excl) * TM;
      }
      base += __shfl_sync(0xffffffffu, v, 31);
    }
  }
  __syncthreads();
  e_out = st[0];
  row0_out = st[1];
  return e_out >= 0;
}

#ifndef FMOE_EMU
__device__ __forceinline__ void cp_async16(void* smem_ptr, const void* gptr) {
  const u32 s = static_cast<u32>(__cvta_generic_to_shared(smem_ptr));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gptr));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
#endif
__device__ __forceinline__ u32 lds32(const unsigned char* p) {
  return *reinterpret_cast<const u32*>(p);
}

#ifndef TC_FP8
#define TC_FP8 1  // 1: GEMM 1 on the e4m3 tensor cores (wgmma), 0: f16 mma.sync after conversion
#endif
#ifndef TC1_STAGES
#define TC1_STAGES 5  // TC_FP8 = 1: stages of fmoe_tc1's ring (40 KB each)
#endif
#ifndef TC2_V
#define TC2_V 2  // 2: wgmma fmoe_tc2 (needs TC_FP8 1); 0: mma.sync kernel; 1: its generic tiles
#endif
#ifndef TC2_WM
#define TC2_WM 64
#endif
#ifndef TC2_BN
#define TC2_BN 128
#endif
#ifndef TC2_STAGES
#define TC2_STAGES 4
#endif
#if Y16 && TC2_V != 2
#error "Y16 needs TC2_V = 2"
#endif

#if !TC_FP8
#define TC1_STAGE (TBM * SA1 + 128 * SA1)
// grid (inter / 64, ceil_div(tokens * top_k, 64) + num_experts: an upper bound of the tiles),
// block 128,
// shared TC_STAGES * TC1_STAGE bytes (82944).
extern "C" __global__ void __launch_bounds__(128)
    fmoe_tc1(const u8* __restrict__ hs, const float* __restrict__ a_scale,
             const u8* __restrict__ w1, const float* __restrict__ fc1_scale,
             const int* __restrict__ lists, const int* __restrict__ counts,
             __half* __restrict__ act, int tokens, int hidden, int inter, int top_k,
             int num_experts, int enable) {
  if (!enable) return;
  int e, row0;
  if (!find_tile(counts, num_experts, blockIdx.y, e, row0)) return;
  extern __shared__ __align__(16) unsigned char smem[];
  const int cnt = counts[e];
  const int n0 = blockIdx.x * 64;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int wm = warp & 1, wn = warp >> 1;
  const int kblocks = hidden / QB, nblocks = 2 * inter / QB;
  const int* lst = lists + static_cast<u64>(e) * tokens;
  // cp.async sources: A 64 rows x 8 chunks (4 per thread), B 128 rows x 8 chunks (8 per thread).
  const u8* asrc[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int q = tid + 128 * i, r = q >> 3, ch = q & 7;
    const int rr = min(row0 + r, cnt - 1);
    asrc[i] = hs + static_cast<u64>(lst[rr] / top_k) * hidden + ch * 16;
  }
  const u8* bsrc = w1 + (static_cast<u64>(e) * 2 * inter + n0) * hidden;
  auto load_stage = [&](int kb, int st) {
    unsigned char* sA = smem + st * TC1_STAGE;
    unsigned char* sB = sA + TBM * SA1;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int q = tid + 128 * i, r = q >> 3, ch = q & 7;
      cp_async16(sA + r * SA1 + ch * 16, asrc[i] + kb * QB);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int q = tid + 128 * i, r = q >> 3, ch = q & 7;
      const int grow = r < 64 ? r : inter + r - 64;
      cp_async16(sB + r * SA1 + ch * 16,
                 bsrc + static_cast<u64>(grow) * hidden + kb * QB + ch * 16);
    }
  };
  // token of each of the thread's 4 accumulator rows (for a_scale)
  int tok[2][2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rr = min(row0 + wm * 32 + mt * 16 + g + 8 * h, cnt - 1);
      tok[mt][h] = lst[rr] / top_k;
    }
  const float* sgp = fc1_scale + (static_cast<u64>(e) * nblocks + n0 / QB) * kblocks;
  const float* sup = fc1_scale + (static_cast<u64>(e) * nblocks + (inter + n0) / QB) * kblocks;

  float acc[2][8][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[mt][nt][j] = 0.f;

#pragma unroll
  for (int s = 0; s < TC_STAGES - 1; ++s) {
    if (s < kblocks) load_stage(s, s);
    cp_async_commit();
  }
  for (int kb = 0; kb < kblocks; ++kb) {
    cp_async_wait<TC_STAGES - 2>();
    __syncthreads();
    {
      const int nk = kb + TC_STAGES - 1;
      if (nk < kblocks) load_stage(nk, nk % TC_STAGES);
      cp_async_commit();
    }
    const unsigned char* sA = smem + (kb % TC_STAGES) * TC1_STAGE;
    const unsigned char* sB = sA + TBM * SA1;
    float tmp[2][8][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) tmp[mt][nt][j] = 0.f;
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      const int ko = ks * 16 + c * 4;
      u32 a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int r = wm * 32 + mt * 16 + g;
        const u32 x0 = lds32(sA + r * SA1 + ko), x1 = lds32(sA + (r + 8) * SA1 + ko);
        f8x4_to_h2x2(x0, a[mt][0], a[mt][2]);
        f8x4_to_h2x2(x1, a[mt][1], a[mt][3]);
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int br = (nt < 4 ? wn * 32 + nt * 8 : 64 + wn * 32 + (nt - 4) * 8) + g;
        u32 b0, b1;
        f8x4_to_h2x2(lds32(sB + br * SA1 + ko), b0, b1);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
          mma16816(tmp[mt][nt], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b0, b1);
      }
    }
    const float sg = sgp[kb] * (F8_UNSCALE * F8_UNSCALE), su = sup[kb] * (F8_UNSCALE * F8_UNSCALE);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float as = a_scale[static_cast<u64>(tok[mt][h]) * kblocks + kb];
        const float xg = as * sg, xu = as * su;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int j = 0; j < 2; ++j)
            acc[mt][nt][2 * h + j] += tmp[mt][nt][2 * h + j] * (nt < 4 ? xg : xu);
      }
  }
  cp_async_wait<0>();
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + wm * 32 + mt * 16 + g + 8 * h;
      if (r >= cnt) continue;
      const u64 f = static_cast<u64>(lst[r]);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int i = n0 + wn * 32 + nt * 8 + 2 * c;
        float v[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const float z = acc[mt][nt][2 * h + j], u = acc[mt][nt + 4][2 * h + j];
          v[j] = z / (1.0f + expf(-z)) * u;
        }
        *reinterpret_cast<__half2*>(act + f * inter + i) = __floats2half2_rn(v[0], v[1]);
      }
    }
}
#else  // TC_FP8 = 1: GEMM 1 on the e4m3 tensor cores (wgmma)
// K-major, 128-byte swizzle: rows of 128 bytes (= 128 e4m3 = one scale block), 8-row groups
// 1024 bytes apart; a k32 step advances the start address by 32 bytes (+2 in the descriptor).
__device__ __forceinline__ u64 desc_sw128(u32 addr) {
  return static_cast<u64>((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
#ifndef FMOE_EMU
__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  asm volatile(
      "{\n.reg .pred P1;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@!P1 bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// 16-byte copy, zero-filled past src_bytes
__device__ __forceinline__ void cp_async16z(u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_arrive_noinc(u32 bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Pins the registers here so that zero fills and scaling do not move across the MMAs.
template <int R>
__device__ __forceinline__ void fence_regs(float* d) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float* d, unsigned long long da,
                                                      unsigned long long db) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(da), "l"(db));
}
#endif  // FMOE_EMU

#ifndef WG_PROMO
#define WG_PROMO 4  // k32 MMAs per fresh temporary accumulator (4: one per 128-k scale block)
#endif
#ifndef WG_OVL
#define WG_OVL 0  // 1: two temporaries, the next stage's MMAs overlap the scaling (WG_PROMO 4)
#endif
#if WG_OVL
#define WG_REG_P 56  // setmaxnreg split of the 384 x 168 block allocation: 128 x 56 + 256 x 224
#define WG_REG_C 224
#else
#define WG_REG_P 64
#define WG_REG_C 216
#endif
#define WG_STAGE (TBM * 128 + 256 * 128)  // A 64 rows + B 256 rows of 128 bytes
// TC_FP8 = 1: CTA per (64 slot rows of one expert, 128 act columns), 384 threads: warpgroup 0
// copies (cp.async, 128-byte-swizzled K-major stages of 128 k, hand-over on mbarriers),
// warpgroups 1 and 2 each own 64 act columns: B rows [64 gate | 64 up] of w1, one
// wgmma m64n128k32 e4m3 per k32, fp32 into a temporary that is fresh every WG_PROMO MMAs (the
// tensor core's reduced-precision accumulation spans at most 128 k) and added to the totals
// with a_scale[row] * fc1_scale in fp32. Thread layout of the accumulator d[4 j + i]: row
// 16 warp + lane / 4 + 8 (i / 2), column 8 j + 2 (lane % 4) + i % 2; gate column 8 j + ..
// (j < 8) pairs with the up value d[4 (j + 8) + i] in the same thread.
// grid (inter / 128, tile bound), block 384, shared TC1_STAGES * WG_STAGE + 2048 bytes.
extern "C" __global__ void __launch_bounds__(384, 1)
    fmoe_tc1(const u8* __restrict__ hs, const float* __restrict__ a_scale,
             const u8* __restrict__ w1, const float* __restrict__ fc1_scale,
             const int* __restrict__ lists, const int* __restrict__ counts,
             __half* __restrict__ act, int tokens, int hidden, int inter, int top_k,
             int num_experts, int enable) {
  if (!enable) return;
  int e, row0;
  if (!find_tile(counts, num_experts, blockIdx.y, e, row0)) return;
  extern __shared__ __align__(16) unsigned char smem[];
  const u32 base = (smem_addr(smem) + 1023u) & ~1023u;
  const u32 bars = base + TC1_STAGES * WG_STAGE;  // full[s] at 8 s, empty[s] at 8 (STAGES + s)
  const int rows = min(TBM, counts[e] - row0);
  const int n0 = blockIdx.x * 128;
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127;
  const int KT = hidden / QB, nblocks = 2 * inter / QB;
  const int* lst = lists + static_cast<u64>(e) * tokens + row0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < TC1_STAGES; ++s) {
      mbar_init(bars + 8 * s, 128);               // full: every copying thread
      mbar_init(bars + 8 * (TC1_STAGES + s), 8);  // empty: one arrival per MMA warp
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (wg == 0) {
    setmaxnreg_dec<WG_REG_P>();
    const int r = tid >> 3, cc = tid & 7;
    const u32 dst = r * 128 + ((cc ^ (r & 7)) << 4);
    const u8* asrc[4];
    int abytes[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const bool ok = r + 16 * j < rows;
      asrc[j] = ok ? hs + static_cast<u64>(lst[r + 16 * j] / top_k) * hidden + cc * 16 : hs;
      abytes[j] = ok ? 16 : 0;
    }
    // B smem rows: [64 gate | 64 up] for warpgroup 1, then the same for warpgroup 2
    const u8* bsrc[4];
#pragma unroll
    for (int q = 0; q < 4; ++q)
      bsrc[q] = w1 +
                (static_cast<u64>(e) * 2 * inter + (q & 1 ? inter : 0) + n0 + (q >> 1) * 64 + r) *
                    hidden +
                cc * 16;
    const u64 row16 = static_cast<u64>(16) * hidden;
    for (int kt = 0; kt < KT; ++kt) {
      const int s = kt % TC1_STAGES;
      if (kt >= TC1_STAGES) mbar_wait(bars + 8 * (TC1_STAGES + s), ((kt / TC1_STAGES) - 1) & 1);
      const u32 sa = base + s * WG_STAGE, sb = sa + TBM * 128;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        cp_async16z(sa + dst + j * 2048, abytes[j] ? asrc[j] + kt * QB : hs, abytes[j]);
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          cp_async16z(sb + dst + (4 * q + j) * 2048, bsrc[q] + j * row16 + kt * QB, 16);
      cp_async_arrive_noinc(bars + 8 * s);
    }
  } else {
    setmaxnreg_inc<WG_REG_C>();
    const int c = wg - 1, w = tid >> 5, lane = tid & 31;
    const int r0 = w * 16 + (lane >> 2);
    const float* as0 = a_scale + static_cast<u64>(lst[min(r0, rows - 1)] / top_k) * KT;
    const float* as1 = a_scale + static_cast<u64>(lst[min(r0 + 8, rows - 1)] / top_k) * KT;
    const float* sgp = fc1_scale + (static_cast<u64>(e) * nblocks + n0 / QB) * KT;
    const float* sup = fc1_scale + (static_cast<u64>(e) * nblocks + (inter + n0) / QB) * KT;
#if WG_OVL
    // Two temporaries: stage kt + 1's MMAs run while stage kt's are scaled into acc.
    float acc[64], t0[64], t1[64], x0[4], x1[4];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    auto issue = [&](float* t, float* x, int kt) {
      const int s = kt % TC1_STAGES;
      const float a0 = as0[kt], a1 = as1[kt], sg = sgp[kt], su = sup[kt];
      x[0] = a0 * sg;
      x[1] = a0 * su;
      x[2] = a1 * sg;
      x[3] = a1 * su;
      mbar_wait(bars + 8 * s, (kt / TC1_STAGES) & 1);
      fence_proxy_async();
      const u32 sa = base + s * WG_STAGE;
      const u64 da = desc_sw128(sa), db = desc_sw128(sa + TBM * 128 + c * 128 * 128);
#pragma unroll
      for (int i = 0; i < 64; ++i) t[i] = 0.f;
      fence_regs<64>(t);
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < 4; ++k) wgmma_m64n128k32_e4m3(t, da + 2 * k, db + 2 * k);
      wgmma_commit();
    };
    auto retire = [&](float* t, const float* x, int kt) {
      fence_regs<64>(t);
      if (lane == 0) mbar_arrive(bars + 8 * (TC1_STAGES + kt % TC1_STAGES));
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[4 * j + i] += t[4 * j + i] * x[(i >> 1) * 2 + (j >> 3)];
    };
    issue(t0, x0, 0);
    int kt = 1;
    for (; kt + 1 < KT; kt += 2) {
      issue(t1, x1, kt);
      wgmma_wait<1>();
      retire(t0, x0, kt - 1);
      issue(t0, x0, kt + 1);
      wgmma_wait<1>();
      retire(t1, x1, kt);
    }
    if (kt < KT) {
      issue(t1, x1, kt);
      wgmma_wait<1>();
      retire(t0, x0, kt - 1);
      wgmma_wait<0>();
      retire(t1, x1, kt);
    } else {
      wgmma_wait<0>();
      retire(t0, x0, kt - 1);
    }
#else
    float acc[64], tmp[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    for (int kt = 0; kt < KT; ++kt) {
      const int s = kt % TC1_STAGES;
      const float a0 = as0[kt], a1 = as1[kt], sg = sgp[kt], su = sup[kt];
      const float x00 = a0 * sg, x01 = a0 * su, x10 = a1 * sg, x11 = a1 * su;
      mbar_wait(bars + 8 * s, (kt / TC1_STAGES) & 1);
      fence_proxy_async();
      const u32 sa = base + s * WG_STAGE;
      const u64 da = desc_sw128(sa), db = desc_sw128(sa + TBM * 128 + c * 128 * 128);
#pragma unroll
      for (int p = 0; p < 4 / WG_PROMO; ++p) {
#pragma unroll
        for (int i = 0; i < 64; ++i) tmp[i] = 0.f;
        fence_regs<64>(tmp);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < WG_PROMO; ++kk) {
          const int k = p * WG_PROMO + kk;
          wgmma_m64n128k32_e4m3(tmp, da + 2 * k, db + 2 * k);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs<64>(tmp);
        if (p == 4 / WG_PROMO - 1 && lane == 0) mbar_arrive(bars + 8 * (TC1_STAGES + s));
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            acc[4 * j + i] += tmp[4 * j + i] * (i < 2 ? (j < 8 ? x00 : x01) : (j < 8 ? x10 : x11));
      }
    }
#endif  // WG_OVL
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + 8 * h;
      if (r >= rows) continue;
      __half* arow = act + static_cast<u64>(lst[r]) * inter + n0 + c * 64 + 2 * (lane & 3);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float v[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const float z = acc[4 * j + 2 * h + i], u = acc[4 * (j + 8) + 2 * h + i];
          v[i] = z / (1.0f + expf(-z)) * u;
        }
#if TC2_V == 2
        const int q = (8 * j + 2 * (lane & 3)) & 15;  // position in the 16-group of act columns
        __half* dst = arow - 2 * (lane & 3) + 8 * (j & ~1) + (((q & 2) << 2) | ((q >> 2) << 1));
#else
        __half* dst = arow + 8 * j;
#endif
        *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(v[0], v[1]);
      }
    }
  }
}
#endif  // TC_FP8
#if TC2_V == 0
#define TC2_STAGE (TBM * SA2 + 128 * SA1)
// grid (hidden / 128, ceil_div(tokens * top_k, 64) + num_experts), block 128,
// shared TC_STAGES * TC2_STAGE bytes (110592).
extern "C" __global__ void __launch_bounds__(128)
    fmoe_tc2(const __half* __restrict__ act, const u8* __restrict__ w2,
             const float* __restrict__ fc2_scale, const int* __restrict__ lists,
             const int* __restrict__ counts, float* __restrict__ y, int tokens, int hidden,
             int inter, int num_experts, int enable) {
  if (!enable) return;
  int e, row0;
  if (!find_tile(counts, num_experts, blockIdx.y, e, row0)) return;
  extern __shared__ __align__(16) unsigned char smem[];
  const int cnt = counts[e];
  const int d0 = blockIdx.x * 128;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int wm = warp & 1, wn = warp >> 1;
  const int kblocks = inter / QB, dblocks = hidden / QB;
  const int* lst = lists + static_cast<u64>(e) * tokens;
  // A: 64 rows x 16 chunks of 16 bytes (8 per thread); B: 128 rows x 8 chunks (8 per thread).
  const unsigned char* asrc[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int q = tid + 128 * i, r = q >> 4, ch = q & 15;
    const int rr = min(row0 + r, cnt - 1);
    asrc[i] =
        reinterpret_cast<const unsigned char*>(act + static_cast<u64>(lst[rr]) * inter) + ch * 16;
  }
  const u8* bsrc = w2 + (static_cast<u64>(e) * hidden + d0) * inter;
  auto load_stage = [&](int kb, int st) {
    unsigned char* sA = smem + st * TC2_STAGE;
    unsigned char* sB = sA + TBM * SA2;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int q = tid + 128 * i, r = q >> 4, ch = q & 15;
      cp_async16(sA + r * SA2 + ch * 16, asrc[i] + kb * QB * 2);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int q = tid + 128 * i, r = q >> 3, ch = q & 7;
      cp_async16(sB + r * SA1 + ch * 16, bsrc + static_cast<u64>(r) * inter + kb * QB + ch * 16);
    }
  };
  const float* s2p = fc2_scale + (static_cast<u64>(e) * dblocks + d0 / QB) * kblocks;

  float acc[2][8][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[mt][nt][j] = 0.f;

#pragma unroll
  for (int s = 0; s < TC_STAGES - 1; ++s) {
    if (s < kblocks) load_stage(s, s);
    cp_async_commit();
  }
  for (int kb = 0; kb < kblocks; ++kb) {
    cp_async_wait<TC_STAGES - 2>();
    __syncthreads();
    {
      const int nk = kb + TC_STAGES - 1;
      if (nk < kblocks) load_stage(nk, nk % TC_STAGES);
      cp_async_commit();
    }
    const unsigned char* sA = smem + (kb % TC_STAGES) * TC2_STAGE;
    const unsigned char* sB = sA + TBM * SA2;
    float tmp[2][8][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) tmp[mt][nt][j] = 0.f;
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      u32 a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int r = wm * 32 + mt * 16 + g;
        const uint2 x0 = *reinterpret_cast<const uint2*>(sA + r * SA2 + (ks * 16 + c * 4) * 2);
        const uint2 x1 =
            *reinterpret_cast<const uint2*>(sA + (r + 8) * SA2 + (ks * 16 + c * 4) * 2);
        a[mt][0] = x0.x;
        a[mt][1] = x1.x;
        a[mt][2] = x0.y;
        a[mt][3] = x1.y;
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int br = wn * 64 + nt * 8 + g;
        u32 b0, b1;
        f8x4_to_h2x2(lds32(sB + br * SA1 + ks * 16 + c * 4), b0, b1);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
          mma16816(tmp[mt][nt], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b0, b1);
      }
    }
    const float sc = s2p[kb] * F8_UNSCALE;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[mt][nt][j] += tmp[mt][nt][j] * sc;
  }
  cp_async_wait<0>();
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + wm * 32 + mt * 16 + g + 8 * h;
      if (r >= cnt) continue;
      const u64 f = static_cast<u64>(lst[r]);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int d = d0 + wn * 64 + nt * 8 + 2 * c;
        *reinterpret_cast<float2*>(y + f * hidden + d) =
            make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
      }
    }
}
#elif TC2_V == 1  // warp tiles of TC2_WM rows x (2048 / TC2_WM) columns, TC2_BN columns per CTA
#define TC2_WN (2048 / TC2_WM)
#define TC2_MT (TC2_WM / 16)
#define TC2_NT (TC2_WN / 8)
#define TC2_THREADS TC2_BN  // (64 / TC2_WM) x (TC2_BN / TC2_WN) warps
#define TC2_STAGE (TBM * SA2 + TC2_BN * SA1)
// Each converted w2 fragment (cvt.rn.f16x2.e4m3x2) feeds TC2_MT MMAs: with TC2_WM = 64 one
// conversion per 4 MMAs instead of per 2.
// grid (hidden / TC2_BN, tile bound), block TC2_THREADS, shared TC2_STAGES * TC2_STAGE bytes.
extern "C" __global__ void __launch_bounds__(TC2_THREADS)
    fmoe_tc2(const __half* __restrict__ act, const u8* __restrict__ w2,
             const float* __restrict__ fc2_scale, const int* __restrict__ lists,
             const int* __restrict__ counts, float* __restrict__ y, int tokens, int hidden,
             int inter, int num_experts, int enable) {
  if (!enable) return;
  int e, row0;
  if (!find_tile(counts, num_experts, blockIdx.y, e, row0)) return;
  extern __shared__ __align__(16) unsigned char smem[];
  const int cnt = counts[e];
  const int d0 = blockIdx.x * TC2_BN;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  constexpr int WMS = 64 / TC2_WM;  // warps along the rows
  const int wm = warp % WMS, wn = warp / WMS;
  const int kblocks = inter / QB, dblocks = hidden / QB;
  const int* lst = lists + static_cast<u64>(e) * tokens;
  // A: 64 rows x 16 chunks of 16 bytes; B: TC2_BN rows x 8 chunks (8 per thread).
  constexpr int ACH = TBM * 16 / TC2_THREADS;
  const unsigned char* asrc[ACH];
#pragma unroll
  for (int i = 0; i < ACH; ++i) {
    const int q = tid + TC2_THREADS * i, r = q >> 4, ch = q & 15;
    const int rr = min(row0 + r, cnt - 1);
    asrc[i] =
        reinterpret_cast<const unsigned char*>(act + static_cast<u64>(lst[rr]) * inter) + ch * 16;
  }
  const u8* bsrc = w2 + (static_cast<u64>(e) * hidden + d0) * inter;
  auto load_stage = [&](int kb, int st) {
    unsigned char* sA = smem + st * TC2_STAGE;
    unsigned char* sB = sA + TBM * SA2;
#pragma unroll
    for (int i = 0; i < ACH; ++i) {
      const int q = tid + TC2_THREADS * i, r = q >> 4, ch = q & 15;
      cp_async16(sA + r * SA2 + ch * 16, asrc[i] + kb * QB * 2);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int q = tid + TC2_THREADS * i, r = q >> 3, ch = q & 7;
      cp_async16(sB + r * SA1 + ch * 16, bsrc + static_cast<u64>(r) * inter + kb * QB + ch * 16);
    }
  };
  // the warp's TC2_WN columns lie in one 128-column scale block
  const float* s2p =
      fc2_scale + (static_cast<u64>(e) * dblocks + (d0 + wn * TC2_WN) / QB) * kblocks;

  float acc[TC2_MT][TC2_NT][4];
#pragma unroll
  for (int mt = 0; mt < TC2_MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < TC2_NT; ++nt)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[mt][nt][j] = 0.f;

#pragma unroll
  for (int s = 0; s < TC2_STAGES - 1; ++s) {
    if (s < kblocks) load_stage(s, s);
    cp_async_commit();
  }
  for (int kb = 0; kb < kblocks; ++kb) {
    cp_async_wait<TC2_STAGES - 2>();
    __syncthreads();
    {
      const int nk = kb + TC2_STAGES - 1;
      if (nk < kblocks) load_stage(nk, nk % TC2_STAGES);
      cp_async_commit();
    }
    const unsigned char* sA = smem + (kb % TC2_STAGES) * TC2_STAGE;
    const unsigned char* sB = sA + TBM * SA2;
    const float sc = s2p[kb] * F8_UNSCALE;
    float tmp[TC2_MT][TC2_NT][4];
#pragma unroll
    for (int mt = 0; mt < TC2_MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < TC2_NT; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) tmp[mt][nt][j] = 0.f;
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      u32 a[TC2_MT][4];
#pragma unroll
      for (int mt = 0; mt < TC2_MT; ++mt) {
        const int r = wm * TC2_WM + mt * 16 + g;
        const uint2 x0 = *reinterpret_cast<const uint2*>(sA + r * SA2 + (ks * 16 + c * 4) * 2);
        const uint2 x1 =
            *reinterpret_cast<const uint2*>(sA + (r + 8) * SA2 + (ks * 16 + c * 4) * 2);
        a[mt][0] = x0.x;
        a[mt][1] = x1.x;
        a[mt][2] = x0.y;
        a[mt][3] = x1.y;
      }
#pragma unroll
      for (int nt = 0; nt < TC2_NT; ++nt) {
        const int br = wn * TC2_WN + nt * 8 + g;
        u32 b0, b1;
        f8x4_to_h2x2(lds32(sB + br * SA1 + ks * 16 + c * 4), b0, b1);
#pragma unroll
        for (int mt = 0; mt < TC2_MT; ++mt)
          mma16816(tmp[mt][nt], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b0, b1);
      }
    }
#pragma unroll
    for (int mt = 0; mt < TC2_MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < TC2_NT; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[mt][nt][j] += tmp[mt][nt][j] * sc;
  }
  cp_async_wait<0>();
#pragma unroll
  for (int mt = 0; mt < TC2_MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + wm * TC2_WM + mt * 16 + g + 8 * h;
      if (r >= cnt) continue;
      const u64 f = static_cast<u64>(lst[r]);
#pragma unroll
      for (int nt = 0; nt < TC2_NT; ++nt) {
        const int d = d0 + wn * TC2_WN + nt * 8 + 2 * c;
        *reinterpret_cast<float2*>(y + f * hidden + d) =
            make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
      }
    }
}
#else  // TC2_V = 2: GEMM 2 on wgmma f16 (needs TC_FP8 = 1, which writes act k-permuted)
#if !TC_FP8
#error "TC2_V = 2 needs TC_FP8 = 1 (act in the k-permuted order)"
#endif
#ifndef FMOE_EMU
// D (64 x 64, fp32) += A (64 x 16 f16, registers) * B^T (64 x 16 f16, shared memory, K-major).
__device__ __forceinline__ void wgmma_rs_m64n64k16(float* d, const u32* a, u64 db) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, 1, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void wgmma_rs_m64n128k16(float* d, const u32* a, u64 db) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

__device__ __forceinline__ u32 lds32a(u32 addr) {
  u32 v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
#endif
// Register A fragments of half h (k 64 h .. 64 h + 63) of a stage for the thread's two m64
// blocks: lds32 of rows g and g + 8 at k 16 kk + 4 (lane % 4) (128-byte-swizzled rows: chunk kk
// sits at chunk kk ^ g), each 4 bytes -> {a0, a2} / {a1, a3} (the k permutation of the header).
__device__ __forceinline__ void t2_frags(u32 (*f)[4][4], u32 sa, u32 roff, int g, int h) {
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const u32 a = sa + roff + m * 64 * 128 + (((4 * h + kk) ^ g) << 4);
      f8x4_to_h2x2(lds32a(a), f[m][kk][0], f[m][kk][2]);
      f8x4_to_h2x2(lds32a(a + 8 * 128), f[m][kk][1], f[m][kk][3]);
    }
}
#ifndef TC2_TM
#define TC2_TM 64  // TC2_V = 2: slot rows per tile (64 or 128: w2 streamed once per 128 rows)
#endif
#define T2_STAGE (256 * 128 + TC2_TM * 256)  // w2 256 rows x 128 bytes + act TC2_TM rows x 256
#if TC2_TM == 128
#define T2_REG_P 56
#define T2_REG_C 224
#else
#define T2_REG_P 64
#define T2_REG_C 216
#endif
template <int N>
__device__ __forceinline__ void wgmma_rs_t2(float* d, const u32* a, u64 db) {
  if constexpr (N == 128)
    wgmma_rs_m64n128k16(d, a, db);
  else
    wgmma_rs_m64n64k16(d, a, db);
}
// TC2_V = 2: y^T = W2 act^T per (256 hidden rows, TC2_TM slot rows of one expert), 384 threads:
// warpgroup 0 copies (cp.async into 128-byte-swizzled stages of 128 k, mbarriers), warpgroups
// 1 and 2 each own 128 hidden rows (two m64 blocks): w2 fp8 from shared memory converted to f16
// register A fragments, act f16 (k-permuted by fmoe_tc1) as the K-major B operand of
// wgmma m64nTC2_TMk16. fc2_scale is uniform over a warpgroup's rows, so one accumulator carries
// sum_kb P_kb s_kb / s_cur (rescaled by s_prev / s_cur entering each block, times the last s
// at the end). The second half of a stage is converted while the first half's MMAs run.
// grid (hidden / 256, tile bound), block 384, shared TC2_STAGES * T2_STAGE + 2048 bytes.
extern "C" __global__ void __launch_bounds__(384, 1)
    fmoe_tc2(const __half* __restrict__ act, const u8* __restrict__ w2,
             const float* __restrict__ fc2_scale, const int* __restrict__ lists,
             const int* __restrict__ counts, float* __restrict__ y, int tokens, int hidden,
             int inter, int num_experts, int enable) {
  if (!enable) return;
  int e, row0;
  if (!find_tile<TC2_TM>(counts, num_experts, blockIdx.y, e, row0)) return;
  extern __shared__ __align__(16) unsigned char smem[];
  const u32 base = (smem_addr(smem) + 1023u) & ~1023u;
  const u32 bars = base + TC2_STAGES * T2_STAGE;
  const int rows = min(TC2_TM, counts[e] - row0);
  const int d0 = blockIdx.x * 256;
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127;
  const int KT = inter / QB, dblocks = hidden / QB;
  const int* lst = lists + static_cast<u64>(e) * tokens + row0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < TC2_STAGES; ++s) {
      mbar_init(bars + 8 * s, 128);
      mbar_init(bars + 8 * (TC2_STAGES + s), 8);
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (wg == 0) {
    setmaxnreg_dec<T2_REG_P>();
    const int r = tid >> 3, cc = tid & 7;
    const u32 dst = r * 128 + ((cc ^ (r & 7)) << 4);
    const u8* wsrc = w2 + (static_cast<u64>(e) * hidden + d0 + r) * inter + cc * 16;
    const u64 w16 = static_cast<u64>(16) * inter;
    const u8* act8 = reinterpret_cast<const u8*>(act);
    const u8* asrc[TC2_TM / 16];
    int abytes[TC2_TM / 16];
#pragma unroll
    for (int j = 0; j < TC2_TM / 16; ++j) {
      const bool ok = r + 16 * j < rows;
      asrc[j] = ok ? act8 + static_cast<u64>(lst[r + 16 * j]) * inter * 2 + cc * 16 : act8;
      abytes[j] = ok ? 16 : 0;
    }
    for (int kt = 0; kt < KT; ++kt) {
      const int s = kt % TC2_STAGES;
      if (kt >= TC2_STAGES) mbar_wait(bars + 8 * (TC2_STAGES + s), ((kt / TC2_STAGES) - 1) & 1);
      const u32 sa = base + s * T2_STAGE, sb = sa + 256 * 128;
#pragma unroll
      for (int j = 0; j < 16; ++j) cp_async16z(sa + dst + j * 2048, wsrc + j * w16 + kt * QB, 16);
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < TC2_TM / 16; ++j)
          cp_async16z(sb + h * (TC2_TM * 128) + dst + j * 2048,
                      abytes[j] ? asrc[j] + kt * QB * 2 + h * 128 : act8, abytes[j]);
      cp_async_arrive_noinc(bars + 8 * s);
    }
  } else {
    setmaxnreg_inc<T2_REG_C>();
    const int c = wg - 1, w = tid >> 5, lane = tid & 31, g = lane >> 2;
    const u32 roff = (c * 128 + 16 * w + g) * 128 + 4 * (lane & 3);
    const float* sp = fc2_scale + (static_cast<u64>(e) * dblocks + (d0 + c * 128) / QB) * KT;
    float acc[2][TC2_TM / 2];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int i = 0; i < TC2_TM / 2; ++i) acc[m][i] = 0.f;
    u32 fa[2][4][4], fb[2][4][4];
    float sprev = 1.f;
    for (int kt = 0; kt < KT; ++kt) {
      const int s = kt % TC2_STAGES;
      const float sc = sp[kt] * F8_UNSCALE, rho = sprev / sc;
      sprev = sc;
      mbar_wait(bars + 8 * s, (kt / TC2_STAGES) & 1);
      fence_proxy_async();
      const u32 sa = base + s * T2_STAGE, sb = sa + 256 * 128;
      wgmma_wait<1>();  // the previous stage's first half has read fa
      t2_frags(fa, sa, roff, g, 0);
      wgmma_wait<0>();
      fence_regs<TC2_TM / 2>(acc[0]);
      fence_regs<TC2_TM / 2>(acc[1]);
      if (kt > 0 && lane == 0) mbar_arrive(bars + 8 * (TC2_STAGES + (kt - 1) % TC2_STAGES));
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int i = 0; i < TC2_TM / 2; ++i) acc[m][i] *= rho;
      fence_regs<TC2_TM / 2>(acc[0]);
      fence_regs<TC2_TM / 2>(acc[1]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int m = 0; m < 2; ++m) wgmma_rs_t2<TC2_TM>(acc[m], fa[m][kk], desc_sw128(sb) + 2 * kk);
      wgmma_commit();
      t2_frags(fb, sa, roff, g, 1);
      fence_regs<TC2_TM / 2>(acc[0]);
      fence_regs<TC2_TM / 2>(acc[1]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int m = 0; m < 2; ++m)
          wgmma_rs_t2<TC2_TM>(acc[m], fb[m][kk], desc_sw128(sb + TC2_TM * 128) + 2 * kk);
      wgmma_commit();
    }
    wgmma_wait<0>();
    fence_regs<TC2_TM / 2>(acc[0]);
    fence_regs<TC2_TM / 2>(acc[1]);
    if (lane == 0) mbar_arrive(bars + 8 * (TC2_STAGES + (KT - 1) % TC2_STAGES));
      // acc[m][4 j + i]: hidden row d0 + 128 c + 64 m + 16 w + g + 8 (i / 2), slot column
      // 8 j + 2 (lane % 4) + i % 2 of the tile.
#pragma unroll
    for (int j = 0; j < TC2_TM / 8; ++j)
#pragma unroll
      for (int i2 = 0; i2 < 2; ++i2) {
        const int col = 8 * j + 2 * (lane & 3) + i2;
        if (col >= rows) continue;
#if Y16
        __half* yr = reinterpret_cast<__half*>(y) + static_cast<u64>(lst[col]) * hidden + d0 +
                     c * 128 + 16 * w + g;
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            yr[m * 64 + 8 * h] = __float2half_rn(acc[m][4 * j + 2 * h + i2] * sprev);
#else
        float* yr = y + static_cast<u64>(lst[col]) * hidden + d0 + c * 128 + 16 * w + g;
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h) yr[m * 64 + 8 * h] = acc[m][4 * j + 2 * h + i2] * sprev;
#endif
      }
  }
}
#endif  // TC2_V
