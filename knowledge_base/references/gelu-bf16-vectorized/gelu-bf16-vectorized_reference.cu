// Naive reference: out[i] = gelu(x[i]) = 0.5 x (1 + erf(x / sqrt(2))), bf16 in
// and out, fp32 math, one element per thread.
#include <cuda_bf16.h>
extern "C" __global__ void gelu_ref(const __nv_bfloat16* x, __nv_bfloat16* out, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = __bfloat162float(x[i]);
  out[i] = __float2bfloat16(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
}
