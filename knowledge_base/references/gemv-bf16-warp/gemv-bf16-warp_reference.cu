// Naive reference: y[n] = sum_k w[n][k] * x[k]; bf16 weights and vector, fp32
// accumulation in index order, one thread per output.
#include <cuda_bf16.h>
extern "C" __global__ void gemv_ref(const __nv_bfloat16* w, const __nv_bfloat16* x, __nv_bfloat16* y,
                                    int n, int k) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) acc += __bfloat162float(w[(long long)r * k + i]) * __bfloat162float(x[i]);
  y[r] = __float2bfloat16(acc);
}
