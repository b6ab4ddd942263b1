// Reference kernel: exact (erf) GELU over a bf16 tensor, out = 0.5 x (1 + erf(x/sqrt2)).
// Techniques: 16-byte vector loads and stores (uint4 = 8 bf16), a grid-stride
// loop over a grid sized to a few waves (no tail of tiny blocks), UNROLL
// independent vectors in flight per thread before any use (memory-level
// parallelism), fp32 math on packed pairs, a scalar tail for n % 8.
// Tunable: BLOCK (threads per block), UNROLL (vectors per thread per step).
// Measured on H200 (2026-12-01): 60.1% of speed of light weighted over the config's workloads, 72.3% on n234881024; 2.2x the naive reference.
#include <cuda_bf16.h>

__device__ __forceinline__ float gelu_f(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

__device__ __forceinline__ uint4 gelu8(uint4 u) {
  __nv_bfloat162* p = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(p[j]);
    p[j] = __floats2bfloat162_rn(gelu_f(f.x), gelu_f(f.y));
  }
  return u;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
gelu_bf16_vec(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ out, long long n) {
  const long long nvec = n / 8;  // full 16-byte vectors; cudaMalloc'd tensors are 256-byte aligned
  const uint4* __restrict__ xv = reinterpret_cast<const uint4*>(x);
  uint4* __restrict__ ov = reinterpret_cast<uint4*>(out);
  const long long stride = (long long)gridDim.x * BLOCK;
  long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  // Main loop: UNROLL loads issued back to back, then computed and stored.
  for (; i + (UNROLL - 1) * stride < nvec; i += UNROLL * stride) {
    uint4 r[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) r[u] = xv[i + u * stride];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) ov[i + u * stride] = gelu8(r[u]);
  }
  for (; i < nvec; i += stride) ov[i] = gelu8(xv[i]);
  // Scalar tail (n % 8 elements), done by the first threads of the grid.
  const long long t = nvec * 8 + (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (t < n) out[t] = __float2bfloat16(gelu_f(__bfloat162float(x[t])));
}
