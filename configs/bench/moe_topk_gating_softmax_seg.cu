// moe_topk_gating_softmax, segmented kernel: the config's baseline since 2026-12-04 (MT_WARPS = 8,
// MT_V = 16; the earlier one-warp-per-row kernel, kept as the simple example, is
// configs/bench/moe_topk_gating_softmax_baseline.cu).
// Measured on H200 (2026-12-04, driver 580.159.04, kopt eval): 04:35 UTC, one input set, same run
// as that kernel: correct on all 10 workloads, 19.7 % of speed of light weighted against 5.3 %; s7
// (8192 x 128, 73 % of the weight) 4.1 against 16.7 us, s9 (13526 x 256) 9.0 against 26.8, t1 2.2
// against 3.8; MT_WARPS 2 / 4: 19.3 %, MT_V = 32: 19.1 %. 05:18 UTC, three input sets: 13.9 %, s7's
// median 6.0 us (q1 4.1): rows sent to the exact path make one warp's tail long.
//
// What: per row of expert logits (fp32), p = softmax(row) (max-subtracted), then the top_k
// largest p in descending order (ties: lower expert id first): topk_weights = p (not
// renormalized), topk_ids = expert ids (int32), exactly as moe_topk_gating_softmax_reference.cu.
//
// Why this shape: the one-warp-per-row baseline is issue-bound (8 rounds x 5 shuffle levels per
// row plus a 16-wide local rescan per round). Here a row is held by a segment of
// L = num_experts / MT_V lanes (MT_V = 16: 8 lanes for 128 experts, 4 rows per warp), MT_V
// values per lane, so one shuffle serves several rows and reductions are log2(L) deep.
// (Described below for MT_V = 16; MT_V = 32 uses 5 index bits and clamps e at 2^-15.)
//
// Fast path, per row:
// - float4 loads at float4 index q * L + lane (q = 0..MT_V/4-1): coalesced, 128 contiguous bytes
// per
//   row and instruction; value j = 4 q + c of a lane is expert (q L + lane) * 4 + c.
// - max and sum by lane loops plus xor-shuffle trees inside the segment; e = expf(x - max) as
//   the reference computes it. p = e / sum is only computed for the k outputs.
// - Selection on 32-bit keys: key = bits(max(e, 2^-31)) << 4 | (15 - j). For e in [2^-31, 2)
//   the four top bits of bits(e) are 0011, so the shift drops nothing: the key orders exactly by
//   e, then by lower j, and is unique inside a lane; bits(e) = key >> 4 | 0x30000000 recovers e
//   exactly. Each lane sorts its top 8 keys (two 19-comparator networks on 8 + a bitonic
//   top-8 merge, integer max/min only); then top_k rounds of segment max over the lanes' heads:
//   the winner pops its head, the ballot of winners gives the owner lane (hence the id) and
//   catches two lanes with one key. One more round gives the largest key not selected.
// - Exactness (the order is decided on e and with a tree sum, the reference on p = e / s with a
//   sequential s): the row takes the fast result only if every selected e exceeds the next one
//   (the last: the largest e not selected) by more than a factor 1 + 2^-22 (checked as
//   e > RN(e_next * (1 + 2^-22)), true ratio >= 1 + 3 * 2^-24). Two reals in the normal range
//   with that ratio never round to one float, so RN(e / s) is strictly decreasing along the
//   selection for ANY positive s, the reference's s included (s >= 1, e >= 2^-31: quotients are
//   normal); the selected set and order are then the reference's, ids exactly, and the weights
//   differ from the reference's only through the sum order (relative <= 127 * 2^-24, far inside
//   rtol 1e-4). Exact duplicates, near ties (4 ulps), clamped (e < 2^-31) outputs, a lane that
//   ran out of its 8 sorted keys, a non-finite sum (NaN / inf logits) all send the row to the
//   exact path: N(0,1) rows needed it 2 times in 38k (CPU model, the 10 workloads).
// Exact path (failed rows and every shape without a fast path: num_experts not 4, 8, 16 or
// 32 x MT_V, top_k > 8, misaligned input): one warp per row, the reference's
// arithmetic: fmaxf max, the sum in the reference's sequential order (all lanes add the same
// shuffled values in id order), p = expf(x - max) / sum, top_k rounds of "the next after
// (prev_p, prev_id)" with the first-strict-max rule, -1 / -inf when nothing qualifies; up to
// 32 * MT_EW experts with p in registers and REDUX max / min per round.
// Rows are grid-strided, so any grid is correct; the plan's grid gives one pass for the fast
// path (ceil_div(tokens * num_experts, 32 * MT_V * MT_WARPS) blocks of 32 * MT_WARPS threads).
// CPU model: bench/hopper/moetopk/moetopk_emu.cpp; notes: bench/hopper/moetopk/NOTES.md.

#ifndef MT_WARPS
#define MT_WARPS 4  // warps per block (the plan's block and grid use it)
#endif
#ifndef MT_EW
#define MT_EW 8  // the exact path keeps p in registers up to 32 * MT_EW experts (16 spilled)
#endif
#ifndef MT_EXACT_INLINE
#define MT_EXACT_INLINE __forceinline__  // __noinline__ costs registers and spills at MT_WARPS 8
#endif
#ifndef MT_EXACT_HOOK
#define MT_EXACT_HOOK()  // the CPU model counts fast-path rows sent to the exact path here
#endif
#ifndef MT_V
#define MT_V 16  // values per lane on the fast path: 16 or 32
#endif
#if MT_V == 32
#define MT_LV 5            // log2(MT_V): the local index bits of a key
#define MT_CLAMP 0x1p-15f  // e is clamped to [2^-15, 2): bits(e) >> 27 == 00111b
#define MT_HIBITS 0x38000000u
#else
#define MT_LV 4
#define MT_CLAMP 0x1p-31f  // e is clamped to [2^-31, 2): bits(e) >> 28 == 0011b
#define MT_HIBITS 0x30000000u
#endif
#define MT_C 8  // sorted keys kept per lane = largest top_k of the fast path

__device__ __forceinline__ void mt_ce(unsigned& a, unsigned& b) {  // a := max, b := min
  const unsigned hi = max(a, b), lo = min(a, b);
  a = hi;
  b = lo;
}

// Descending sort of k[o..o+7]: the 19-comparator network for 8 inputs.
__device__ __forceinline__ void mt_sort8(unsigned* k) {
  mt_ce(k[0], k[2]);
  mt_ce(k[1], k[3]);
  mt_ce(k[4], k[6]);
  mt_ce(k[5], k[7]);
  mt_ce(k[0], k[4]);
  mt_ce(k[1], k[5]);
  mt_ce(k[2], k[6]);
  mt_ce(k[3], k[7]);
  mt_ce(k[0], k[1]);
  mt_ce(k[2], k[3]);
  mt_ce(k[4], k[5]);
  mt_ce(k[6], k[7]);
  mt_ce(k[2], k[4]);
  mt_ce(k[3], k[5]);
  mt_ce(k[1], k[4]);
  mt_ce(k[3], k[6]);
  mt_ce(k[1], k[2]);
  mt_ce(k[3], k[4]);
  mt_ce(k[5], k[6]);
}

// out = the top 8 of two descending 8-lists, descending: the larger of a[i] and b[7 - i]
// (a bitonic sequence holding the top 8), then a bitonic merge. out may alias a.
__device__ __forceinline__ void mt_merge8(const unsigned* a, const unsigned* b, unsigned* out) {
  unsigned t[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) t[i] = max(a[i], b[7 - i]);
#pragma unroll
  for (int d = 4; d > 0; d >>= 1)
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if ((i & d) == 0) mt_ce(t[i], t[i + d]);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = t[i];
}

// The exact path for one row, by the whole warp (the reference's arithmetic and order).
__device__ MT_EXACT_INLINE void mt_exact_row(const float* __restrict__ xr,
                                             float* __restrict__ w_out, int* __restrict__ id_out,
                                             int num_experts, int top_k, int lane) {
  const float NEG_INF = -__int_as_float(0x7f800000);
  if (num_experts <= 32 * MT_EW) {
    // Rows of up to 32 * MT_EW experts (every fast-path fallback): p in registers (lane l holds
    // ids l + 32 i), each round two warp reductions (REDUX) instead of 5 shuffle pairs, so a
    // near-tied row costs its warp little latency.
    float p[MT_EW];
    float mx = NEG_INF;
#pragma unroll
    for (int i = 0; i < MT_EW; ++i) {
      p[i] = lane + 32 * i < num_experts ? xr[lane + 32 * i] : NEG_INF;
      mx = fmaxf(mx, p[i]);
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float s = 0.0f;  // sequential in id order, as the reference (all lanes add the same values)
#pragma unroll
    for (int i = 0; i < MT_EW; ++i) {
      if (32 * i >= num_experts) break;  // uniform
      p[i] = lane + 32 * i < num_experts ? expf(p[i] - mx) : 0.0f;
      const int n = min(32, num_experts - 32 * i);
      for (int t = 0; t < n; ++t) s += __shfl_sync(0xffffffffu, p[i], t);
    }
#pragma unroll
    for (int i = 0; i < MT_EW; ++i)  // NaN never qualifies below: absent ids are NaN
      p[i] = lane + 32 * i < num_experts ? p[i] / s : __int_as_float(0x7fc00000);
    float prev_p = __int_as_float(0x7f800000);
    int prev_id = -1;
    for (int r = 0; r < top_k; ++r) {
      float best_p = NEG_INF;
      int best = 0x7fffffff;
#pragma unroll
      for (int i = 0; i < MT_EW; ++i) {
        const int e = lane + 32 * i;
        const bool after_prev = p[i] < prev_p || (p[i] == prev_p && e > prev_id);
        if (after_prev && p[i] > best_p) {  // ids ascend with i: the first of equal p stays
          best_p = p[i];
          best = e;
        }
      }
      // p >= 0, so its bits order as unsigned; + 1 keeps 0 for "no qualifier in this lane"
      const unsigned pb = best != 0x7fffffff ? __float_as_uint(best_p) + 1u : 0u;
      const unsigned m = __reduce_max_sync(0xffffffffu, pb);
      const unsigned bi = __reduce_min_sync(
          0xffffffffu, pb == m && m != 0u ? static_cast<unsigned>(best) : 0x7fffffffu);
      best_p = m != 0u ? __uint_as_float(m - 1u) : NEG_INF;  // none: the reference's -1 / -inf
      best = m != 0u ? static_cast<int>(bi) : -1;
      if (lane == 0) {
        w_out[r] = best_p;
        id_out[r] = best;
      }
      prev_p = best_p;
      prev_id = best;
    }
    return;
  }
  float mx = NEG_INF;
  for (int e = lane; e < num_experts; e += 32) mx = fmaxf(mx, xr[e]);
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  // sequential sum in id order, 0 + e_0 + e_1 + ... as the reference: every lane adds the
  // same values in the same order, so all hold the reference's sum
  float s = 0.0f;
  for (int c = 0; c < num_experts; c += 32) {
    const float ev = c + lane < num_experts ? expf(xr[c + lane] - mx) : 0.0f;
    const int n = min(32, num_experts - c);
    for (int i = 0; i < n; ++i) s += __shfl_sync(0xffffffffu, ev, i);
  }
  float prev_p = __int_as_float(0x7f800000);
  int prev_id = -1;
  for (int r = 0; r < top_k; ++r) {
    float best_p = NEG_INF;  // no qualifier yet (a qualifier's p is >= 0: never -inf)
    int best = 0x7fffffff;
    for (int e = lane; e < num_experts; e += 32) {
      const float p = expf(xr[e] - mx) / s;
      const bool after_prev = p < prev_p || (p == prev_p && e > prev_id);
      if (after_prev && p > best_p) {  // ids ascend in a lane: the first of equal p stays
        best_p = p;
        best = e;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float op = __shfl_xor_sync(0xffffffffu, best_p, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best, o);
      if (op > best_p || (op == best_p && oi < best)) {
        best_p = op;
        best = oi;
      }
    }
    if (best == 0x7fffffff) best = -1;  // the reference's "none": id -1, weight -inf
    if (lane == 0) {
      w_out[r] = best_p;
      id_out[r] = best;
    }
    prev_p = best_p;
    prev_id = best;
  }
}

template <int L>
__device__ __forceinline__ void mt_fast(const float* __restrict__ gating_output,
                                        float* __restrict__ topk_weights,
                                        int* __restrict__ topk_ids, int tokens, int top_k) {
  constexpr int E = L * MT_V, RPW = 32 / L, RPB = MT_WARPS * RPW;
  constexpr unsigned SEGMASK = L == 32 ? 0xffffffffu : (1u << L) - 1u;
  const int lane = threadIdx.x & 31, sl = lane & (L - 1), seg = lane & ~(L - 1);
  for (long long b0 = static_cast<long long>(blockIdx.x) * RPB; b0 < tokens;
       b0 += static_cast<long long>(gridDim.x) * RPB) {  // block-uniform
    const long long wrow0 = b0 + (threadIdx.x >> 5) * RPW;
    const long long row = wrow0 + lane / L;
    const bool valid = row < tokens;
    float v[MT_V];
    const float4* src = reinterpret_cast<const float4*>(gating_output + row * E);
#pragma unroll
    for (int q = 0; q < MT_V / 4; ++q) {
      const float4 f = valid ? __ldcs(src + q * L + sl) : make_float4(0.f, 0.f, 0.f, 0.f);
      v[4 * q] = f.x;
      v[4 * q + 1] = f.y;
      v[4 * q + 2] = f.z;
      v[4 * q + 3] = f.w;
    }
    float mx = v[0];
#pragma unroll
    for (int j = 1; j < MT_V; ++j) mx = fmaxf(mx, v[j]);
#pragma unroll
    for (int o = 1; o < L; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < MT_V; ++j) {
      v[j] = expf(v[j] - mx);
      s += v[j];
    }
#pragma unroll
    for (int o = 1; o < L; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    unsigned k[MT_V];
#pragma unroll
    for (int j = 0; j < MT_V; ++j)
      k[j] =
          (__float_as_uint(fmaxf(v[j], MT_CLAMP)) << MT_LV) | static_cast<unsigned>(MT_V - 1 - j);
    // top 8 of the lane's keys, sorted: sorted groups of 8, merged pairwise (mt_merge8)
    unsigned h[MT_C];
#if MT_V == 32
    mt_sort8(k);
    mt_sort8(k + 8);
    mt_sort8(k + 16);
    mt_sort8(k + 24);
    mt_merge8(k, k + 8, k);
    mt_merge8(k + 16, k + 24, k + 16);
    mt_merge8(k, k + 16, h);
#else
    mt_sort8(k);
    mt_sort8(k + 8);
    mt_merge8(k, k + 8, h);
#endif

    // output slot r is lane r % L's slot r / L (one slot per lane when L >= 8)
    constexpr int NS = (MT_C + L - 1) / L;
    unsigned my_k[NS], my_b[NS];
#pragma unroll
    for (int i = 0; i < NS; ++i) my_k[i] = my_b[i] = 0u;
#pragma unroll
    for (int r = 0; r < MT_C; ++r) {
      if (r >= top_k) break;  // uniform
      unsigned m = h[0];
#pragma unroll
      for (int o = 1; o < L; o <<= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
      const bool win = h[0] == m;
      const unsigned wb = __ballot_sync(0xffffffffu, win);
      if (sl == r % L) {
        my_k[r / L] = m;
        my_b[r / L] = wb;
      }
      if (win) {
#pragma unroll
        for (int i = 0; i < MT_C - 1; ++i) h[i] = h[i + 1];
        h[MT_C - 1] = 0u;
      }
    }
    unsigned kn = h[0];  // the largest key not selected
#pragma unroll
    for (int o = 1; o < L; o <<= 1) kn = max(kn, __shfl_xor_sync(0xffffffffu, kn, o));
    // a lane that popped all its 8 keys (its 9th is unknown); key 0 may also be a real
    // clamped e with j = 15: then the row only takes the exact path needlessly
    bool bad = h[0] == 0u;
    bad |= !(s <= 3.0e38f);  // NaN / inf logits: the exact path reproduces the reference
    int id[NS];
    float w[NS];
#pragma unroll
    for (int i = 0; i < NS; ++i) {
      // the key of slot r + 1: the next lane's slot i, or lane 0's slot i + 1
      const unsigned nk_down = __shfl_down_sync(0xffffffffu, my_k[i], 1, L);
      const unsigned nk_wrap =
          i + 1 < NS ? __shfl_sync(0xffffffffu, my_k[i + 1 < NS ? i + 1 : i], seg) : kn;
      const int r = i * L + sl;
      id[i] = 0;
      w[i] = 0.0f;
      if (r < top_k) {
        const unsigned nk = r + 1 >= top_k ? kn : sl + 1 < L ? nk_down : nk_wrap;
        const float e_me = __uint_as_float((my_k[i] >> MT_LV) | MT_HIBITS);
        const float e_nx = __uint_as_float((nk >> MT_LV) | MT_HIBITS);
        bad |= !(e_me > e_nx * (1.0f + 0x1p-22f));
        const unsigned sb = (my_b[i] >> seg) & SEGMASK;
        bad |= (sb & (sb - 1u)) != 0u;  // two lanes held this key
        const int owner = __ffs(sb) - 1;
        const int j = MT_V - 1 - static_cast<int>(my_k[i] & (MT_V - 1u));
        id[i] = (((j >> 2) * L + owner) << 2) + (j & 3);
        w[i] = e_me / s;
      }
    }
    unsigned badb = __ballot_sync(0xffffffffu, bad && valid);
    if (valid && ((badb >> seg) & SEGMASK) == 0u) {
#pragma unroll
      for (int i = 0; i < NS; ++i)
        if (i * L + sl < top_k) {
          topk_weights[row * top_k + i * L + sl] = w[i];
          topk_ids[row * top_k + i * L + sl] = id[i];
        }
    }
    while (badb != 0u) {  // uniform: rows that need the exact path, one by one
      const int g = (__ffs(badb) - 1) / L;
      const long long fr = wrow0 + g;
      MT_EXACT_HOOK();
      mt_exact_row(gating_output + fr * E, topk_weights + fr * top_k, topk_ids + fr * top_k, E,
                   top_k, lane);
      badb &= ~(SEGMASK << (g * L));
    }
  }
}

extern "C" __global__ void __launch_bounds__(MT_WARPS * 32)
    moe_topk_gating_softmax_seg(const float* __restrict__ gating_output,
                                float* __restrict__ topk_weights, int* __restrict__ topk_ids,
                                int tokens, int num_experts, int top_k) {
  const bool aligned = (reinterpret_cast<unsigned long long>(gating_output) & 15ull) == 0;
  if (aligned && top_k >= 1 && top_k <= MT_C) {
    // L = num_experts / MT_V lanes per row; slot r is written by lane r % L
    if (num_experts == 8 * MT_V)
      return mt_fast<8>(gating_output, topk_weights, topk_ids, tokens, top_k);
    if (num_experts == 4 * MT_V)
      return mt_fast<4>(gating_output, topk_weights, topk_ids, tokens, top_k);
#if MT_V == 16  // (at MT_V 32 these two spill: 512 / 1024 experts take the exact path there)
    if (num_experts == 16 * MT_V)
      return mt_fast<16>(gating_output, topk_weights, topk_ids, tokens, top_k);
    if (num_experts == 32 * MT_V)
      return mt_fast<32>(gating_output, topk_weights, topk_ids, tokens, top_k);
#endif
  }
  const int lane = threadIdx.x & 31;
  for (long long row = static_cast<long long>(blockIdx.x) * MT_WARPS + (threadIdx.x >> 5);
       row < tokens; row += static_cast<long long>(gridDim.x) * MT_WARPS)  // warp-uniform
    mt_exact_row(gating_output + row * num_experts, topk_weights + row * top_k,
                 topk_ids + row * top_k, num_experts, top_k, lane);
}
