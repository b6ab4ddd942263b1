// RMSNorm baseline: one block of 256 threads per row; strided loads, a
// warp-shuffle reduction and a shared-memory combine across warps.
#include <cuda_bf16.h>

#define BASELINE_THREADS 256

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

extern "C" __global__ void __launch_bounds__(BASELINE_THREADS)
rmsnorm_baseline(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* out,
                 int hidden, float eps) {
  __shared__ float warp_sums[BASELINE_THREADS / 32];
  __shared__ float rstd_shared;
  const long long row = blockIdx.x;
  const __nv_bfloat16* xr = x + row * hidden;
  __nv_bfloat16* outr = out + row * hidden;

  float sum = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += BASELINE_THREADS) {
    const float v = __bfloat162float(xr[i]);
    sum += v * v;
  }
  sum = warp_sum(sum);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    float s = lane < BASELINE_THREADS / 32 ? warp_sums[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) rstd_shared = rsqrtf(s / static_cast<float>(hidden) + eps);
  }
  __syncthreads();
  const float rstd = rstd_shared;
  for (int i = threadIdx.x; i < hidden; i += BASELINE_THREADS) {
    const float v = __bfloat162float(xr[i]) * rstd * __bfloat162float(weight[i]);
    outr[i] = __float2bfloat16(v);
  }
}
