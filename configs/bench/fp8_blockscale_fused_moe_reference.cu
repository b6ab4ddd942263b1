// FP8 block-scaled MoE SwiGLU FFN (AITER fmoe_fp8_blockscale_g1u1), e4m3fn.
// Everything is dequantized to fp32 (value * its block scale, one rounding),
// computed in fp32 without intermediate rounding, and cast to e4m3fn at the end:
//   h[t, d]     = hidden_states[t, d] * a_scale[t, d / 128]
//   W1[e, n, d] = w1[e, n, d] * fc1_scale[e, n / 128, d / 128]   (rows < inter: gate, >= inter: up)
//   W2[e, d, i] = w2[e, d, i] * fc2_scale[e, d / 128, i / 128]
//   per (t, slot s), e = topk_ids[t, s]:
//     z = W1[e] h[t];  a_i = silu(z_i) * z_{inter + i};  y_s = W2[e] a
//   out[t, d] = e4m3fn(sum_{s = 0..top_k-1} y_s[d] * topk_weights[t, s])   (saturating to +-448)
// Plan (naive but not hopeless at 2.7e12 FLOP):
//   1. moe_route_ref: one thread per expert lists the flat (t, s) indices
//      routed to it, ascending (workspace lists[e][tokens], counts[e]).
//   2. moe_gemm1_ref: per expert, a 64x64-tiled fp32 GEMM over its listed rows
//      computes gate and up and writes a = silu(gate) * up to act[f][inter].
//   3. moe_gemm2_ref: per expert, y[f][d] = sum_i act[f][i] * W2[e][d][i].
//   4. moe_combine_ref: out = e4m3fn(sum_s y[t * top_k + s] * topk_weights[t, s]).
#include <cuda_fp8.h>

#define BM 64
#define BN 64
#define BK 16
#define QB 128  // quantization block

extern "C" __global__ void moe_route_ref(const int* __restrict__ topk_ids, int* __restrict__ lists,
                                         int* __restrict__ counts, int tokens, int top_k) {
  const int e = blockIdx.x;
  if (threadIdx.x != 0) return;
  int cnt = 0;
  const long long n = static_cast<long long>(tokens) * top_k;
  for (long long f = 0; f < n; ++f)
    if (topk_ids[f] == e && cnt < tokens) lists[static_cast<long long>(e) * tokens + cnt++] = static_cast<int>(f);
  counts[e] = cnt;
}

extern "C" __global__ void moe_gemm1_ref(const __nv_fp8_e4m3* __restrict__ hidden_states,
                                         const float* __restrict__ a_scale,
                                         const __nv_fp8_e4m3* __restrict__ w1,
                                         const float* __restrict__ fc1_scale, const int* __restrict__ lists,
                                         const int* __restrict__ counts, float* __restrict__ act, int tokens,
                                         int hidden, int inter, int top_k) {
  __shared__ float As[BK][BM], Gs[BK][BN], Us[BK][BN];
  const int e = blockIdx.z;
  const int cnt = counts[e];
  const int row0 = blockIdx.y * BM;
  if (row0 >= cnt) return;
  const int col0 = blockIdx.x * BN;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const int kblocks = hidden / QB, nblocks = 2 * inter / QB;
  float g[4][4] = {}, u[4][4] = {};
  for (int d0 = 0; d0 < hidden; d0 += BK) {
    for (int l = tid; l < BM * BK; l += 256) {
      const int rr = l / BK, kk = l % BK, r = row0 + rr, d = d0 + kk;
      float v = 0.0f;
      if (r < cnt && d < hidden) {
        const long long t = lists[static_cast<long long>(e) * tokens + r] / top_k;
        v = static_cast<float>(hidden_states[t * hidden + d]) * a_scale[t * kblocks + d / QB];
      }
      As[kk][rr] = v;
    }
    for (int l = tid; l < BN * BK; l += 256) {
      const int cc = l / BK, kk = l % BK, i = col0 + cc, d = d0 + kk;
      float gv = 0.0f, uv = 0.0f;
      if (i < inter && d < hidden) {
        const long long ng = static_cast<long long>(e) * 2 * inter + i, nu = ng + inter;
        gv = static_cast<float>(w1[ng * hidden + d]) *
             fc1_scale[(static_cast<long long>(e) * nblocks + i / QB) * kblocks + d / QB];
        uv = static_cast<float>(w1[nu * hidden + d]) *
             fc1_scale[(static_cast<long long>(e) * nblocks + (inter + i) / QB) * kblocks + d / QB];
      }
      Gs[kk][cc] = gv;
      Us[kk][cc] = uv;
    }
    __syncthreads();
    for (int kk = 0; kk < BK; ++kk)
      for (int m = 0; m < 4; ++m) {
        const float a = As[kk][ty * 4 + m];
        for (int n = 0; n < 4; ++n) {
          g[m][n] += a * Gs[kk][tx * 4 + n];
          u[m][n] += a * Us[kk][tx * 4 + n];
        }
      }
    __syncthreads();
  }
  for (int m = 0; m < 4; ++m) {
    const int r = row0 + ty * 4 + m;
    if (r >= cnt) continue;
    const long long f = lists[static_cast<long long>(e) * tokens + r];
    for (int n = 0; n < 4; ++n) {
      const int i = col0 + tx * 4 + n;
      if (i >= inter) continue;
      const float z = g[m][n];
      act[f * inter + i] = z / (1.0f + expf(-z)) * u[m][n];
    }
  }
}

extern "C" __global__ void moe_gemm2_ref(const float* __restrict__ act, const __nv_fp8_e4m3* __restrict__ w2,
                                         const float* __restrict__ fc2_scale, const int* __restrict__ lists,
                                         const int* __restrict__ counts, float* __restrict__ y, int tokens,
                                         int hidden, int inter) {
  __shared__ float As[BK][BM], Bs[BK][BN];
  const int e = blockIdx.z;
  const int cnt = counts[e];
  const int row0 = blockIdx.y * BM;
  if (row0 >= cnt) return;
  const int col0 = blockIdx.x * BN;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const int kblocks = inter / QB, dblocks = hidden / QB;
  float acc[4][4] = {};
  for (int i0 = 0; i0 < inter; i0 += BK) {
    for (int l = tid; l < BM * BK; l += 256) {
      const int rr = l / BK, kk = l % BK, r = row0 + rr, i = i0 + kk;
      float v = 0.0f;
      if (r < cnt && i < inter) v = act[static_cast<long long>(lists[static_cast<long long>(e) * tokens + r]) * inter + i];
      As[kk][rr] = v;
    }
    for (int l = tid; l < BN * BK; l += 256) {
      const int cc = l / BK, kk = l % BK, d = col0 + cc, i = i0 + kk;
      float v = 0.0f;
      if (d < hidden && i < inter)
        v = static_cast<float>(w2[(static_cast<long long>(e) * hidden + d) * inter + i]) *
            fc2_scale[(static_cast<long long>(e) * dblocks + d / QB) * kblocks + i / QB];
      Bs[kk][cc] = v;
    }
    __syncthreads();
    for (int kk = 0; kk < BK; ++kk)
      for (int m = 0; m < 4; ++m) {
        const float a = As[kk][ty * 4 + m];
        for (int n = 0; n < 4; ++n) acc[m][n] += a * Bs[kk][tx * 4 + n];
      }
    __syncthreads();
  }
  for (int m = 0; m < 4; ++m) {
    const int r = row0 + ty * 4 + m;
    if (r >= cnt) continue;
    const long long f = lists[static_cast<long long>(e) * tokens + r];
    for (int n = 0; n < 4; ++n) {
      const int d = col0 + tx * 4 + n;
      if (d < hidden) y[f * hidden + d] = acc[m][n];
    }
  }
}

extern "C" __global__ void moe_combine_ref(const float* __restrict__ y, const float* __restrict__ topk_weights,
                                           __nv_fp8_e4m3* __restrict__ out, int tokens, int hidden, int top_k) {
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<long long>(tokens) * hidden) return;
  const long long t = idx / hidden, d = idx % hidden;
  float r = 0.0f;
  for (int s = 0; s < top_k; ++s) r += y[(t * top_k + s) * hidden + d] * topk_weights[t * top_k + s];
  out[idx] = __nv_fp8_e4m3(r);  // round to nearest even, saturating to +-448
}
