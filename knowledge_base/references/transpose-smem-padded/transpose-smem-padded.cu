// Reference kernel: 2-D transpose out[cols, rows] = x[rows, cols]^T, fp32.
// Techniques: a 32 x 32 tile staged in shared memory so that both the global
// read (along a row of x) and the global write (along a row of out) are
// coalesced 128-byte warp accesses; the tile is padded to 33 columns so the
// column-wise shared-memory read (tile[tx][ty + j]) hits 32 different banks
// instead of one (32-way conflict without the pad); a 32 x 8 block does 4 rows
// per thread (more bytes in flight per thread, fewer blocks); 64-bit offsets;
// edge tiles guarded.
// Tunable: none (the 32 x 8 shape is the classic choice for 4-byte elements).
// Measured on H200 (2026-12-01): 75.3% of speed of light weighted over the config's workloads, 76.2% on r8192_c8192; 6.8x the naive reference.
#define TD 32
#define BR 8

extern "C" __global__ void __launch_bounds__(TD * BR)
transpose_padded(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[TD][TD + 1];
  const int c0 = blockIdx.x * TD, r0 = blockIdx.y * TD;
  const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
  for (int j = 0; j < TD; j += BR) {
    const int r = r0 + ty + j, c = c0 + tx;
    if (r < rows && c < cols) tile[ty + j][tx] = x[(long long)r * cols + c];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < TD; j += BR) {
    const int c = c0 + ty + j, r = r0 + tx;  // out row c, column r
    if (c < cols && r < rows) out[(long long)c * rows + r] = tile[tx][ty + j];
  }
}
