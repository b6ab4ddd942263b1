// LayerNorm reference: one thread per row, two passes (mean, then biased
// variance), fp32 throughout, one bf16 rounding at the end. Deliberately
// simple so that it is obviously correct; speed does not matter here.
#include <cuda_bf16.h>

extern "C" __global__ void layer_norm_ref(const __nv_bfloat16* __restrict__ x,
                                          const __nv_bfloat16* __restrict__ weight,
                                          const __nv_bfloat16* __restrict__ bias,
                                          __nv_bfloat16* __restrict__ out, int tokens, int hidden,
                                          float eps) {
  const long long row = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= tokens) return;
  const __nv_bfloat16* xr = x + row * hidden;
  __nv_bfloat16* outr = out + row * hidden;
  float sum = 0.0f;
  for (int i = 0; i < hidden; ++i) sum += __bfloat162float(xr[i]);
  const float mean = sum / static_cast<float>(hidden);
  float sq = 0.0f;
  for (int i = 0; i < hidden; ++i) {
    const float d = __bfloat162float(xr[i]) - mean;
    sq += d * d;
  }
  const float rstd = 1.0f / sqrtf(sq / static_cast<float>(hidden) + eps);
  for (int i = 0; i < hidden; ++i) {
    const float y = (__bfloat162float(xr[i]) - mean) * rstd * __bfloat162float(weight[i]) +
                    __bfloat162float(bias[i]);
    outr[i] = __float2bfloat16(y);
  }
}
