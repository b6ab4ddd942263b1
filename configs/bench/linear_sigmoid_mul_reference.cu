// out = bf16(sigmoid(gate) * post_mul_mat), gate = bf16(x . W^T + bias).
// A plain 16x16 shared-memory tiled GEMM (one output per thread, fp32
// accumulation in ascending k order), so that the largest shapes (5e11 FLOP)
// stay well under a second; the epilogue follows the spec's rounding points:
// bias added in fp32 before the one rounding of gate, sigmoid in fp32.
#include <cuda_bf16.h>

#define TILE 16

extern "C" __global__ void linear_sigmoid_mul_ref(const __nv_bfloat16* __restrict__ x,
                                                  const __nv_bfloat16* __restrict__ weight,
                                                  const __nv_bfloat16* __restrict__ bias,
                                                  const __nv_bfloat16* __restrict__ post_mul_mat,
                                                  __nv_bfloat16* __restrict__ out, int tokens, int hidden,
                                                  int out_features) {
  __shared__ float xs[TILE][TILE + 1];
  __shared__ float ws[TILE][TILE + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long t = static_cast<long long>(blockIdx.y) * TILE + ty;  // token (row)
  const long long o = static_cast<long long>(blockIdx.x) * TILE + tx;  // output feature (column)
  const long long wrow = static_cast<long long>(blockIdx.x) * TILE + ty;  // W row this thread loads
  float acc = 0.0f;
  for (int k0 = 0; k0 < hidden; k0 += TILE) {
    const int k = k0 + tx;
    xs[ty][tx] = (t < tokens && k < hidden) ? __bfloat162float(x[t * hidden + k]) : 0.0f;
    ws[ty][tx] = (wrow < out_features && k < hidden) ? __bfloat162float(weight[wrow * hidden + k]) : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < TILE; ++kk) acc += xs[ty][kk] * ws[tx][kk];
    __syncthreads();
  }
  if (t < tokens && o < out_features) {
    const float gate = __bfloat162float(__float2bfloat16(acc + __bfloat162float(bias[o])));
    const float sig = 1.0f / (1.0f + expf(-gate));
    const long long idx = t * out_features + o;
    out[idx] = __float2bfloat16(sig * __bfloat162float(post_mul_mat[idx]));
  }
}
