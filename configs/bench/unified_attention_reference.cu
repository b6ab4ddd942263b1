// Paged causal attention over packed sequences with GQA (vLLM unified_attention),
// fp32 math with an online (streaming) softmax, one bf16 rounding at the end.
// Sequence i has seqused_k[i] queries and as many keys (query length = KV
// length, so the mask is the ordinary causal one, key j <= query r). Its
// queries are rows [qs_i, qs_i + len_i) of q, qs_i = sum of the previous
// seqused_k (the prefix sum vLLM passes as cu_seqlens_q). Key position j of
// sequence i is row (j % block_size) of physical block block_table[i, j / block_size].
// Query head h reads KV head h / (num_query_heads / num_kv_heads).
// One block per (16 query rows, sequence, query head); one warp per query row,
// lane l owning dims l, l + 32, ... (head_size <= 256); the block stages one
// page (block_size keys) of K and V for its KV head in shared memory.
#include <cuda_bf16.h>

#define ROWS 16    // query rows (warps) per block
#define MAXD 256
#define PER (MAXD / 32)

extern "C" __global__ void unified_attention_ref(const __nv_bfloat16* __restrict__ q,
                                                 const __nv_bfloat16* __restrict__ k_cache,
                                                 const __nv_bfloat16* __restrict__ v_cache,
                                                 const int* __restrict__ seqused_k,
                                                 const int* __restrict__ block_table,
                                                 __nv_bfloat16* __restrict__ out, int num_query_heads,
                                                 int num_kv_heads, int head_size, int block_size,
                                                 int max_blocks) {
  extern __shared__ float smem[];
  float* Ks = smem;                          // [block_size][head_size]
  float* Vs = smem + block_size * head_size;  // [block_size][head_size]
  __shared__ int qstart;
  if (head_size > MAXD) return;  // output stays unwritten: the check fails loudly
  const int i = blockIdx.y, h = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) qstart = 0;
  __syncthreads();
  int part = 0;
  for (int j = threadIdx.x; j < i; j += blockDim.x) part += seqused_k[j];
  atomicAdd(&qstart, part);
  __syncthreads();
  const long long qs = qstart;
  const int len = seqused_k[i];
  const int r0 = blockIdx.x * ROWS;
  if (r0 >= len) return;  // uniform across the block
  const int r = r0 + warp;
  const bool active = r < len;
  const int hk = h / (num_query_heads / num_kv_heads);
  const float scale = 1.0f / sqrtf(static_cast<float>(head_size));
  float qv[PER], o[PER];
#pragma unroll
  for (int p = 0; p < PER; ++p) {
    const int d = lane + 32 * p;
    qv[p] = (active && d < head_size)
                ? __bfloat162float(q[((qs + r) * num_query_heads + h) * head_size + d])
                : 0.0f;
    o[p] = 0.0f;
  }
  float m = -__int_as_float(0x7f800000), l = 0.0f;
  const int last = min(len, r0 + ROWS) - 1;  // the last key any row of this block sees
  for (int pg = 0; pg * block_size <= last; ++pg) {
    const long long phys = block_table[static_cast<long long>(i) * max_blocks + pg];
    for (int e = threadIdx.x; e < block_size * head_size; e += blockDim.x) {
      const int kk = e / head_size, d = e % head_size;
      const bool valid = pg * block_size + kk < len;
      const long long src = ((phys * block_size + kk) * num_kv_heads + hk) * head_size + d;
      Ks[e] = valid ? __bfloat162float(k_cache[src]) : 0.0f;
      Vs[e] = valid ? __bfloat162float(v_cache[src]) : 0.0f;
    }
    __syncthreads();
    if (active) {
      for (int kk = 0; kk < block_size; ++kk) {
        const int j = pg * block_size + kk;
        if (j > r) break;  // causal
        float s = 0.0f;
#pragma unroll
        for (int p = 0; p < PER; ++p) {
          const int d = lane + 32 * p;
          if (d < head_size) s += qv[p] * Ks[kk * head_size + d];
        }
        for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
        s *= scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);
        const float pe = expf(s - m_new);
        l = l * corr + pe;
#pragma unroll
        for (int p = 0; p < PER; ++p) {
          const int d = lane + 32 * p;
          if (d < head_size) o[p] = o[p] * corr + pe * Vs[kk * head_size + d];
        }
        m = m_new;
      }
    }
    __syncthreads();
  }
  if (active) {
#pragma unroll
    for (int p = 0; p < PER; ++p) {
      const int d = lane + 32 * p;
      if (d < head_size) out[((qs + r) * num_query_heads + h) * head_size + d] = __float2bfloat16(o[p] / l);
    }
  }
}
