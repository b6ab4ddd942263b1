// fused_add_rms_norm reference: one thread per row. The sum is rounded to
// bf16 first (residual_out), and the norm is taken over the rounded values.
#include <cuda_bf16.h>

extern "C" __global__ void fused_add_rms_norm_ref(const __nv_bfloat16* x, const __nv_bfloat16* residual,
                                                  const __nv_bfloat16* weight, __nv_bfloat16* out,
                                                  __nv_bfloat16* residual_out, int tokens, int hidden,
                                                  float eps) {
  const long long row = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= tokens) return;
  const long long base = row * hidden;
  float sum = 0.0f;
  for (int i = 0; i < hidden; ++i) {
    const __nv_bfloat16 r =
        __float2bfloat16(__bfloat162float(x[base + i]) + __bfloat162float(residual[base + i]));
    residual_out[base + i] = r;
    const float v = __bfloat162float(r);
    sum += v * v;
  }
  const float rinv = 1.0f / sqrtf(sum / static_cast<float>(hidden) + eps);
  for (int i = 0; i < hidden; ++i) {
    const float v = __bfloat162float(residual_out[base + i]);
    out[base + i] = __float2bfloat16((v * rinv) * __bfloat162float(weight[i]));
  }
}
