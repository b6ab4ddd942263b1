// MLA decode attention on the absorbed latent cache (AITER mla_decode):
// K is the full kv_lora_rank + rope row, V its first kv_lora_rank entries.
// One block per (sequence i, head h). Sequence i occupies rows
// [o_i, o_i + seq_lens[i]) of kv_cache, o_i = sum of the previous seq_lens.
// Scores s_p = (q . K_p) / sqrt(dqk) in fp32 go to shared memory; thread 0
// computes the max and the sum of exponentials; each thread then produces
// output columns c = tid, tid + blockDim, ...: out = bf16(sum_p prob_p V_p[c]).
// Shared memory: max ctx_len floats (the launch sizes it from ctx_len).
#include <cuda_bf16.h>

extern "C" __global__ void mla_decode_ref(const __nv_bfloat16* __restrict__ q,
                                          const __nv_bfloat16* __restrict__ kv_cache,
                                          const int* __restrict__ seq_lens,
                                          __nv_bfloat16* __restrict__ out, int nhead, int dqk,
                                          int dv) {
  extern __shared__ float s[];
  __shared__ float smax, ssum;
  const int i = blockIdx.x / nhead, h = blockIdx.x % nhead;
  long long o = 0;
  for (int j = 0; j < i; ++j) o += seq_lens[j];
  const int len = seq_lens[i];
  const __nv_bfloat16* qv = q + (static_cast<long long>(i) * nhead + h) * dqk;
  const float inv_sqrt = 1.0f / sqrtf(static_cast<float>(dqk));
  for (int p = threadIdx.x; p < len; p += blockDim.x) {
    const __nv_bfloat16* kr = kv_cache + (o + p) * dqk;
    float acc = 0.0f;
    for (int d = 0; d < dqk; ++d) acc += __bfloat162float(qv[d]) * __bfloat162float(kr[d]);
    s[p] = acc * inv_sqrt;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = -__int_as_float(0x7f800000);
    for (int p = 0; p < len; ++p) m = fmaxf(m, s[p]);
    float sum = 0.0f;
    for (int p = 0; p < len; ++p) sum += expf(s[p] - m);
    smax = m;
    ssum = sum;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < dv; c += blockDim.x) {
    float acc = 0.0f;
    for (int p = 0; p < len; ++p)
      acc += expf(s[p] - smax) * __bfloat162float(kv_cache[(o + p) * dqk + c]);
    out[(static_cast<long long>(i) * nhead + h) * dv + c] = __float2bfloat16(acc / ssum);
  }
}
