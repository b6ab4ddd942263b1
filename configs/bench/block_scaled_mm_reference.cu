// block_scaled_mm reference. The math is the plain definition: per output
// (i, j) and K group kb, P = sum of a[i, k] * b[j, k] over the group's 128 k in
// fp32, then out += (P * a_scales[i, kb]) * b_scales[j / 128, kb]. Only the
// loop order is arranged for speed (the largest shapes do 10^13 FLOPs): a
// 64 x 64 output tile per block of 16 x 16 threads, 4 x 4 outputs per
// thread, 32-wide K slices of A and B staged in shared memory as fp32.
// m may be ragged; n and k are multiples of 128.
#include <cuda_fp8.h>

extern "C" __global__ void block_scaled_mm_ref(const __nv_fp8_e4m3* a, const float* a_scales,
                                               const __nv_fp8_e4m3* b, const float* b_scales, float* out, int m,
                                               int n, int k) {
  __shared__ float as[64][33];
  __shared__ float bs[64][33];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const long long row0 = static_cast<long long>(blockIdx.y) * 64, col0 = static_cast<long long>(blockIdx.x) * 64;
  const int groups = k / 128;
  float acc[4][4], part[4][4];
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) acc[r][c] = 0.0f;
  for (int kb = 0; kb < groups; ++kb) {
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) part[r][c] = 0.0f;
    for (int k0 = kb * 128; k0 < kb * 128 + 128; k0 += 32) {
      for (int e = tid; e < 64 * 32; e += 256) {  // stage A[row0.., k0..] and B[col0.., k0..]
        const int rr = e / 32, kk = e % 32;
        const long long ar = row0 + rr;
        as[rr][kk] = ar < m ? static_cast<float>(a[ar * k + k0 + kk]) : 0.0f;
        const long long br = col0 + rr;
        bs[rr][kk] = br < n ? static_cast<float>(b[br * k + k0 + kk]) : 0.0f;
      }
      __syncthreads();
      for (int kk = 0; kk < 32; ++kk)
        for (int r = 0; r < 4; ++r)
          for (int c = 0; c < 4; ++c) part[r][c] += as[ty + 16 * r][kk] * bs[tx + 16 * c][kk];
      __syncthreads();
    }
    for (int r = 0; r < 4; ++r) {
      const long long i = row0 + ty + 16 * r;
      if (i >= m) continue;
      const float sa = a_scales[i * groups + kb];
      for (int c = 0; c < 4; ++c) {
        const long long j = col0 + tx + 16 * c;
        if (j >= n) continue;
        acc[r][c] += (part[r][c] * sa) * b_scales[(j / 128) * groups + kb];
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    const long long i = row0 + ty + 16 * r;
    if (i >= m) continue;
    for (int c = 0; c < 4; ++c) {
      const long long j = col0 + tx + 16 * c;
      if (j < n) out[i * n + j] = acc[r][c];
    }
  }
}
