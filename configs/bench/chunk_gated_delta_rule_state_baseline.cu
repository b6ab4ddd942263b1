// chunk_gated_delta_rule_state baseline (kopt bench, optimized reference kernel)
// Measured on H200 (driver 580.159.04, 2026-12-03 12:45 UTC, kopt eval --seeds 1 --max-time 0.2,
// bench/hopper/delta/results/2026-12-03-lead): correct on all 25 workloads, weighted SOL 0.096.
//
// What: the inter-chunk state recurrence of the chunked gated delta rule
// (FLA chunk_gated_delta_rule_fwd_h), fp32 state, chunks of 64 tokens. Per
// (batch b, value head j) with H (K x V fp32) = state[state_indices[b], j], for
// each chunk (gl = g of its last token): h[b, c, j] = bf16(H); Hb = float(bf16(H));
// vn = u - w Hb (fp32); v_new = bf16(vn); vs = bf16(vn * f_t) with
// f_t = exp(gl - g_t) if gl - g_t <= 0 else 0; H = H * exp(gl) + k^T vs.
// The final H goes back to the pool slot (in place). Same rounding points as the
// reference; only the order of the fp32 sums differs (tensor-core accumulation).
//
// Techniques:
// - Columns of H are independent: one block per (value head, batch, 32-column
//   slice of V); 8 warps; the block's 128 x 32 fp32 slice of H lives in
//   registers as mma.sync accumulator fragments (warp w: rows [16 w, 16 w + 16),
//   16 floats per thread), for the whole sequence.
// - Per chunk two small GEMMs on the tensor cores (mma.sync m16n8k16, bf16 in,
//   fp32 accumulate): vn (64 x 32) = u - w (64 x 128) Hb (128 x 32), and
//   H (128 x 32) += k^T (128 x 64) vs (64 x 32). Hb and vs are exact bf16
//   values, so the bf16 operands lose nothing. Fragments are built with
//   32-bit / 16-bit shared loads from padded tiles (conflict-free).
// - The chunk's w, k (64 x 128 bf16 each), u (64 x 32) and g tiles are
//   prefetched NSTAGE - 1 chunks ahead with cp.async (zero-filled past the end
//   of the sequence), so the sequential chain over chunks does not wait for
//   global memory; 2 barriers per chunk.
// - h (bf16 state per chunk) and v_new are written from shared memory with
//   coalesced 16-byte stores.
// Requires key_dim == 128, chunk_size == 64, value_dim % 32 == 0 (checked;
// outputs stay unwritten otherwise, so a mismatch fails loudly).
// Launch: grid (num_v_heads, batch, value_dim / 32), block 256,
// shared_bytes = NSTAGE * STAGE_BYTES + 20480 (141056 for NSTAGE 3).
// MEASURED: (see the Measured lines below)
#include <cuda_bf16.h>

#define KD 128                 // key_dim
#define CH 64                  // chunk_size
#define VS 32                  // value columns per block
#define NT 256                 // threads per block (8 warps)
#define WP (KD + 8)            // row pitch (bf16) of the w / k tiles: conflict-free fragments
#define UP (VS + 8)            // row pitch (bf16) of the u / Hb / vs / vn tiles
#ifndef NSTAGE
#define NSTAGE 3
#endif
#define STAGE_W 0
#define STAGE_K (STAGE_W + CH * WP * 2)
#define STAGE_U (STAGE_K + CH * WP * 2)
#define STAGE_G (STAGE_U + CH * UP * 2)
#define STAGE_BYTES (STAGE_G + CH * 4)  // 40192
#define OFF_HB (NSTAGE * STAGE_BYTES)
#define OFF_VS (OFF_HB + KD * UP * 2)
#define OFF_VN (OFF_VS + CH * UP * 2)
#define SMEM_BYTES (OFF_VN + CH * UP * 2)

typedef unsigned short u16;
typedef unsigned int u32;

#ifndef DELTA_CPU_EMU
__device__ __forceinline__ void mma16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool pred) {
  const u32 d = static_cast<u32>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool pred) {
  const u32 d = static_cast<u32>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(pred ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
#endif

__device__ __forceinline__ u16 bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16(x)); }
__device__ __forceinline__ float bf16_val(u16 b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
__device__ __forceinline__ u32 pack2(u16 lo, u16 hi) { return static_cast<u32>(lo) | (static_cast<u32>(hi) << 16); }
__device__ __forceinline__ u32 ld32(const u16* p) { return *reinterpret_cast<const u32*>(p); }

extern "C" __global__ void __launch_bounds__(NT)
chunk_gated_delta_rule_state_baseline(const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ w,
                                      const __nv_bfloat16* __restrict__ u, const float* __restrict__ g,
                                      float* __restrict__ state, const int* __restrict__ state_indices,
                                      __nv_bfloat16* __restrict__ h_out, __nv_bfloat16* __restrict__ v_new,
                                      int tokens, int num_k_heads, int num_v_heads, int key_dim,
                                      int value_dim, int chunk_size) {
#ifndef DELTA_CPU_EMU
  extern __shared__ __align__(16) unsigned char dsmem[];
#endif
  if (key_dim != KD || chunk_size != CH || value_dim % VS != 0) return;  // fail loudly
  const int j = blockIdx.x, bb = blockIdx.y, cb = blockIdx.z * VS;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gid = lane >> 2, tig = lane & 3;
  const int ratio = max(num_v_heads / num_k_heads, 1);
  const int hk = min(j / ratio, num_k_heads - 1);
  const int num_chunks = (tokens + CH - 1) / CH;
  const long long V = value_dim;

  u16* Hb_s = reinterpret_cast<u16*>(dsmem + OFF_HB);
  u16* vs_s = reinterpret_cast<u16*>(dsmem + OFF_VS);
  u16* vn_s = reinterpret_cast<u16*>(dsmem + OFF_VN);

  const u16* kg = reinterpret_cast<const u16*>(k);
  const u16* wg = reinterpret_cast<const u16*>(w);
  const u16* ug = reinterpret_cast<const u16*>(u);

  // Issue the cp.async loads of chunk c into stage st (rows past the end zero-filled).
  auto load_chunk = [&](int c, int st) {
    unsigned char* base = dsmem + st * STAGE_BYTES;
    u16* w_s = reinterpret_cast<u16*>(base + STAGE_W);
    u16* k_s = reinterpret_cast<u16*>(base + STAGE_K);
    u16* u_s = reinterpret_cast<u16*>(base + STAGE_U);
    float* g_s = reinterpret_cast<float*>(base + STAGE_G);
    const int t0 = c * CH;
    const int n = min(CH, tokens - t0);
    const long long row0 = static_cast<long long>(bb) * tokens + t0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // w and k: 64 rows x 16 segments of 16 bytes each
      const int idx = tid + i * NT;
      const int r = idx >> 4, sg = idx & 15;
      const bool ok = r < n;
      const long long row = row0 + (ok ? r : 0);
      cp_async16(w_s + r * WP + sg * 8, wg + (row * num_v_heads + j) * KD + sg * 8, ok);
      cp_async16(k_s + r * WP + sg * 8, kg + (row * num_k_heads + hk) * KD + sg * 8, ok);
    }
    {  // u: 64 rows x 4 segments
      const int r = tid >> 2, sg = tid & 3;
      const bool ok = r < n;
      const long long row = row0 + (ok ? r : 0);
      cp_async16(u_s + r * UP + sg * 8, ug + (row * num_v_heads + j) * V + cb + sg * 8, ok);
    }
    if (tid < CH) {
      const bool ok = tid < n;
      const long long row = row0 + (ok ? tid : 0);
      cp_async4(g_s + tid, g + row * num_v_heads + j, ok);
    }
  };

  // H fragment of this thread: rows d0 + gid (+8), columns nt * 8 + 2 tig (+1).
  const int d0 = warp * 16;
  float* S = state + (static_cast<long long>(state_indices[bb]) * num_v_heads + j) * KD * V;
  float H[4][4];
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int c = cb + nt * 8 + 2 * tig;
    const float2 lo = *reinterpret_cast<const float2*>(S + (d0 + gid) * V + c);
    const float2 hi = *reinterpret_cast<const float2*>(S + (d0 + gid + 8) * V + c);
    H[nt][0] = lo.x; H[nt][1] = lo.y; H[nt][2] = hi.x; H[nt][3] = hi.y;
  }

#pragma unroll
  for (int s = 0; s < NSTAGE - 1; ++s) {
    if (s < num_chunks) load_chunk(s, s);
    cp_async_commit();
  }

  // mma1 role: token tile tt (rows 16 tt ..), column group cg (columns 16 cg ..).
  const int tt = warp & 3, cg = warp >> 2;

  for (int ch = 0; ch < num_chunks; ++ch) {
    const int st = ch % NSTAGE;
    const unsigned char* base = dsmem + st * STAGE_BYTES;
    const u16* w_s = reinterpret_cast<const u16*>(base + STAGE_W);
    const u16* k_s = reinterpret_cast<const u16*>(base + STAGE_K);
    const u16* u_s = reinterpret_cast<const u16*>(base + STAGE_U);
    const float* g_s = reinterpret_cast<const float*>(base + STAGE_G);
    const int t0 = ch * CH;
    const int n = min(CH, tokens - t0);

    // Hb = bf16(H) into shared memory (the previous chunk's readers passed its 2nd barrier).
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int c = nt * 8 + 2 * tig;
      *reinterpret_cast<u32*>(Hb_s + (d0 + gid) * UP + c) = pack2(bf16_bits(H[nt][0]), bf16_bits(H[nt][1]));
      *reinterpret_cast<u32*>(Hb_s + (d0 + gid + 8) * UP + c) = pack2(bf16_bits(H[nt][2]), bf16_bits(H[nt][3]));
    }
    cp_async_wait<NSTAGE - 2>();
    __syncthreads();
    // Prefetch chunk ch + NSTAGE - 1 into the stage chunk ch - 1 used (all its readers passed the barrier).
    {
      const int c = ch + NSTAGE - 1;
      if (c < num_chunks) load_chunk(c, c % NSTAGE);
      cp_async_commit();
    }

    // h[b, ch, j][:, cb .. cb + 32) = Hb: 128 rows x 4 segments of 16 bytes.
    {
      __nv_bfloat16* hc = h_out + ((static_cast<long long>(bb) * num_chunks + ch) * num_v_heads + j) * KD * V;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int idx = tid + i * NT;
        const int r = idx >> 2, sg = idx & 3;
        *reinterpret_cast<uint4*>(hc + r * V + cb + sg * 8) = *reinterpret_cast<const uint4*>(Hb_s + r * UP + sg * 8);
      }
    }

    // vn = u - w Hb for tokens 16 tt + [0, 16), columns 16 cg + [0, 16).
    {
      float acc[2][2][4];
#pragma unroll
      for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int p = 0; p < 2; ++p)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[a][p][e] = 0.0f;
      const u16* wr0 = w_s + (16 * tt + gid) * WP + 2 * tig;
      const u16* wr1 = wr0 + 8 * WP;
#pragma unroll
      for (int ks = 0; ks < KD / 16; ++ks) {
        const int k0 = ks * 16;
        u32 a[4];
        a[0] = ld32(wr0 + k0);
        a[1] = ld32(wr1 + k0);
        a[2] = ld32(wr0 + k0 + 8);
        a[3] = ld32(wr1 + k0 + 8);
#pragma unroll
        for (int ni = 0; ni < 2; ++ni) {
          const int col = 16 * cg + 8 * ni + gid;
          const u16* hb = Hb_s + (k0 + 2 * tig) * UP + col;
          u32 b[2];
          b[0] = pack2(hb[0], hb[UP]);
          b[1] = pack2(hb[8 * UP], hb[9 * UP]);
          mma16816(acc[ni][ks & 1], a, b);
        }
      }
      const float gl = g_s[n - 1];
      const int ta = 16 * tt + gid, tb = ta + 8;
      const float da = gl - g_s[ta], db = gl - g_s[tb];
      const float fa = (ta < n && da <= 0.0f) ? expf(da) : 0.0f;
      const float fb = (tb < n && db <= 0.0f) ? expf(db) : 0.0f;
#pragma unroll
      for (int ni = 0; ni < 2; ++ni) {
        const int c = 16 * cg + 8 * ni + 2 * tig;
        const u32 ua = ld32(u_s + ta * UP + c), ub = ld32(u_s + tb * UP + c);
        const float v0 = bf16_val(static_cast<u16>(ua & 0xffffu)) - (acc[ni][0][0] + acc[ni][1][0]);
        const float v1 = bf16_val(static_cast<u16>(ua >> 16)) - (acc[ni][0][1] + acc[ni][1][1]);
        const float v2 = bf16_val(static_cast<u16>(ub & 0xffffu)) - (acc[ni][0][2] + acc[ni][1][2]);
        const float v3 = bf16_val(static_cast<u16>(ub >> 16)) - (acc[ni][0][3] + acc[ni][1][3]);
        *reinterpret_cast<u32*>(vn_s + ta * UP + c) = pack2(bf16_bits(v0), bf16_bits(v1));
        *reinterpret_cast<u32*>(vn_s + tb * UP + c) = pack2(bf16_bits(v2), bf16_bits(v3));
        *reinterpret_cast<u32*>(vs_s + ta * UP + c) = pack2(bf16_bits(v0 * fa), bf16_bits(v1 * fa));
        *reinterpret_cast<u32*>(vs_s + tb * UP + c) = pack2(bf16_bits(v2 * fb), bf16_bits(v3 * fb));
      }
    }
    const float decay = expf(g_s[n - 1]);
    __syncthreads();

    // v_new rows of this chunk: 64 rows x 4 segments of 16 bytes.
    {
      const int r = tid >> 2, sg = tid & 3;
      if (r < n) {
        const long long row = static_cast<long long>(bb) * tokens + t0 + r;
        *reinterpret_cast<uint4*>(v_new + (row * num_v_heads + j) * V + cb + sg * 8) =
            *reinterpret_cast<const uint4*>(vn_s + r * UP + sg * 8);
      }
    }

    // H = H * exp(gl) + k^T vs for rows d0 + [0, 16), all 32 columns.
    {
      float acc[4][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < CH / 16; ++ks) {
        const int r0 = ks * 16 + 2 * tig;
        const u16* kc = k_s + r0 * WP + d0 + gid;
        u32 a[4];
        a[0] = pack2(kc[0], kc[WP]);
        a[1] = pack2(kc[8], kc[WP + 8]);
        a[2] = pack2(kc[8 * WP], kc[9 * WP]);
        a[3] = pack2(kc[8 * WP + 8], kc[9 * WP + 8]);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const u16* vc = vs_s + r0 * UP + nt * 8 + gid;
          u32 b[2];
          b[0] = pack2(vc[0], vc[UP]);
          b[1] = pack2(vc[8 * UP], vc[9 * UP]);
          mma16816(acc[nt], a, b);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) H[nt][e] = H[nt][e] * decay + acc[nt][e];
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int c = cb + nt * 8 + 2 * tig;
    *reinterpret_cast<float2*>(S + (d0 + gid) * V + c) = make_float2(H[nt][0], H[nt][1]);
    *reinterpret_cast<float2*>(S + (d0 + gid + 8) * V + c) = make_float2(H[nt][2], H[nt][3]);
  }
}
