// Naive reference: idx[r] = the smallest c with x[r][c] = max_c x[r][c] (greedy
// sampling), fp32 logits, int32 index; one thread per row, sequential.
extern "C" __global__ void argmax_ref(const float* x, int* idx, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + (long long)r * cols;
  float best = xr[0];
  int bi = 0;
  for (int c = 1; c < cols; ++c)
    if (xr[c] > best) { best = xr[c]; bi = c; }
  idx[r] = bi;
}
