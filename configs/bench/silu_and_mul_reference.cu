// silu_and_mul reference: one thread per output element; silu in fp32,
// rounded to bf16, then the product rounded again (as PyTorch's
// silu(x[:, :d]) * x[:, d:] in bf16 does).
#include <cuda_bf16.h>

extern "C" __global__ void silu_and_mul_ref(const __nv_bfloat16* x, __nv_bfloat16* out, long long n, int d) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long long row = i / d;
  const long long col = i % d;
  const float g = __bfloat162float(x[row * 2 * d + col]);
  const float u = __bfloat162float(x[row * 2 * d + d + col]);
  const __nv_bfloat16 s = __float2bfloat16(g / (1.0f + expf(-g)));
  out[i] = __float2bfloat16(__bfloat162float(s) * u);
}
