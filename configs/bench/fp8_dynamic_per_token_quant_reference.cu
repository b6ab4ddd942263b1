// fp8_dynamic_per_token_quant reference: one thread per row. The scale is
// amax times the fp32-rounded constant 1/448 (PyTorch's tensor / constant),
// the inverse a correctly rounded division, the cast round-to-nearest-even
// with saturation to +-448 (after the explicit clamp it cannot matter).
// Compiled without fast math, so '/' is IEEE division.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

extern "C" __global__ void fp8_per_token_quant_ref(const __nv_bfloat16* x, __nv_fp8_e4m3* q, float* scale,
                                                   int tokens, int hidden) {
  const long long row = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= tokens) return;
  const __nv_bfloat16* xr = x + row * hidden;
  float m = 0.0f;
  for (int i = 0; i < hidden; ++i) m = fmaxf(m, fabsf(__bfloat162float(xr[i])));
  m = fmaxf(m, 1e-12f);
  const float inv448 = 1.0f / 448.0f;  // folded by the compiler into the rounded constant
  const float s = m * inv448;
  const float inv = 1.0f / s;
  scale[row] = s;
  for (int i = 0; i < hidden; ++i) {
    float v = __bfloat162float(xr[i]) * inv;
    v = fminf(fmaxf(v, -448.0f), 448.0f);
    q[row * hidden + i] = __nv_fp8_e4m3(v);
  }
}
