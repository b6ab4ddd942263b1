// Reference kernel: per-group fp8 e4m3 quantization (group = 128 consecutive
// elements of a row, as in DeepSeek-style block-scaled GEMM inputs).
// scale = max(absmax, 1e-10) / 448, q = fp8(clamp(x / scale)); bf16 in.
// Techniques: 16 lanes own one group (16 x 16-byte loads = 128 bf16), group
// absmax by 4 shuffle steps inside the half-warp (no shared memory, no
// __syncthreads), packed conversion of 8 values to 8 fp8 bytes stored as one
// 8-byte store, the same IEEE division as the reference (x * (1/scale) can round
// differently by one fp8 step), a grid-stride loop over groups with UNROLL
// independent loads in flight.
// Tunable: BLOCK (threads per block), UNROLL (groups per half-warp per step).
// Measured on H200 (2026-12-01): 57.9% of speed of light weighted over the config's workloads, 69.5% on t16384_h18432; 27.4x the naive reference.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

extern "C" __global__ void __launch_bounds__(BLOCK)
fp8_group_quant(const __nv_bfloat16* __restrict__ x, __nv_fp8_e4m3* __restrict__ q,
                float* __restrict__ scales, long long groups) {
  const int lane16 = threadIdx.x & 15;
  const long long hw = ((long long)blockIdx.x * BLOCK + threadIdx.x) >> 4;  // half-warp id
  const long long nhw = ((long long)gridDim.x * BLOCK) >> 4;
  const uint4* __restrict__ xv = reinterpret_cast<const uint4*>(x);
  uint2* __restrict__ qv = reinterpret_cast<uint2*>(q);
  // The loop bound uses the warp's first group (hw & ~1), so both half-warps
  // of a warp run the same trip count and the full-mask shuffles below never
  // miss a lane; groups past the end are masked by the g < groups guards.
  for (long long gb = hw & ~1LL; gb < groups; gb += nhw * UNROLL) {
    const long long g0 = gb + (hw & 1);
    uint4 r[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long g = g0 + u * nhw;
      r[u] = g < groups ? xv[g * 16 + lane16] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long g = g0 + u * nhw;
      float f[8];
      const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&r[u]);
      float amax = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 t = __bfloat1622float2(p[j]);
        f[2 * j] = t.x;
        f[2 * j + 1] = t.y;
        amax = fmaxf(amax, fmaxf(fabsf(t.x), fabsf(t.y)));
      }
#pragma unroll
      for (int o = 8; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o, 16));
      const float scale = fmaxf(amax, 1e-10f) / 448.f;
      if (g < groups) {
        unsigned char b[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float v = fminf(fmaxf(f[j] / scale, -448.f), 448.f);
          b[j] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
        }
        uint2 o;
        o.x = b[0] | (b[1] << 8) | (b[2] << 16) | ((unsigned)b[3] << 24);
        o.y = b[4] | (b[5] << 8) | (b[6] << 16) | ((unsigned)b[7] << 24);
        qv[g * 16 + lane16] = o;
        if (lane16 == 0) scales[g] = scale;
      }
    }
  }
}
