// Inter-chunk state recurrence of the chunked gated delta rule
// (FLA chunk_gated_delta_rule_fwd_h), fp32 state. One block per
// (value head j, batch b), one thread per value column c (columns of the
// K x V state are independent). Value head j uses k head min(j / (HV / HK), HK - 1).
// For each chunk of chunk_size tokens (the last may be shorter), gl = g of
// its last token:
//   h[b, chunk, j] = bf16(H);  Hb = float(bf16(H))
//   per token t: vn = u_t - w_t^T Hb;  v_new = bf16(vn);
//                vs = bf16(vn * (gl - g_t <= 0 ? exp(gl - g_t) : 0))
//   H = H * exp(gl) + sum_t k_t vs_t^T
// The final H goes back into the pool slot state_indices[b] (in place).
#include <cuda_bf16.h>

#define MAX_K 128

extern "C" __global__ void chunk_gated_delta_rule_state_ref(
    const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ w,
    const __nv_bfloat16* __restrict__ u, const float* __restrict__ g, float* __restrict__ state,
    const int* __restrict__ state_indices, __nv_bfloat16* __restrict__ h_out,
    __nv_bfloat16* __restrict__ v_new, int tokens, int num_k_heads, int num_v_heads, int key_dim,
    int value_dim, int chunk_size) {
  if (key_dim > MAX_K) return;  // outputs stay unwritten: the check fails loudly
  const int j = blockIdx.x, bb = blockIdx.y;
  const int c = blockIdx.z * blockDim.x + threadIdx.x;
  if (c >= value_dim) return;
  const int ratio = max(num_v_heads / num_k_heads, 1);
  const int hk = min(j / ratio, num_k_heads - 1);
  const int num_chunks = (tokens + chunk_size - 1) / chunk_size;
  float* S = state + (static_cast<long long>(state_indices[bb]) * num_v_heads + j) * key_dim * value_dim;
  float H[MAX_K], Hb[MAX_K], acc[MAX_K];
  for (int kk = 0; kk < key_dim; ++kk) H[kk] = S[static_cast<long long>(kk) * value_dim + c];
  for (int ch = 0; ch < num_chunks; ++ch) {
    const int t0 = ch * chunk_size;
    const int t1 = min(t0 + chunk_size, tokens);
    __nv_bfloat16* hc =
        h_out + ((static_cast<long long>(bb) * num_chunks + ch) * num_v_heads + j) * key_dim * value_dim;
    for (int kk = 0; kk < key_dim; ++kk) {
      const __nv_bfloat16 r = __float2bfloat16(H[kk]);
      hc[static_cast<long long>(kk) * value_dim + c] = r;
      Hb[kk] = __bfloat162float(r);
      acc[kk] = 0.0f;
    }
    const long long row1 = static_cast<long long>(bb) * tokens + (t1 - 1);
    const float gl = g[row1 * num_v_heads + j];
    for (int t = t0; t < t1; ++t) {
      const long long row = static_cast<long long>(bb) * tokens + t;
      const __nv_bfloat16* wt = w + (row * num_v_heads + j) * key_dim;
      float wh = 0.0f;
      for (int kk = 0; kk < key_dim; ++kk) wh += __bfloat162float(wt[kk]) * Hb[kk];
      const long long vi = (row * num_v_heads + j) * value_dim + c;
      const float vn = __bfloat162float(u[vi]) - wh;
      v_new[vi] = __float2bfloat16(vn);
      const float d = gl - g[row * num_v_heads + j];
      const float f = d <= 0.0f ? expf(d) : 0.0f;
      const float vs = __bfloat162float(__float2bfloat16(vn * f));
      const __nv_bfloat16* kt = k + (row * num_k_heads + hk) * key_dim;
      for (int kk = 0; kk < key_dim; ++kk) acc[kk] += __bfloat162float(kt[kk]) * vs;
    }
    const float decay = expf(gl);
    for (int kk = 0; kk < key_dim; ++kk) H[kk] = H[kk] * decay + acc[kk];
  }
  for (int kk = 0; kk < key_dim; ++kk) S[static_cast<long long>(kk) * value_dim + c] = H[kk];
}
