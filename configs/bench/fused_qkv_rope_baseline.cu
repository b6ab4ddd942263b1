// fused_qkv_rope baseline (kopt bench, optimized reference kernel); used by
// fused_qkv_rope.json (bf16 kernel) and fused_qkv_rope_fp16.json (fp16 kernel).
//
// What: split each fused QKV row [(H + 2 HKV) * 128] into q [H, 128], k [HKV, 128],
// v [HKV, 128]; NeoX rotary embedding on q and k: for i < 64,
// y[i] = x[i] cos - x[i + 64] sin, y[i + 64] = x[i + 64] cos + x[i] sin (fp32),
// inv_freq[i] = 1 / 10000^(2i / 128), theta = position * inv_freq[i]; v copied.
//
// Techniques:
// - One thread per (head, 8-wide slice of the first half): it loads the 16
//   bytes at i and the 16 bytes at i + 64, so each rotation pair is in the same
//   thread, and writes two 16-byte chunks; v heads are 16-byte copies. A
//   token is (H + HKV) * 8 + HKV * 16 threads: 512 for H = 40, HKV = 8, all
//   active, no shared memory, no barrier: the decode shapes (1 token) are one
//   small launch whose time is launch latency plus one load round trip.
// - cos/sin exactly as the reference computes them: the argument is reduced
//   to [-pi, pi] in double, then __cosf/__sinf (cosf/sinf would link CUDA's
//   range-reduction table, a module-scope variable kopt's integrity check
//   refuses); inv_freq with powf as in the reference.
// - Head size or rope size other than 128, or misaligned pointers: a scalar
//   path with the reference's per-element formula.
// Measured on H200 (2026-12-01, driver 580.159.04, `kopt bench --seeds 1`): fused_qkv_rope: 0.2 % of speed of light (weighted over 2 shapes), 0.70x the naive reference, 2 launch-bound shapes; fused_qkv_rope_fp16: 0.2 % of speed of light (weighted over 4 shapes), 0.71x the naive reference, 4 launch-bound shapes
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define THREADS 128
#define HD 128  // head_dim == rope_dim on the fast path

__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_f(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half from_f(float v) { return __float2half_rn(v); }

__device__ __forceinline__ void cos_sin(int pos, int i, int rope_dim, float& c, float& s) {
  const float inv_freq = 1.0f / powf(10000.0f, static_cast<float>(2 * i) / static_cast<float>(rope_dim));
  const float theta = static_cast<float>(pos) * inv_freq;
  const double two_pi = 6.283185307179586;
  const float r = static_cast<float>(theta - two_pi * rint(static_cast<double>(theta) / two_pi));
  c = __cosf(r);
  s = __sinf(r);
}

template <typename T>
struct __align__(16) vec8 {
  T v[8];
};

template <typename T>
__device__ __forceinline__ void qkv_rope(const T* __restrict__ qkv, const int* __restrict__ positions,
                                         T* __restrict__ q, T* __restrict__ k, T* __restrict__ v,
                                         int tokens, int H, int HKV, int head_dim, int rope_dim) {
  const int heads = H + 2 * HKV;
  const bool fast = head_dim == HD && rope_dim == HD &&
                    ((reinterpret_cast<unsigned long long>(qkv) | reinterpret_cast<unsigned long long>(q) |
                      reinterpret_cast<unsigned long long>(k) | reinterpret_cast<unsigned long long>(v)) & 15ull) == 0;
  const long long gid = static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x;
  const long long gstride = static_cast<long long>(gridDim.x) * THREADS;
  if (fast) {
    const int rope_units = (H + HKV) * 8;  // 8 slices of 8 in the first half
    const int per_token = rope_units + HKV * 16;
    const long long total = static_cast<long long>(tokens) * per_token;
    for (long long u = gid; u < total; u += gstride) {
      const long long t = u / per_token;
      const int r = static_cast<int>(u - t * per_token);
      const T* row = qkv + t * heads * HD;
      if (r < rope_units) {
        const int h = r >> 3, d0 = (r & 7) * 8;
        const vec8<T> a = *reinterpret_cast<const vec8<T>*>(row + h * HD + d0);
        const vec8<T> b = *reinterpret_cast<const vec8<T>*>(row + h * HD + HD / 2 + d0);
        const int pos = positions[t];
        vec8<T> lo, hi;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          float c, s;
          cos_sin(pos, d0 + e, HD, c, s);
          const float x1 = to_f(a.v[e]), x2 = to_f(b.v[e]);
          lo.v[e] = from_f<T>(x1 * c - x2 * s);
          hi.v[e] = from_f<T>(x2 * c + x1 * s);
        }
        T* dst = h < H ? q + (t * H + h) * HD : k + (t * HKV + (h - H)) * HD;
        *reinterpret_cast<vec8<T>*>(dst + d0) = lo;
        *reinterpret_cast<vec8<T>*>(dst + HD / 2 + d0) = hi;
      } else {
        const int r2 = r - rope_units;
        const int hv = r2 >> 4, d0 = (r2 & 15) * 8;
        *reinterpret_cast<vec8<T>*>(v + (t * HKV + hv) * HD + d0) =
            *reinterpret_cast<const vec8<T>*>(row + (H + HKV + hv) * HD + d0);
      }
    }
    return;
  }
  // Scalar path: one element per iteration, the reference's formula.
  const long long total = static_cast<long long>(tokens) * heads * head_dim;
  for (long long i = gid; i < total; i += gstride) {
    const long long t = i / (static_cast<long long>(heads) * head_dim);
    const int h = static_cast<int>(i / head_dim % heads);
    const int d = static_cast<int>(i % head_dim);
    const T* row = qkv + t * heads * head_dim + static_cast<long long>(h) * head_dim;
    float y = to_f(row[d]);
    if (h < H + HKV && d < rope_dim) {
      const int half = rope_dim / 2, j = d % half;
      float c, s;
      cos_sin(positions[t], j, rope_dim, c, s);
      const float x1 = to_f(row[j]), x2 = to_f(row[j + half]);
      y = d < half ? x1 * c - x2 * s : x2 * c + x1 * s;
    }
    if (h < H)
      q[(t * H + h) * head_dim + d] = from_f<T>(y);
    else if (h < H + HKV)
      k[(t * HKV + (h - H)) * head_dim + d] = from_f<T>(y);
    else
      v[(t * HKV + (h - H - HKV)) * head_dim + d] = row[d];
  }
}

extern "C" __global__ void __launch_bounds__(THREADS)
fused_qkv_rope_baseline_bf16(const __nv_bfloat16* qkv, const int* positions, __nv_bfloat16* q,
                             __nv_bfloat16* k, __nv_bfloat16* v, int tokens, int num_heads,
                             int num_kv_heads, int head_dim, int rope_dim) {
  qkv_rope(qkv, positions, q, k, v, tokens, num_heads, num_kv_heads, head_dim, rope_dim);
}

extern "C" __global__ void __launch_bounds__(THREADS)
fused_qkv_rope_baseline_fp16(const __half* qkv, const int* positions, __half* q, __half* k, __half* v,
                             int tokens, int num_heads, int num_kv_heads, int head_dim, int rope_dim) {
  qkv_rope(qkv, positions, q, k, v, tokens, num_heads, num_kv_heads, head_dim, rope_dim);
}
