// Reference: C[i][j] = sum_k A[i][k] * B[j][k] (y = x W^T), bf16 in, fp32
// accumulation in index order, bf16 out. The arithmetic is the plain
// definition; only the loop order is tiled (64 x 64 outputs per block of
// 16 x 16 threads, 4 x 4 per thread, 32-wide K slices staged in shared memory
// as fp32) so that the 8192^3 workload checks in a fraction of a second.
// M, N ragged; K any.
#include <cuda_bf16.h>
extern "C" __global__ void gemm_ref_tiled(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                          __nv_bfloat16* c, int m, int n, int k) {
  __shared__ float as[64][33];
  __shared__ float bs[64][33];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const long long row0 = (long long)blockIdx.y * 64, col0 = (long long)blockIdx.x * 64;
  float acc[4][4];
  for (int r = 0; r < 4; ++r)
    for (int q = 0; q < 4; ++q) acc[r][q] = 0.f;
  for (int k0 = 0; k0 < k; k0 += 32) {
    for (int e = tid; e < 64 * 32; e += 256) {
      const int rr = e / 32, kk = e % 32;
      const long long ar = row0 + rr, br = col0 + rr;
      const bool kin = k0 + kk < k;
      as[rr][kk] = (ar < m && kin) ? __bfloat162float(a[ar * k + k0 + kk]) : 0.f;
      bs[rr][kk] = (br < n && kin) ? __bfloat162float(b[br * k + k0 + kk]) : 0.f;
    }
    __syncthreads();
    for (int kk = 0; kk < 32; ++kk)
      for (int r = 0; r < 4; ++r)
        for (int q = 0; q < 4; ++q) acc[r][q] += as[ty + 16 * r][kk] * bs[tx + 16 * q][kk];
    __syncthreads();
  }
  for (int r = 0; r < 4; ++r) {
    const long long i = row0 + ty + 16 * r;
    if (i >= m) continue;
    for (int q = 0; q < 4; ++q) {
      const long long j = col0 + tx + 16 * q;
      if (j < n) c[i * n + j] = __float2bfloat16(acc[r][q]);
    }
  }
}
