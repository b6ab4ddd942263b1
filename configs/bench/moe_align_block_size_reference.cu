// moe_align_block_size reference: one block, one thread per expert. Each
// thread counts its expert's entries by scanning all of topk_ids (O(E * N),
// plain and obviously ordered), thread 0 forms the padded offsets, then each
// thread writes its entries in increasing flat index, its padding and its
// block ids. The tails past P are filled with the sentinel N / -1.
extern "C" __global__ void moe_align_ref(const int* topk_ids, int* sorted_token_ids, int* expert_ids,
                                         int* num_tokens_post_pad, int n, int num_experts, int block_size,
                                         int max_len) {
  extern __shared__ int offsets[];  // num_experts + 1 padded offsets
  const int e = threadIdx.x;
  int count = 0;
  if (e < num_experts) {
    for (int f = 0; f < n; ++f) count += topk_ids[f] == e ? 1 : 0;
    offsets[e + 1] = (count + block_size - 1) / block_size * block_size;  // 0 for an empty expert
  }
  __syncthreads();
  if (e == 0) {
    offsets[0] = 0;
    for (int i = 1; i <= num_experts; ++i) offsets[i] += offsets[i - 1];
    num_tokens_post_pad[0] = offsets[num_experts];
  }
  __syncthreads();
  const int total = offsets[num_experts];
  if (e < num_experts) {
    int pos = offsets[e];
    for (int f = 0; f < n; ++f)
      if (topk_ids[f] == e) sorted_token_ids[pos++] = f;
    for (; pos < offsets[e + 1]; ++pos) sorted_token_ids[pos] = n;
    for (int b = offsets[e] / block_size; b < offsets[e + 1] / block_size; ++b) expert_ids[b] = e;
  }
  for (int i = total + threadIdx.x; i < max_len; i += blockDim.x) sorted_token_ids[i] = n;
  const int max_blocks = (max_len + block_size - 1) / block_size;
  for (int b = total / block_size + threadIdx.x; b < max_blocks; b += blockDim.x) expert_ids[b] = -1;
}
