// block_scaled_mm baseline: out[i, j] = sum over 128-wide K groups kb of
// P_kb[i, j] * a_scales[i, kb] * b_scales[j / 128, kb], P_kb the exact dot
// product of the group's 128 fp8 (e4m3) values; fp32 out. m ragged; n, k
// multiples of 128.
//
// Why not fp8 wgmma: the e4m3 tensor-core MMA adds its products with a
// reduced-precision accumulator (reported at about 14 significand bits). On
// this config's data (outputs of about 45, where |out| < 10 must be within
// atol 0.02) the fp8 wgmma version of this kernel had maximum absolute errors
// of 0.035-0.084 (H200, 2026-12-01/02; promotion every 128 k: all 24 shapes
// failed; every 64 k: 3 of the 4 shapes tried), and cuBLAS's fp8 path 0.054
// and 0.078 on the two shapes checked. Every e4m3 value is exact
// in f16 and f16 x f16 products are exact in the fp32 accumulator, so this
// kernel runs the f16 wgmma (half the fp8 peak) on converted operands.
//
// Two launches:
// 1. bsmm_prep: builds two TMA tensor maps on the device (kopt's launch plan
//    cannot pass a host-encoded CUtensorMap), converts the smaller of A and B
//    (the "S" operand) to f16 in a workspace, with its k order permuted inside
//    each 64-wide block to match the register fragments below, writes the
//    per-column scale-ratio table and the transposed a_scales that the swapped
//    orientation needs, and (PF_L2) prefetches into L2 the first k-steps of R
//    that each block of launch 2 reads first.
// 2. bsmm_f16_tma: persistent, 384 threads = one producer warpgroup (one
//    thread issues the TMA copies) + 2 consumer warpgroups. Tile = 128 rows of
//    the "R" operand (the larger matrix, read as fp8 by TMA, 64 k per stage,
//    converted to f16 in registers: wgmma takes A from registers) x 256 rows
//    of S (f16 in shared memory, 128-byte swizzle). D[r, s] = sum_k R[r,k]
//    S[s,k]; R = A and S = B (out = D) when m >= n, else R = B and S = A
//    (out = D^T): the fp8 matrix that is large is streamed once at 1 byte per
//    element and only the small one pays the conversion pass.
// Scales without a second accumulator: D holds sum_g P_g sigma_g / sigma_cur
// (sigma = the product of both scales for the element); entering group g the
// accumulators are multiplied by sigma_{g-1} / sigma_g, and the epilogue
// multiplies by the last sigma. 128 accumulators per thread (m64n256) fit;
// a separate fp32 total would not. Swapped orientation: the ratio row of a
// group (and the last group's a_scales row) comes into the stage's shared
// memory by a 1 KB bulk copy on the same mbarrier as the operands, so the
// rescale reads shared memory instead of waiting on global loads.
// Small problems (fewer tiles than half the SMs) split K across blocks. The
// splits do not add into out with atomics (that epilogue took 8.5-10.3 us of
// 32-44 us on m = 349, 1024, 237; H200, 2026-12-03): each stores its scaled
// running sum through a workspace, as a chain in quarter tiles: split sp waits for split
// sp - 1's quarter, adds it, stores the new running sum (flag per unit and quarter = the
// launch's epoch, release / acquire), the last split writes out; no zeroing of out. A block
// takes its unit by atomic ticket in arrival order and waits only for smaller tickets
// (blocks already running), so no co-residency is assumed and nothing can deadlock.
// Its predecessor, the last-arriver reduction (bench/hopper/bsmm/block_scaled_mm_ws.cu), was
// correct but slower on 4 splits.
// Measured on H200 (2026-12-04 04:07 UTC, driver 580.159.04; bench/suite/results/2026-12-04-b/):
// the config's default is FP8_SMALL = 3 since then (below): correct on all 24 workloads, 27.2 %
// of the fp8 peak weighted; same run against FP8_SMALL = 1 (harness, 03:50 UTC): m = 3072 x 4096
// 147.2 against 155.8 us, m = 8192 x 4096 367.6 against 391.2, m = 4533 69.7 against 72.8, the
// split shapes within 1-3 % (m = 1024 18.9 against 19.5). FP8_SMALL = 2 was 6-8 % slower on the
// unsplit shapes than 1.
// Measured on H200 (2026-12-04, driver 580.159.04; docs/benchmarks.md, bench/suite/results/
// 2026-12-04/): the config's default was FP8 = 1, FP8_DB = 2, FP8_SMALL = 1 (every shape on the
// e4m3 path below, split K for m = 237 / 349): correct on all 24 workloads, 26.2 % of the fp8 peak
// weighted (`kopt kb lint --run`, 01:40 UTC), against 21.1 % for the f16 path (FP8 = 0, 01:20
// UTC); same run against it: m = 349 16.6 against 30.6 us, m = 1024 19.4 against 35.1, m = 237
// 22.8 against 36.9, m = 4533 72.6 against 93.2 (max abs error 0.011-0.013; up to 0.0184 at
// k = 4096). The f16 path (FP8 = 0), as measured before:
// Measured on H200 (2026-12-03 17:43 UTC, driver 580.159.04, `kopt eval --seeds 1 --max-time
// 0.1`): correct on all 24 shapes, 21.0 % of the fp8 peak weighted against 20.3 % for the
// atomic split-K kernel it replaces in the same run (m = 1024: 35.7 against 42.9 us; m = 237:
// 36.9 against 39.1; m = 3072 x 4096: 191.6 against 266.4; m = 349: 30.8, unchanged; the large
// shapes equal within the runs' spread, 0.35-0.38 of the fp8 peak = 70-76 % of the f16 peak).
// Index math checked on the CPU by bench/hopper/bsmm_emulate.py.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#ifndef STAGES
#define STAGES 5
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
// PF_L2 = 1: the prepass prefetches into L2 the R rows of the first k-steps of each
// block's first unit (after the harness's L2 flush, they come from DRAM).
#ifndef PF_L2
#define PF_L2 1
#endif
// STAGGER (ns, harness experiment): the second consumer warpgroup starts each unit this
// much later, so that the two do not drain their MMAs at the same group boundaries.
#ifndef STAGGER
#define STAGGER 0
#endif
// FP8 = 1: tiles without split-K (every m >= 3072 here) take an e4m3 wgmma path instead
// (see "FP8 path" below; bench/hopper/bsmm8/); the small-m shapes keep the f16 path
// (FP8_SMALL = 1: they take it too, with a split-K plan of its own).
// Measured (H200, 2026-12-03, FP8_DB = 2, kopt, 19 of 24 workloads, all correct, max abs
// error up to 0.018 against atol 0.02): 0.27-0.40 of the fp8 peak against 0.21-0.39 for
// FP8 = 0 (0.77-0.89x the time at m = 3072 .. 8192, 0.92-1.02x on the large shapes): the
// promotion FFMAs bound it (0.86-0.93 without them). The 5 largest (s9, s10, s11, s22, s23) on
// 2026-12-04 01:19 UTC: correct, 0.37-0.39 (max abs error 0.014-0.0184, atol 0.02): the config's
// default since then is FP8 = 1 with FP8_DB = 2 (this file's macro defaults stay 0 for the
// harnesses that compile it directly).
#ifndef FP8
#define FP8 0
#endif
// FP8_DB = 1: the FP8 path's wgmmas are m64n64k32 into two alternating 32-register
// temporaries, so each warpgroup keeps one wgmma in flight while it adds the previous one
// (FP8_DB = 0: m64n128k32 into one 64-register temporary, waited for at once).
#ifndef FP8_DB
#define FP8_DB 0
#endif
// FP8_FFMA = 0: diagnostic only (wrong results): the FP8 path without its promotion FFMAs.
#ifndef FP8_FFMA
#define FP8_FFMA 1
#endif
// FP8_DB = 2 only, UNMEASURED experiments on the FFMAs' speed (measured 2026-12-03: the
// promotion FFMAs took about twice their issue-slot count): FP8_ACC_XOR = 1 pairs temporary
// register i with accumulator i ^ 1 (the other register-bank parity if ptxas allocates both
// arrays contiguously from bases of equal parity); FP8_SC_ORDER = 1 issues all FFMAs of one
// scale operand before those of the other.
#ifndef FP8_ACC_XOR
#define FP8_ACC_XOR 0
#endif
#ifndef FP8_SC_ORDER
#define FP8_SC_ORDER 0
#endif
// FP8_SMALL = 1 (FP8 = 1, FP8_DB = 2 only; the config's default on 2026-12-04 until FP8_SMALL =
// 3 replaced it, see the header's measurements): every shape takes the FP8 path, with
// a plan of its own (make_plan below): 128 x 128 tiles of A rows x B rows (no swap: both are
// read as e4m3 by TMA, nothing to convert), K split where the tiles are fewer than half the
// SMs (m = 237 x 4096, m = 349 x 2048: 2 splits), the splits chained through the workspace like
// the f16 path's (see the header). The prepass then only builds the two maps for every shape.
// Promotion stays after every k32 (the e4m3 MMA's sum must not span more than 32 products).
// FP8_SMALL = 2 (measured slower than 1 on the unsplit shapes): the same plan, but producer and
// consumers branch once on p.splits (uniform over the grid) into two instances of their loops: the
// split one is FP8_SMALL = 1's (ticket-ordered units, per-unit group bounds, the chain), the
// unsplit one FP8_SMALL = 0's source (u = blockIdx.x .. tiles step gridDim.x over all groups, no
// chain code). Why: with FP8_SMALL = 1 the unsplit shapes ran 3-5 % slower than FP8_SMALL = 0
// (H200, 2026-12-04: m = 3072 x 4096 x 4096 155.8 against 149.5 us, 4096^3 203.1 against 196.6).
// Same source is not same machine code: ptxas allocates the kernel as a whole, and this
// unsplit group loop has 364 instruction slots against FP8_SMALL = 0's 348 (the a_scales row
// offsets recomputed per group) and another FFMA register assignment (the unsplit branch is
// placed first: with the split one first its loop has 351 slots and fewer reuse-cache hits).
// FP8_SMALL = 3 (the config's default since 2026-12-04, 04:07 UTC): 2, with the unsplit instance's
// a_scales row pointers pinned (see fp8_consumer). Its group loop has 349 instruction slots against
// 348 for FP8_SMALL = 0's and 364 for 2's, and a different FFMA register assignment (NVRTC 13, SASS
// through bench/hopper/sass/fp8_loops.py; bench/hopper/bsmm8/small2/NOTES.md).
#ifndef FP8_SMALL
#define FP8_SMALL 0
#endif
#if FP8_SMALL && !(FP8 && FP8_DB == 2)
#error "FP8_SMALL needs FP8 = 1 and FP8_DB = 2"
#endif
#define AX(i) ((i) ^ FP8_ACC_XOR)
#define BM 128  // rows of R per tile (2 consumer warpgroups x 64)
#define BN 256  // rows of S per tile
#define BK 64   // k per stage
#define S_BYTES (BN * BK * 2)
#define R_BYTES (BM * BK)
#define STAGE_BYTES (S_BYTES + R_BYTES)
#define SCALE_BYTES (BN * 4)  // one row of the ratio or transposed-scale table
#define STAGE_STRIDE (STAGE_BYTES + SCALE_BYTES)
#if FP8
// FP8 path: tile = 128 rows of A x 256 rows of B, one 128-wide K group per stage (A 16 KB,
// B 32 KB, both e4m3 straight from global by TMA, 128-byte swizzle), as many stages as fit
// in the f16 path's shared memory (STAGES = 5: 4).
// FP8_DB = 2: tile 128 x 128 instead (each consumer warpgroup 64 x 128, m64n128k32 into two
// alternating 64-register temporaries, drained at each group's end; 5 stages).
#define FP8_BN (FP8_DB == 2 ? 128 : 256)
#define A8_BYTES (128 * 128)
#define STAGE8 (A8_BYTES + FP8_BN * 128)
// at most STAGES: the kernel initializes STAGES full and STAGES empty barriers
#define ST8_FIT ((STAGES * STAGE_STRIDE) / STAGE8)
#define ST8 (ST8_FIT < STAGES ? ST8_FIT : STAGES)
#endif

struct plan_t {
  int swap, rows_r, rows_s, tiles_r, tiles_s, tiles, splits, gps, groups;
};
// One decision for both launches: orientation, tiles, split-K.
__device__ __forceinline__ plan_t make_plan(int M, int N, int K, int ctas) {
  plan_t p;
  p.groups = K / 128;
#if FP8_SMALL
  // The FP8 plan: R = A, S = B, tiles of 128 x FP8_BN (= 128), the same split-K rule.
  p.swap = 0;
  p.rows_r = M;
  p.rows_s = N;
  p.tiles_r = (M + 127) / 128;
  p.tiles_s = (N + FP8_BN - 1) / FP8_BN;
#else
  p.swap = M < N;
  p.rows_r = p.swap ? N : M;
  p.rows_s = p.swap ? M : N;
  p.tiles_r = (p.rows_r + BM - 1) / BM;
  p.tiles_s = (p.rows_s + BN - 1) / BN;
#endif
  p.tiles = p.tiles_r * p.tiles_s;
  int splits = 1;
  if (2 * p.tiles <= ctas) splits = min(p.groups, ctas / p.tiles);
  p.gps = (p.groups + splits - 1) / splits;
  p.splits = (p.groups + p.gps - 1) / p.gps;
  return p;
}
#if FP8
// The FP8 path is taken where the f16 plan does not split K (then no `out` zeroing, no
// conversion pass, no ratio table are needed); with FP8_SMALL everywhere (the f16 path is
// then dead code and compiled out).
__device__ __forceinline__ bool use_fp8(const plan_t& p) {
#if FP8_SMALL
  return true;
#else
  return p.splits == 1;
#endif
}
#endif
// Padded column count of the ratio table (a whole number of S tiles).
__device__ __forceinline__ long long ratio_stride(const plan_t& p) {
  return (long long)p.tiles_s * BN;
}
// Workspace "conv": S in f16 [rows_s, K], the ratio table [groups][ratio_stride], the
// transposed a_scales [groups][ratio_stride] (swapped orientation), then the split-K
// partial tiles (128 KB per unit; units <= CTAS whenever K is split).
__device__ __forceinline__ long long part_offset(const plan_t& p, int K) {
  return 2LL * p.rows_s * K + 8LL * p.groups * ratio_stride(p);
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
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes,
                                          unsigned bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(unsigned dst, const void* map, int c0, int c1,
                                            unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// A 2D row-major [rows, k] map with a box of [64 elements, box_rows], built in
// shared memory (tensormap.replace on global memory costs microseconds per
// field; the prepass is short, so that was its critical path) and copied out
// by the whole warp with tensormap.cp_fenceproxy. PTX's tensormap encodings:
// elemtype 0 = u8, 1 = u16; swizzle 0 = none, 3 = 128 B (TMA copies bytes,
// so u16 serves f16); rank is written as rank - 1.
#define MAP_FIELD32(field, idx_imm, val)                                               \
  asm volatile("tensormap.replace.tile." field ".shared::cta.b1024.b32 [%0], " idx_imm \
               "%1;" ::"r"(sm),                                                        \
               "r"(val)                                                                \
               : "memory")
__device__ __forceinline__ void make_map_smem(unsigned sm, const void* gaddr, int K, int rows,
                                              int box_rows, int elem_bytes, int elemtype,
                                              int swizzle, int box0 = BK) {
  asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" ::"r"(sm),
               "l"(gaddr)
               : "memory");
  MAP_FIELD32("rank", "", 1);
  MAP_FIELD32("box_dim", "0, ", box0);
  MAP_FIELD32("box_dim", "1, ", box_rows);
  MAP_FIELD32("global_dim", "0, ", K);
  MAP_FIELD32("global_dim", "1, ", rows);
  asm volatile("tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %1;" ::"r"(sm),
               "l"((unsigned long long)K * elem_bytes)
               : "memory");
  MAP_FIELD32("element_stride", "0, ", 1);
  MAP_FIELD32("element_stride", "1, ", 1);
  if (elemtype == 0)
    asm volatile("tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%0], 0;" ::"r"(sm)
                 : "memory");
  else
    asm volatile("tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%0], 1;" ::"r"(sm)
                 : "memory");
  asm volatile("tensormap.replace.tile.interleave_layout.shared::cta.b1024.b32 [%0], 0;" ::"r"(sm)
               : "memory");
  if (swizzle == 3)
    asm volatile("tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%0], 3;" ::"r"(sm)
                 : "memory");
  else
    asm volatile("tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%0], 0;" ::"r"(sm)
                 : "memory");
  asm volatile("tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [%0], 0;" ::"r"(sm)
               : "memory");
}
#undef MAP_FIELD32

// Two e4m3 (one 16-bit pair, low byte first) -> f16x2 (low half first).
__device__ __forceinline__ void cvt_e4m3x4(unsigned x, unsigned& lo, unsigned& hi) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\n"
      "cvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(x));
}

// Tile t -> (tr, ts): groups of GROUP_M R-tiles, R fastest inside a group.
__device__ __forceinline__ void tile_coords(int t, int tiles_r, int tiles_s, int& tr, int& ts) {
  const int group = GROUP_M * tiles_s, g = t / group, first = g * GROUP_M;
  const int gm = min(tiles_r - first, GROUP_M);
  tr = first + (t % group) % gm;
  ts = (t % group) / gm;
}

// Warp-wide: the R map (fp8, box 64 x BM, no swizzle) and the S map (f16, box 64 x BN,
// 128-byte swizzle) built in shared memory at sm (256 bytes, 128-aligned) and copied to
// global memory at gmap, gmap + 128.
__device__ __forceinline__ void build_maps(const plan_t& p, const void* r, const void* ws, int K,
                                           unsigned sm, unsigned char* gmap) {
  const int lane = threadIdx.x & 31;
  for (int i = lane; i < 64; i += 32)
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(sm + 4 * i), "r"(0) : "memory");
  __syncwarp();
  if (lane == 0) {
    make_map_smem(sm, r, K, p.rows_r, BM, 1, 0, 0);
    make_map_smem(sm + 128, ws, K, p.rows_s, BN, 2, 1, 3);
  }
  __syncwarp();
  asm volatile(
      "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
      " [%0], [%1], 128;" ::"l"(gmap),
      "r"(sm)
      : "memory");
  asm volatile(
      "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
      " [%0], [%1], 128;" ::"l"(gmap + 128),
      "r"(sm + 128)
      : "memory");
}

// The k permutation inside each 64-wide block: the consumer thread
// with t = lane % 4 loads bytes 16t .. 16t + 15 of a row (one 16-byte load)
// and uses the pair of bytes 16t + 4kk + 2h + (0, 1) as the f16 fragment
// elements k = 16kk + 8h + 2t + (0, 1) of k16 step kk. S is written in that
// logical order: f16 pair 8kk + 4h + t of a block = source byte pair
// 8t + 2kk + h, so the dot products see matching k on both sides.
// Converts S and (swapped) writes the scale tables, threads tid of nthreads. The two jobs
// start on different threads (rot: the index shifted by the work before), so that on
// small problems their DRAM round trips overlap instead of queueing in the same threads.
// Returns the number of work items handed out (for a following job's rot).
__device__ __forceinline__ long long prep_work(const plan_t& p, const __nv_fp8_e4m3* A,
                                               const float* a_scales, const __nv_fp8_e4m3* B,
                                               unsigned char* ws, int M, int K, long long tid,
                                               long long nthreads) {
  const unsigned char* src = reinterpret_cast<const unsigned char*>(p.swap ? A : B);
  unsigned* dst = reinterpret_cast<unsigned*>(ws);
  const long long chunks = (long long)p.rows_s * (K / 64);
  auto rot = [&](long long before) { return (tid + nthreads - before % nthreads) % nthreads; };
  for (long long c = tid; c < chunks; c += nthreads) {
    const uint4* in = reinterpret_cast<const uint4*>(src + c * 64);
    unsigned w[16];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 v = __ldg(in + i);
      w[4 * i] = v.x;
      w[4 * i + 1] = v.y;
      w[4 * i + 2] = v.z;
      w[4 * i + 3] = v.w;
    }
    // Output words 8kk .. 8kk + 7 (two 16-byte stores) per k16 step kk.
    uint4* op = reinterpret_cast<uint4*>(dst + c * 32);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      unsigned lo[4], hi[4];  // source pairs 8t + 2kk (h = 0) and 8t + 2kk + 1 (h = 1)
#pragma unroll
      for (int t = 0; t < 4; ++t) cvt_e4m3x4(w[4 * t + kk], lo[t], hi[t]);
      op[2 * kk] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
      op[2 * kk + 1] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    }
  }
  if (!p.swap) return chunks;
  // ratio[g][s] = a_scales[s, g - 1] / a_scales[s, g] (1 where unused)
  float* ratio = reinterpret_cast<float*>(ws + 2LL * p.rows_s * K);
  const long long stride = ratio_stride(p), total = stride * p.groups;
  for (long long i = rot(chunks); i < total; i += nthreads) {
    const int g = (int)(i / stride);
    const long long s = i % stride;
    float v = 1.0f;
    if (g > 0 && s < M) v = a_scales[s * p.groups + g - 1] / a_scales[s * p.groups + g];
    ratio[i] = v;
    ratio[total + i] = s < M ? a_scales[s * p.groups + g] : 0.f;  // transposed a_scales
  }
  return chunks + total;
}

// Launch 1 of the two-launch plan: the maps (warp 0 of block 0), S in f16, the scale
// tables and (PF_L2) the L2 prefetch.
extern "C" __global__ void __launch_bounds__(256)
    bsmm_prep(const __nv_fp8_e4m3* __restrict__ A, const float* __restrict__ a_scales,
              const __nv_fp8_e4m3* __restrict__ B, unsigned char* __restrict__ ws,
              unsigned char* __restrict__ maps, int M, int N, int K, int ctas) {
  const plan_t p = make_plan(M, N, K, ctas);
#if FP8
  if (use_fp8(p)) {  // FP8 path: A [M, K] and B [N, K] as they are; nothing else to prepare
    if (blockIdx.x == 0 && threadIdx.x < 32) {
      __shared__ __align__(128) unsigned char smaps8[256];
      for (int i = threadIdx.x; i < 256; i += 32) smaps8[i] = 0;
      __syncwarp();
      const unsigned sm = (unsigned)__cvta_generic_to_shared(smaps8);
      if (threadIdx.x == 0) {
        make_map_smem(sm, A, K, M, 128, 1, 0, 3, 128);
        make_map_smem(sm + 128, B, K, N, FP8_BN, 1, 0, 3, 128);
      }
      __syncwarp();
      asm volatile(
          "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
          " [%0], [%1], 128;" ::"l"(maps),
          "r"(sm)
          : "memory");
      asm volatile(
          "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
          " [%0], [%1], 128;" ::"l"(maps + 128),
          "r"(sm + 128)
          : "memory");
    }
    return;
  }
#endif
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x,
                  nthreads = (long long)gridDim.x * blockDim.x;
  if (blockIdx.x == 0 && threadIdx.x < 32) {  // warp 0 of block 0: the two tensor maps
    __shared__ __align__(128) unsigned char smaps[256];
    build_maps(p, p.swap ? (const void*)B : (const void*)A, ws, K,
               (unsigned)__cvta_generic_to_shared(smaps), maps);
  }
  const long long before = prep_work(p, A, a_scales, B, ws, M, K, tid, nthreads);
#if PF_L2
  {  // R rows of the first 4 k-steps (2 lines) of each block's first unit
    const int first = min(p.tiles * p.splits, ctas);
    const unsigned char* r = reinterpret_cast<const unsigned char*>(p.swap ? B : A);
    for (long long i = (tid + nthreads - before % nthreads) % nthreads;
         i < (long long)first * BM * 2; i += nthreads) {
      const int u = (int)(i / (2 * BM)), row = (int)(i % (2 * BM)) >> 1, line = (int)(i & 1);
      int tr, ts;
      tile_coords(u % p.tiles, p.tiles_r, p.tiles_s, tr, ts);
      const long long rr = (long long)tr * BM + row;
      const int kb = (u / p.tiles) * p.gps * 128 + 128 * line;  // byte offset in the row
      if (rr < p.rows_r && kb < K) asm volatile("prefetch.global.L2 [%0];" ::"l"(r + rr * K + kb));
    }
  }
#else
  (void)before;
#endif
}

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
template <int R>
__device__ __forceinline__ void fence_regs(float* d) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D (64 x 256, fp32) += A (64 x 16 f16, registers) * S^T (shared memory).
__device__ __forceinline__ void wgmma_rs_m64n256k16(float* d, const unsigned* a,
                                                    unsigned long long db) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "
      "%127"
      "}, {%128, %129, %130, %131}, %132, 1, 1, 1, 0;\n}\n"
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
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

// One k-step's register fragments: rows g and g + 8 of this warp's 16 rows,
// 16 bytes each (bytes 16t .. 16t + 15 of the 64-byte row), as 4 k16 steps
// x 4 f16x2 registers (see bsmm_prep for the k order).
__device__ __forceinline__ void load_frags(unsigned* f, unsigned addr) {
  uint4 r0, r1;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0.x), "=r"(r0.y), "=r"(r0.z), "=r"(r0.w)
               : "r"(addr));
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r1.x), "=r"(r1.y), "=r"(r1.z), "=r"(r1.w)
               : "r"(addr + 8 * BK));
  cvt_e4m3x4(r0.x, f[0], f[2]);
  cvt_e4m3x4(r1.x, f[1], f[3]);
  cvt_e4m3x4(r0.y, f[4], f[6]);
  cvt_e4m3x4(r1.y, f[5], f[7]);
  cvt_e4m3x4(r0.z, f[8], f[10]);
  cvt_e4m3x4(r1.z, f[9], f[11]);
  cvt_e4m3x4(r0.w, f[12], f[14]);
  cvt_e4m3x4(r1.w, f[13], f[15]);
}
__device__ __forceinline__ void issue_step(float* d, const unsigned* f, unsigned s_addr) {
  const unsigned long long db = desc_sw128(s_addr);
  fence_regs<128>(d);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_rs_m64n256k16(d, f + 4 * kk, db + 2 * kk);  // +32 B along k
  wgmma_commit();
}

#if FP8
// D (64 x 128, fp32) = A (64 x 32 e4m3, shared memory) * B^T (128 x 32 e4m3, shared memory),
// a fresh accumulator (scale-d = 0): every k32 product is promoted into fp32 by the caller.
__device__ __forceinline__ void wgmma_fp8_m64n128k32(float* d, unsigned long long da,
                                                     unsigned long long db) {
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
      : "l"(da), "l"(db), "r"(0));
}
// The same with 64 columns (32 fp32), for FP8_DB = 1.
__device__ __forceinline__ void wgmma_fp8_m64n64k32(float* d, unsigned long long da,
                                                    unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(0));
}
#endif
#if FP8
// FP8 path, one consumer warpgroup (c = 0, 1: rows 64c .. 64c + 63 of the 128-row A tile) x all
// 256 B rows of the tile. Per k32 and 128-column half h: a fresh m64n128k32 e4m3 wgmma into tm
// (64 fp32), waited for at once, then acc[64h + ..] += tm * sigma in fp32 (one FFMA per
// element and k32: the e4m3 MMA's reduced-precision sum never spans more than 32 products).
// The two consumer warpgroups alternate on the tensor cores: one's FFMAs run while the
// other's wgmma does. sigma = a_scales[row, g] * b_scales[column block, g] for the stage's
// group g; d-register layout as in the f16 path: tm[4jj + i] is row 16w + gq + 8(i/2),
// column 8jj + 2t + (i%2) of the half.
#if FP8_DB == 2
// One K group (stage it % ST8) of the 128 x 128 tile: 4 k32 wgmmas, each issued before the
// previous one is added, drained at the group's end (a wgmma still in flight across the loop's
// back edge made ptxas serialize every wgmma: C7514).
__device__ __forceinline__ void fp8_group_n128(float (&tq)[2][64], float (&acc)[64], unsigned base,
                                               unsigned bars, int it, int c, int lane, float sc0,
                                               float sc1) {
  const int s = it % ST8;
  mbar_wait(bars + 8 * s, (it / ST8) & 1);
  const unsigned st = base + s * STAGE8;
  const unsigned long long da = desc_sw128(st + 8192 * c), db = desc_sw128(st + A8_BYTES);
  wgmma_fence();
  wgmma_fp8_m64n128k32(tq[0], da, db);
  wgmma_commit();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    if (kk < 3) {
      wgmma_fence();
      wgmma_fp8_m64n128k32(tq[(kk + 1) & 1], da + 2 * (kk + 1), db + 2 * (kk + 1));
      wgmma_commit();
      wgmma_wait<1>();
    } else {
      wgmma_wait<0>();
    }
    float* tp = tq[kk & 1];
    fence_regs<64>(tp);
    if (kk == 3 && lane == 0) mbar_arrive(bars + 8 * (STAGES + s));  // the group's last read
#if FP8_SC_ORDER  // all FFMAs of sc0, then all of sc1 (long runs of one scale operand)
#pragma unroll
    for (int jj = 0; jj < 16 * FP8_FFMA; ++jj) {
      acc[AX(4 * jj)] = fmaf(tp[4 * jj], sc0, acc[AX(4 * jj)]);
      acc[AX(4 * jj + 1)] = fmaf(tp[4 * jj + 1], sc0, acc[AX(4 * jj + 1)]);
    }
#pragma unroll
    for (int jj = 0; jj < 16 * FP8_FFMA; ++jj) {
      acc[AX(4 * jj + 2)] = fmaf(tp[4 * jj + 2], sc1, acc[AX(4 * jj + 2)]);
      acc[AX(4 * jj + 3)] = fmaf(tp[4 * jj + 3], sc1, acc[AX(4 * jj + 3)]);
    }
#else
#pragma unroll
    for (int jj = 0; jj < 16 * FP8_FFMA; ++jj) {
      acc[AX(4 * jj)] = fmaf(tp[4 * jj], sc0, acc[AX(4 * jj)]);
      acc[AX(4 * jj + 1)] = fmaf(tp[4 * jj + 1], sc0, acc[AX(4 * jj + 1)]);
      acc[AX(4 * jj + 2)] = fmaf(tp[4 * jj + 2], sc1, acc[AX(4 * jj + 2)]);
      acc[AX(4 * jj + 3)] = fmaf(tp[4 * jj + 3], sc1, acc[AX(4 * jj + 3)]);
    }
#endif
  }
}
// SPLIT (FP8_SMALL = 1; FP8_SMALL = 2 where p.splits > 1): the FP8 plan's units with their
// group ranges and the split chain. Otherwise one unit per tile over all groups: the
// FP8_SMALL = 0 loop, without the chain's code (p, u0, epoch, ws, flags then unused).
template <bool SPLIT>
__device__ __forceinline__ void fp8_consumer(const float* __restrict__ a_scales,
                                             const float* __restrict__ b_scales,
                                             float* __restrict__ out, int M, int N, int G,
                                             unsigned base, unsigned bars, int c, const plan_t& p,
                                             int u0, unsigned epoch, unsigned char* ws,
                                             unsigned* flags) {
  const int tid = threadIdx.x & 127, w = tid >> 5, lane = tid & 31, gq = lane >> 2, t = lane & 3;
  const int tr8 = (M + 127) / 128, ts8 = (N + 127) / 128, tiles8 = tr8 * ts8;
  float tq[2][64];
#pragma unroll
  for (int i = 0; i < 128; ++i) tq[i >> 6][i & 63] = 0.f;
  int it = 0;  // groups (stages) consumed so far
  // SPLIT: units as in the f16 path: u = split * tiles + tile, from the ticket's u0 (=
  // blockIdx.x without split-K); split sp covers groups [g0, g1).
  for (int u = SPLIT ? u0 : (int)blockIdx.x; u < (SPLIT ? tiles8 * p.splits : tiles8);
       u += gridDim.x) {
    int tr, ts;
    tile_coords(SPLIT ? u % tiles8 : u, tr8, ts8, tr, ts);
    const int sp = SPLIT ? u / tiles8 : 0, g0 = SPLIT ? sp * p.gps : 0,
              g1 = SPLIT ? min(G, g0 + p.gps) : G;
    const int r0 = tr * 128 + 64 * c + 16 * w + gq;  // rows r0, r0 + 8
    const float* sa0 = a_scales + (long long)min(r0, M - 1) * G;
    const float* sa1 = a_scales + (long long)min(r0 + 8, M - 1) * G;
    const float* sb = b_scales + (long long)ts * G;
#if FP8_SMALL >= 3
    // The row pointers as opaque values: ptxas then keeps them instead of recomputing the
    // 64-bit row offsets in every group (FP8_SMALL = 2's unsplit loop: 16 more integer slots
    // per group than FP8_SMALL = 0's).
    if (!SPLIT) asm volatile("" : "+l"(sa0), "+l"(sa1));
#endif
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    float xa0 = __ldg(sa0 + g0), xa1 = __ldg(sa1 + g0), xb = __ldg(sb + g0);
    for (int g = g0; g < g1; ++g, ++it) {
      const float sc0 = xa0 * xb, sc1 = xa1 * xb;
      if (g + 1 < g1) {  // next group's scales, a group ahead
        xa0 = __ldg(sa0 + g + 1);
        xa1 = __ldg(sa1 + g + 1);
        xb = __ldg(sb + g + 1);
      }
      fp8_group_n128(tq, acc, base, bars, it, c, lane, sc0, sc1);
    }
    const bool ok0 = r0 < M, ok1 = r0 + 8 < M;
#if FP8_SMALL >= 4
    if (SPLIT && p.splits > 1) {
      // One flag per unit instead of per quarter: the FP8 plan splits in 2 (s0, s12), so
      // there is no chain of splits to pipeline, and each quarter cost the writer a fence and
      // the reader a flag and a load round trip in series. Now the writer stores all 16
      // float4 (same slot layout), fences once and sets flags[4u]; the reader polls once and
      // takes its predecessor's 64 KB in two batches of 8 float4 (registers: tq stays live).
      const int ctid = threadIdx.x - 128, sp = u / tiles8;
      float4* mine = reinterpret_cast<float4*>(ws) + (long long)u * 4096 + ctid;
      const float4* prev = mine - (long long)tiles8 * 4096;  // slot of split sp - 1
      if (sp > 0) {
        if (ctid == 0) {
          const unsigned* f = flags + 4 * (u - tiles8);
          for (;;) {
            unsigned now;
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(f) : "memory");
            if ((int)(now - epoch) >= 0) break;
            __nanosleep(20);
          }
        }
        asm volatile("bar.sync 1, 256;" ::: "memory");
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float4 v[8];
#pragma unroll
          for (int i = 0; i < 8; ++i) v[i] = __ldcg(prev + 256 * (8 * h + i));
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            const int jj = 8 * h + i;
            acc[AX(4 * jj)] += v[i].x;
            acc[AX(4 * jj + 1)] += v[i].y;
            acc[AX(4 * jj + 2)] += v[i].z;
            acc[AX(4 * jj + 3)] += v[i].w;
          }
        }
      }
      if (sp < p.splits - 1) {
#pragma unroll
        for (int jj = 0; jj < 16; ++jj)
          __stcg(mine + 256 * jj, make_float4(acc[AX(4 * jj)], acc[AX(4 * jj + 1)],
                                              acc[AX(4 * jj + 2)], acc[AX(4 * jj + 3)]));
        __threadfence();
        asm volatile("bar.sync 1, 256;" ::: "memory");
        if (ctid == 0)
          asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flags + 4 * u), "r"(epoch)
                       : "memory");
        continue;
      }
      // the last split: out, below
    }
#else
    if (SPLIT && p.splits > 1) {
      // The f16 path's chain (see there), on this accumulator: a unit's slot is 64 KB (16
      // float4 per consumer thread, float4 jj of thread ctid at 256 jj + ctid: coalesced), in
      // quarters of 4 jj's (16 KB) with a flag each. acc is already scaled (no last sigma).
      const int ctid = threadIdx.x - 128, sp = u / tiles8;
      float4* mine = reinterpret_cast<float4*>(ws) + (long long)u * 4096 + ctid;
      const float4* prev = mine - (long long)tiles8 * 4096;  // slot of split sp - 1
      const bool last = sp == p.splits - 1;
#pragma unroll
      for (int qt = 0; qt < 4; ++qt) {
        if (sp > 0) {
          if (ctid == 0) {
            const unsigned* f = flags + 4 * (u - tiles8) + qt;
            for (;;) {
              unsigned now;
              asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(f) : "memory");
              if ((int)(now - epoch) >= 0) break;
              __nanosleep(20);
            }
          }
          asm volatile("bar.sync 1, 256;" ::: "memory");
          float4 v[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) v[i] = __ldcg(prev + 256 * (4 * qt + i));
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int jj = 4 * qt + i;
            acc[AX(4 * jj)] += v[i].x;
            acc[AX(4 * jj + 1)] += v[i].y;
            acc[AX(4 * jj + 2)] += v[i].z;
            acc[AX(4 * jj + 3)] += v[i].w;
          }
        }
        if (!last) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int jj = 4 * qt + i;
            __stcg(mine + 256 * jj, make_float4(acc[AX(4 * jj)], acc[AX(4 * jj + 1)],
                                                acc[AX(4 * jj + 2)], acc[AX(4 * jj + 3)]));
          }
          __threadfence();
          asm volatile("bar.sync 1, 256;" ::: "memory");
          if (ctid == 0)
            asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flags + 4 * u + qt), "r"(epoch)
                         : "memory");
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int jj = 4 * qt + i, col = ts * 128 + 8 * jj + 2 * t;  // N % 128 == 0
            float* o0 = out + (long long)r0 * N + col;
            if (ok0)
              *reinterpret_cast<float2*>(o0) = make_float2(acc[AX(4 * jj)], acc[AX(4 * jj + 1)]);
            if (ok1)
              *reinterpret_cast<float2*>(o0 + 8LL * N) =
                  make_float2(acc[AX(4 * jj + 2)], acc[AX(4 * jj + 3)]);
          }
        }
      }
      continue;
    }
#endif
#pragma unroll
    for (int jj = 0; jj < 16; ++jj) {
      const int col = ts * 128 + 8 * jj + 2 * t;  // N % 128 == 0
      float* o0 = out + (long long)r0 * N + col;
      if (ok0) *reinterpret_cast<float2*>(o0) = make_float2(acc[AX(4 * jj)], acc[AX(4 * jj + 1)]);
      if (ok1)
        *reinterpret_cast<float2*>(o0 + 8LL * N) =
            make_float2(acc[AX(4 * jj + 2)], acc[AX(4 * jj + 3)]);
    }
  }
}
#else
// FP8_DB = 0 / 1 (never split: SPLIT is false, p .. flags unused).
template <bool SPLIT>
__device__ __forceinline__ void fp8_consumer(const float* __restrict__ a_scales,
                                             const float* __restrict__ b_scales,
                                             float* __restrict__ out, int M, int N, int G,
                                             unsigned base, unsigned bars, int c, const plan_t&,
                                             int, unsigned, unsigned char*, unsigned*) {
  const int tid = threadIdx.x & 127, w = tid >> 5, lane = tid & 31, gq = lane >> 2, t = lane & 3;
  const int tr8 = (M + 127) / 128, ts8 = (N + 255) / 256, tiles8 = tr8 * ts8, nb = N / 128;
#if FP8_DB
  float tq[2][32];
#pragma unroll
  for (int i = 0; i < 64; ++i) tq[i >> 5][i & 31] = 0.f;
#else
  float tm[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) tm[i] = 0.f;
#endif
  int it = 0;
  for (int u = blockIdx.x; u < tiles8; u += gridDim.x) {
    int tr, ts;
    tile_coords(u, tr8, ts8, tr, ts);
    const int r0 = tr * 128 + 64 * c + 16 * w + gq;  // rows r0, r0 + 8
    const float* sa0 = a_scales + (long long)min(r0, M - 1) * G;
    const float* sa1 = a_scales + (long long)min(r0 + 8, M - 1) * G;
    const float* sb0 = b_scales + (long long)min(2 * ts, nb - 1) * G;
    const float* sb1 = b_scales + (long long)min(2 * ts + 1, nb - 1) * G;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.f;
    float xa0 = __ldg(sa0), xa1 = __ldg(sa1), xb0 = __ldg(sb0), xb1 = __ldg(sb1);
    for (int g = 0; g < G; ++g, ++it) {
      float sc[4];  // sc[2h + q]: column half h, row r0 + 8q
      sc[0] = xa0 * xb0;
      sc[1] = xa1 * xb0;
      sc[2] = xa0 * xb1;
      sc[3] = xa1 * xb1;
      if (g + 1 < G) {  // next group's scales, a group ahead
        xa0 = __ldg(sa0 + g + 1);
        xa1 = __ldg(sa1 + g + 1);
        xb0 = __ldg(sb0 + g + 1);
        xb1 = __ldg(sb1 + g + 1);
      }
      const int s = it % ST8;
      mbar_wait(bars + 8 * s, (it / ST8) & 1);
      const unsigned st = base + s * STAGE8;
      const unsigned long long da = desc_sw128(st + 8192 * c), db = desc_sw128(st + A8_BYTES);
#if FP8_DB
      // 16 wgmmas per group (k32 step kk = q / 4, 64-column quarter qq = q % 4), one in flight
      // while the previous one is added; drained at the group's end.
      wgmma_fence();
      wgmma_fp8_m64n64k32(tq[0], da, db);
      wgmma_commit();
#pragma unroll
      for (int q = 1; q <= 16; ++q) {
        if (q < 16) {
          wgmma_fence();
          wgmma_fp8_m64n64k32(tq[q & 1], da + 2 * (q >> 2), db + 512 * (q & 3) + 2 * (q >> 2));
          wgmma_commit();
          wgmma_wait<1>();
        } else {
          wgmma_wait<0>();
        }
        const int pq = q - 1, qq = pq & 3, h = qq >> 1;
        float* tp = tq[pq & 1];
        fence_regs<32>(tp);
        if (q == 16 && lane == 0) mbar_arrive(bars + 8 * (STAGES + s));
#pragma unroll
        for (int jj = 0; jj < 8 * FP8_FFMA; ++jj) {
          acc[32 * qq + 4 * jj] = fmaf(tp[4 * jj], sc[2 * h], acc[32 * qq + 4 * jj]);
          acc[32 * qq + 4 * jj + 1] = fmaf(tp[4 * jj + 1], sc[2 * h], acc[32 * qq + 4 * jj + 1]);
          acc[32 * qq + 4 * jj + 2] =
              fmaf(tp[4 * jj + 2], sc[2 * h + 1], acc[32 * qq + 4 * jj + 2]);
          acc[32 * qq + 4 * jj + 3] =
              fmaf(tp[4 * jj + 3], sc[2 * h + 1], acc[32 * qq + 4 * jj + 3]);
        }
      }
#else
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          wgmma_fence();
          wgmma_fp8_m64n128k32(tm, da + 2 * kk, db + 1024 * h + 2 * kk);  // +32 B per k32
          wgmma_commit();
          wgmma_wait<0>();
          fence_regs<64>(tm);
          if (kk == 3 && h == 1 && lane == 0) mbar_arrive(bars + 8 * (STAGES + s));
#pragma unroll
          for (int jj = 0; jj < 16 * FP8_FFMA; ++jj) {
            acc[64 * h + 4 * jj] = fmaf(tm[4 * jj], sc[2 * h], acc[64 * h + 4 * jj]);
            acc[64 * h + 4 * jj + 1] = fmaf(tm[4 * jj + 1], sc[2 * h], acc[64 * h + 4 * jj + 1]);
            acc[64 * h + 4 * jj + 2] =
                fmaf(tm[4 * jj + 2], sc[2 * h + 1], acc[64 * h + 4 * jj + 2]);
            acc[64 * h + 4 * jj + 3] =
                fmaf(tm[4 * jj + 3], sc[2 * h + 1], acc[64 * h + 4 * jj + 3]);
          }
        }
      }
#endif
    }
    const bool ok0 = r0 < M, ok1 = r0 + 8 < M;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int jj = 0; jj < 16; ++jj) {
        const int col = ts * 256 + 128 * h + 8 * jj + 2 * t;
        if (col >= N) continue;
        float* o0 = out + (long long)r0 * N + col;
        if (ok0)
          *reinterpret_cast<float2*>(o0) =
              make_float2(acc[64 * h + 4 * jj], acc[64 * h + 4 * jj + 1]);
        if (ok1)
          *reinterpret_cast<float2*>(o0 + 8LL * N) =
              make_float2(acc[64 * h + 4 * jj + 2], acc[64 * h + 4 * jj + 3]);
      }
    }
  }
}
#endif  // FP8_DB == 2

// The FP8 path's producer (one thread): one 128-wide K group of A and B per stage, in the
// consumers' order. SPLIT: the FP8 plan's units from the ticket's u0 (see fp8_consumer);
// otherwise one unit per tile, all groups.
template <bool SPLIT>
__device__ __forceinline__ void fp8_producer(const plan_t& p, int u0, int units, int M, int N,
                                             unsigned base, unsigned bars,
                                             const unsigned char* maps) {
  const int tr8 = (M + 127) / 128, ts8 = (N + FP8_BN - 1) / FP8_BN, tiles8 = tr8 * ts8;
  int it = 0;
  for (int u = SPLIT ? u0 : (int)blockIdx.x; u < (SPLIT ? units : tiles8); u += gridDim.x) {
    int tr, ts;
    tile_coords(SPLIT ? u % tiles8 : u, tr8, ts8, tr, ts);
    const int g0 = SPLIT ? (u / tiles8) * p.gps : 0,
              g1 = SPLIT ? min(p.groups, g0 + p.gps) : p.groups;
    for (int g = g0; g < g1; ++g, ++it) {
      const int s = it % ST8;
      if (it >= ST8) mbar_wait(bars + 8 * (STAGES + s), ((it / ST8) - 1) & 1);
      const unsigned ss = base + s * STAGE8;
      mbar_expect_tx(bars + 8 * s, STAGE8);  // whole boxes, out-of-bounds rows included
      tma_load_2d(ss, maps, g * 128, tr * 128, bars + 8 * s);
      tma_load_2d(ss + A8_BYTES, maps + 128, g * 128, ts * FP8_BN, bars + 8 * s);
    }
  }
}
#endif

// Launch 2 (after bsmm_prep): the persistent GEMM.
extern "C" __global__ void __launch_bounds__(384, 1)
    bsmm_f16_tma(const float* __restrict__ a_scales, const float* __restrict__ b_scales,
                 float* __restrict__ out, unsigned char* ws, unsigned char* maps, int M, int N,
                 int K, int ctas) {
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
  // full[STAGES], then empty[STAGES]; + 512: the split-K flag.
  const unsigned bars = base + STAGES * STAGE_STRIDE;
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127;
  const plan_t p = make_plan(M, N, K, ctas);
  const int units = p.tiles * p.splits;
  // maps: the prepass's two tensor maps, the ticket counter, then 4 flags per unit.
  unsigned* const ticket_ctr = reinterpret_cast<unsigned*>(maps + 256);
  unsigned* const flags = reinterpret_cast<unsigned*>(maps + 260);

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bars + 8 * s, 1);
      mbar_init(bars + 8 * (STAGES + s), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    // Split K: the first unit comes from a ticket in arrival order, so that a block only
    // ever waits for units of smaller tickets, whose blocks are already running: no
    // deadlock whether or not all blocks are resident at once.
    unsigned tk = blockIdx.x;
    if (p.splits > 1) tk = atomicAdd(ticket_ctr, 1u);
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(bars + 512), "r"(tk) : "memory");
  }
  __syncthreads();
  unsigned ticket;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(ticket) : "r"(bars + 512) : "memory");
  // Every block of a launch takes one ticket: this launch's are [e * grid, (e + 1) * grid).
  const int u0 = (int)(ticket % gridDim.x);
  const unsigned epoch = ticket / gridDim.x + 1;

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 0) {
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(maps) : "memory");
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(maps + 128)
                   : "memory");
#if FP8
      if (use_fp8(p)) {  // FP8 path: one 128-wide K group of A and B per stage
#if FP8_SMALL >= 2       // one branch, uniform over the grid; each loop as in its own build
        if (p.splits == 1)
          fp8_producer<false>(p, u0, units, M, N, base, bars, maps);
        else
          fp8_producer<true>(p, u0, units, M, N, base, bars, maps);
#else
        fp8_producer<FP8_SMALL == 1>(p, u0, units, M, N, base, bars, maps);
#endif
      } else
#endif
      {
        int it = 0;
        for (int u = u0; u < units; u += gridDim.x) {
          int tr, ts;
          tile_coords(u % p.tiles, p.tiles_r, p.tiles_s, tr, ts);
          const int sp = u / p.tiles, g0 = sp * p.gps, g1 = min(p.groups, g0 + p.gps);
          for (int ks = 2 * g0; ks < 2 * g1; ++ks, ++it) {
            const int s = it % STAGES;
            const unsigned ss = base + s * STAGE_STRIDE;
            // Swapped: the ratio row of group ks / 2 (BN floats) rides with its first k-step.
            // The transposed a_scales row of the unit's last group rides with its
            // last k-step (odd, so never the same slot as a ratio row).
            const bool rat = p.swap && !(ks & 1) && ks > 2 * g0;
            const bool lsc = p.swap && ks == 2 * g1 - 1;
            if (it >= STAGES) mbar_wait(bars + 8 * (STAGES + s), ((it / STAGES) - 1) & 1);
            mbar_expect_tx(bars + 8 * s, STAGE_BYTES + (rat || lsc ? 4 * BN : 0));
            tma_load_2d(ss + S_BYTES, maps, ks * BK, tr * BM, bars + 8 * s);
            if (rat || lsc)
              bulk_load(ss + STAGE_BYTES,
                        ws + 2LL * p.rows_s * K +
                            4 * ((lsc ? (long long)p.groups * p.tiles_s * BN : 0) +
                                 (long long)(ks / 2) * p.tiles_s * BN + ts * BN),
                        4 * BN, bars + 8 * s);
            tma_load_2d(ss, maps + 128, ks * BK, ts * BN, bars + 8 * s);
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
#if FP8
    if (use_fp8(p)) {
#if FP8_SMALL >= 2  // the producer's branch (same p on every thread)
      if (p.splits == 1)
        fp8_consumer<false>(a_scales, b_scales, out, M, N, p.groups, base, bars, wg - 1, p, u0,
                            epoch, ws, flags);
      else
        fp8_consumer<true>(a_scales, b_scales, out, M, N, p.groups, base, bars, wg - 1, p, u0,
                           epoch, ws, flags);
#else
      fp8_consumer<FP8_SMALL == 1>(a_scales, b_scales, out, M, N, p.groups, base, bars, wg - 1, p,
                                   u0, epoch, ws, flags);
#endif
      return;
    }
#endif
    const int c = wg - 1, w = tid >> 5, lane = tid & 31, gq = lane >> 2, t = lane & 3;
    const int G = p.groups;
    int it = 0;
    for (int u = u0; u < units; u += gridDim.x) {
      int tr, ts;
      tile_coords(u % p.tiles, p.tiles_r, p.tiles_s, tr, ts);
      const int sp = u / p.tiles, g0 = sp * p.gps, g1 = min(G, g0 + p.gps);
      const int rloc = 64 * c + 16 * w + gq;  // this thread's rows rloc, rloc + 8 of the R tile
      const long long r0 = (long long)tr * BM + rloc;
      const int s0 = ts * BN + 2 * t;  // column of d[4j] is s0 + 8j
      // Scale sources. Not swapped: sigma(r, s) = a_scales[r] * b_scales[s / 128]
      // (2 rows x 2 column blocks per thread). Swapped: b_scales[tile's block] *
      // a_scales[s] (one value for the tile's rows, the ratio table per column).
      const float* sa_r0 = a_scales + min(r0, (long long)M - 1) * G;
      const float* sa_r1 = a_scales + min(r0 + 8, (long long)M - 1) * G;
      const int nb = N / 128;
      const float* sb_c0 = b_scales + (long long)min(2 * ts, nb - 1) * G;
      const float* sb_c1 = b_scales + (long long)min(2 * ts + 1, nb - 1) * G;
      const float* sb_t = b_scales + (long long)tr * G;  // swapped: R tile = one 128-block
      float sig[4];      // not swapped: sigma of (row i/2, column block i%2) for the current group
      float sigt = 0.f;  // swapped: b_scales of the tile, current group
      if (!p.swap) {
        sig[0] = sa_r0[g0] * sb_c0[g0];
        sig[1] = sa_r0[g0] * sb_c1[g0];
        sig[2] = sa_r1[g0] * sb_c0[g0];
        sig[3] = sa_r1[g0] * sb_c1[g0];
      } else {
        sigt = sb_t[g0];
      }
      const unsigned rbase = S_BYTES + rloc * BK + 16 * t;
      if (STAGGER && c == 1) __nanosleep(STAGGER);
      float d[128];
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.f;
      fence_regs<128>(d);
      unsigned fa[16], fb[16];
      for (int g = g0; g < g1; ++g) {
        // Ratios for entering group g, loaded before the waits.
        float rho[4];
        float rt = 1.f;
        if (g > g0) {
          if (!p.swap) {
            const float n0 = sa_r0[g] * sb_c0[g], n1 = sa_r0[g] * sb_c1[g],
                        n2 = sa_r1[g] * sb_c0[g], n3 = sa_r1[g] * sb_c1[g];
            rho[0] = sig[0] / n0;
            rho[1] = sig[1] / n1;
            rho[2] = sig[2] / n2;
            rho[3] = sig[3] / n3;
            sig[0] = n0;
            sig[1] = n1;
            sig[2] = n2;
            sig[3] = n3;
          } else {
            const float nt = sb_t[g];
            rt = sigt / nt;
            sigt = nt;
          }
        }
        // k-step 2g
        {
          const int s = it % STAGES;
          mbar_wait(bars + 8 * s, (it / STAGES) & 1);
          load_frags(fa, base + s * STAGE_STRIDE + rbase);
          if (g > g0) {
            wgmma_wait<0>();
            fence_regs<128>(d);
            if (lane == 0) mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
            if (!p.swap) {
#pragma unroll
              for (int j = 0; j < 32; ++j) {
                const int cb = j >> 4;
                d[4 * j] *= rho[cb];
                d[4 * j + 1] *= rho[cb];
                d[4 * j + 2] *= rho[2 + cb];
                d[4 * j + 3] *= rho[2 + cb];
              }
            } else {
              const unsigned rs = base + s * STAGE_STRIDE + STAGE_BYTES + 8 * t;
#pragma unroll
              for (int j = 0; j < 32; ++j) {
                float2 q;
                asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];"
                             : "=f"(q.x), "=f"(q.y)
                             : "r"(rs + 32 * j));
                const float x = q.x * rt, y = q.y * rt;
                d[4 * j] *= x;
                d[4 * j + 1] *= y;
                d[4 * j + 2] *= x;
                d[4 * j + 3] *= y;
              }
            }
          }
          issue_step(d, fa, base + s * STAGE_STRIDE);
          ++it;
        }
        // k-step 2g + 1
        {
          const int s = it % STAGES;
          mbar_wait(bars + 8 * s, (it / STAGES) & 1);
          load_frags(fb, base + s * STAGE_STRIDE + rbase);  // fb's last reader finished at wait 0
          issue_step(d, fb, base + s * STAGE_STRIDE);
          // Only now is "all but the newest group" step 2g: its stage (and fa) are free.
          wgmma_wait<1>();
          fence_regs<128>(d);
          if (lane == 0) mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
          ++it;
        }
      }
      wgmma_wait<0>();
      fence_regs<128>(d);
      // d[4j + i] is R row rloc + 8(i/2), S column s0 + 8j + (i%2): times the last
      // group's sigma, in place.
      if (!p.swap) {
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          const int cb = j >> 4;
          d[4 * j] *= sig[cb];
          d[4 * j + 1] *= sig[cb];
          d[4 * j + 2] *= sig[2 + cb];
          d[4 * j + 3] *= sig[2 + cb];
        }
      } else {
        // a_scales[s, g1 - 1] of the tile's columns came with the last k-step's stage.
        const unsigned ls = base + ((it - 1) % STAGES) * STAGE_STRIDE + STAGE_BYTES + 8 * t;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          float2 q;
          asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];"
                       : "=f"(q.x), "=f"(q.y)
                       : "r"(ls + 32 * j));
          const float x = q.x * sigt, y = q.y * sigt;
          d[4 * j] *= x;
          d[4 * j + 1] *= y;
          d[4 * j + 2] *= x;
          d[4 * j + 3] *= y;
          // Chunks of 8 columns: the loads of all 32 would be hoisted and spill.
          if ((j & 7) == 7) fence_regs<32>(d + 4 * (j - 7));
        }
      }
      __syncwarp();  // the warp's reads of the last stage are done
      if (lane == 0) mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
      if (p.splits > 1) {
        // Split-K without atomics, as a chain in quarters of the tile (8 j's = 32 KB): split
        // sp waits for split sp - 1's quarter (its running sum, flag = this launch's epoch,
        // ld.acquire.gpu by one thread, then a barrier), adds it to d, and stores the new
        // running sum into its own slot (st.global.cg, fence, barrier, st.release.gpu of the
        // flag); the last split writes out instead. The splits' quarters pipeline, and a
        // block waits only for a smaller ticket (see the ticket above).
        const int ctid = threadIdx.x - 128, sp = u / p.tiles;
        float4* part = reinterpret_cast<float4*>(ws + part_offset(p, K));
        float4* mine = part + (long long)u * 8192 + ctid;
        const float4* prev = mine - (long long)p.tiles * 8192;  // slot of split sp - 1
        const bool last = sp == p.splits - 1;
#pragma unroll
        for (int qt = 0; qt < 4; ++qt) {
          if (sp > 0) {
            if (ctid == 0) {
              const unsigned* f = flags + 4 * (u - p.tiles) + qt;
              for (;;) {
                unsigned now;
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(f) : "memory");
                if ((int)(now - epoch) >= 0) break;
                __nanosleep(20);
              }
            }
            asm volatile("bar.sync 1, 256;" ::: "memory");
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              float4 v[4];
#pragma unroll
              for (int i = 0; i < 4; ++i) v[i] = __ldcg(prev + 256 * (8 * qt + 4 * h + i));
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                const int j = 8 * qt + 4 * h + i;
                d[4 * j] += v[i].x;
                d[4 * j + 1] += v[i].y;
                d[4 * j + 2] += v[i].z;
                d[4 * j + 3] += v[i].w;
              }
            }
          }
          if (!last) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              const int j = 8 * qt + i;
              __stcg(mine + 256 * j,
                     make_float4(d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]));
            }
            __threadfence();
            asm volatile("bar.sync 1, 256;" ::: "memory");
            if (ctid == 0)
              asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flags + 4 * u + qt),
                           "r"(epoch)
                           : "memory");
          } else if (!p.swap) {
            const bool ok0 = r0 < M, ok1 = r0 + 8 < M;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              const int j = 8 * qt + i, col = s0 + 8 * j;
              if (col >= N) continue;
              float* o0 = out + r0 * N + col;
              if (ok0) *reinterpret_cast<float2*>(o0) = make_float2(d[4 * j], d[4 * j + 1]);
              if (ok1)
                *reinterpret_cast<float2*>(o0 + 8LL * N) = make_float2(d[4 * j + 2], d[4 * j + 3]);
            }
          } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              const int j = 8 * qt + i, col = s0 + 8 * j;
              if (col >= M) continue;
              float* o = out + (long long)col * N + r0;
              o[0] = d[4 * j];
              o[8] = d[4 * j + 2];
              if (col + 1 < M) {
                o[N] = d[4 * j + 1];
                o[N + 8] = d[4 * j + 3];
              }
            }
          }
        }
        continue;
      }
      if (!p.swap) {
        const bool ok0 = r0 < M, ok1 = r0 + 8 < M;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          const int col = s0 + 8 * j;
          if (col >= N) continue;
          float* o0 = out + r0 * N + col;
          if (ok0) *reinterpret_cast<float2*>(o0) = make_float2(d[4 * j], d[4 * j + 1]);
          if (ok1)
            *reinterpret_cast<float2*>(o0 + 8LL * N) = make_float2(d[4 * j + 2], d[4 * j + 3]);
        }
      } else {
        // out[s, r] = D[r, s]; r < N always (N % 128 == 0), s < M checked.
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          const int col = s0 + 8 * j;  // token index
          if (col >= M) continue;
          float* o = out + (long long)col * N + r0;
          o[0] = d[4 * j];
          o[8] = d[4 * j + 2];
          if (col + 1 < M) {
            o[N] = d[4 * j + 1];
            o[N + 8] = d[4 * j + 3];
          }
        }
      }
    }
  }
}

#if FP8_SMALL >= 5
// FP8_SMALL = 5: FP8_SMALL = 4 in one launch (a plan of its own: bsmm_fp8_1l alone, which takes
// A and B). bsmm_prep only built the two tensor maps on the FP8 path, yet its launch and the gap
// to the next one cost about 2.7 us of every shape (harness, m = 237 x 4096 x 4096: prep + main
// 26.3 us against main alone 23.6; H200, 2026-12-04). Here warp 0 of each block builds its own
// copy of both maps (its 256-byte slot in `maps` after the flags: no block waits for another)
// while its first unit's first two K groups are being prefetched into L2 (after the harness's
// L2 flush they come from DRAM, so the map build hides under that latency).
// Byte offset of block 0's maps in `maps` (after the ticket counter and 4 flags per block).
__device__ __forceinline__ long long maps1_offset(int ctas) {
  return (260LL + 16LL * ctas + 127) & ~127LL;
}
extern "C" __global__ void __launch_bounds__(384, 1)
    bsmm_fp8_1l(const __nv_fp8_e4m3* __restrict__ A, const float* __restrict__ a_scales,
                const __nv_fp8_e4m3* __restrict__ B, const float* __restrict__ b_scales,
                float* __restrict__ out, unsigned char* ws, unsigned char* maps, int M, int N,
                int K, int ctas) {
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
  // full[STAGES], then empty[STAGES]; + 512: the split-K ticket; + 768: the maps being built
  // (256 bytes, 128-aligned: bars is 1024-aligned; shared_bytes leaves >= 1025 bytes there).
  const unsigned bars = base + STAGES * STAGE_STRIDE, smap = bars + 768;
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127;
  const plan_t p = make_plan(M, N, K, ctas);
  const int units = p.tiles * p.splits;
  unsigned* const ticket_ctr = reinterpret_cast<unsigned*>(maps + 256);
  unsigned* const flags = reinterpret_cast<unsigned*>(maps + 260);
  unsigned char* const gmap = maps + maps1_offset(ctas) + 256LL * blockIdx.x;

  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    // L2 prefetch: rows of the first two K groups of unit blockIdx.x (units <= ctas where K is
    // split, so over the grid these are the first groups of every first unit, whichever ticket
    // a block then draws); one 128-byte line per row and group.
    if ((int)blockIdx.x < units) {
      int tr, ts;
      tile_coords((int)blockIdx.x % p.tiles, p.tiles_r, p.tiles_s, tr, ts);
      const int g0 = ((int)blockIdx.x / p.tiles) * p.gps, g1 = min(p.groups, g0 + p.gps);
      for (int i = lane; i < 512; i += 32) {
        const int g = g0 + (i >> 8), row = i & 127;
        const bool isb = (i >> 7) & 1;
        const long long r = (long long)(isb ? ts * FP8_BN : tr * 128) + row;
        if (g < g1 && r < (isb ? N : M)) {
          const __nv_fp8_e4m3* src = (isb ? B : A) + r * K + 128LL * g;
          asm volatile("prefetch.global.L2 [%0];" ::"l"(src));
        }
      }
    }
    // Both maps as in bsmm_prep's FP8 branch, into this block's slot.
    for (int i = lane; i < 64; i += 32)
      asm volatile("st.shared.u32 [%0], %1;" ::"r"(smap + 4 * i), "r"(0) : "memory");
    __syncwarp();
    if (lane == 0) {
      make_map_smem(smap, A, K, M, 128, 1, 0, 3, 128);
      make_map_smem(smap + 128, B, K, N, FP8_BN, 1, 0, 3, 128);
    }
    __syncwarp();
    asm volatile(
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
        " [%0], [%1], 128;" ::"l"(gmap),
        "r"(smap)
        : "memory");
    asm volatile(
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
        " [%0], [%1], 128;" ::"l"(gmap + 128),
        "r"(smap + 128)
        : "memory");
  }
  if (threadIdx.x == 0) {  // as in bsmm_f16_tma (see there)
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bars + 8 * s, 1);
      mbar_init(bars + 8 * (STAGES + s), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    unsigned tk = blockIdx.x;
    if (p.splits > 1) tk = atomicAdd(ticket_ctr, 1u);
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(bars + 512), "r"(tk) : "memory");
  }
  __syncthreads();
  unsigned ticket;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(ticket) : "r"(bars + 512) : "memory");
  const int u0 = (int)(ticket % gridDim.x);
  const unsigned epoch = ticket / gridDim.x + 1;

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 0) {  // the thread that copied the maps out (lane 0 of warp 0)
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(gmap) : "memory");
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(gmap + 128)
                   : "memory");
      if (p.splits == 1)
        fp8_producer<false>(p, u0, units, M, N, base, bars, gmap);
      else
        fp8_producer<true>(p, u0, units, M, N, base, bars, gmap);
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    if (p.splits == 1)
      fp8_consumer<false>(a_scales, b_scales, out, M, N, p.groups, base, bars, wg - 1, p, u0,
                          epoch, ws, flags);
    else
      fp8_consumer<true>(a_scales, b_scales, out, M, N, p.groups, base, bars, wg - 1, p, u0, epoch,
                         ws, flags);
  }
}
#endif
