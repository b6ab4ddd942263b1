// topk_filter reference: one block per row. The threshold (the k-th largest
// value counting duplicates) is found by peeling distinct values from the
// top: each round finds the largest value below the previous one and how
// often it occurs, until k values are covered (at most k rounds of plain
// block-wide max/count). Then out = x >= thr ? x : -inf.
extern "C" __global__ void topk_filter_ref(const float* logits, float* out, int vocab, int top_k) {
  __shared__ float red_f[256];
  __shared__ int red_i[256];
  const float* x = logits + static_cast<long long>(blockIdx.x) * vocab;
  float* y = out + static_cast<long long>(blockIdx.x) * vocab;
  const int k = top_k < vocab ? top_k : vocab;
  const int tid = threadIdx.x;
  float bound = __int_as_float(0x7f800000);  // +inf: values strictly below it are candidates
  int remaining = k;
  float thr = -__int_as_float(0x7f800000);
  while (remaining > 0) {
    float m = -__int_as_float(0x7f800000);
    for (int i = tid; i < vocab; i += blockDim.x)
      if (x[i] < bound && x[i] > m) m = x[i];
    red_f[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
      if (tid < s && red_f[tid + s] > red_f[tid]) red_f[tid] = red_f[tid + s];
      __syncthreads();
    }
    m = red_f[0];
    int c = 0;
    for (int i = tid; i < vocab; i += blockDim.x) c += x[i] == m ? 1 : 0;
    red_i[tid] = c;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
      if (tid < s) red_i[tid] += red_i[tid + s];
      __syncthreads();
    }
    c = red_i[0];
    __syncthreads();  // everyone has read red_f[0] / red_i[0] before the next round overwrites them
    thr = m;
    remaining -= c;
    bound = m;
  }
  for (int i = tid; i < vocab; i += blockDim.x) y[i] = x[i] >= thr ? x[i] : -__int_as_float(0x7f800000);
}
