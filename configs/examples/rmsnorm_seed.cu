// RMSNorm seed with tunable parameters:
//   BLOCK  threads per block (a multiple of 32, at most 1024), one block per row
//   VEC    bf16 elements per vector load (8 = one 16-byte load)
// Correct for every hidden size: the vector path is used only when the row,
// the weight and the output are aligned to VEC elements and hidden % VEC == 0;
// otherwise every element goes through the scalar path. The row is read
// twice (sum of squares, then normalise); the second read usually hits L2.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 8
#endif

static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32, at most 1024");
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC must be 1, 2, 4 or 8");

struct __align__(2 * VEC) bf16_vec {
  __nv_bfloat16 v[VEC];
};

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ bool aligned(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) % (2ull * VEC)) == 0;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
rmsnorm_seed(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
             __nv_bfloat16* __restrict__ out, int hidden, float eps) {
  __shared__ float warp_sums[BLOCK / 32];
  __shared__ float rstd_shared;
  const long long row = blockIdx.x;
  const __nv_bfloat16* xr = x + row * hidden;
  __nv_bfloat16* outr = out + row * hidden;
  const bool vec_ok = (hidden % VEC) == 0 && aligned(xr) && aligned(outr) && aligned(weight);
  const int nvec = vec_ok ? hidden / VEC : 0;
  const int tail_start = nvec * VEC;

  float sum = 0.0f;
  const bf16_vec* xv = reinterpret_cast<const bf16_vec*>(xr);
  for (int i = threadIdx.x; i < nvec; i += BLOCK) {
    const bf16_vec chunk = xv[i];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float v = __bfloat162float(chunk.v[k]);
      sum += v * v;
    }
  }
  for (int i = tail_start + threadIdx.x; i < hidden; i += BLOCK) {
    const float v = __bfloat162float(xr[i]);
    sum += v * v;
  }

  sum = warp_sum(sum);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    float s = lane < BLOCK / 32 ? warp_sums[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) rstd_shared = rsqrtf(s / static_cast<float>(hidden) + eps);
  }
  __syncthreads();
  const float rstd = rstd_shared;

  const bf16_vec* wv = reinterpret_cast<const bf16_vec*>(weight);
  bf16_vec* ov = reinterpret_cast<bf16_vec*>(outr);
  for (int i = threadIdx.x; i < nvec; i += BLOCK) {
    const bf16_vec xc = xv[i];
    const bf16_vec wc = wv[i];
    bf16_vec oc;
#pragma unroll
    for (int k = 0; k < VEC; ++k)
      oc.v[k] = __float2bfloat16(__bfloat162float(xc.v[k]) * rstd * __bfloat162float(wc.v[k]));
    ov[i] = oc;
  }
  for (int i = tail_start + threadIdx.x; i < hidden; i += BLOCK)
    outr[i] = __float2bfloat16(__bfloat162float(xr[i]) * rstd * __bfloat162float(weight[i]));
}
