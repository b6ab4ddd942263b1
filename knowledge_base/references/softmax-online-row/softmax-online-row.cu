// Reference kernel: row softmax y = exp(x - max) / sum(exp(x - max)), fp32, one
// block per row.
// Techniques: online softmax (each thread keeps a running max m and a sum s
// rescaled by exp(m_old - m_new), so max and sum need ONE block reduction
// instead of two), the row cached in registers (CACHE float4 per thread: rows
// up to BLOCK * 4 * CACHE elements are read from DRAM once; longer rows re-read
// the part that did not fit, from L2 when it is still there), 16-byte loads and
// stores when cols % 4 == 0 (scalar path otherwise), warp shuffles then one
// shared-memory step for the (m, s) pairs.
// Tunable: BLOCK (threads per row), CACHE (float4 kept in registers per thread).
// Measured on H200 (2026-12-01): 35.8% of speed of light weighted over the config's workloads, 72.7% on r2048_c32000; 16.2x the naive reference.

#define NEG_INF __int_as_float(0xff800000)

struct ms { float m, s; };

__device__ __forceinline__ ms combine(ms a, ms b) {
  const float m = fmaxf(a.m, b.m);
  if (m == NEG_INF) return {m, 0.f};
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__device__ __forceinline__ void add(ms& a, float v) {
  if (v > a.m) { a.s = a.s * __expf(a.m - v) + 1.f; a.m = v; }
  else a.s += __expf(v - a.m);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_online(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ ms red[BLOCK / 32];
  __shared__ ms total;
  const int row = blockIdx.x, tid = threadIdx.x;
  const float* xr = x + (long long)row * cols;
  float* yr = y + (long long)row * cols;
  const bool vec = (cols & 3) == 0;
  const int nv = vec ? cols / 4 : 0;
  ms acc = {NEG_INF, 0.f};
  float4 cache[CACHE];
  if (vec) {
#pragma unroll
    for (int k = 0; k < CACHE; ++k) {
      const int i = tid + k * BLOCK;
      cache[k] = i < nv ? reinterpret_cast<const float4*>(xr)[i]
                        : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
    }
#pragma unroll
    for (int k = 0; k < CACHE; ++k) {
      if (tid + k * BLOCK < nv) {
        add(acc, cache[k].x); add(acc, cache[k].y); add(acc, cache[k].z); add(acc, cache[k].w);
      }
    }
    for (int i = tid + CACHE * BLOCK; i < nv; i += BLOCK) {  // beyond the register cache
      const float4 v = reinterpret_cast<const float4*>(xr)[i];
      add(acc, v.x); add(acc, v.y); add(acc, v.z); add(acc, v.w);
    }
  } else {
    for (int c = tid; c < cols; c += BLOCK) add(acc, xr[c]);
  }
  // (m, s) reduction: warp shuffles, then the warp leaders through shared memory.
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ms other = {__shfl_xor_sync(0xffffffffu, acc.m, o), __shfl_xor_sync(0xffffffffu, acc.s, o)};
    acc = combine(acc, other);
  }
  if ((tid & 31) == 0) red[tid >> 5] = acc;
  __syncthreads();
  if (tid < 32) {
    ms a = tid < BLOCK / 32 ? red[tid] : ms{NEG_INF, 0.f};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      ms other = {__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
      a = combine(a, other);
    }
    if (tid == 0) total = a;
  }
  __syncthreads();
  const float m = total.m, inv = 1.f / total.s;
  if (vec) {
#pragma unroll
    for (int k = 0; k < CACHE; ++k) {
      const int i = tid + k * BLOCK;
      if (i < nv) {
        const float4 v = cache[k];
        reinterpret_cast<float4*>(yr)[i] = make_float4(__expf(v.x - m) * inv, __expf(v.y - m) * inv,
                                                       __expf(v.z - m) * inv, __expf(v.w - m) * inv);
      }
    }
    for (int i = tid + CACHE * BLOCK; i < nv; i += BLOCK) {
      const float4 v = reinterpret_cast<const float4*>(xr)[i];
      reinterpret_cast<float4*>(yr)[i] = make_float4(__expf(v.x - m) * inv, __expf(v.y - m) * inv,
                                                     __expf(v.z - m) * inv, __expf(v.w - m) * inv);
    }
  } else {
    for (int c = tid; c < cols; c += BLOCK) yr[c] = __expf(xr[c] - m) * inv;
  }
}
