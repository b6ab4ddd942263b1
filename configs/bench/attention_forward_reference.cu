// attention_forward reference: one thread per (query row, head) with an
// online (streaming) softmax over all keys in fp32, as the definition
// softmax(q k^T / sqrt(D)) v computes; 64-key tiles of K and V are staged in
// shared memory (as fp32) because the longest shapes have 65 556 keys.
// No mask (bidirectional). head_dim <= 128.
#include <cuda_bf16.h>

// The fp32 value of the low (half 0) or high (half 1) bf16 of a packed pair.
__device__ __forceinline__ float widen_bf16(unsigned pair, int half) {
  unsigned r;
  if (half)
    asm volatile("and.b32 %0, %1, 0xffff0000;" : "=r"(r) : "r"(pair));
  else
    asm volatile("shl.b32 %0, %1, 16;" : "=r"(r) : "r"(pair));
  return __uint_as_float(r);
}

extern "C" __global__ void attention_forward_ref(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                 const __nv_bfloat16* v, __nv_bfloat16* out,
                                                 int seq_len, int num_heads, int head_dim) {
  extern __shared__ float kv[];  // [64][head_dim] keys, then [64][head_dim] values
  float* ks = kv;
  float* vs = kv + 64 * head_dim;
  const int head = blockIdx.y;
  const long long row = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = row < seq_len;
  const long long stride = static_cast<long long>(num_heads) * head_dim;  // between tokens
  // q kept as its raw bf16 bits, two per register (64 registers, not 128 floats), and widened at
  // each use: bf16 -> fp32 is exact (the bits shifted up), so every product is the one fp32 copies
  // would give, and the thread fits its registers without spilling. The widening is an asm
  // statement so that the compiler keeps q packed instead of hoisting 128 floats out of the loop.
  unsigned qp[64];
  float acc[128];
  const unsigned short* qb = reinterpret_cast<const unsigned short*>(q);
#pragma unroll
  for (int d = 0; d < 128; d += 2) {
    const unsigned lo = (active && d < head_dim) ? qb[row * stride + head * head_dim + d] : 0u;
    const unsigned hi =
        (active && d + 1 < head_dim) ? qb[row * stride + head * head_dim + d + 1] : 0u;
    qp[d / 2] = lo | (hi << 16);
    acc[d] = 0.0f;
    acc[d + 1] = 0.0f;
  }
  const float rsq = sqrtf(static_cast<float>(head_dim));
  float m = -__int_as_float(0x7f800000), l = 0.0f;
  for (int j0 = 0; j0 < seq_len; j0 += 64) {
    const int nj = min(64, seq_len - j0);
    for (int e = threadIdx.x; e < nj * head_dim; e += blockDim.x) {
      const long long j = j0 + e / head_dim;
      const int d = e % head_dim;
      ks[e] = __bfloat162float(k[j * stride + head * head_dim + d]);
      vs[e] = __bfloat162float(v[j * stride + head * head_dim + d]);
    }
    __syncthreads();
    if (active) {
      for (int jj = 0; jj < nj; ++jj) {
        float s = 0.0f;
#pragma unroll
        for (int d = 0; d < 128; ++d)
          if (d < head_dim) s += widen_bf16(qp[d / 2], d % 2) * ks[jj * head_dim + d];
        s = s / rsq;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);
        const float p = expf(s - m_new);
        l = l * corr + p;
#pragma unroll
        for (int d = 0; d < 128; ++d)
          if (d < head_dim) acc[d] = acc[d] * corr + p * vs[jj * head_dim + d];
        m = m_new;
      }
    }
    __syncthreads();
  }
  if (!active) return;
#pragma unroll
  for (int d = 0; d < 128; ++d)
    if (d < head_dim) out[row * stride + head * head_dim + d] = __float2bfloat16(acc[d] / l);
}
