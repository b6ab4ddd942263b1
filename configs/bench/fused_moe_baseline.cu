// Grouped (MoE) GEMM for configs/bench/fused_moe.json on Hopper (sm_90a): the
// warp-specialized wgmma pipeline of the knowledge-base reference
// gemm-bf16-wgmma-ws with gathered A rows and MoE epilogues.
//
// Launches:
// 1. moe_route (one block of 1024 threads): counts the (token, slot) pairs per
//    expert, scans the counts, lays the slots out expert by expert (`sorted`;
//    the order inside an expert is whatever the shared-memory atomics give)
//    and writes a tile table: tile -> (expert, first sorted position, rows),
//    BM = 128 rows per tile, an expert's last tile partial. Loads are batched
//    (4 per thread in flight); one shared-memory atomic per slot.
// 2. moe_gemm1 (persistent, 384 threads): tile (m, n) computes, for the tile's
//    sorted positions p and act columns i in [BN/2 n, BN/2 (n + 1)),
//    act[p, i] = silu(x[token(p)] . w1[e, i]) * (x[token(p)] . w1[e, inter + i]).
//    The B tile is BN/2 gate rows then the BN/2 matching up rows, so in the
//    m64nBN accumulator of a consumer thread the up value of a gate column sits
//    BN/4 registers further on: the SwiGLU pairs need no exchange. act is bf16
//    (the reference keeps fp32; a 2^-9 relative rounding per element against
//    the config's 2 % tolerance). In atomic mode
//    the consumers of every working gemm1 block first zero part of `out`
//    (gemm2 adds into it) while their producer fills the first stages.
// 3. moe_gemm2 (persistent, 384 threads): tile (m, n) computes
//    y = act[p] . w2[e, BN n .. BN (n + 1) - 1] and
//    atomic mode (ys == nullptr): adds topk_weight[slot] * y into out[token]
//               with vector reductions (red.global.add.v2.f32; a token's slots
//               live in different tiles, so the adds race);
//    ordered mode: stores topk_weight[slot] * y as bf16 into the workspace
//               row of the slot, and
// 4. moe_reduce (ordered mode; a one-block no-op otherwise) sums the top_k
//    rows of each token in order into out (fp32): no atomics, at the cost of
//    one bf16 round trip of tokens * top_k * hidden. Measured (H200,
//    2026-12-02) to pay where gemm2's K (inter) is short: inter 384.
// The launch plan picks the mode and each GEMM's tile width BN (256 or 128:
// `wide`) per shape from the axes; both widths are compiled into one kernel.
// Producer (warpgroup 0), MOE_TMA = 1 (default): moe_route's first five lanes build
// five tensor maps with tensormap.replace (w1 with 128- and 64-row boxes, w2 with 256-
// and 128-row boxes, act with 128-row boxes): MAPS_SMEM = 1 (default) in shared memory,
// copied into the `maps` workspace by warps 0-4 with tensormap.cp_fenceproxy after the
// route's first barrier (as block_scaled_mm_baseline.cu); MAPS_SMEM = 0 in the workspace
// itself (as the reference gemm-bf16-tma-ws; microseconds per field on global memory,
// and the route block waited for the 13 serial fields). gemm1: thread 0 arms the stage's full
// barrier (expect_tx) and issues two cp.async.bulk.tensor.2d copies of B (the gate box, then the up
// box) while all 128 threads gather the 128 x rows with 16-byte cp.async (8 per thread and stage,
// instead of 24 with B too; rows past the expert's count zero-filled), handed over
// with cp.async.mbarrier.arrive.noinc (full count 129). gemm2: one thread, two TMA
// copies per stage (act rows p0 .. p0 + 127, whose rows past the tile's count are
// the next expert's or zero-filled and masked by the epilogue; the w2 box).
// MOE_TMA = 0: the cp.async producer of before for both operands.
// MOE_SKIP = 1: a consumer warpgroup whose 64 rows all lie past the tile's row count
// (an expert's last, partial tile) only hands the stages back and has no epilogue; its
// row check loads the row count with an asm ld.global.nc that the compiler cannot merge
// with the epilogue's load (merged, the count stayed live across gemm1's K loop and
// ptxas spilled 20 bytes in moe_gemm1).
// MOE_SPLIT = S > 1: gemm2 in atomic mode splits K into s <= S parts, s chosen in the
// kernel from the tile count and the grid (fewest waves x (k-steps + SPLIT_EPI)); the
// parts add into out with the same vector reductions.
// RED_V4 = 1: gemm2's atomic epilogue swaps half of each 8-column group between lane pairs
// (two shuffles), so that even lanes hold 4 consecutive columns of row r and odd lanes of
// row r + 8, and adds them with one red.global.add.v4.f32 instead of two .v2.
// Consumers (warpgroups 1, 2): 64 rows each,
// four wgmma m64nBNk16 per stage, one stage of MMAs in flight. The ring is
// 192 KiB: 4 stages of 48 KiB (BN 256) or 6 of 32 KiB (BN 128).
// setmaxnreg: producer 64, consumers 216. The pool is per block: an .inc
// waits until the .dec of the other warpgroups freed enough, so the split must
// fit in the block's allocation (384 x 168 here); 64/224 asks for 1024 more
// registers than exist and hangs (seen on the H200).
// Limits: hidden % 256 == 0, inter % 128 == 0, experts <= 1024.
// Measured on H200 (driver 580.159.04, 2026-12-03 15:53 UTC, `kopt eval
// configs/bench/fused_moe.json --seeds 1 --max-time 0.3`, these defaults: MOE_TMA 1,
// MOE_SKIP 1, MOE_SPLIT 4, SPLIT_EPI 4, MAPS_SMEM 1, RED_V4 0): correct on all 23
// workloads, 49.5 % of speed of light weighted (0.4947; the previous baseline, cp.async
// only, 45.8 % in the same run); 29.8 % (s3, 1023 tokens, 8 experts, 164.0 us) to 71.9 %
// (s15). Same run: MAPS_SMEM 0 48.9 % (s0 75.9 against 72.7 us, s8 43.2 against 40.5 us),
// RED_V4 1 48.9 % (slower where gemm2 adds the most: s14 7229 against 6896 us).
// Results: bench/hopper/fmoe/results/2026-12-03-batchA/.
#include <cuda_bf16.h>

#ifndef MOE_TMA
#define MOE_TMA 1  // 1: weights (gemm1, gemm2) and act (gemm2) through TMA tensor copies
#endif
#ifndef MOE_SKIP
#define MOE_SKIP 1  // 1: a consumer warpgroup with all 64 rows past the tile's rows skips MMAs
#endif
#ifndef MOE_SPLIT
#define MOE_SPLIT 4  // gemm2 (atomic mode): split K in up to this many parts to fill the last wave
#endif
#ifndef RED_V4
#define RED_V4 0  // 1: gemm2's atomic epilogue adds 4 floats per red (lane pairs swap halves)
#endif
#ifndef SPLIT_EPI
#define SPLIT_EPI 4  // the split rule's cost of one tile's epilogue, in k-steps
#endif
#define BM 128
#define BK 64
#define A_BYTES (BM * BK * 2)
#define RING_BYTES (4 * 49152)  // the launch plan's shared_bytes is RING_BYTES + 2048
// Functions, not static constexpr members: NVRTC emits those as writable
// module-scope objects, which kopt rejects.
__host__ __device__ constexpr int stage_bytes(int bn) {
  return A_BYTES + bn * BK * 2;
}
__host__ __device__ constexpr int ring_stages(int bn) {
  return RING_BYTES / stage_bytes(bn);
}

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
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
// 2D tile load: the box at (c0 = k, c1 = row) of the tensor map at global address `map`,
// completing on `bar` (complete_tx); rows past the map's extent are zero-filled.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const void* map, int c0, int c1,
                                            unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_acquire(const void* map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(map) : "memory");
}
// Tensor map of a bf16 row-major [rows, K] matrix, box [box_rows, 64], 128-byte swizzle, built
// in global memory with tensormap.replace (as the knowledge-base reference gemm-bf16-tma-ws:
// elemtype bf16 = 10, swizzle 128B = 3, rank written as rank - 1).
__device__ void make_map(unsigned char* map, const void* gaddr, int K, int rows, int box_rows) {
  for (int i = 0; i < 128; ++i) map[i] = 0;
  asm volatile("fence.proxy.async.global;" ::: "memory");
  const unsigned long long a = (unsigned long long)map;
  asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;" ::"l"(a),
               "l"(gaddr)
               : "memory");
  asm volatile("tensormap.replace.tile.rank.global.b1024.b32 [%0], %1;" ::"l"(a), "r"(1)
               : "memory");
  asm volatile("tensormap.replace.tile.box_dim.global.b1024.b32 [%0], 0, %1;" ::"l"(a), "r"(64)
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
// Workspace "maps" (640 bytes, 128 per map): w1 with 128-row boxes (gemm1 at BN 256: 128 gate
// rows, then 128 up rows), w1 with 64-row boxes (BN 128), w2 with 256- and 128-row boxes, act
// with 128-row boxes (gemm2's A tile; rows past the expert's count belong to the next expert
// or, past the slots, are zero-filled, and gemm2's epilogue masks them).
#define MAP_W1_256 0
#define MAP_W1_128 128
#define MAP_W2_256 256
#define MAP_W2_128 384
#define MAP_ACT 512
#ifndef MAPS_SMEM
#define MAPS_SMEM 1  // 1: moe_route builds the maps in shared memory and copies them out
#endif

// The same map built in shared memory (tensormap.replace on global memory costs microseconds
// per field, and the five maps' 13 serial fields held up the whole route block; as
// configs/bench/block_scaled_mm_baseline.cu), copied out later with tensormap.cp_fenceproxy.
#define MAP_FIELD32(field, idx_imm, val)                                               \
  asm volatile("tensormap.replace.tile." field ".shared::cta.b1024.b32 [%0], " idx_imm \
               "%1;" ::"r"(sm),                                                        \
               "r"(val)                                                                \
               : "memory")
__device__ __forceinline__ void make_map_smem(unsigned sm, const void* gaddr, int K, int rows,
                                              int box_rows) {
  asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" ::"r"(sm),
               "l"(gaddr)
               : "memory");
  MAP_FIELD32("rank", "", 1);
  MAP_FIELD32("box_dim", "0, ", 64);
  MAP_FIELD32("box_dim", "1, ", box_rows);
  MAP_FIELD32("global_dim", "0, ", K);
  MAP_FIELD32("global_dim", "1, ", rows);
  asm volatile("tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %1;" ::"r"(sm),
               "l"((unsigned long long)K * 2)
               : "memory");
  MAP_FIELD32("element_stride", "0, ", 1);
  MAP_FIELD32("element_stride", "1, ", 1);
  asm volatile("tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%0], 10;" ::"r"(sm)
               : "memory");
  asm volatile("tensormap.replace.tile.interleave_layout.shared::cta.b1024.b32 [%0], 0;" ::"r"(sm)
               : "memory");
  asm volatile("tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%0], 3;" ::"r"(sm)
               : "memory");
  asm volatile("tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [%0], 0;" ::"r"(sm)
               : "memory");
}
#undef MAP_FIELD32

// K-major, 128-byte swizzle: rows of 128 bytes, 8-row groups 1024 bytes apart.
__device__ __forceinline__ unsigned long long desc_sw128(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Pins the accumulators here so the zero fill cannot move into the MMA stage
// (ptxas would then serialize every wgmma, warning C7515).
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
                                                 unsigned long long db) {
  asm volatile(
      "{\n"
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
      "}, %128, %129, 1, 1, 1, 0, 0;\n}\n"
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
      : "l"(da), "l"(db));
}

__device__ __forceinline__ void wgmma_m64n128k16(float* d, unsigned long long da,
                                                 unsigned long long db) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, 1, 1, 1, 0, 0;\n}\n"
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
      : "l"(da), "l"(db));
}

template <int BN>
__device__ __forceinline__ void wgmma_tile(float* d, unsigned long long da, unsigned long long db) {
  if constexpr (BN == 256)
    wgmma_m64n256k16(d, da, db);
  else
    wgmma_m64n128k16(d, da, db);
}

// Workspace "route" (int32): [0] tile count, then tile_e[tb], tile_p0[tb],
// tile_rows[tb] (tb = the launch plan's tile bound), then sorted[tokens * top_k].
__device__ __forceinline__ int tile_bound(int slots, int experts) {
  return (slots + BM - 1) / BM + experts;
}

// Adds 1 to ctr[key] for every lane of the warp with key >= 0, one atomic per
// distinct key; returns the lane's old value plus its rank among equal keys.
__device__ __forceinline__ int warp_agg_inc(int* ctr, int key) {
  const int lane = threadIdx.x & 31;
  const unsigned peers = __match_any_sync(0xffffffffu, key);
  const int leader = __ffs(peers) - 1;
  int base = 0;
  if (lane == leader && key >= 0) base = atomicAdd(&ctr[key], __popc(peers));
  base = __shfl_sync(0xffffffffu, base, leader);
  return base + __popc(peers & ((1u << lane) - 1));
}

#define ROUTE_UNROLL 4
#ifndef ROUTE_AGG
#define ROUTE_AGG 0  // 1: warp-aggregated atomics (__match_any_sync); measured slower
#endif
extern "C" __global__ void __launch_bounds__(1024)
    moe_route(const int* __restrict__ topk_ids, int* __restrict__ route, int tokens, int top_k,
              int experts, const __nv_bfloat16* w1, const __nv_bfloat16* w2,
              const __nv_bfloat16* act, unsigned char* maps, int hidden, int inter) {
  __shared__ int cnt[1024], off[1024], toff[1024], cur[1024];
#if MOE_TMA && MAPS_SMEM
  __shared__ __align__(128) unsigned char smaps[640];
  if (threadIdx.x < 32) {  // warp 0: one lane per tensor map
    for (int i = threadIdx.x; i < 640 / 4; i += 32) reinterpret_cast<unsigned*>(smaps)[i] = 0u;
    __syncwarp();
    const int i = threadIdx.x;
    const unsigned sm = (unsigned)__cvta_generic_to_shared(smaps) + 128 * i;
    if (i < 2)
      make_map_smem(sm, w1, hidden, experts * 2 * inter, i == 0 ? 128 : 64);
    else if (i < 4)
      make_map_smem(sm, w2, inter, experts * hidden, i == 2 ? 256 : 128);
    else if (i == 4)
      make_map_smem(sm, act, inter, tokens * top_k, BM);
  }  // copied out by warps 0 .. 4 after the block's first barrier
#elif MOE_TMA
  if (threadIdx.x < 5) {  // one lane per tensor map
    const int i = threadIdx.x;
    if (i < 2)
      make_map(maps + 128 * i, w1, hidden, experts * 2 * inter, i == 0 ? 128 : 64);
    else if (i < 4)
      make_map(maps + 128 * i, w2, inter, experts * hidden, i == 2 ? 256 : 128);
    else
      make_map(maps + MAP_ACT, act, inter, tokens * top_k, BM);
  }
#endif
  const int slots = tokens * top_k, tb = tile_bound(slots, experts);
  int* tile_e = route + 1;
  int* tile_p0 = tile_e + tb;
  int* tile_rows = tile_p0 + tb;
  int* sorted = tile_rows + tb;
  const int e = threadIdx.x;
  cnt[e] = cur[e] = 0;
  __syncthreads();
#if MOE_TMA && MAPS_SMEM
  if (threadIdx.x < 5 * 32) {  // warp m copies map m (the five release fences in parallel)
    const int m = threadIdx.x >> 5;
    asm volatile(
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
        " [%0], [%1], 128;" ::"l"(maps + 128 * m),
        "r"((unsigned)__cvta_generic_to_shared(smaps) + 128 * m)
        : "memory");
  }
#endif
  // Warp-uniform loop bounds (the warp primitives need every lane).
  for (int s0 = 0; s0 < slots; s0 += 1024 * ROUTE_UNROLL) {
    int ids[ROUTE_UNROLL];
#pragma unroll
    for (int j = 0; j < ROUTE_UNROLL; ++j) {
      const int s = s0 + j * 1024 + threadIdx.x;
      ids[j] = s < slots ? topk_ids[s] : -1;
    }
#pragma unroll
    for (int j = 0; j < ROUTE_UNROLL; ++j) {
#if ROUTE_AGG
      warp_agg_inc(cnt, ids[j]);
#else
      if (ids[j] >= 0) atomicAdd(&cnt[ids[j]], 1);
#endif
    }
  }
  __syncthreads();
  // Inclusive Hillis-Steele scans of the counts and of the tile counts (1024 entries).
  const int c = cnt[e], t = (c + BM - 1) / BM;
  off[e] = c;
  toff[e] = t;
  __syncthreads();
  for (int d = 1; d < 1024; d <<= 1) {
    const int a = e >= d ? off[e - d] : 0, b = e >= d ? toff[e - d] : 0;
    __syncthreads();
    off[e] += a;
    toff[e] += b;
    __syncthreads();
  }
  const int p_first = off[e] - c, t_first = toff[e] - t;  // exclusive
  __syncthreads();
  off[e] = p_first;
  if (e < experts)
    for (int i = 0; i < t; ++i) {
      tile_e[t_first + i] = e;
      tile_p0[t_first + i] = p_first + i * BM;
      tile_rows[t_first + i] = min(BM, c - i * BM);
    }
  if (e == 1023) route[0] = toff[1023];
  __syncthreads();
  for (int s0 = 0; s0 < slots; s0 += 1024 * ROUTE_UNROLL) {
    int ids[ROUTE_UNROLL];
#pragma unroll
    for (int j = 0; j < ROUTE_UNROLL; ++j) {
      const int s = s0 + j * 1024 + threadIdx.x;
      ids[j] = s < slots ? topk_ids[s] : -1;
    }
#pragma unroll
    for (int j = 0; j < ROUTE_UNROLL; ++j) {
#if ROUTE_AGG
      const int pos = warp_agg_inc(cur, ids[j]);
      if (ids[j] >= 0) sorted[off[ids[j]] + pos] = s0 + j * 1024 + threadIdx.x;
#else
      if (ids[j] >= 0)
        sorted[off[ids[j]] + atomicAdd(&cur[ids[j]], 1)] = s0 + j * 1024 + threadIdx.x;
#endif
    }
  }
}

template <int STAGES>
__device__ __forceinline__ void init_bars(unsigned bars, unsigned full_count) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bars + 8 * s, full_count);    // full: the producer's arrivals (plus TMA bytes)
      mbar_init(bars + 8 * (STAGES + s), 8);  // empty: one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
}

// The consumers' K loop over one tile: d = A(128 x K) . B(BN x K)^T for this
// warpgroup's 64 rows, KT k-steps; `it` counts k-steps over all tiles of the block.
template <int BN>
__device__ __forceinline__ void consume_tile(float* d, unsigned base, unsigned bars, int c, int KT,
                                             int& it) {
  constexpr int STAGES = ring_stages(BN), SB = stage_bytes(BN);
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
  fence_regs<BN / 2>(d);
  for (int kt = 0; kt < KT; ++kt, ++it) {
    const int s = it % STAGES;
    mbar_wait(bars + 8 * s, (it / STAGES) & 1);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const unsigned sa = base + s * SB + c * (64 * 128), sb = base + s * SB + A_BYTES;
    const unsigned long long da = desc_sw128(sa), db = desc_sw128(sb);
    fence_regs<BN / 2>(d);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) wgmma_tile<BN>(d, da + 2 * kk, db + 2 * kk);
    wgmma_commit();
    wgmma_wait<1>();
    fence_regs<BN / 2>(d);
    if (kt > 0 && lane == 0) mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
  }
  wgmma_wait<0>();
  fence_regs<BN / 2>(d);
  if (lane == 0) mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
}

// MOE_SKIP: a consumer warpgroup whose 64 rows all lie past the tile's rows only hands every
// stage back (and has no epilogue), so the other warpgroup has the tensor cores to itself.
template <int BN>
__device__ __forceinline__ void skip_tile(unsigned bars, int KT, int& it) {
  constexpr int STAGES = ring_stages(BN);
  for (int kt = 0; kt < KT; ++kt, ++it) {
    const int s = it % STAGES;
    mbar_wait(bars + 8 * s, (it / STAGES) & 1);
    if ((threadIdx.x & 31) == 0) mbar_arrive(bars + 8 * (STAGES + s));
  }
}

// A load the compiler cannot merge with a later plain load of the same address (MOE_SKIP's
// row check would otherwise keep the tile's row count live across the K loop).
__device__ __forceinline__ int ld_once(const int* p) {
  int v;
  asm volatile("ld.global.nc.b32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

struct route_view {
  const int *tile_e, *tile_p0, *tile_rows, *sorted;
  int tiles;
  __device__ route_view(const int* route, int slots, int experts) {
    const int tb = tile_bound(slots, experts);
    tiles = route[0];
    tile_e = route + 1;
    tile_p0 = tile_e + tb;
    tile_rows = tile_p0 + tb;
    sorted = tile_rows + tb;
  }
};

template <int BN>
__device__ __forceinline__ void gemm1_body(const __nv_bfloat16* __restrict__ x,
                                           const __nv_bfloat16* __restrict__ w1,
                                           const route_view& rv, __nv_bfloat16* __restrict__ act,
                                           float* __restrict__ out,
                                           const unsigned char* __restrict__ maps, int tokens,
                                           int hidden, int inter, int top_k) {
  constexpr int STAGES = ring_stages(BN), SB = stage_bytes(BN), H = BN / 2;  // H act columns
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
  const unsigned bars = base + RING_BYTES;
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127;
  const int tiles_n = inter / H, num_tiles = rv.tiles * tiles_n, KT = hidden / BK;
  if (blockIdx.x >= num_tiles) return;
  // full: 128 cp.async arrivals (+ thread 0's expect_tx arrival for the TMA copies of B)
  init_bars<STAGES>(bars, 128 + MOE_TMA);

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 64;");
    const int r = tid >> 3, cc = tid & 7;
    const unsigned dst = r * 128 + ((cc ^ (r & 7)) << 4);
#if MOE_TMA
    const unsigned char* map = maps + (BN == 256 ? MAP_W1_256 : MAP_W1_128);
    if (tid == 0) tma_acquire(map);
#endif
    int it = 0;
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      const int tm = tile / tiles_n, tn = tile % tiles_n;
      const int e = rv.tile_e[tm], p0 = rv.tile_p0[tm], rows = rv.tile_rows[tm];
      int tok[BM / 16];  // token of A row r + 16 j, -1 past the expert's rows
#pragma unroll
      for (int j = 0; j < BM / 16; ++j)
        tok[j] = r + 16 * j < rows ? rv.sorted[p0 + r + 16 * j] / top_k : -1;
#if !MOE_TMA
      const __nv_bfloat16* pg = w1 + ((long long)e * 2 * inter + tn * H + r) * hidden + cc * 8;
      const __nv_bfloat16* pu = pg + (long long)inter * hidden;
#endif
      for (int kt = 0; kt < KT; ++kt, ++it) {
        const int s = it % STAGES;
        if (it >= STAGES) mbar_wait(bars + 8 * (STAGES + s), ((it / STAGES) - 1) & 1);
        const unsigned sa = base + s * SB, sb = sa + A_BYTES;
        const int k0 = kt * BK + cc * 8;
#if MOE_TMA
        if (tid == 0) {  // B: H gate rows, then the H matching up rows
          mbar_expect_tx(bars + 8 * s, BN * BK * 2);
          tma_load_2d(sb, map, kt * BK, e * 2 * inter + tn * H, bars + 8 * s);
          tma_load_2d(sb + H * 128, map, kt * BK, e * 2 * inter + inter + tn * H, bars + 8 * s);
        }
#endif
#pragma unroll
        for (int j = 0; j < BM / 16; ++j) {
          const bool ok = tok[j] >= 0;
          cp_async16(sa + dst + j * 2048, ok ? x + (long long)tok[j] * hidden + k0 : x,
                     ok ? 16 : 0);
        }
#if !MOE_TMA
#pragma unroll
        for (int j = 0; j < H / 16; ++j)
          cp_async16(sb + dst + j * 2048, pg + (long long)16 * j * hidden + kt * BK, 16);
#pragma unroll
        for (int j = 0; j < H / 16; ++j)
          cp_async16(sb + dst + (j + H / 16) * 2048, pu + (long long)16 * j * hidden + kt * BK, 16);
#endif
        cp_async_arrive_noinc(bars + 8 * s);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 216;");
    if (out != nullptr) {  // atomic mode: zero out while the producer fills the first stages
      const long long total4 = (long long)tokens * hidden / 4;
      const long long nb = min((int)gridDim.x, num_tiles);  // the blocks that did not return
      float4* o4 = reinterpret_cast<float4*>(out);
      for (long long i = (long long)blockIdx.x * 256 + threadIdx.x - 128; i < total4; i += nb * 256)
        o4[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    const int c = wg - 1, w = tid >> 5, lane = tid & 31;
    int it = 0;
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      const int tm = tile / tiles_n, tn = tile % tiles_n;
      if (MOE_SKIP && c * 64 >= ld_once(rv.tile_rows + tm)) {
        skip_tile<BN>(bars, KT, it);
        continue;
      }
      float d[BN / 2];
      consume_tile<BN>(d, base, bars, c, KT, it);
      const int p0 = rv.tile_p0[tm], rows = rv.tile_rows[tm];
      // d[4j + i]: row 16w + lane/4 + 8(i/2), column 8j + 2(lane%4) + i%2; the up
      // value of gate column 8j + .. (j < BN/16) is d[4j + BN/4 + i].
      const int r0 = c * 64 + w * 16 + (lane >> 2);
      const int col0 = tn * H + 2 * (lane & 3);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + 8 * h;
        if (r < rows) {
          __nv_bfloat16* arow = act + (long long)(p0 + r) * inter + col0;
#pragma unroll
          for (int j = 0; j < BN / 16; ++j) {
            const float g0 = d[4 * j + 2 * h], g1 = d[4 * j + 2 * h + 1];
            const float u0 = d[4 * j + BN / 4 + 2 * h], u1 = d[4 * j + BN / 4 + 2 * h + 1];
            *reinterpret_cast<__nv_bfloat162*>(arow + 8 * j) = __floats2bfloat162_rn(
                g0 / (1.0f + __expf(-g0)) * u0, g1 / (1.0f + __expf(-g1)) * u1);
          }
        }
      }
    }
  }
}

// grid: persistent (any size), block 384, dynamic shared RING_BYTES + 2048.
// wide: BN 256 (else 128); zero_out: atomic mode (gemm2 adds into out).
extern "C" __global__ void __launch_bounds__(384, 1)
    moe_gemm1(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w1,
              const int* __restrict__ route, __nv_bfloat16* __restrict__ act,
              float* __restrict__ out, const unsigned char* __restrict__ maps, int tokens,
              int hidden, int inter, int top_k, int experts, int wide, int zero_out) {
  const route_view rv(route, tokens * top_k, experts);
  float* o = zero_out ? out : nullptr;
  if (wide)
    gemm1_body<256>(x, w1, rv, act, o, maps, tokens, hidden, inter, top_k);
  else
    gemm1_body<128>(x, w1, rv, act, o, maps, tokens, hidden, inter, top_k);
}

// gemm2's K split (atomic mode): the split count s <= MOE_SPLIT that minimizes
// waves(tiles * s) * (KT / s + SPLIT_EPI), keeping at least 4 k-steps per part.
__device__ __forceinline__ int gemm2_split(int tiles, int KT, int grid) {
  int best = 1;
  long long best_cost = (long long)((tiles + grid - 1) / grid) * (KT + SPLIT_EPI) * MOE_SPLIT;
  for (int s = 2; s <= MOE_SPLIT; ++s) {
    if (KT / s < 4) break;
    const long long cost =
        (long long)((tiles * s + grid - 1) / grid) * (KT * MOE_SPLIT / s + SPLIT_EPI * MOE_SPLIT);
    if (cost < best_cost) best = s, best_cost = cost;
  }
  return best;
}

template <int BN>
__device__ __forceinline__ void gemm2_body(const __nv_bfloat16* __restrict__ act,
                                           const __nv_bfloat16* __restrict__ w2,
                                           const route_view& rv,
                                           const float* __restrict__ topk_weights,
                                           float* __restrict__ out, __nv_bfloat16* __restrict__ ys,
                                           const unsigned char* __restrict__ maps, int hidden,
                                           int inter, int top_k) {
  constexpr int STAGES = ring_stages(BN), SB = stage_bytes(BN);
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
  const unsigned bars = base + RING_BYTES;
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127;
  const int tiles_n = hidden / BN, KT = inter / BK;
  const int split =
      (MOE_SPLIT > 1 && ys == nullptr) ? gemm2_split(rv.tiles * tiles_n, KT, gridDim.x) : 1;
  const int num_tiles = rv.tiles * tiles_n * split;
  if (blockIdx.x >= num_tiles) return;
  init_bars<STAGES>(bars, MOE_TMA ? 1 : 128);

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 64;");
#if MOE_TMA
    if (tid == 0) {  // one thread issues every copy
      const unsigned char* mapb = maps + (BN == 256 ? MAP_W2_256 : MAP_W2_128);
      const unsigned char* mapa = maps + MAP_ACT;
      tma_acquire(mapa);
      tma_acquire(mapb);
      int it = 0;
      for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
        const int q = tile / split, ks = tile % split, tm = q / tiles_n, tn = q % tiles_n;
        const int e = rv.tile_e[tm], p0 = rv.tile_p0[tm];
        const int k1 = (ks + 1) * KT / split;
        for (int kt = ks * KT / split; kt < k1; ++kt, ++it) {
          const int s = it % STAGES;
          if (it >= STAGES) mbar_wait(bars + 8 * (STAGES + s), ((it / STAGES) - 1) & 1);
          const unsigned sa = base + s * SB, sb = sa + A_BYTES;
          mbar_expect_tx(bars + 8 * s, SB);  // whole boxes, zero-filled rows included
          tma_load_2d(sa, mapa, kt * BK, p0, bars + 8 * s);
          tma_load_2d(sb, mapb, kt * BK, e * hidden + tn * BN, bars + 8 * s);
        }
      }
    }
#else
    const int r = tid >> 3, cc = tid & 7;
    const unsigned dst = r * 128 + ((cc ^ (r & 7)) << 4);
    int it = 0;
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      const int q = tile / split, ks = tile % split, tm = q / tiles_n, tn = q % tiles_n;
      const int e = rv.tile_e[tm], p0 = rv.tile_p0[tm], rows = rv.tile_rows[tm];
      const __nv_bfloat16* pa = act + (long long)(p0 + r) * inter + cc * 8;
      const __nv_bfloat16* pb = w2 + ((long long)e * hidden + tn * BN + r) * inter + cc * 8;
      const int k1 = (ks + 1) * KT / split;
      for (int kt = ks * KT / split; kt < k1; ++kt, ++it) {
        const int s = it % STAGES;
        if (it >= STAGES) mbar_wait(bars + 8 * (STAGES + s), ((it / STAGES) - 1) & 1);
        const unsigned sa = base + s * SB, sb = sa + A_BYTES;
#pragma unroll
        for (int j = 0; j < BM / 16; ++j) {
          const bool ok = r + 16 * j < rows;
          cp_async16(sa + dst + j * 2048, ok ? pa + (long long)16 * j * inter + kt * BK : act,
                     ok ? 16 : 0);
        }
#pragma unroll
        for (int j = 0; j < BN / 16; ++j)
          cp_async16(sb + dst + j * 2048, pb + (long long)16 * j * inter + kt * BK, 16);
        cp_async_arrive_noinc(bars + 8 * s);
      }
    }
#endif
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 216;");
    const int c = wg - 1, w = tid >> 5, lane = tid & 31;
    int it = 0;
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      const int q = tile / split, ks = tile % split, tm = q / tiles_n, tn = q % tiles_n;
      const int kn = (ks + 1) * KT / split - ks * KT / split;
      if (MOE_SKIP && c * 64 >= ld_once(rv.tile_rows + tm)) {
        skip_tile<BN>(bars, kn, it);
        continue;
      }
      float d[BN / 2];
      consume_tile<BN>(d, base, bars, c, kn, it);
      const int p0 = rv.tile_p0[tm], rows = rv.tile_rows[tm];
      const int r0 = c * 64 + w * 16 + (lane >> 2);
#if RED_V4
      if (ys == nullptr) {  // lane pairs swap halves: even lanes row r0, odd lanes row r0 + 8
        const int odd = lane & 1, r = r0 + 8 * odd;
        const bool ok = r < rows;
        const int slot = ok ? rv.sorted[p0 + r] : 0;
        const float wgt = ok ? topk_weights[slot] : 0.f;
        float* orow = out + (long long)(slot / top_k) * hidden + tn * BN + 4 * ((lane >> 1) & 1);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          // even lane: own (row r0, cols 2q, 2q+1) + partner's row-r0 pair (cols 2q+2, 2q+3);
          // odd lane: partner's row-(r0+8) pair (cols 2q-2, 2q-1) + own (row r0+8, 2q, 2q+1)
          const float s0 = odd ? d[4 * j] : d[4 * j + 2], s1 = odd ? d[4 * j + 1] : d[4 * j + 3];
          const float v0 = __shfl_xor_sync(0xffffffffu, s0, 1);
          const float v1 = __shfl_xor_sync(0xffffffffu, s1, 1);
          const float a0 = odd ? v0 : d[4 * j], a1 = odd ? v1 : d[4 * j + 1];
          const float a2 = odd ? d[4 * j + 2] : v0, a3 = odd ? d[4 * j + 3] : v1;
          if (ok)
            asm volatile(
                "red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(orow + 8 * j),
                "f"(wgt * a0), "f"(wgt * a1), "f"(wgt * a2), "f"(wgt * a3)
                : "memory");
        }
        continue;
      }
#endif
      const int col0 = tn * BN + 2 * (lane & 3);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + 8 * h;
        if (r < rows) {
          const int slot = rv.sorted[p0 + r];
          const float wgt = topk_weights[slot];
          if (ys == nullptr) {
            float* orow = out + (long long)(slot / top_k) * hidden + col0;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
              asm volatile("red.relaxed.gpu.global.add.v2.f32 [%0], {%1, %2};" ::"l"(orow + 8 * j),
                           "f"(wgt * d[4 * j + 2 * h]), "f"(wgt * d[4 * j + 2 * h + 1])
                           : "memory");
          } else {
            __nv_bfloat16* yrow = ys + (long long)slot * hidden + col0;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
              *reinterpret_cast<__nv_bfloat162*>(yrow + 8 * j) =
                  __floats2bfloat162_rn(wgt * d[4 * j + 2 * h], wgt * d[4 * j + 2 * h + 1]);
          }
        }
      }
    }
  }
}

// grid: persistent (any size), block 384, dynamic shared RING_BYTES + 2048.
// wide: BN 256 (else 128); ordered: write the weighted slot rows to ys (bf16,
// [tokens * top_k, hidden]) for moe_reduce, else add into out (atomic mode).
extern "C" __global__ void __launch_bounds__(384, 1)
    moe_gemm2(const __nv_bfloat16* __restrict__ act, const __nv_bfloat16* __restrict__ w2,
              const int* __restrict__ route, const float* __restrict__ topk_weights,
              float* __restrict__ out, __nv_bfloat16* __restrict__ ys,
              const unsigned char* __restrict__ maps, int tokens, int hidden, int inter, int top_k,
              int experts, int wide, int ordered) {
  const route_view rv(route, tokens * top_k, experts);
  __nv_bfloat16* y = ordered ? ys : nullptr;
  if (wide)
    gemm2_body<256>(act, w2, rv, topk_weights, out, y, maps, hidden, inter, top_k);
  else
    gemm2_body<128>(act, w2, rv, topk_weights, out, y, maps, hidden, inter, top_k);
}

// Ordered mode: out[t, h] = sum over s of ys[t * top_k + s, h], slots in order;
// returns at once otherwise. grid ceil_div(tokens * hidden / 8, 256), block 256.
extern "C" __global__ void __launch_bounds__(256)
    moe_reduce(const __nv_bfloat16* __restrict__ ys, float* __restrict__ out, int tokens,
               int hidden, int top_k, int ordered) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // 8-column group
  if (!ordered || i >= (long long)tokens * hidden / 8) return;
  const long long t = i / (hidden / 8), h = (i % (hidden / 8)) * 8;
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int s = 0; s < top_k; ++s) {
    const uint4 v = *reinterpret_cast<const uint4*>(ys + (t * top_k + s) * hidden + h);
    const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float2 f = __bfloat1622float2(p[q]);
      acc[2 * q] += f.x;
      acc[2 * q + 1] += f.y;
    }
  }
  float4* o = reinterpret_cast<float4*>(out + t * hidden + h);
  o[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  o[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
}
