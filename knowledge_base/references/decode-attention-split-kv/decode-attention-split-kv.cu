// decode-attention-split-kv: decode attention (one query token per sequence)
// with grouped-query heads, split over the keys, built to stream K and V at
// DRAM speed: out[b, h] = softmax(scale q[b, h] . K[b, :, h / G]^T) V[b, :, h / G];
// q [batch, kv_heads * G, 128], K/V [batch, seqlen, kv_heads, 128], bf16, fp32 math.
//
// decode_attn_stream: a persistent-style grid of DA_BLOCKS blocks (default 2 per SM
// of an H200) splits the flattened work, (sequence, kv head, 16-key unit), into
// equal contiguous ranges ("stream-K"), so every block streams the same number
// of bytes whatever batch, seqlen and group are; no wave quantization.
// - warp w of a block takes units w, w + 4, ... of the block's range; each warp
//   runs its own DA_NS-stage ring of cp.async copies (16 keys of K and V, 8 KB a
//   stage): the loads of units k + 1 .. k + DA_NS - 1 are in flight while unit
//   k is computed, 16 KB per warp, 128 KB per SM with the defaults. Keys past
//   seqlen are zero-filled and masked.
// - all G <= 8 query heads of the kv head at once on tensor cores
//   (mma.sync m16n8k16 bf16, fp32 accumulate): S[key][head] = K q^T with K
//   from shared memory (ldmatrix, 16-byte chunks XOR-swizzled by row) and q
//   in registers; online softmax in the log2 domain (warp shuffles over the
//   keys); P to bf16 and transposed in registers (movmatrix) to be the B
//   operand of O^T[dim][head] += V^T P^T (V through ldmatrix.trans). The score
//   and the output fragments give a thread the same two heads, so the rescale
//   needs no shuffles.
// - where a block's range crosses from one (sequence, kv head) to the next,
//   the four warps merge their (m, l, O) through shared memory and warp 0
//   writes one partial (unnormalized acc, m, l) per (pair, block) slot.
// decode_attn_combine: one block per (kv head, sequence) rescales its few
// partials by exp2(m_s - max m) and divides by the total l.
// Measured on H200 (2026-12-03, driver 580.159.04): 73.2 % of speed of light weighted, 85.1 %
// (4.08 TB/s) on b16_s8192_kv8_g4; the one-tile-per-block version it replaces: 41.2 %, 52.0 %.
#include <cuda_bf16.h>

#define HD 128
#define UK 16  // keys per unit (one ring stage)
#define MAXG 8
#ifndef DA_NS
#define DA_NS 3  // ring stages per warp
#endif
#ifndef DA_MOVM
#define DA_MOVM 0  // 1: transpose P with movmatrix; 0: with two shuffles and a byte permute
#endif
#ifndef DA_NW
#define DA_NW 4  // warps per block
#endif
#define NW DA_NW
#define STAGE_BYTES (UK * HD * 2 * 2)
#define RING_BYTES (NW * DA_NS * STAGE_BYTES)
#define RED_OFF RING_BYTES                         // [NW - 1][32 values][32 lanes] fp32
#define ML_OFF (RED_OFF + (NW - 1) * 32 * 32 * 4)  // [NW][m[8], l[8]] fp32
#define SMEM_BYTES (ML_OFF + NW * 2 * MAXG * 4)
#define NEG_INF __int_as_float(0xff800000)
#define LOG2E 1.4426950408889634f

// The PTX primitives. KOPT_EMU (bench/hopper/emu, decode_emu.cpp) replaces them with a CPU
// model of their semantics to run this file's kernels on the host.
#ifndef KOPT_EMU
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}
__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldsm_x4_t(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
// c[4] += a[4] (16 x 16, row) * {b0, b1} (16 x 8, col), bf16 in, fp32 accumulate
__device__ __forceinline__ void mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Transposes the 8 x 8 b16 matrix held in mma fragment order (lane: row lane / 4,
// columns 2 (lane % 4), + 1).
__device__ __forceinline__ unsigned movmatrix_t(unsigned x) {
  unsigned y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#endif  // KOPT_EMU

// Transposes the 8 x 8 bf16 matrix X held in mma fragment order (lane l: row l / 4,
// columns 2 (l % 4), + 1, low half first): returns the same positions of X^T.
__device__ __forceinline__ unsigned transpose8x8(unsigned x, int lane) {
#if DA_MOVM
  return movmatrix_t(x);
#else
  // X^T[l / 4][2 (l % 4) + e] = X[2 (l % 4) + e][l / 4], held by lane 4 (2 (l % 4) + e) + l / 8
  const int c = lane >> 2, src = 8 * (lane & 3) + (c >> 1);
  const unsigned y0 = __shfl_sync(0xffffffffu, x, src), y1 = __shfl_sync(0xffffffffu, x, src + 4);
  return __byte_perm(y0, y1, (c & 1) ? 0x7632 : 0x5410);
#endif
}
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&h);
}
// First block of a grid of nb blocks whose equal range [bi U / nb, (bi + 1) U / nb) holds unit u.
__device__ __forceinline__ int owner_block(long long u, long long units, int nb) {
  return (int)(((u + 1) * nb - 1) / units);
}

// Issues the cp.async copies of 16 keys (key0 ..) of K and V of (sequence b, kv
// head kvh) into ring stage `st` of this warp: lane copies pieces lane & 15 of
// rows 2 j + lane / 16; 16-byte chunk c of row r lands at chunk c ^ (r & 7).
__device__ __forceinline__ void load_keys(unsigned st, int b, int kvh, int key0, int seqlen,
                                          int kv_heads, const __nv_bfloat16* __restrict__ kc,
                                          const __nv_bfloat16* __restrict__ vc, int lane) {
  const long long row_stride = (long long)kv_heads * HD;
  const long long base = (long long)b * seqlen * row_stride + (long long)kvh * HD;
  const int piece = lane & 15;
#pragma unroll
  for (int j = 0; j < UK / 2; ++j) {
    const int row = 2 * j + (lane >> 4), key = key0 + row;
    const bool ok = key < seqlen;
    const long long off = base + (ok ? key : 0) * row_stride + piece * 8;
    const unsigned s = st + row * (HD * 2) + ((piece ^ (row & 7)) << 4);
    cp_async16(s, kc + off, ok ? 16 : 0);
    cp_async16(s + UK * HD * 2, vc + off, ok ? 16 : 0);
  }
}
// Unit u of the (sequence, kv head, 16 keys) order.
__device__ __forceinline__ void load_unit(unsigned st, int u, int nch, int seqlen, int kv_heads,
                                          const __nv_bfloat16* __restrict__ kc,
                                          const __nv_bfloat16* __restrict__ vc, int lane) {
  const int p = u / nch, b = p / kv_heads;
  load_keys(st, b, p - b * kv_heads, (u - p * nch) * UK, seqlen, kv_heads, kc, vc, lane);
}

// q fragments of (sequence b, kv head kvh) as the B operand of S = K q^T:
// B[k = dim][n = head], head = lane / 4 (zero past group), dims 2 (lane % 4) + 16 ks (+ 8).
__device__ __forceinline__ void load_q(unsigned (&qb)[8][2], const __nv_bfloat16* __restrict__ q,
                                       int b, int kvh, int kv_heads, int group, int lane) {
  const int hq = lane >> 2;
  const __nv_bfloat16* qp =
      q + ((long long)b * kv_heads * group + kvh * group + hq) * HD + (lane & 3) * 2;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    qb[ks][0] = hq < group ? *reinterpret_cast<const unsigned*>(qp + ks * 16) : 0u;
    qb[ks][1] = hq < group ? *reinterpret_cast<const unsigned*>(qp + ks * 16 + 8) : 0u;
  }
}

// One unit (16 keys, K tile at kt, V tile at kt + 4 KB) into the warp's online-softmax
// state: S = K q^T (16 keys x 8 heads), m / l / O rescaled, O^T += V^T P^T. `key` is the
// sequence position of this lane's first key (lane / 4 of the unit; the second is + 8).
__device__ __forceinline__ void attend_unit(unsigned kt, int key, int seqlen, float sl2,
                                            const unsigned (&qb)[8][2], float (&o)[8][4],
                                            float (&m_run)[2], float (&l_run)[2], int lane) {
  const int x7 = lane & 7;
  const int rowK = x7 + ((lane >> 3) & 1) * 8, hiK = lane >> 4;
  const int rowV = x7 + (lane >> 4) * 8, hiV = (lane >> 3) & 1;
  const unsigned vt = kt + UK * HD * 2;
  float s0[4] = {0.f, 0.f, 0.f, 0.f}, s1[4] = {0.f, 0.f, 0.f, 0.f};
  {
    unsigned a[8][4];
#pragma unroll
    for (int ks = 0; ks < 8; ++ks)
      ldsm_x4(kt + rowK * (HD * 2) + (((2 * ks + hiK) ^ x7) << 4), a[ks]);
#pragma unroll
    for (int ks = 0; ks < 8; ks += 2) {
      mma_bf16(s0, a[ks], qb[ks][0], qb[ks][1]);
      mma_bf16(s1, a[ks + 1], qb[ks + 1][0], qb[ks + 1][1]);
    }
  }
  // s[0], s[1]: key lane / 4, heads h0, h0 + 1; s[2], s[3]: key lane / 4 + 8
  const bool v0 = key < seqlen, v1 = key + 8 < seqlen;
  float x[4];
  x[0] = v0 ? (s0[0] + s1[0]) * sl2 : NEG_INF;
  x[1] = v0 ? (s0[1] + s1[1]) * sl2 : NEG_INF;
  x[2] = v1 ? (s0[2] + s1[2]) * sl2 : NEG_INF;
  x[3] = v1 ? (s0[3] + s1[3]) * sl2 : NEG_INF;
  float alpha[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float mx = fmaxf(x[j], x[2 + j]);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
    const float mn = fmaxf(m_run[j], mx);  // finite: every unit has a valid key
    alpha[j] = fast_exp2(m_run[j] - mn);
    m_run[j] = mn;
    x[j] = fast_exp2(x[j] - mn);
    x[2 + j] = fast_exp2(x[2 + j] - mn);
    l_run[j] = l_run[j] * alpha[j] + x[j] + x[2 + j];
  }
  // P^T as the B operand: transpose the two 8 x 8 [key][head] blocks.
  const unsigned pb0 = transpose8x8(pack_bf16(x[0], x[1]), lane);
  const unsigned pb1 = transpose8x8(pack_bf16(x[2], x[3]), lane);
  unsigned a[8][4];
#pragma unroll
  for (int mt = 0; mt < 8; ++mt)
    ldsm_x4_t(vt + rowV * (HD * 2) + (((2 * mt + hiV) ^ x7) << 4), a[mt]);
#pragma unroll
  for (int mt = 0; mt < 8; ++mt) {
    o[mt][0] *= alpha[0];
    o[mt][1] *= alpha[1];
    o[mt][2] *= alpha[0];
    o[mt][3] *= alpha[1];
    mma_bf16(o[mt], a[mt], pb0, pb1);
  }
}

extern "C" __global__ void __launch_bounds__(NW * 32, 2)
    decode_attn_stream(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ kc,
                       const __nv_bfloat16* __restrict__ vc, float* __restrict__ part_acc,
                       float* __restrict__ part_ml, int batch, int seqlen, int kv_heads, int group,
                       int slots_per_pair, float scale) {
#ifdef KOPT_EMU
  unsigned char* sm = smem;
#else
  extern __shared__ __align__(128) unsigned char sm[];
#endif
  float* red = reinterpret_cast<float*>(sm + RED_OFF);
  float* mls = reinterpret_cast<float*>(sm + ML_OFF);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int nb = gridDim.x, bi = blockIdx.x;
  const int nch = (seqlen + UK - 1) / UK;
  const long long units = (long long)batch * kv_heads * nch;
  const int bs = (int)((long long)bi * units / nb), be = (int)((long long)(bi + 1) * units / nb);
  if (bs >= be) return;  // whole block: uniform
  const float sl2 = scale * LOG2E;
  const unsigned ring = smem_u32(sm) + warp * (DA_NS * STAGE_BYTES);

  // Prologue: units kk = 0 .. DA_NS - 2 of this warp in flight.
#pragma unroll
  for (int s = 0; s < DA_NS - 1; ++s) {
    const int u = bs + warp + NW * s;
    if (u < be) load_unit(ring + s * STAGE_BYTES, u, nch, seqlen, kv_heads, kc, vc, lane);
    cp_async_commit();
  }

  const int h0 = (lane & 3) * 2;  // the two heads of this thread's S and O fragments

  int kk = 0;  // this warp's unit counter (ring position)
  const int p_first = bs / nch, p_last = (be - 1) / nch;
  for (int p = p_first; p <= p_last; ++p) {
    const int seg_hi = min(be, (p + 1) * nch);
    unsigned qb[8][2];
    {
      const int b = p / kv_heads;
      load_q(qb, q, b, p - b * kv_heads, kv_heads, group, lane);
    }
    float m_run[2] = {NEG_INF, NEG_INF}, l_run[2] = {0.f, 0.f};
    float o[8][4];
#pragma unroll
    for (int mt = 0; mt < 8; ++mt) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;

    for (int u = bs + warp + NW * kk; u < seg_hi; u += NW, ++kk) {
      cp_async_wait<DA_NS - 2>();
      __syncwarp();
      {
        const int un = bs + warp + NW * (kk + DA_NS - 1);
        if (un < be)
          load_unit(ring + ((kk + DA_NS - 1) % DA_NS) * STAGE_BYTES, un, nch, seqlen, kv_heads, kc,
                    vc, lane);
        cp_async_commit();
      }
      attend_unit(ring + (kk % DA_NS) * STAGE_BYTES, (u - p * nch) * UK + (lane >> 2), seqlen, sl2,
                  qb, o, m_run, l_run, lane);
    }

    // Merge the warps' states of pair p; warp 0 writes the partial.
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      l_run[j] += __shfl_xor_sync(0xffffffffu, l_run[j], 4);
      l_run[j] += __shfl_xor_sync(0xffffffffu, l_run[j], 8);
      l_run[j] += __shfl_xor_sync(0xffffffffu, l_run[j], 16);
    }
    if (lane < 4) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        mls[warp * 2 * MAXG + h0 + j] = m_run[j];
        mls[warp * 2 * MAXG + MAXG + h0 + j] = l_run[j];
      }
    }
    __syncthreads();
    float f[2], mtot[2], ltot[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float mm = NEG_INF;
#pragma unroll
      for (int w = 0; w < NW; ++w) mm = fmaxf(mm, mls[w * 2 * MAXG + h0 + j]);
      mtot[j] = mm;
      f[j] = m_run[j] == NEG_INF ? 0.f : fast_exp2(m_run[j] - mm);
      float ll = 0.f;
#pragma unroll
      for (int w = 0; w < NW; ++w) {
        const float mw = mls[w * 2 * MAXG + h0 + j];
        ll += mw == NEG_INF ? 0.f : mls[w * 2 * MAXG + MAXG + h0 + j] * fast_exp2(mw - mm);
      }
      ltot[j] = ll;
    }
    if (warp > 0) {
      float* r = red + (warp - 1) * 32 * 32 + lane;
#pragma unroll
      for (int mt = 0; mt < 8; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) r[(mt * 4 + e) * 32] = o[mt][e] * f[e & 1];
    }
    __syncthreads();
    if (warp == 0) {
      const long long units_ll = units;
      const int slot = p * slots_per_pair + (bi - owner_block((long long)p * nch, units_ll, nb));
#pragma unroll
      for (int mt = 0; mt < 8; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float v = o[mt][e] * f[e & 1];
#pragma unroll
          for (int w = 0; w < NW - 1; ++w) v += red[(w * 32 + mt * 4 + e) * 32 + lane];
          const int d = mt * 16 + (lane >> 2) + (e >> 1) * 8, h = h0 + (e & 1);
          if (h < group) part_acc[((long long)slot * HD + d) * group + h] = v;
        }
      if (lane < 4) {
#pragma unroll
        for (int j = 0; j < 2; ++j)
          if (h0 + j < group) {
            part_ml[((long long)slot * group + h0 + j) * 2] = mtot[j];
            part_ml[((long long)slot * group + h0 + j) * 2 + 1] = ltot[j];
          }
      }
    }
  }
  cp_async_wait_all();
}

// decode_attn_rows (alternative main kernel, same combine with rows = 1): the work is
// flattened over (sequence, 16-key row unit) only; warp w of a block takes kv head
// blockIdx.y * DA_RW + w for every unit of the block's range, so the DA_RW warps of
// a block read the same 16 key rows (2 KB each for 8 kv heads) together, and no
// warp merge is needed: each warp writes its own partial per (pair, block).
#ifndef DA_RW
#define DA_RW 8  // warps (kv heads) per block of decode_attn_rows
#endif
extern "C" __global__ void __launch_bounds__(DA_RW * 32, 1)
    decode_attn_rows(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ kc,
                     const __nv_bfloat16* __restrict__ vc, float* __restrict__ part_acc,
                     float* __restrict__ part_ml, int batch, int seqlen, int kv_heads, int group,
                     int slots_per_pair, float scale) {
#ifdef KOPT_EMU
  unsigned char* sm = smem;
#else
  extern __shared__ __align__(128) unsigned char sm[];
#endif
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int kvh = blockIdx.y * DA_RW + warp;
  const int nb = gridDim.x, bi = blockIdx.x;
  const int nch = (seqlen + UK - 1) / UK;
  const long long units = (long long)batch * nch;
  const int bs = (int)((long long)bi * units / nb), be = (int)((long long)(bi + 1) * units / nb);
  if (bs >= be || kvh >= kv_heads) return;  // no block barriers in this kernel
  const float sl2 = scale * LOG2E;
  const unsigned ring = smem_u32(sm) + warp * (DA_NS * STAGE_BYTES);
#pragma unroll
  for (int s = 0; s < DA_NS - 1; ++s) {
    const int u = bs + s;
    if (u < be) {
      const int b = u / nch;
      load_keys(ring + s * STAGE_BYTES, b, kvh, (u - b * nch) * UK, seqlen, kv_heads, kc, vc, lane);
    }
    cp_async_commit();
  }
  const int h0 = (lane & 3) * 2;
  int kk = 0;
  for (int b = bs / nch; b <= (be - 1) / nch; ++b) {
    const int seg_hi = min(be, (b + 1) * nch);
    unsigned qb[8][2];
    load_q(qb, q, b, kvh, kv_heads, group, lane);
    float m_run[2] = {NEG_INF, NEG_INF}, l_run[2] = {0.f, 0.f};
    float o[8][4];
#pragma unroll
    for (int mt = 0; mt < 8; ++mt) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    for (int u = bs + kk; u < seg_hi; ++u, ++kk) {
      cp_async_wait<DA_NS - 2>();
      __syncwarp();
      {
        const int un = u + DA_NS - 1;
        if (un < be) {
          const int bn = un / nch;
          load_keys(ring + ((kk + DA_NS - 1) % DA_NS) * STAGE_BYTES, bn, kvh, (un - bn * nch) * UK,
                    seqlen, kv_heads, kc, vc, lane);
        }
        cp_async_commit();
      }
      attend_unit(ring + (kk % DA_NS) * STAGE_BYTES, (u - b * nch) * UK + (lane >> 2), seqlen, sl2,
                  qb, o, m_run, l_run, lane);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      l_run[j] += __shfl_xor_sync(0xffffffffu, l_run[j], 4);
      l_run[j] += __shfl_xor_sync(0xffffffffu, l_run[j], 8);
      l_run[j] += __shfl_xor_sync(0xffffffffu, l_run[j], 16);
    }
    const int slot =
        (b * kv_heads + kvh) * slots_per_pair + (bi - owner_block((long long)b * nch, units, nb));
#pragma unroll
    for (int mt = 0; mt < 8; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int d = mt * 16 + (lane >> 2) + (e >> 1) * 8, h = h0 + (e & 1);
        if (h < group) part_acc[((long long)slot * HD + d) * group + h] = o[mt][e];
      }
    if (lane < 4) {
#pragma unroll
      for (int j = 0; j < 2; ++j)
        if (h0 + j < group) {
          part_ml[((long long)slot * group + h0 + j) * 2] = m_run[j];
          part_ml[((long long)slot * group + h0 + j) * 2 + 1] = l_run[j];
        }
    }
  }
  cp_async_wait_all();
}

// Combine, one block per (kv head, sequence): the blocks first .. last of the
// main grid (nb blocks) whose ranges touch the pair (rows = 0: decode_attn_stream's
// (pair, unit) order; rows = 1: decode_attn_rows' (sequence, unit) order) wrote slots
// 0 .. last - first (every block range is non-empty: the launches keep nb <= units); out = sum_s
// exp2(m_s - M) acc_s / sum_s exp2(m_s - M) l_s.
#define MAXCAND 1024  // slots per pair; the launches keep DA_BLOCKS / pairs + 2 below it
extern "C" __global__ void __launch_bounds__(256)
    decode_attn_combine(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                        __nv_bfloat16* __restrict__ out, int seqlen, int kv_heads, int group,
                        int nb, int slots_per_pair, int rows) {
#ifdef KOPT_EMU
  float* wsm = reinterpret_cast<float*>(smem);
#else
  __shared__ float wsm[MAXCAND * MAXG];  // [slot][head]: exp2(m_s - M) / L
#endif
  const int kvh = blockIdx.x, b = blockIdx.y, p = b * kv_heads + kvh;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nch = (seqlen + UK - 1) / UK;
  const long long units = (long long)gridDim.y * (rows ? 1 : kv_heads) * nch;
  const long long seg = rows ? b : p;  // index of the pair's range in the unit order
  const int first = owner_block(seg * nch, units, nb);
  const int last = owner_block((seg + 1) * nch - 1, units, nb);
  const int ncand = min(last - first + 1, MAXCAND);
  const long long sbase = (long long)p * slots_per_pair;
  // Warp g: the weights of head g over the slots (lanes over slots, shuffles).
  for (int g = warp; g < group; g += blockDim.x / 32) {
    float mm = NEG_INF;
    for (int k = lane; k < ncand; k += 32) {
      const float m = part_ml[((sbase + k) * group + g) * 2];
      wsm[k * MAXG + g] = m;
      mm = fmaxf(mm, m);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, o));
    float ll = 0.f;
    for (int k = lane; k < ncand; k += 32) {
      const float m = wsm[k * MAXG + g];
      const float w = m == NEG_INF ? 0.f : fast_exp2(m - mm);
      wsm[k * MAXG + g] = w;
      if (m != NEG_INF) ll += part_ml[((sbase + k) * group + g) * 2 + 1] * w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ll += __shfl_xor_sync(0xffffffffu, ll, o);
    const float inv = 1.f / ll;
    for (int k = lane; k < ncand; k += 32) wsm[k * MAXG + g] *= inv;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * HD; i += blockDim.x) {
    const int g = i % group, d = i / group;
    float a = 0.f;
#pragma unroll 8
    for (int k = 0; k < ncand; ++k) {
      const float w = wsm[k * MAXG + g];
      if (w != 0.f) a += part_acc[((sbase + k) * HD + d) * group + g] * w;
    }
    out[((long long)b * kv_heads * group + kvh * group + g) * HD + d] = __float2bfloat16(a);
  }
}
