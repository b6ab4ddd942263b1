// fused_moe reference, one (token, slot) at a time, fp32 throughout.
// Kernel 1: act[slot, i] = silu(x[t] . w1[e, i]) * (x[t] . w1[e, inter + i])
// for slot = t * top_k + s and e = topk_ids[slot].
// Kernel 2: out[t, h] = sum over the token's slots of
// topk_weights[t, s] * (act[slot] . w2[e, h]).
// Each dot product belongs to one warp (lanes stride along the row, then a
// shuffle sum) so that weight rows are read contiguously; that is the only
// concession to speed. Duplicate expert ids within a token are simply two
// slots (equivalent to summing their weights).
#include <cuda_bf16.h>

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// grid (tokens * top_k, ceil(inter / 8)), block 256: warp w computes i = blockIdx.y * 8 + w.
extern "C" __global__ void fused_moe_act_ref(const __nv_bfloat16* x, const __nv_bfloat16* w1, const int* topk_ids,
                                             float* act, int hidden, int inter, int top_k) {
  extern __shared__ float xs[];
  const long long slot = blockIdx.x;
  const long long t = slot / top_k;
  for (int h = threadIdx.x; h < hidden; h += blockDim.x) xs[h] = __bfloat162float(x[t * hidden + h]);
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const int i = blockIdx.y * (blockDim.x / 32) + threadIdx.x / 32;
  if (i >= inter) return;
  const long long e = topk_ids[slot];
  const __nv_bfloat16* gate_row = w1 + (e * 2 * inter + i) * hidden;
  const __nv_bfloat16* up_row = w1 + (e * 2 * inter + inter + i) * hidden;
  float gate = 0.0f, up = 0.0f;
  for (int h = lane; h < hidden; h += 32) {
    gate += xs[h] * __bfloat162float(gate_row[h]);
    up += xs[h] * __bfloat162float(up_row[h]);
  }
  gate = warp_sum(gate);
  up = warp_sum(up);
  if (lane == 0) act[slot * inter + i] = gate / (1.0f + expf(-gate)) * up;
}

// grid (tokens, ceil(hidden / 8)), block 256: warp w computes h = blockIdx.y * 8 + w.
extern "C" __global__ void fused_moe_down_ref(const float* act, const __nv_bfloat16* w2, const int* topk_ids,
                                              const float* topk_weights, float* out, int hidden, int inter,
                                              int top_k) {
  const long long t = blockIdx.x;
  const int lane = threadIdx.x % 32;
  const int h = blockIdx.y * (blockDim.x / 32) + threadIdx.x / 32;
  if (h >= hidden) return;
  float acc = 0.0f;
  for (int s = 0; s < top_k; ++s) {
    const long long slot = t * top_k + s;
    const long long e = topk_ids[slot];
    const __nv_bfloat16* row = w2 + (e * hidden + h) * inter;
    const float* a = act + slot * inter;
    float y = 0.0f;
    for (int i = lane; i < inter; i += 32) y += a[i] * __bfloat162float(row[i]);
    acc += topk_weights[slot] * warp_sum(y);
  }
  if (lane == 0) out[t * hidden + h] = acc;
}
