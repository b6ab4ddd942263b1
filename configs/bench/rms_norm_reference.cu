// rms_norm reference: one thread per row, fp32 throughout, one rounding at
// the end. Deliberately naive so that it is obviously correct.
#include <cuda_bf16.h>

extern "C" __global__ void rms_norm_ref(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                                        __nv_bfloat16* out, int tokens, int hidden, float eps) {
  const long long row = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= tokens) return;
  const __nv_bfloat16* xr = x + row * hidden;
  __nv_bfloat16* outr = out + row * hidden;
  float sum = 0.0f;
  for (int i = 0; i < hidden; ++i) {
    const float v = __bfloat162float(xr[i]);
    sum += v * v;
  }
  const float rinv = 1.0f / sqrtf(sum / static_cast<float>(hidden) + eps);
  for (int i = 0; i < hidden; ++i) {
    outr[i] = __float2bfloat16((__bfloat162float(xr[i]) * rinv) * __bfloat162float(weight[i]));
  }
}
