// mma.sync version of the grouped (MoE) GEMM for configs/bench/fused_moe.json
// (written 2026-12-02, checked on the CPU by emulate.py). First run on the H200
// (2026-12-02): correct on the 6 workloads of run1.sh, 18.6 % of speed of light
// weighted over them, against 48.0 % for the first wgmma version in the same run
// (s0: 245.7 us against 73.7 us); superseded by configs/bench/fused_moe_baseline.cu, the
// config's baseline. Kept as the simple sm_80-style example of the structure.
//
// Three launches:
// 1. moe_route (one block of 1024 threads): counts the (token, slot) pairs per
//    expert, lays them out expert by expert (`sorted`, unpadded; the order
//    inside an expert is whatever the shared-memory atomics give), and writes a
//    tile table: tile -> (expert, first sorted position, rows), 128 rows per
//    tile, an expert's last tile partial.
// 2. moe_gemm1 (grid: tile bound x inter / 64): per tile, act[p, i0 .. i0+63]
//    = silu(x[token] . w1[e, i]) * (x[token] . w1[e, inter + i]) for the
//    tile's sorted positions p, stored as bf16 (the reference keeps it in fp32;
//    the rounding is 2^-9 relative per element against the config's 2 %). The
//    block's B tile is 64 gate rows and the 64 matching up rows, so warp
//    (wm, wn + 2) holds, lane for lane, the up values of warp (wm, wn)'s gate
//    values: one exchange through shared memory pairs them. All gemm1 blocks
//    also zero `out` (grid-stride) before they start.
// 3. moe_gemm2 (grid: tile bound x hidden / 128): out[token, h] +=
//    topk_weights[slot] * (act[p] . w2[e, h]) with atomicAdd (a token's slots
//    land in different tiles).
// The GEMM core is the tested 128 x 128 x 32 mma.sync.m16n8k16 loop of the
// knowledge-base example gemm-bf16-mma-sync (cp.async double buffering,
// ldmatrix, padded rows), with gathered A rows: tile rows past the expert's
// count read a valid row and are masked in the epilogue.
// Limits: hidden % 32 == 0, inter % 64 == 0, hidden % 128 == 0, experts <= 1024.
// Evaluate with (GPU): kopt eval configs/bench/fused_moe.json
//   --candidate bench/hopper/fused_moe_grouped/candidate.json --seeds 1
#include <cuda_bf16.h>

#define BM 128
#define BN 128
#define BK 32
#define LDS 40  // padded row length of a shared tile, in bf16 (80 bytes)

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(smem)), "l"(gmem));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                            const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void mma16816(float* d, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Workspace "route" (int32): [0] tile count, then tile_e[tb], tile_p0[tb],
// tile_rows[tb] (tb = the launch plan's tile bound), then sorted[tokens * top_k].
__device__ __forceinline__ int tile_bound(int slots, int experts) {
  return (slots + BM - 1) / BM + experts;
}

extern "C" __global__ void __launch_bounds__(1024)
    moe_route(const int* __restrict__ topk_ids, int* __restrict__ route, int tokens, int top_k,
              int experts) {
  __shared__ int cnt[1024], off[1024], cur[1024];
  const int slots = tokens * top_k, tb = tile_bound(slots, experts);
  int* tile_e = route + 1;
  int* tile_p0 = tile_e + tb;
  int* tile_rows = tile_p0 + tb;
  int* sorted = tile_rows + tb;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) cnt[e] = cur[e] = 0;
  __syncthreads();
  for (int s = threadIdx.x; s < slots; s += blockDim.x) atomicAdd(&cnt[topk_ids[s]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {  // experts <= 1024: a serial scan is short
    int p = 0, t = 0;
    for (int e = 0; e < experts; ++e) {
      off[e] = p;
      for (int r = 0; r < cnt[e]; r += BM, ++t) {
        tile_e[t] = e;
        tile_p0[t] = p + r;
        tile_rows[t] = min(BM, cnt[e] - r);
      }
      p += cnt[e];
    }
    route[0] = t;
  }
  __syncthreads();
  for (int s = threadIdx.x; s < slots; s += blockDim.x) {
    const int e = topk_ids[s];
    sorted[off[e] + atomicAdd(&cur[e], 1)] = s;
  }
}

// One 128 x 128 x k tile product: A rows a_rows[r] (row pointers), B rows b_rows[r].
struct tile_ptrs {
  const __nv_bfloat16* a[2];  // the two A rows this thread copies (chunk rows)
  const __nv_bfloat16* b[2];
};
__device__ __forceinline__ void load_tile(__nv_bfloat16 (*sa)[LDS], __nv_bfloat16 (*sb)[LDS],
                                          const tile_ptrs& tp, int kt) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int chunk = threadIdx.x + i * 256;
    const int r = chunk >> 2, c = (chunk & 3) * 8;
    cp_async16(&sa[r][c], tp.a[i] + kt * BK + c);
    cp_async16(&sb[r][c], tp.b[i] + kt * BK + c);
  }
}
__device__ __forceinline__ void tile_mma(float (*acc)[4][4], __nv_bfloat16 (*sa)[BM][LDS],
                                         __nv_bfloat16 (*sb)[BN][LDS], const tile_ptrs& tp, int k) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = warp >> 2, wn = warp & 3;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
  const int ktiles = k / BK;
  load_tile(sa[0], sb[0], tp, 0);
  asm volatile("cp.async.commit_group;\n" ::);
  for (int kt = 0; kt < ktiles; ++kt) {
    const int s = kt & 1;
    if (kt + 1 < ktiles) load_tile(sa[s ^ 1], sb[s ^ 1], tp, kt + 1);
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 1;\n" ::);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned af[4][4], bfr[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        ldmatrix_x4(af[i][0], af[i][1], af[i][2], af[i][3],
                    &sa[s][wm * 64 + i * 16 + (lane & 15)][kk + (lane >> 4) * 8]);
#pragma unroll
      for (int j = 0; j < 2; ++j)
        ldmatrix_x4(
            bfr[2 * j][0], bfr[2 * j][1], bfr[2 * j + 1][0], bfr[2 * j + 1][1],
            &sb[s][wn * 32 + j * 16 + (lane & 7) + ((lane >> 4) << 3)][kk + ((lane >> 3) & 1) * 8]);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma16816(acc[i][j], af[i], bfr[j][0], bfr[j][1]);
    }
    __syncthreads();
  }
}

// grid (tile bound, inter / 64), block 256.
extern "C" __global__ void __launch_bounds__(256)
    moe_gemm1(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w1,
              const int* __restrict__ route, __nv_bfloat16* __restrict__ act,
              float* __restrict__ out, int tokens, int hidden, int inter, int top_k, int experts) {
  __shared__ __align__(16) unsigned char smem[2 * 2 * BM * LDS * 2];  // A and B stages, 40 KB
  auto sa = reinterpret_cast<__nv_bfloat16(*)[BM][LDS]>(smem);
  auto sb = reinterpret_cast<__nv_bfloat16(*)[BN][LDS]>(smem + 2 * BM * LDS * 2);
  {  // zero out (gemm2 adds into it), spread over every gemm1 block
    const long long total4 = (long long)tokens * hidden / 4;
    const long long nb = (long long)gridDim.x * gridDim.y,
                    b = (long long)blockIdx.y * gridDim.x + blockIdx.x;
    float4* o4 = reinterpret_cast<float4*>(out);
    for (long long i = b * blockDim.x + threadIdx.x; i < total4; i += nb * blockDim.x)
      o4[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const int slots = tokens * top_k, tb = tile_bound(slots, experts);
  const int tile = blockIdx.x;
  if (tile >= route[0]) return;
  const int* sorted = route + 1 + 3 * tb;
  const int e = route[1 + tile], p0 = route[1 + tb + tile], rows = route[1 + 2 * tb + tile];
  const int i0 = blockIdx.y * 64;
  tile_ptrs tp;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = (threadIdx.x + i * 256) >> 2;  // tile row this thread copies
    const int slot =
        sorted[p0 + min(r, rows - 1)];  // rows past the expert: a valid row, masked later
    tp.a[i] = x + (long long)(slot / top_k) * hidden;
    const long long wrow = r < 64 ? (long long)i0 + r : (long long)inter + i0 + (r - 64);
    tp.b[i] = w1 + ((long long)e * 2 * inter + wrow) * hidden;
  }
  float acc[4][4][4];
  tile_mma(acc, sa, sb, tp, hidden);
  // Pair gate (warps wn = 0, 1: tile columns 0..63) with up (wn = 2, 3: 64..127):
  // the up warps park their accumulators, the gate warps read the same lane's.
  float* xch = reinterpret_cast<float*>(smem);  // 4 pairs x 64 values x 32 lanes = 32 KB of the 40
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wm = warp >> 2, wn = warp & 3;
  const int pair = wm * 2 + (wn & 1);
  if (wn >= 2) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q)
          xch[(pair * 64 + (i * 16 + j * 4 + q)) * 32 + lane] = acc[i][j][q];
  }
  __syncthreads();
  if (wn < 2) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float v[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float gt = acc[i][j][q], up = xch[(pair * 64 + (i * 16 + j * 4 + q)) * 32 + lane];
          v[q] = gt / (1.0f + expf(-gt)) * up;
        }
        const int r = wm * 64 + i * 16 + g, col = i0 + wn * 32 + j * 8 + 2 * t;
        if (r < rows)
          *reinterpret_cast<__nv_bfloat162*>(act + (long long)(p0 + r) * inter + col) =
              __floats2bfloat162_rn(v[0], v[1]);
        if (r + 8 < rows)
          *reinterpret_cast<__nv_bfloat162*>(act + (long long)(p0 + r + 8) * inter + col) =
              __floats2bfloat162_rn(v[2], v[3]);
      }
    }
  }
}

// grid (tile bound, hidden / 128), block 256.
extern "C" __global__ void __launch_bounds__(256)
    moe_gemm2(const __nv_bfloat16* __restrict__ act, const __nv_bfloat16* __restrict__ w2,
              const int* __restrict__ route, const float* __restrict__ topk_weights,
              float* __restrict__ out, int tokens, int hidden, int inter, int top_k, int experts) {
  __shared__ __align__(16) unsigned char smem[2 * 2 * BM * LDS * 2];  // A and B stages, 40 KB
  auto sa = reinterpret_cast<__nv_bfloat16(*)[BM][LDS]>(smem);
  auto sb = reinterpret_cast<__nv_bfloat16(*)[BN][LDS]>(smem + 2 * BM * LDS * 2);
  const int slots = tokens * top_k, tb = tile_bound(slots, experts);
  const int tile = blockIdx.x;
  if (tile >= route[0]) return;
  const int* sorted = route + 1 + 3 * tb;
  const int e = route[1 + tile], p0 = route[1 + tb + tile], rows = route[1 + 2 * tb + tile];
  const int h0 = blockIdx.y * BN;
  tile_ptrs tp;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = (threadIdx.x + i * 256) >> 2;
    tp.a[i] = act + (long long)(p0 + min(r, rows - 1)) * inter;
    tp.b[i] = w2 + ((long long)e * hidden + h0 + r) * inter;
  }
  float acc[4][4][4];
  tile_mma(acc, sa, sb, tp, inter);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wm = warp >> 2, wn = warp & 3;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = wm * 64 + i * 16 + g + 8 * half;
      if (r >= rows) continue;
      const int slot = sorted[p0 + r];
      const float wgt = topk_weights[slot];
      float* orow = out + (long long)(slot / top_k) * hidden + h0 + wn * 32 + 2 * t;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        atomicAdd(orow + j * 8, wgt * acc[i][j][2 * half]);
        atomicAdd(orow + j * 8 + 1, wgt * acc[i][j][2 * half + 1]);
      }
    }
  }
}
