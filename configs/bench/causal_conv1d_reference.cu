// Depthwise causal conv1d (width W) with bias and SiLU, layout [dim, tokens].
// One thread per output element. The W-1 inputs before token 0 come from
// initial_state[0, c, :] (oldest first); weight[c, W-1] multiplies the
// current token (cross-correlation, no flip). Two bf16 roundings as in the
// spec: y = bf16(bias + sum), out = bf16(silu(y)).
#include <cuda_bf16.h>

extern "C" __global__ void causal_conv1d_ref(const __nv_bfloat16* __restrict__ x,
                                             const __nv_bfloat16* __restrict__ weight,
                                             const __nv_bfloat16* __restrict__ bias,
                                             const __nv_bfloat16* __restrict__ initial_state,
                                             __nv_bfloat16* __restrict__ out, int dim, int tokens,
                                             int width) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<long long>(dim) * tokens) return;
  const long long c = i / tokens;
  const long long t = i % tokens;
  float acc = __bfloat162float(bias[c]);
  for (int j = 0; j < width; ++j) {
    // extended sequence e[c, t + j]: state for positions < width - 1, then x
    const long long p = t + j - (width - 1);  // token index of this tap
    const float v = p >= 0 ? __bfloat162float(x[c * tokens + p])
                           : __bfloat162float(initial_state[c * (width - 1) + (p + width - 1)]);
    acc += __bfloat162float(weight[c * width + j]) * v;
  }
  const float y = __bfloat162float(__float2bfloat16(acc));
  out[i] = __float2bfloat16(y / (1.0f + expf(-y)));
}
