// paged_attention_decode baseline (kopt bench, optimized reference kernel);
// used by paged_attention_decode.json (bf16 kernel) and
// paged_attention_decode_fp16.json (fp16 kernel).
//
// What: decode attention, one query per sequence, against a paged KV cache in
// vLLM's legacy layout: key (block b, kv head h, dim d, slot t) at
// k_cache[b, h, d / 8, t, d % 8], value at v_cache[b, h, d, t]; position p of
// sequence i is in block block_tables[i, p / 16], slot p % 16. GQA: query head
// q uses kv head q / (HQ / HKV). s_p = (q . K_p) / sqrt(D) (fp32), softmax over
// p < seq_len, out = sum_p prob_p V_p rounded to the input dtype.
//
// Techniques:
// - One block per (sequence, kv head) serves all G = HQ / HKV query heads of
//   the group, so every K and V byte is read once per group, not G times (the
//   reference reads them once per query head).
// - Scores: one thread per position. In this layout the 16 positions of a
//   cache block are 16 consecutive 16-byte chunks for each group of 8 dims, so
//   consecutive threads read consecutive 16-byte vectors (coalesced), and a
//   thread needs no reduction: it accumulates the full dot products of its
//   position for up to 8 query heads at once (q in shared memory as fp32,
//   read as float4 broadcasts), in the reference's summation order.
// - Softmax: a warp per query head, shuffle max and sum, probabilities back
//   into shared memory.
// - Output: one thread per head dimension; the 16 positions of a block are 32
//   contiguous bytes of v_cache for that dimension (two 16-byte loads;
//   consecutive threads read consecutive 32-byte pieces), weighted by the
//   probabilities of all G heads at once (float4 broadcast reads; the
//   probabilities past the sequence end are zeroed so no per-position test).
// - Every position goes through the block table; sequence lengths up to
//   16 * max_blocks; any G (in chunks of 8), head sizes that are multiples of
//   32 up to 256 (one thread per dimension, __launch_bounds__(256)).
// Measured on H200 (2026-12-01, driver 580.159.04, `kopt bench --seeds 1`): paged_attention_decode: 11.5 % of speed of light (weighted over 5 shapes), 1.05x the naive reference, 0 launch-bound shapes; paged_attention_decode_fp16: 2.9 % of speed of light (weighted over 3 shapes), 1.12x the naive reference, 0 launch-bound shapes
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define BS 16  // tokens per cache block
#define X 8    // elements per 16-byte chunk
#define GC 8   // query heads accumulated at once

__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }

template <typename T>
struct __align__(16) chunk8 {
  T v[8];
};

template <typename T>
__device__ __forceinline__ void paged_attention(const T* __restrict__ query, const T* __restrict__ k_cache,
                                                const T* __restrict__ v_cache,
                                                const int* __restrict__ block_tables,
                                                const int* __restrict__ seq_lens, T* __restrict__ out,
                                                int HQ, int HKV, int D, int max_blocks) {
  extern __shared__ float smem[];
  const int G = HQ / HKV;
  const int cap = max_blocks * BS;  // score slots per head
  float* qs = smem;                 // [G][D]
  float* sc = smem + G * D;         // [G][cap]
  const int seq = blockIdx.x, kvh = blockIdx.y, tid = threadIdx.x, nt = blockDim.x;
  const int lane = tid & 31, warp = tid >> 5, nwarps = nt >> 5;
  const int n = min(seq_lens[seq], cap);
  const long long q0 = (static_cast<long long>(seq) * HQ + static_cast<long long>(kvh) * G) * D;
  if (n <= 0) {
    for (int i = tid; i < G * D; i += nt) store(out + q0 + i, 0.0f);
    return;
  }
  for (int i = tid; i < G * D; i += nt) qs[i] = to_f(query[q0 + i]);
  __syncthreads();

  const float rsq = sqrtf(static_cast<float>(D));
  const int* bt = block_tables + static_cast<long long>(seq) * max_blocks;
  const int nch = D / X;
  for (int p = tid; p < n; p += nt) {
    const long long blk = bt[p / BS];
    const chunk8<T>* kp = reinterpret_cast<const chunk8<T>*>(
        k_cache + (blk * HKV + kvh) * static_cast<long long>(D) * BS + (p % BS) * X);
    for (int g0 = 0; g0 < G; g0 += GC) {
      float acc[GC];
#pragma unroll
      for (int g = 0; g < GC; ++g) acc[g] = 0.0f;
      for (int c = 0; c < nch; ++c) {
        const chunk8<T> kc = kp[c * BS];  // k_cache[blk, kvh, c, slot, 0..7]
        float kf[X];
#pragma unroll
        for (int e = 0; e < X; ++e) kf[e] = to_f(kc.v[e]);
#pragma unroll
        for (int g = 0; g < GC; ++g) {
          if (g0 + g < G) {
            // q[g][8c .. 8c+7] as two float4 broadcast reads, summed in d order
            const float4* q4 = reinterpret_cast<const float4*>(qs + (g0 + g) * D + c * X);
            const float4 a = q4[0], b = q4[1];
            float t = acc[g];
            t = fmaf(a.x, kf[0], t); t = fmaf(a.y, kf[1], t); t = fmaf(a.z, kf[2], t); t = fmaf(a.w, kf[3], t);
            t = fmaf(b.x, kf[4], t); t = fmaf(b.y, kf[5], t); t = fmaf(b.z, kf[6], t); t = fmaf(b.w, kf[7], t);
            acc[g] = t;
          }
        }
      }
#pragma unroll
      for (int g = 0; g < GC; ++g)
        if (g0 + g < G) sc[(g0 + g) * cap + p] = acc[g] / rsq;
    }
  }
  __syncthreads();

  for (int g = warp; g < G; g += nwarps) {
    float* s = sc + g * cap;
    float m = -__int_as_float(0x7f800000);
    for (int p = lane; p < n; p += 32) m = fmaxf(m, s[p]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.0f;
    for (int p = lane; p < n; p += 32) sum += expf(s[p] - m);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    for (int p = lane; p < n; p += 32) s[p] = expf(s[p] - m) / sum;
    for (int p = n + lane; p < (n + BS - 1) / BS * BS; p += 32) s[p] = 0.0f;  // tail of the last block
  }
  __syncthreads();

  const int nblk = (n + BS - 1) / BS;
  for (int d = tid; d < D; d += nt) {
    for (int g0 = 0; g0 < G; g0 += GC) {
      float acc[GC];
#pragma unroll
      for (int g = 0; g < GC; ++g) acc[g] = 0.0f;
#pragma unroll 2
      for (int j = 0; j < nblk; ++j) {
        const long long blk = bt[j];
        const chunk8<T>* vp = reinterpret_cast<const chunk8<T>*>(
            v_cache + ((blk * HKV + kvh) * static_cast<long long>(D) + d) * BS);
        const chunk8<T> v0 = vp[0], v1 = vp[1];  // v_cache[blk, kvh, d, 0..15]
        float vf[BS];
#pragma unroll
        for (int t = 0; t < 8; ++t) {
          vf[t] = to_f(v0.v[t]);
          vf[t + 8] = to_f(v1.v[t]);
        }
#pragma unroll
        for (int g = 0; g < GC; ++g) {
          if (g0 + g < G) {
            // probabilities of positions 16j .. 16j+15 (zero past n), in p order
            const float4* s4 = reinterpret_cast<const float4*>(sc + (g0 + g) * cap + j * BS);
            float a = acc[g];
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              const float4 w = s4[q];
              a = fmaf(w.x, vf[4 * q], a);
              a = fmaf(w.y, vf[4 * q + 1], a);
              a = fmaf(w.z, vf[4 * q + 2], a);
              a = fmaf(w.w, vf[4 * q + 3], a);
            }
            acc[g] = a;
          }
        }
      }
#pragma unroll
      for (int g = 0; g < GC; ++g)
        if (g0 + g < G) store(out + q0 + static_cast<long long>(g0 + g) * D + d, acc[g]);
    }
  }
}

extern "C" __global__ void __launch_bounds__(256)
paged_attention_decode_baseline_bf16(const __nv_bfloat16* query, const __nv_bfloat16* k_cache,
                                     const __nv_bfloat16* v_cache, const int* block_tables,
                                     const int* seq_lens, __nv_bfloat16* out, int num_heads,
                                     int num_kv_heads, int head_size, int max_blocks) {
  paged_attention(query, k_cache, v_cache, block_tables, seq_lens, out, num_heads, num_kv_heads, head_size,
                  max_blocks);
}

extern "C" __global__ void __launch_bounds__(256)
paged_attention_decode_baseline_fp16(const __half* query, const __half* k_cache, const __half* v_cache,
                                     const int* block_tables, const int* seq_lens, __half* out,
                                     int num_heads, int num_kv_heads, int head_size, int max_blocks) {
  paged_attention(query, k_cache, v_cache, block_tables, seq_lens, out, num_heads, num_kv_heads, head_size,
                  max_blocks);
}
