// RMSNorm reference: one thread per row, fp32 throughout. Deliberately
// simple so that it is obviously correct; speed does not matter here.
#include <cuda_bf16.h>

extern "C" __global__ void rmsnorm_ref(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                       __nv_bfloat16* out, int hidden, float eps) {
  const long long row = blockIdx.x;
  const __nv_bfloat16* xr = x + row * hidden;
  __nv_bfloat16* outr = out + row * hidden;
  float sum = 0.0f;
  for (int i = 0; i < hidden; ++i) {
    const float v = __bfloat162float(xr[i]);
    sum += v * v;
  }
  const float rstd = 1.0f / sqrtf(sum / static_cast<float>(hidden) + eps);
  for (int i = 0; i < hidden; ++i) {
    const float v = __bfloat162float(xr[i]) * rstd * __bfloat162float(weight[i]);
    outr[i] = __float2bfloat16(v);
  }
}
