// paged_attention_decode reference: one block per (sequence, query head),
// one thread per head dimension. Scores go to shared memory (one per
// position, each computed by one thread over the whole head), then every
// thread takes the max and the sum serially and forms its output dimension.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ float to_f(__half v) { return __half2float(v); }
__device__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ void store(__half* p, float v) { *p = __float2half_rn(v); }

template <typename T>
__device__ void paged_attention(const T* query, const T* k_cache, const T* v_cache, const int* block_tables,
                                const int* seq_lens, T* out, int num_heads, int num_kv_heads, int head_size,
                                int max_blocks) {
  extern __shared__ float scores[];
  const int seq = blockIdx.x, head = blockIdx.y;
  const int kv_head = head / (num_heads / num_kv_heads);
  const int n = seq_lens[seq];
  const T* q = query + (static_cast<long long>(seq) * num_heads + head) * head_size;
  T* o = out + (static_cast<long long>(seq) * num_heads + head) * head_size;
  const int BS = 16, X = 8;
  if (n <= 0) {
    for (int d = threadIdx.x; d < head_size; d += blockDim.x) store(o + d, 0.0f);
    return;
  }
  const float rsq = sqrtf(static_cast<float>(head_size));
  for (int p = threadIdx.x; p < n; p += blockDim.x) {
    const long long blk = block_tables[static_cast<long long>(seq) * max_blocks + p / BS];
    const int slot = p % BS;
    float s = 0.0f;
    for (int d = 0; d < head_size; ++d) {
      // k_cache[blk, kv_head, d / X, slot, d % X]
      const long long idx = (((blk * num_kv_heads + kv_head) * (head_size / X) + d / X) * BS + slot) * X + d % X;
      s += to_f(q[d]) * to_f(k_cache[idx]);
    }
    scores[p] = s / rsq;
  }
  __syncthreads();
  float m = scores[0];
  for (int p = 1; p < n; ++p) m = fmaxf(m, scores[p]);
  float sum = 0.0f;
  for (int p = 0; p < n; ++p) sum += expf(scores[p] - m);
  for (int d = threadIdx.x; d < head_size; d += blockDim.x) {
    float acc = 0.0f;
    for (int p = 0; p < n; ++p) {
      const long long blk = block_tables[static_cast<long long>(seq) * max_blocks + p / BS];
      // v_cache[blk, kv_head, d, slot]
      const long long idx = ((blk * num_kv_heads + kv_head) * head_size + d) * BS + p % BS;
      acc += (expf(scores[p] - m) / sum) * to_f(v_cache[idx]);
    }
    store(o + d, acc);
  }
}

extern "C" __global__ void paged_attention_ref_bf16(const __nv_bfloat16* query, const __nv_bfloat16* k_cache,
                                                    const __nv_bfloat16* v_cache, const int* block_tables,
                                                    const int* seq_lens, __nv_bfloat16* out, int num_heads,
                                                    int num_kv_heads, int head_size, int max_blocks) {
  paged_attention(query, k_cache, v_cache, block_tables, seq_lens, out, num_heads, num_kv_heads, head_size,
                  max_blocks);
}

extern "C" __global__ void paged_attention_ref_fp16(const __half* query, const __half* k_cache,
                                                    const __half* v_cache, const int* block_tables,
                                                    const int* seq_lens, __half* out, int num_heads,
                                                    int num_kv_heads, int head_size, int max_blocks) {
  paged_attention(query, k_cache, v_cache, block_tables, seq_lens, out, num_heads, num_kv_heads, head_size,
                  max_blocks);
}
