// block_scaled_mm baseline: Hopper FP8 (e4m3) GEMM with per-group scales
// (vLLM w8a8 block-scaled semantics): out[i, j] = sum over 128-wide K groups
// kb of (P_kb[i, j] * a_scales[i, kb]) * b_scales[j / 128, kb], P_kb the fp32
// dot product of the group's 128 k; fp32 out.
//
// Structure (sm_90a): a persistent grid (one block of 384 threads per SM) walks
// the 128 x 128 output tiles (tile = blockIdx.x, += gridDim.x); the K step is
// one scale group (128 fp8 = 128 bytes per row); stage and phase counters run
// on across tiles, so the producer refills the ring during the epilogue:
// - warpgroup 0 produces: 16-byte cp.async copies of A (128 x 128 B) and B
//   (128 x 128 B) into a ring of STAGES shared-memory stages in the
//   128-byte-swizzled layout (chunk c of row r at c ^ (r % 8)); A rows past m
//   are zero-filled; each thread hands a stage over with
//   cp.async.mbarrier.arrive.noinc on the stage's "full" barrier.
// - warpgroups 1 and 2 consume 64 rows each: wait full, fence.proxy.async,
//   wgmma.mma_async m64n128k32 e4m3 x e4m3 -> fp32 into a unit accumulator
//   (WPU MMAs per unit, the first with scale-d 0, which clears it), then
//   acc += P_unit * (a_scale[row] * b_scale) in fp32 on the CUDA cores. The
//   fp8 MMA accumulates with reduced precision, so units are shorter than
//   the 128-wide scale group (WPU = 1: one k32 slice). Two unit accumulators
//   alternate: unit u's MMA is issued before unit u - 1 is waited for
//   (wait_group 1) and promoted; a stage is released (empty barrier, one
//   arrival per warp) after its last unit; the scales are loaded before the
//   wait so their latency hides behind the MMAs.
// - BN = 128 = the scale group along n, so one b_scale per tile and K step.
// - setmaxnreg: producer 56 registers, consumers 224 (3 x 64 fp32
//   accumulators); tiles rasterized in groups of GROUP_M M-tiles for L2 reuse.
// Why cp.async and not TMA tensor copies: kopt's launch plan cannot pass a
// host-encoded CUtensorMap (see knowledge_base/references/gemm-bf16-wgmma-ws.md).
// Limits: n % 128 == 0, k % 128 == 0 (the config's shapes); m ragged.
// Measured on H200 (2026-12-01, driver 580.159.04, `kopt eval --seeds 1`): the WPU = 4
// version failed the tolerance on all 24 shapes (max abs error 0.041-0.084, atol 0.02);
// WPU = 1 (this default): PENDING.
#include <cuda_fp8.h>

#ifndef STAGES
#define STAGES 6
#endif
#define BM 128
#define BN 128
#define BK 128
#ifndef GROUP_M
#define GROUP_M 8
#endif
#define A_BYTES (BM * BK)
#define B_BYTES (BN * BK)
#define STAGE_BYTES (A_BYTES + B_BYTES)

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred P1;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@!P1 bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_arrive_noinc(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// K-major, 128-byte swizzle, 8-row groups 1024 bytes apart, base 1024-aligned.
__device__ __forceinline__ unsigned long long desc_sw128(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving other definitions of these registers into an
// MMA pipeline stage (ptxas would then serialize the wgmmas, warning C7515).
template <int R>
__device__ __forceinline__ void fence_regs(float* d) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float* d, unsigned long long da,
                                                      unsigned long long db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(da), "l"(db), "r"(scale_d));
}

// Tile t -> (tm, tn): groups of GROUP_M M-tiles, M fastest inside a group.
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int group = GROUP_M * tiles_n, g = t / group, first_m = g * GROUP_M;
  const int gm = min(tiles_m - first_m, GROUP_M);
  tm = first_m + (t % group) % gm;
  tn = (t % group) / gm;
}
// Promotion unit: WPU consecutive k32 MMAs accumulate in the tensor core's
// accumulator, then the unit's sum is added in fp32 on the CUDA cores. The
// fp8 MMA accumulates with reduced precision, so a whole 128-wide group per
// unit (WPU = 4) missed the config's 0.02 absolute tolerance on every shape
// (max abs error 0.04-0.06 on outputs of about 45); shorter units cost more
// FFMA work.
#ifndef WPU
#define WPU 1
#endif
#define UPS (4 / WPU)  // units per stage (= per 128-wide scale group)

// Unit u (the block's global unit counter): stage u / UPS, k32 slices from
// (u % UPS) * WPU; waits for the stage on its first unit.
__device__ __forceinline__ void issue_unit(float* p, unsigned base, unsigned bars, int u, int c) {
  const int it = u / UPS, s = it % STAGES, kk0 = (u % UPS) * WPU;
  if (kk0 == 0) {
    mbar_wait(bars + 8 * s, (it / STAGES) & 1);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  const unsigned long long da = desc_sw128(base + s * STAGE_BYTES + c * (64 * 128)) + 2 * kk0;
  const unsigned long long db = desc_sw128(base + s * STAGE_BYTES + A_BYTES) + 2 * kk0;
  fence_regs<64>(p);
  wgmma_fence();
  wgmma_m64n128k32_e4m3(p, da, db, 0);  // scale-d 0: p = this k32 slice's product
#pragma unroll
  for (int kk = 1; kk < WPU; ++kk) wgmma_m64n128k32_e4m3(p, da + 2 * kk, db + 2 * kk, 1);
  wgmma_commit();
}
// Waits until only the newest unit is in flight (wait_group 1), releases the
// stage after its last unit, and adds unit u's product times both scales of
// its group kb (loaded before the wait, so their latency hides behind it).
__device__ __forceinline__ void finish_unit(float* acc, float* p, unsigned bars, int u, int lane,
                                            const float* sa0, const float* sa1, const float* sbr,
                                            int kb) {
  const float s0 = __ldg(sa0 + kb), s1 = __ldg(sa1 + kb), sbv = __ldg(sbr + kb);
  wgmma_wait<1>();
  fence_regs<64>(p);
  if (u % UPS == UPS - 1 && lane == 0) mbar_arrive(bars + 8 * (STAGES + (u / UPS) % STAGES));
  const float f0 = s0 * sbv, f1 = s1 * sbv;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    acc[4 * j] = fmaf(p[4 * j], f0, acc[4 * j]);
    acc[4 * j + 1] = fmaf(p[4 * j + 1], f0, acc[4 * j + 1]);
    acc[4 * j + 2] = fmaf(p[4 * j + 2], f1, acc[4 * j + 2]);
    acc[4 * j + 3] = fmaf(p[4 * j + 3], f1, acc[4 * j + 3]);
  }
}

extern "C" __global__ void __launch_bounds__(384, 1)
    block_scaled_mm_wgmma(const __nv_fp8_e4m3* __restrict__ A, const float* __restrict__ a_scales,
                          const __nv_fp8_e4m3* __restrict__ B, const float* __restrict__ b_scales,
                          float* __restrict__ out, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
  const unsigned bars = base + STAGES * STAGE_BYTES;  // full[STAGES], then empty[STAGES]
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127;

  const int tiles_m = (M + BM - 1) / BM, tiles_n = N / BN, num_tiles = tiles_m * tiles_n;
  const int KT = K / BK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bars + 8 * s, 128);
      mbar_init(bars + 8 * (STAGES + s), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 56;");
    const int r = tid >> 3, cc = tid & 7;
    const unsigned dst = r * 128 + ((cc ^ (r & 7)) << 4);
    int it = 0;  // k-steps issued over all tiles of this block: stage it % STAGES, use it / STAGES
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      int tm, tn;
      tile_coords(tile, tiles_m, tiles_n, tm, tn);
      const int rows_a = M - tm * BM;
      const __nv_fp8_e4m3* a0 = A + ((long long)tm * BM + r) * K + cc * 16;
      const __nv_fp8_e4m3* b0 = B + ((long long)tn * BN + r) * K + cc * 16;
      for (int kt = 0; kt < KT; ++kt, ++it) {
        const int s = it % STAGES;
        if (it >= STAGES) mbar_wait(bars + 8 * (STAGES + s), ((it / STAGES) - 1) & 1);
        const unsigned sa = base + s * STAGE_BYTES, sb = sa + A_BYTES;
        const long long k0 = (long long)kt * BK;
        const __nv_fp8_e4m3* pa = a0 + k0;
#pragma unroll
        for (int j = 0; j < BM / 16; ++j, pa += 16 * (long long)K) {
          const bool ok = r + 16 * j < rows_a;
          cp_async16(sa + dst + j * 2048, ok ? pa : A, ok ? 16 : 0);
        }
        const __nv_fp8_e4m3* pb = b0 + k0;
#pragma unroll
        for (int j = 0; j < BN / 16; ++j, pb += 16 * (long long)K)
          cp_async16(sb + dst + j * 2048, pb, 16);
        cp_async_arrive_noinc(bars + 8 * s);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 224;");
    const int c = wg - 1, w = tid >> 5, lane = tid & 31;
    int it = 0;
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      int tm, tn;
      tile_coords(tile, tiles_m, tiles_n, tm, tn);
      const long long r0 = (long long)tm * BM + c * 64 + w * 16 + (lane >> 2);
      const long long ra = min(r0, (long long)M - 1),
                      rb = min(r0 + 8, (long long)M - 1);  // scale rows (clamped)
      const float* sa0 = a_scales + ra * KT;
      const float* sa1 = a_scales + rb * KT;
      const float* sbr = b_scales + (long long)tn * KT;
      float acc[64], p0[64], p1[64];
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.f;
      fence_regs<64>(acc);
      // Two unit accumulators alternate: unit u's MMAs are issued before unit
      // u - 1 is waited for and promoted, so the tensor pipe does not drain.
      const int NU = KT * UPS, u0 = it * UPS;  // units of this tile; global index of its first
      int u = 0;
      issue_unit(p0, base, bars, u0, c);
      for (u = 1; u + 1 < NU; u += 2) {
        issue_unit(p1, base, bars, u0 + u, c);
        finish_unit(acc, p0, bars, u0 + u - 1, lane, sa0, sa1, sbr, (u - 1) / UPS);
        issue_unit(p0, base, bars, u0 + u + 1, c);
        finish_unit(acc, p1, bars, u0 + u, lane, sa0, sa1, sbr, u / UPS);
      }
      if (u < NU) {  // NU even: one unit in flight in p0, one left to issue
        issue_unit(p1, base, bars, u0 + u, c);
        finish_unit(acc, p0, bars, u0 + u - 1, lane, sa0, sa1, sbr, (u - 1) / UPS);
        wgmma_wait<0>();
        finish_unit(acc, p1, bars, u0 + u, lane, sa0, sa1, sbr, u / UPS);
      } else {
        wgmma_wait<0>();
        finish_unit(acc, p0, bars, u0 + u - 1, lane, sa0, sa1, sbr, (u - 1) / UPS);
      }
      it += KT;
      // Epilogue: acc[4j + i] is row r0 + 8(i/2), column 8j + 2(lane%4) + i%2 of the tile.
      const int col0 = tn * BN + 2 * (lane & 3);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int col = col0 + 8 * j;
        if (r0 < M)
          *reinterpret_cast<float2*>(out + r0 * N + col) = make_float2(acc[4 * j], acc[4 * j + 1]);
        if (r0 + 8 < M)
          *reinterpret_cast<float2*>(out + (r0 + 8) * N + col) =
              make_float2(acc[4 * j + 2], acc[4 * j + 3]);
      }
    }
  }
}
