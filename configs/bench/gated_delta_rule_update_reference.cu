// Gated delta rule, token by token (SGLang/vLLM fused_sigmoid_gating_delta_rule_update),
// fp32 throughout. One block per (batch b, value head j), one thread per value
// column c: column c of the K x V state evolves independently of the others,
// so thread c keeps H[:, c] in a local array. Per token, the block stages the
// L2-normalized q and k of the shared q/k head and the gates in shared memory:
//   g = -exp(A_log[j]) * softplus(a + dt_bias)   (softplus: x if x > 20)
//   beta = sigmoid(b)
//   H *= exp(g); p = H^T k; delta = (v - p) * beta; H += k delta^T;
//   out = bf16(H^T (q * scale)),  scale = key_dim^-1/2
// The updated state goes back into the pool slot state_indices[b] (in place).
#include <cuda_bf16.h>

#define MAX_K 128

extern "C" __global__ void gated_delta_rule_update_ref(
    const float* __restrict__ A_log, const __nv_bfloat16* __restrict__ a,
    const __nv_bfloat16* __restrict__ dt_bias, const __nv_bfloat16* __restrict__ q,
    const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
    const __nv_bfloat16* __restrict__ b, float* __restrict__ state,
    const int* __restrict__ state_indices, __nv_bfloat16* __restrict__ out, int tokens,
    int num_q_heads, int num_v_heads, int key_dim, int value_dim) {
  __shared__ float kh[MAX_K], qh[MAX_K];
  __shared__ float decay, beta, knorm, qnorm;
  if (key_dim > MAX_K) return;  // outputs stay unwritten: the check fails loudly
  const int bj = blockIdx.x;
  const int bb = bj / num_v_heads, j = bj % num_v_heads;
  const int ratio = max(num_v_heads / num_q_heads, 1);
  const int hq = min(j / ratio, num_q_heads - 1);
  const int c = threadIdx.x;
  const float scale = 1.0f / sqrtf(static_cast<float>(key_dim));
  float* H = state + (static_cast<long long>(state_indices[bb]) * num_v_heads + j) * key_dim * value_dim;
  float h[MAX_K];
  if (c < value_dim)
    for (int kk = 0; kk < key_dim; ++kk) h[kk] = H[static_cast<long long>(kk) * value_dim + c];
  for (int t = 0; t < tokens; ++t) {
    const long long bt = static_cast<long long>(bb) * tokens + t;
    const long long qk_off = (bt * num_q_heads + hq) * key_dim;
    for (int kk = c; kk < key_dim; kk += blockDim.x) {
      kh[kk] = __bfloat162float(k[qk_off + kk]);
      qh[kk] = __bfloat162float(q[qk_off + kk]);
    }
    __syncthreads();
    if (c == 0) {
      float ks = 0.0f, qs = 0.0f;
      for (int kk = 0; kk < key_dim; ++kk) {
        ks += kh[kk] * kh[kk];
        qs += qh[kk] * qh[kk];
      }
      knorm = fmaxf(sqrtf(ks), 1e-6f);
      qnorm = fmaxf(sqrtf(qs), 1e-6f);
      const float x = __bfloat162float(a[bt * num_v_heads + j]) + __bfloat162float(dt_bias[j]);
      const float sp = x > 20.0f ? x : log1pf(expf(x));
      decay = expf(-expf(A_log[j]) * sp);
      beta = 1.0f / (1.0f + expf(-__bfloat162float(b[bt * num_v_heads + j])));
    }
    __syncthreads();
    for (int kk = c; kk < key_dim; kk += blockDim.x) {
      kh[kk] = kh[kk] / knorm;
      qh[kk] = qh[kk] / qnorm * scale;
    }
    __syncthreads();
    if (c < value_dim) {
      float p = 0.0f;
      for (int kk = 0; kk < key_dim; ++kk) {
        h[kk] *= decay;
        p += h[kk] * kh[kk];
      }
      const float delta = (__bfloat162float(v[(bt * num_v_heads + j) * value_dim + c]) - p) * beta;
      float o = 0.0f;
      for (int kk = 0; kk < key_dim; ++kk) {
        h[kk] += kh[kk] * delta;
        o += h[kk] * qh[kk];
      }
      out[(bt * num_v_heads + j) * value_dim + c] = __float2bfloat16(o);
    }
    __syncthreads();  // the next token overwrites kh, qh
  }
  if (c < value_dim)
    for (int kk = 0; kk < key_dim; ++kk) H[static_cast<long long>(kk) * value_dim + c] = h[kk];
}
