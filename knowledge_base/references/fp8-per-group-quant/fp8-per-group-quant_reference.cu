// Naive reference: per-group (128 consecutive elements of a row) fp8 e4m3
// quantization. scale = max(absmax(group), 1e-10) / 448; q = fp8(clamp(x / scale,
// -448, 448)); one thread per group.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
extern "C" __global__ void fp8_group_quant_ref(const __nv_bfloat16* x, __nv_fp8_e4m3* q, float* scales,
                                               long long groups) {
  const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const __nv_bfloat16* xg = x + g * 128;
  float amax = 0.f;
  for (int i = 0; i < 128; ++i) amax = fmaxf(amax, fabsf(__bfloat162float(xg[i])));
  const float scale = fmaxf(amax, 1e-10f) / 448.f;
  for (int i = 0; i < 128; ++i) {
    const float v = fminf(fmaxf(__bfloat162float(xg[i]) / scale, -448.f), 448.f);
    q[g * 128 + i] = __nv_fp8_e4m3(v);
  }
  scales[g] = scale;
}
