// Output stage of the chunked gated delta rule (FLA chunk_fwd_o), fp32 math.
// One block per (chunk c, value head j, batch b), one thread per value column.
// Value head j uses q/k head min(j / (HV / HQ), HQ - 1). For the n tokens of
// the chunk (the last chunk may be shorter), with local indices i, m < n:
//   A[i, m] = (q_i . k_m) * exp(g_i - g_m) if m <= i and g_i - g_m <= 0, else 0
//   Ab = bf16(A)                               (staged in shared memory)
//   inter[i, :] = exp(g_i) * (q_i . h[b, c, j])  (h is K x V)
//   intra[i, :] = sum_{m <= i} Ab[i, m] * v_m
//   out = bf16((inter + intra) * key_dim^-1/2)
#include <cuda_bf16.h>

#define CHUNK 64

extern "C" __global__ void chunk_delta_rule_output_ref(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
    const __nv_bfloat16* __restrict__ v, const __nv_bfloat16* __restrict__ h,
    const float* __restrict__ g, __nv_bfloat16* __restrict__ out, int tokens, int num_q_heads,
    int num_v_heads, int key_dim, int value_dim, int chunk_size) {
  __shared__ float Ab[CHUNK][CHUNK];
  __shared__ float gs[CHUNK];
  if (chunk_size != CHUNK) return;  // outputs stay unwritten: the check fails loudly
  const int ch = blockIdx.x, j = blockIdx.y, bb = blockIdx.z;
  const int num_chunks = (tokens + CHUNK - 1) / CHUNK;
  const int t0 = ch * CHUNK;
  const int n = min(CHUNK, tokens - t0);
  const int ratio = max(num_v_heads / num_q_heads, 1);
  const int hq = min(j / ratio, num_q_heads - 1);
  const float scale = 1.0f / sqrtf(static_cast<float>(key_dim));
  const long long tok0 = static_cast<long long>(bb) * tokens + t0;  // (b, t0) row
  for (int i = threadIdx.x; i < n; i += blockDim.x) gs[i] = g[(tok0 + i) * num_v_heads + j];
  __syncthreads();
  for (int e = threadIdx.x; e < CHUNK * CHUNK; e += blockDim.x) {
    const int i = e / CHUNK, m = e % CHUNK;
    float a = 0.0f;
    if (i < n && m <= i && gs[i] - gs[m] <= 0.0f) {
      const __nv_bfloat16* qi = q + ((tok0 + i) * num_q_heads + hq) * key_dim;
      const __nv_bfloat16* km = k + ((tok0 + m) * num_q_heads + hq) * key_dim;
      float dot = 0.0f;
      for (int kk = 0; kk < key_dim; ++kk) dot += __bfloat162float(qi[kk]) * __bfloat162float(km[kk]);
      a = __bfloat162float(__float2bfloat16(dot * expf(gs[i] - gs[m])));
    }
    Ab[i][m] = a;
  }
  __syncthreads();
  const __nv_bfloat16* hc =
      h + ((static_cast<long long>(bb) * num_chunks + ch) * num_v_heads + j) * key_dim * value_dim;
  for (int c = threadIdx.x; c < value_dim; c += blockDim.x) {
    for (int i = 0; i < n; ++i) {
      const __nv_bfloat16* qi = q + ((tok0 + i) * num_q_heads + hq) * key_dim;
      float inter = 0.0f;
      for (int kk = 0; kk < key_dim; ++kk)
        inter += __bfloat162float(qi[kk]) * __bfloat162float(hc[static_cast<long long>(kk) * value_dim + c]);
      inter *= expf(gs[i]);
      float intra = 0.0f;
      for (int m = 0; m <= i; ++m)
        intra += Ab[i][m] * __bfloat162float(v[((tok0 + m) * num_v_heads + j) * value_dim + c]);
      out[((tok0 + i) * num_v_heads + j) * value_dim + c] = __float2bfloat16((inter + intra) * scale);
    }
  }
}
