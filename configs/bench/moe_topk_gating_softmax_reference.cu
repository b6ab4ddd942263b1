// MoE router: softmax over each row of expert logits (fp32, max-subtracted),
// then the top_k largest probabilities in descending order, with their
// expert ids; no renormalization. Among exactly equal probabilities the
// lower expert id comes first. One thread per row; selection by repeated
// arg-max over the row (top_k = 8 passes).
extern "C" __global__ void moe_topk_gating_softmax_ref(const float* __restrict__ gating_output,
                                                       float* __restrict__ topk_weights,
                                                       int* __restrict__ topk_ids, int tokens,
                                                       int num_experts, int top_k) {
  const long long row = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= tokens) return;
  const float* x = gating_output + row * num_experts;
  float mx = -__int_as_float(0x7f800000);
  for (int e = 0; e < num_experts; ++e) mx = fmaxf(mx, x[e]);
  float sum = 0.0f;
  for (int e = 0; e < num_experts; ++e) sum += expf(x[e] - mx);
  int prev_id = -1;
  float prev_p = __int_as_float(0x7f800000);
  for (int s = 0; s < top_k; ++s) {
    // the next element in the order (p descending, id ascending) after (prev_p, prev_id)
    int best = -1;
    float best_p = -__int_as_float(0x7f800000);
    for (int e = 0; e < num_experts; ++e) {
      const float p = expf(x[e] - mx) / sum;
      const bool after_prev = p < prev_p || (p == prev_p && e > prev_id);
      if (after_prev && (best < 0 || p > best_p)) {
        best = e;
        best_p = p;
      }
    }
    topk_weights[row * top_k + s] = best_p;
    topk_ids[row * top_k + s] = best;
    prev_id = best;
    prev_p = best_p;
  }
}
