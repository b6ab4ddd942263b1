// Counting sort of the flat (token, slot) indices by expert id.
// One single-thread block per expert e scans all N = tokens * top_k entries
// in ascending order: it counts the entries with id < e (its start) and with
// id == e, and writes the latter's flat indices in ascending order, which is
// the stable order the spec requires. Ids outside [0, num_experts) are
// dropped, as in the spec. O(N * E) work; trivial at these sizes.
extern "C" __global__ void moe_count_and_sort_ref(const int* __restrict__ topk_ids,
                                                  int* __restrict__ sorted_token_ids,
                                                  int* __restrict__ expert_token_counts,
                                                  int* __restrict__ cumsum, int n, int num_experts) {
  const int e = blockIdx.x;
  if (threadIdx.x != 0 || e >= num_experts) return;
  int before = 0, count = 0;
  for (int f = 0; f < n; ++f) {
    const int id = topk_ids[f];
    if (id >= 0 && id < e) ++before;
    if (id == e) ++count;
  }
  expert_token_counts[e] = count;
  cumsum[e + 1] = before + count;
  if (e == 0) cumsum[0] = 0;
  int pos = before;
  for (int f = 0; f < n; ++f)
    if (topk_ids[f] == e) sorted_token_ids[pos++] = f;
}
