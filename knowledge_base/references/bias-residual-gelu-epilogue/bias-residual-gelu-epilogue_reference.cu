// Naive reference: out[t][h] = gelu(x[t][h] + bias[h]) + residual[t][h], with the
// erf GELU; bf16 in and out, fp32 math, one element per thread.
#include <cuda_bf16.h>
extern "C" __global__ void bias_gelu_residual_ref(const __nv_bfloat16* x, const __nv_bfloat16* bias,
                                                  const __nv_bfloat16* residual, __nv_bfloat16* out,
                                                  long long n, int hidden) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = __bfloat162float(x[i]) + __bfloat162float(bias[i % hidden]);
  const float g = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  out[i] = __float2bfloat16(g + __bfloat162float(residual[i]));
}
