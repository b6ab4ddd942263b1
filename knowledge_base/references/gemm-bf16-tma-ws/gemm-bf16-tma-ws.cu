// gemm-bf16-tma-ws: Hopper bf16 GEMM C[M, N] = A[M, K] . B[N, K]^T (y = x W^T), fp32
// accumulation, bf16 out; K a multiple of 64, M and N ragged.
//
// Two launches (kopt's launch plan cannot pass a host-encoded CUtensorMap):
// 1. gemm_tma_make_maps (one thread) builds the tensor maps of A and B in a
//    256-byte workspace with tensormap.replace (PTX encodings: elemtype bf16 =
//    10, swizzle 128B = 3, rank written as rank - 1; zeroed first, then
//    fence.proxy.tensormap::generic.release), as bench/hopper/tensormap_probe.cu
//    checked byte for byte against cuTensorMapEncodeTiled on the H200.
// 2. gemm_bf16_tma_ws: persistent grid (one block of 384 threads per SM)
//    walking 128 x BN tiles rasterized in groups of GROUP_M M-tiles. Warpgroup 0
//    is the producer: ONE thread acquires the maps (fence.proxy.tensormap
//    acquire), then per stage waits the stage's empty barrier, arms the full
//    barrier with expect_tx(STAGE_BYTES) and issues two
//    cp.async.bulk.tensor.2d copies (A box 64 x 128, B box 64 x BN) that land
//    128-byte-swizzled and complete on that barrier; rows past M or N are
//    zero-filled by the copy engine and still count toward the bytes.
//    Warpgroups 1 and 2 (64 rows each, setmaxnreg 232; the producer drops to
//    40) wait the full barrier (no proxy fence: the copy engine writes through
//    the async proxy that wgmma reads), issue BK/16 wgmma.m64nBNk16 from
//    shared-memory descriptors, commit, wait_group 1, and release the previous
//    stage (one arrival per consumer warp). Stage and phase counters run across
//    tiles, so the producer refills the ring during the epilogue.
// Measured on H200 (2026-12-02, driver 580.159.04, kopt eval --seeds 3): 75.5 %
// of dense bf16 peak at 8192^3 (1471.6 us), 69.3 % weighted over the config.
#include <cuda_bf16.h>

#ifndef BN
#define BN 256
#endif
#ifndef STAGES
#define STAGES 4
#endif
#define BM 128
#define BK 64
#ifndef GROUP_M
#define GROUP_M 16
#endif
#define A_BYTES (BM * BK * 2)
#define B_BYTES (BN * BK * 2)
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
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
// 2D tile load: the box at (c0 = k, c1 = row) of the map at global address `map`.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const void* map, int c0, int c1,
                                            unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// One bf16 row-major [rows, K] matrix, box [box_rows, BK], 128-byte swizzle.
__device__ void make_map(unsigned char* map, const void* gaddr, int K, int rows, int box_rows) {
  for (int i = 0; i < 128; ++i) map[i] = 0;
  asm volatile("fence.proxy.async.global;" ::: "memory");
  const unsigned long long a = (unsigned long long)map;
  asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;" ::"l"(a),
               "l"(gaddr)
               : "memory");
  asm volatile("tensormap.replace.tile.rank.global.b1024.b32 [%0], %1;" ::"l"(a), "r"(1)
               : "memory");
  asm volatile("tensormap.replace.tile.box_dim.global.b1024.b32 [%0], 0, %1;" ::"l"(a), "r"(BK)
               : "memory");
  asm volatile("tensormap.replace.tile.box_dim.global.b1024.b32 [%0], 1, %1;" ::"l"(a),
               "r"(box_rows)
               : "memory");
  asm volatile("tensormap.replace.tile.global_dim.global.b1024.b32 [%0], 0, %1;" ::"l"(a), "r"(K)
               : "memory");
  asm volatile("tensormap.replace.tile.global_dim.global.b1024.b32 [%0], 1, %1;" ::"l"(a), "r"(rows)
               : "memory");
  asm volatile("tensormap.replace.tile.global_stride.global.b1024.b64 [%0], 0, %1;" ::"l"(a),
               "l"((unsigned long long)K * 2)
               : "memory");
  asm volatile("tensormap.replace.tile.element_stride.global.b1024.b32 [%0], 0, %1;" ::"l"(a),
               "r"(1)
               : "memory");
  asm volatile("tensormap.replace.tile.element_stride.global.b1024.b32 [%0], 1, %1;" ::"l"(a),
               "r"(1)
               : "memory");
  asm volatile("tensormap.replace.tile.elemtype.global.b1024.b32 [%0], %1;" ::"l"(a), "n"(10)
               : "memory");
  asm volatile("tensormap.replace.tile.interleave_layout.global.b1024.b32 [%0], %1;" ::"l"(a),
               "n"(0)
               : "memory");
  asm volatile("tensormap.replace.tile.swizzle_mode.global.b1024.b32 [%0], %1;" ::"l"(a), "n"(3)
               : "memory");
  asm volatile("tensormap.replace.tile.fill_mode.global.b1024.b32 [%0], %1;" ::"l"(a), "n"(0)
               : "memory");
  asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
}
// Launch 1 of the plan: both maps into the 256-byte workspace.
extern "C" __global__ void gemm_tma_make_maps(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                              unsigned char* maps, int M, int N, int K) {
  if (threadIdx.x == 0) {
    make_map(maps, A, K, M, BM);
    make_map(maps + 128, B, K, N, BN);
  }
}
// Shared-memory matrix descriptor, K-major, 128-byte swizzle: rows of 128
// bytes, 8-row groups 1024 bytes apart (SBO), LBO unused (1), base 1024-aligned.
__device__ __forceinline__ unsigned long long desc_sw128(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Pins the accumulators at this point of the program: the compiler may not move
// their definitions (the zero fill) past it into an MMA pipeline stage, which
// would make ptxas serialize the wgmmas (warning C7515).
template <int R>
__device__ __forceinline__ void fence_regs(float* d) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void wgmma_m64n256k16(float* d, unsigned long long da,
                                                 unsigned long long db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "
      "%127"
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n128k16(float* d, unsigned long long da,
                                                 unsigned long long db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
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

template <int NN>
__device__ __forceinline__ void wgmma_tile(float* d, unsigned long long da, unsigned long long db) {
  if constexpr (NN == 256)
    wgmma_m64n256k16(d, da, db, 1);
  else
    wgmma_m64n128k16(d, da, db, 1);
}

// Tile t -> (tm, tn): groups of GROUP_M M-tiles, M fastest inside a group, so
// the blocks working at the same time share A and B strips in L2.
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int group = GROUP_M * tiles_n, g = t / group, first_m = g * GROUP_M;
  const int gm = min(tiles_m - first_m, GROUP_M);
  tm = first_m + (t % group) % gm;
  tn = (t % group) / gm;
}

extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_bf16_tma_ws(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                     __nv_bfloat16* __restrict__ C, const unsigned char* __restrict__ maps, int M,
                     int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  // Swizzled tiles need 1024-byte alignment; the launch plan asks for 1 KiB extra.
  const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
  const unsigned bars = base + STAGES * STAGE_BYTES;  // full[STAGES], then empty[STAGES]
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127;

  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, num_tiles = tiles_m * tiles_n;
  const int KT = K / BK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bars + 8 * s, 1);  // full: the producer thread's expect_tx (plus the bytes)
      mbar_init(bars + 8 * (STAGES + s), 8);  // empty: one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 0) {  // one thread issues every copy
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(maps) : "memory");
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(maps + 128)
                   : "memory");
      int it = 0;  // k-steps issued over all tiles: stage it % STAGES, use it / STAGES
      for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
        int tm, tn;
        tile_coords(tile, tiles_m, tiles_n, tm, tn);
        for (int kt = 0; kt < KT; ++kt, ++it) {
          const int s = it % STAGES;
          if (it >= STAGES) mbar_wait(bars + 8 * (STAGES + s), ((it / STAGES) - 1) & 1);
          const unsigned sa = base + s * STAGE_BYTES, sb = sa + A_BYTES;
          mbar_expect_tx(bars + 8 * s, STAGE_BYTES);  // whole boxes, out-of-bounds rows included
          tma_load_2d(sa, maps, kt * BK, tm * BM, bars + 8 * s);
          tma_load_2d(sb, maps + 128, kt * BK, tn * BN, bars + 8 * s);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wg - 1;  // consumer: rows 64c .. 64c + 63 of each tile
    const int w = tid >> 5, lane = tid & 31;
    int it = 0;
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      int tm, tn;
      tile_coords(tile, tiles_m, tiles_n, tm, tn);
      float d[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
      fence_regs<BN / 2>(d);
      for (int kt = 0; kt < KT; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(bars + 8 * s, (it / STAGES) & 1);  // TMA writes via the async proxy: no fence
        const unsigned sa = base + s * STAGE_BYTES + c * (64 * 128),
                       sb = base + s * STAGE_BYTES + A_BYTES;
        const unsigned long long da = desc_sw128(sa), db = desc_sw128(sb);
        fence_regs<BN / 2>(d);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
          wgmma_tile<BN>(d, da + 2 * kk, db + 2 * kk);  // +32 bytes along K
        wgmma_commit();
        wgmma_wait<1>();
        fence_regs<BN / 2>(d);
        if (kt > 0 && lane == 0) mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
      }
      wgmma_wait<0>();
      fence_regs<BN / 2>(d);
      // The tile's last stage is free too: the producer is already filling the
      // ring for the next tile while this epilogue runs.
      if (lane == 0) mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
      // Epilogue: accumulator d[4j + i] is row 16w + lane/4 + 8(i/2), column 8j + 2(lane%4) + i%2.
      const long long r0 = (long long)tm * BM + c * 64 + w * 16 + (lane >> 2);
      const int col0 = tn * BN + 2 * (lane & 3);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int col = col0 + 8 * j;
        if (col < N) {
          if (r0 < M)
            *reinterpret_cast<__nv_bfloat162*>(C + r0 * N + col) =
                __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
          if (r0 + 8 < M)
            *reinterpret_cast<__nv_bfloat162*>(C + (r0 + 8) * N + col) =
                __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
        }
      }
    }
  }
}
