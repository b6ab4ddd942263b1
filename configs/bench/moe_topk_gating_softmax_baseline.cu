// moe_topk_gating_softmax baseline (kopt bench, optimized reference kernel)
//
// What: per row of expert logits (fp32), p = softmax(row) (max-subtracted),
// then the top_k largest p in descending order (ties: lower expert id first):
// topk_weights = p (not renormalized), topk_ids = expert ids (int32).
//
// Techniques:
// - One warp per row, 4 rows per 128-thread block, no shared memory and no
//   barriers. Lane l holds the contiguous experts [l * VPL, (l + 1) * VPL),
//   VPL = num_experts / 32 (4 for 128 experts, 8 for 256), loaded with 16-byte
//   float4 loads (__ldcs: read once).
// - Softmax with two warp-shuffle reductions (max, then sum of expf).
// - Top-k by k rounds of warp arg-max: each lane keeps its local best; the
//   warp max of those is found with 5 __shfl_xor_sync; __ballot_sync picks the
//   lowest lane holding it, which (contiguous layout) also holds the lowest
//   expert id among equal values, so ties are broken exactly as specified
//   without a second (index) reduction. The winner removes its value.
// - Selection is on p itself (expf and an IEEE division, like the reference),
//   not on the logits, so the order matches even where two logits round to
//   the same probability. Caveat: the sum of expf is a tree sum, the
//   reference's a sequential one, so p can differ in the last bit; the id
//   order can then differ only where two of a row's top values round to one
//   p in one sum and not the other (adjacent fp32 logits: rare, but not
//   impossible over 8192 rows).
// - Results collected in lane s for round s and written by lanes 0..k-1 as one
//   coalesced store per output.
// - Any shape: num_experts % 128 != 0 or > 512, top_k > 32, or misaligned input
//   take a generic warp path (strided loads, k scans with the reference's
//   "next after (p, id)" rule).
// Measured on H200 (2026-12-01, driver 580.159.04, `kopt bench --seeds 1`): moe_topk_gating_softmax: 5.3 % of speed of light (weighted over 10 shapes), 10.40x the naive reference, 5 launch-bound shapes

#define WARPS 4
#define MAXV 16  // values per lane on the fast path (num_experts <= 512)

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
moe_topk_gating_softmax_baseline(const float* __restrict__ gating_output,
                                 float* __restrict__ topk_weights, int* __restrict__ topk_ids,
                                 int tokens, int num_experts, int top_k) {
  const int lane = threadIdx.x & 31;
  const long long row = static_cast<long long>(blockIdx.x) * WARPS + (threadIdx.x >> 5);
  if (row >= tokens) return;  // warp-uniform
  const float* xr = gating_output + row * num_experts;
  const float NEG_INF = -__int_as_float(0x7f800000);

  const bool fast = (num_experts % 128) == 0 && num_experts <= 32 * MAXV && top_k <= 32 &&
                    (reinterpret_cast<unsigned long long>(gating_output) & 15ull) == 0;
  if (fast) {
    const int vpl = num_experts >> 5;  // 4, 8, 12 or 16
    float v[MAXV];
    const float4* src = reinterpret_cast<const float4*>(xr + lane * vpl);
#pragma unroll
    for (int q = 0; q < MAXV / 4; ++q) {
      if (q * 4 < vpl) {
        const float4 f = __ldcs(src + q);
        v[4 * q] = f.x; v[4 * q + 1] = f.y; v[4 * q + 2] = f.z; v[4 * q + 3] = f.w;
      } else {
        v[4 * q] = v[4 * q + 1] = v[4 * q + 2] = v[4 * q + 3] = NEG_INF;
      }
    }
    float mx = NEG_INF;
#pragma unroll
    for (int j = 0; j < MAXV; ++j) mx = fmaxf(mx, v[j]);
    mx = warp_max(mx);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < MAXV; ++j)
      if (j < vpl) {
        v[j] = expf(v[j] - mx);
        s += v[j];
      }
    s = warp_sum(s);
#pragma unroll
    for (int j = 0; j < MAXV; ++j) v[j] = j < vpl ? v[j] / s : -1.0f;  // p in [0, 1]; -1 = taken/absent

    float my_w = 0.0f;
    int my_id = 0;
    for (int r = 0; r < top_k; ++r) {
      float lb = v[0];
      int lbi = 0;
#pragma unroll
      for (int j = 1; j < MAXV; ++j)
        if (v[j] > lb) {  // strict: the first (lowest id) of equal values wins
          lb = v[j];
          lbi = j;
        }
      const float m = warp_max(lb);
      const unsigned int who = __ballot_sync(0xffffffffu, lb == m);
      const int win = __ffs(who) - 1;
      const int id = __shfl_sync(0xffffffffu, lane * vpl + lbi, win);
      if (lane == win) {
#pragma unroll
        for (int j = 0; j < MAXV; ++j)
          if (j == lbi) v[j] = -1.0f;
      }
      if (lane == r) {
        my_w = m;
        my_id = id;
      }
    }
    if (lane < top_k) {
      topk_weights[row * top_k + lane] = my_w;
      topk_ids[row * top_k + lane] = my_id;
    }
    return;
  }

  // Generic path: strided over the row, k selection scans (L1-resident row).
  float mx = NEG_INF;
  for (int e = lane; e < num_experts; e += 32) mx = fmaxf(mx, xr[e]);
  mx = warp_max(mx);
  float s = 0.0f;
  for (int e = lane; e < num_experts; e += 32) s += expf(xr[e] - mx);
  s = warp_sum(s);
  float prev_p = __int_as_float(0x7f800000);
  int prev_id = -1;
  for (int r = 0; r < top_k; ++r) {
    float best_p = NEG_INF;
    int best = 0x7fffffff;
    for (int e = lane; e < num_experts; e += 32) {
      const float p = expf(xr[e] - mx) / s;
      const bool after_prev = p < prev_p || (p == prev_p && e > prev_id);
      if (after_prev && (p > best_p || (p == best_p && e < best))) {
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
    if (lane == 0) {
      topk_weights[row * top_k + r] = best_p;
      topk_ids[row * top_k + r] = best;
    }
    prev_p = best_p;
    prev_id = best;
  }
}
