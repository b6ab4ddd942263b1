// Reference kernel: row-wise argmax (greedy sampling / top-1) over fp32 logits,
// idx[r] = smallest c with x[r][c] maximal; int32 out.
// Techniques: one block per row, 16-byte loads (float4) with UNROLL vectors in
// flight per thread, each thread scanning its elements in increasing index
// order with a strict > (so it keeps the first maximum), a (value, index)
// butterfly reduction with __shfl_xor_sync whose tie-break prefers the smaller
// index (so the result is the same as the sequential scan), then one step
// through shared memory across warps. Scalar path when cols % 4 != 0.
// Under-fills the GPU when rows < number of SMs (split the row over blocks
// with a second combine kernel then, as in flash-decoding-split-k).
// Tunable: BLOCK (threads per row), UNROLL.
// Measured on H200 (2026-12-01): 83.1% of speed of light weighted over the config's workloads, 94.0% on r2048_c151936; 70.7x the naive reference.
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ void take(float& bv, int& bi, float v, int i) {
  if (v > bv || (v == bv && i < bi)) { bv = v; bi = i; }
}

extern "C" __global__ void __launch_bounds__(BLOCK)
argmax_rows(const float* __restrict__ x, int* __restrict__ idx, int rows, int cols) {
  __shared__ float sv[BLOCK / 32];
  __shared__ int si[BLOCK / 32];
  const int row = blockIdx.x, tid = threadIdx.x;
  const float* xr = x + (long long)row * cols;
  float bv = NEG_INF;
  int bi = 0x7fffffff;
  if ((cols & 3) == 0) {
    const float4* xv = reinterpret_cast<const float4*>(xr);
    const int nv = cols / 4;
    int i = tid;
    for (; i + (UNROLL - 1) * BLOCK < nv; i += UNROLL * BLOCK) {
      float4 r[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) r[u] = xv[i + u * BLOCK];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int c = (i + u * BLOCK) * 4;
        if (r[u].x > bv) { bv = r[u].x; bi = c; }
        if (r[u].y > bv) { bv = r[u].y; bi = c + 1; }
        if (r[u].z > bv) { bv = r[u].z; bi = c + 2; }
        if (r[u].w > bv) { bv = r[u].w; bi = c + 3; }
      }
    }
    for (; i < nv; i += BLOCK) {
      const float4 v = xv[i];
      const int c = i * 4;
      if (v.x > bv) { bv = v.x; bi = c; }
      if (v.y > bv) { bv = v.y; bi = c + 1; }
      if (v.z > bv) { bv = v.z; bi = c + 2; }
      if (v.w > bv) { bv = v.w; bi = c + 3; }
    }
  } else {
    for (int c = tid; c < cols; c += BLOCK)
      if (xr[c] > bv) { bv = xr[c]; bi = c; }
  }
  // A thread that saw no element keeps (-inf, INT_MAX) and loses every tie.
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    take(bv, bi, ov, oi);
  }
  if ((tid & 31) == 0) { sv[tid >> 5] = bv; si[tid >> 5] = bi; }
  __syncthreads();
  if (tid < 32) {
    bv = tid < BLOCK / 32 ? sv[tid] : NEG_INF;
    bi = tid < BLOCK / 32 ? si[tid] : 0x7fffffff;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      take(bv, bi, ov, oi);
    }
    if (tid == 0) idx[row] = bi;
  }
}
