// Naive reference: C[m][n] = sum_k A[m][k] * B[n][k] (y = x W^T, the layout of a
// linear layer); bf16 in, fp32 accumulation in index order, bf16 out; one
// thread per output element.
#include <cuda_bf16.h>
extern "C" __global__ void gemm_ref(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c,
                                    int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y;
  if (col >= n) return;
  float acc = 0.f;
  for (int i = 0; i < k; ++i)
    acc += __bfloat162float(a[(long long)row * k + i]) * __bfloat162float(b[(long long)col * k + i]);
  c[(long long)row * n + col] = __float2bfloat16(acc);
}
