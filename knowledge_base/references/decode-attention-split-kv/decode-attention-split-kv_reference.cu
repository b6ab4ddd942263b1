// Naive reference: decode attention with GQA, one block per (batch, query head):
// scores[t] = scale * q . k[t] (fp32) into a workspace, then a sequential max
// and sum by one thread, then out[d] = sum_t exp(scores[t] - max) v[t][d] / sum.
// q [batch, heads, 128], k/v cache [batch, seqlen, kv_heads, 128], bf16.
#include <cuda_bf16.h>
extern "C" __global__ void decode_attn_ref(const __nv_bfloat16* q, const __nv_bfloat16* kc,
                                           const __nv_bfloat16* vc, __nv_bfloat16* out, float* scores,
                                           int seqlen, int kv_heads, int group, float scale) {
  __shared__ float s_max, s_sum;
  const int h = blockIdx.x, b = blockIdx.y, heads = kv_heads * group, kvh = h / group;
  const __nv_bfloat16* qh = q + ((long long)b * heads + h) * 128;
  float* sc = scores + ((long long)b * heads + h) * seqlen;
  for (int t = threadIdx.x; t < seqlen; t += blockDim.x) {
    const __nv_bfloat16* kt = kc + (((long long)b * seqlen + t) * kv_heads + kvh) * 128;
    float s = 0.f;
    for (int d = 0; d < 128; ++d) s += __bfloat162float(qh[d]) * __bfloat162float(kt[d]);
    sc[t] = s * scale;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = sc[0];
    for (int t = 1; t < seqlen; ++t) m = fmaxf(m, sc[t]);
    float l = 0.f;
    for (int t = 0; t < seqlen; ++t) l += expf(sc[t] - m);
    s_max = m;
    s_sum = l;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < 128; d += blockDim.x) {
    float o = 0.f;
    for (int t = 0; t < seqlen; ++t)
      o += expf(sc[t] - s_max) * __bfloat162float(vc[(((long long)b * seqlen + t) * kv_heads + kvh) * 128 + d]);
    out[((long long)b * heads + h) * 128 + d] = __float2bfloat16(o / s_sum);
  }
}
