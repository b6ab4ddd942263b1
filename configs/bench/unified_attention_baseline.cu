// unified_attention baseline (kopt bench): FlashAttention-2-style paged causal
// prefill attention with GQA on mma.sync tensor cores.
//
// What: sequence i owns query rows [cu[i], cu[i] + len_i) of q and KV
// positions 0..len_i-1, position j in row j % 16 of cache block
// block_table[i, j / 16]; query row r sees keys j <= r (query length = KV
// length); query head h reads KV head h / (hq / hkv); s = q.k / sqrt(d) in
// fp32, softmax in fp32, out = bf16(sum p v).
//
// Launch plan: unified_attention_cu (one block) turns seqused_k into the
// prefix sums cu[] in a workspace (the offsets vLLM passes as cu_seqlens_q),
// then unified_attention_fa2 with grid (hq, q tiles, sequences).
//
// Techniques:
// - One block of 4 warps per (query head, tile of BM query rows, sequence);
//   each warp owns 16 * WM rows (WM = 2 for d <= 128: BM = 128; WM = 1 for
//   d 192 / 256: BM = 64, so the fp32 output accumulator stays at 16 * WM * d
//   / 32 <= 128 registers per thread). Heads are the fastest grid dimension
//   so the hq / hkv heads that share a KV head run side by side (K/V reuse in
//   L2), and q tiles are issued longest first (causal load balance).
// - K and V tiles of BN keys (64 for d <= 80, 32 for d >= 128) streamed through shared
//   memory with cp.async (16-byte chunks, zero-filled past the sequence end),
//   two buffers each: the next tile's loads are issued right after the
//   barrier that publishes the current one, so they overlap its MMAs. The
//   page table is read per 16-byte chunk (the 16-row pages make a 64-key tile
//   4 scattered runs of rows).
// - Rows padded by 16 bytes in shared memory (row stride / 16 odd): the 8
//   row addresses of every ldmatrix phase hit 8 distinct bank groups, for
//   every head size. d = 72 is padded to 80 (k16 steps) with zero columns.
// - S = Q K^T with mma.sync.m16n8k16 bf16 (fp32 accumulate), A and B through
//   ldmatrix.x4; causal masking only on tiles that cross the diagonal or the
//   sequence end, and a warp whose rows all lie before a tile skips it.
// - Online softmax in fp32 on the accumulator fragments (row max and sum over
//   the 4 lanes of a quad by shuffles, exp2 with log2(e)/sqrt(d) folded in).
// - P V with P split into two bf16 terms, hi = bf16(p) and lo = bf16(p - hi),
//   and two MMAs per P V step (hi + lo carries 16 mantissa bits). One bf16
//   P (8 bits, what FlashAttention and vLLM's Triton kernel do) fails the
//   config's tolerance (atol 1e-4, rtol 0.02, every element): outputs near
//   zero get about 1e-3 absolute error. Measured on the H200 (2026-12-02,
//   bench/hopper/unified_attention.py, 256 + 64 checked rows per sequence):
//   one bf16 P fails every workload (up to 33x the tolerance); fp16 P with V
//   converted to fp16 in shared memory (11 bits) still fails every workload
//   but one (1.1x to 3.8x the tolerance, worst on the 256-token batches,
//   whose outputs are largest). The second P V MMA costs about a third more
//   tensor work (three MMAs per key and dim instead of two).
// - Output normalised by the row sum, staged through the warp's own Q rows
//   in shared memory and written as 16-byte stores.
// - d = 128 (the config's default, UA_WGMMA = 2): wgmma, two consumer warpgroups of
//   64 rows per block sharing the K / V tiles (attn_wgmma_d128 below).
// - d = 128, UA_WGMMA = 3 (the config's default since branch uattn2): warp-specialized kernel
//   unified_attention_ws (producer warpgroup, mbarrier ring, two consumer warpgroups, see
//   attn_ws_d128; UA_PINGPONG = 0, the ping-pong measured slower in the harness).
// - UA_LO_SKIP (parameter of the UA_WGMMA = 3 path, default 0 = the bf16 hi + lo products
//   above): 1 converts V to fp16 in shared memory, splits P as fp16 hi + fp16 lo and skips a
//   tile's lo product when its rounding error is statistically negligible for every row of the
//   warpgroup (derivation at attn_ws_d128); 2 is the fp16 path with every lo product kept.
// - UA_PERSIST (parameter of the UA_WGMMA = 3 path, default 0 = one block per work item):
//   1 makes unified_attention_ws persistent (min(132, items) blocks taking items from a counter
//   in the workspace, in the one-item grid's order; Q double-buffered so the producer loads the
//   next item's Q and first K / V tiles while the consumers finish the current one); 2 is 1 up
//   to 1024 tokens and the one-item grid above (see attn_ws_d128). First GPU run (2026-12-03
//   17:34 UTC): both crashed with a misaligned address (the item slots' st.shared.v4, fixed);
//   after the fix (18:21 UTC, with UA_S_RS = 0 on both sides): correct on 23 of 25 workloads
//   (s13, s19 not run), 5-14 % faster on d = 128. With UA_S_RS = 1 (2026-12-04 01:16 UTC):
//   correct on all 25, the config's default since then (figures below).
// - UA_WS_SMALL (default 0 = d 64 / 72 / 80 on the mma.sync path above): 1 runs them on the
//   warp-specialized kernel too (attn_ws_small: d padded to 80 as a 128-byte-swizzled panel plus
//   a 32-byte-swizzled tail panel, 128-key tiles, UA_WS_PP = 1 the consumers' ping-pong), inside
//   unified_attention_ws, from 113 tokens on (the plan's rule); 2 puts it in a kernel of its own,
//   unified_attention_ws_small, which leaves unified_attention_ws's machine code as shipped
//   (candidate plans in bench/hopper/uattn/small: a fourth launch, or the first launch in place of
//   unified_attention_cu, writing the prefix sums itself). Measured (H200, 2026-12-04 01:30 UTC,
//   kopt eval --seeds 1, bench/hopper/uattn/small/NOTES.md): UA_WS_SMALL = 1 with UA_WS_PP = 1
//   correct on s5, s6, s15, s22, s20, s21; s5 1057 against 1540 us, s6 4591 / 6715, s22 4456 /
//   6429, but d = 128 3-5 % slower (s20 891 / 865 us, s21 120.0 / 114.1): ptxas compiles
//   attn_ws_d128 differently beside it. UA_WS_SMALL = 2 in the three-launch plan (the config's
//   since 2026-12-04 02:20 UTC; bench/suite/results/2026-12-04/uasmall/): correct on all 25, 32.5 %
//   of speed of light weighted; same run against the previous default: s5 1058.2 against 1537.5 us,
//   s6 4566 / 6662, s22 4337 / 6372, the others unchanged (s20 821.3 / 821.4, s15 11.1 / 11.5).
// - UA_WS128_BN (parameter of the UA_WGMMA = 3 path, default 64): 128 gives attn_ws_d128 128-key
//   tiles, with P lo through a shared-memory buffer per consumer warpgroup (SS wgmma) so that the
//   registers hold (see attn_ws_d128, bench/hopper/uattn/bn128/NOTES.md). On the H200
//   (2026-12-04 03:48 UTC) correct on the 15 d = 128 workloads run but slower everywhere (s20
//   1003.5 against 826.9 us, s21 130.8 against 105.8, s9 571.4 against 464.1), so not listed.
// - UA_WS_BIG (default 0 = d 192 / 256 on the mma.sync path above, BM = 64): 1 or 2 run them on
//   the warp-specialized kernel unified_attention_ws_big (attn_ws_big: S = Q K^T as SS wgmma,
//   O 64 x d fp32 in registers, 32-key tiles, 4 stages, ping-pong; see there), routed by the
//   candidate plans of bench/hopper/uattn/big (2: three launches, ws_big in place of
//   unified_attention_fa2, unified_attention_ws_small taking every d <= 80 length; 1: a fourth
//   launch). The config's default since 2026-12-04 (2, with UA_WB_SKIP = 1, UA_WB_PP = 1): on
//   the H200 (03:49 UTC, against the previous plan in the same run) s4 117.2 against 121.6 us,
//   s8 81.6 against 86.4, s14 16.9 against 23.6, s24 786.1 against 840.3; s15 (now on
//   unified_attention_ws_small) 12.0 against 11.4; the whole config 25 / 25 correct at 03:56 UTC.
//   64- or 48-key tiles and no ping-pong were slower (bench/hopper/uattn/big/NOTES.md).
// Measured on H200 (2026-12-04, driver 580.159.04, kopt eval --seeds 1, docs/benchmarks.md,
// bench/suite/results/2026-12-04/): the config's default from 01:40 to 02:20 UTC (UA_WGMMA = 3,
// UA_S_RS = 1, UA_PERSIST = 1, UA_HPAIR = 1) is correct on all 25 workloads, 31.7 % of speed of
// light weighted (31.6 % in `kopt kb lint --run` at 01:40 UTC); against UA_HPAIR = 0 in the same
// run: s20 827.7 against 846.6 us, s21 106.6 against 110.8, s9 466.6 against 539.6, s0 128.0
// against 144.9 (the 28 / 4-head shapes have an odd group and run as before). UA_PERSIST = 1
// alone (01:16-01:20 UTC) is correct on all 25 workloads, 30.3 % of speed of light
// weighted; against UA_PERSIST = 0 in the same run s20 844.4 against 857.5 us, s21 110.4
// against 112.5, the 256-token batches 12-16 % faster (s9 542.6 against 624.8 us, s13 5054
// against 5853), the one-item-per-block shapes s3 / s7 / s23 2-8 % slower (12.5 / 36.0 / 16.0
// against 11.6 / 35.3 / 15.1 us). Before (2026-12-03 17:42 UTC), UA_WGMMA = 3 with
// UA_S_RS = 1 and UA_PERSIST = 0: correct on all 25 workloads, 29.0 % of speed of light
// weighted; s20 859 us (38.2 %), s21 113.2 us, against
// 922 and 118.4 us for UA_S_RS = 0 on the same day (UA_S_RS = 0 on 2026-12-02 11:51 UTC:
// correct on all 25, 27.7 % weighted, s20 918 us). The previous default (UA_WGMMA = 2, two
// wgmma warpgroups without a producer) took 1227 us on s20 (22.2 % weighted, 07:19 UTC); the
// mma.sync path 1451 us.
// Head sizes 64, 72, 80, 128, 192, 256; any other head size returns without
// writing (the output check then fails loudly). block_size must be 16.
#include <cuda_bf16.h>

#define THREADS 128
#ifndef UA_BN128
// keys per tile for d = 128 (64 spills with the split P, and was slower than 32 with fp16 P)
#define UA_BN128 32
#endif
#ifndef UA_P_SPLIT
// 1: P as bf16 hi + lo (two P.V MMAs); 0: one bf16 P (ablation: fails the tolerance)
#define UA_P_SPLIT 1
#endif

// The PTX primitives. KOPT_EMU (bench/hopper/emu) replaces them with a CPU
// model of their semantics to run this file's kernels on the host.
#ifndef KOPT_EMU
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void sts128(unsigned addr, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void sts32(unsigned addr, unsigned v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_gpu(int* p, int v) {
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned lds32(unsigned addr) {
  unsigned v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint4 lds128(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
#endif  // KOPT_EMU

__device__ __forceinline__ unsigned pack_bf162(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}

#ifndef UA_PERSIST
// 1: the warp-specialized d = 128 kernel is persistent (grid min(132, work items), items taken
// from a counter in the workspace, see attn_ws_d128); 0: one block per (head, q tile, sequence)
#define UA_PERSIST 0
#endif
#ifndef UA_WS_SMALL
// 1: d 64 / 72 / 80 on the warp-specialized kernel unified_attention_ws (attn_ws_small; the plan
// routes them there from 8 pages on); 2: the same in a kernel of its own,
// unified_attention_ws_small (a fourth launch; unified_attention_ws then keeps its d = 128 code);
// 0: on unified_attention_fa2 (mma.sync)
#define UA_WS_SMALL 0
#endif
#ifndef UA_WS_BIG
// 0 (the macro's default; the config's is 2): d 192 / 256 on unified_attention_fa2 (mma.sync, BM =
// 64); 1 or 2: on the warp-specialized kernel unified_attention_ws_big (attn_ws_big; candidate
// plans in bench/hopper/uattn/big): 1 with unified_attention_fa2 still launched for the short d <=
// 80 sequences (a fourth launch), 2 with unified_attention_ws_small taking every d <= 80 length, so
// the plan keeps three launches (ws_small, ws_big, ws). The default's machine code is the
// shipped one (checked with bench/nvrtc_check.py --hash)
#define UA_WS_BIG 0
#endif
#ifndef UA_WGMMA
// d = 128 on 1: wgmma, one warpgroup of 64 rows per block (attn_wgmma_d128<1>); 2: wgmma,
// two warpgroups of 64 rows sharing each K / V tile (256 threads); 0: the mma.sync path
// (the config parameter)
#define UA_WGMMA 0
#endif
#ifndef UA_LAZY
// 1: the wgmma path rescales O only when a row max of the warp moved
#define UA_LAZY 0
#endif
#ifndef UA_WG_SKIP
// 1: on the two-warpgroup path, the lower warpgroup skips the diagonal tile its rows all
// precede (serialized by ptxas; kept to reproduce the measured version)
#define UA_WG_SKIP 0
#endif
#ifndef UA_PROBE
// time-only probes of the wgmma path (wrong results): bit 1 no K / V loads after the first
// tiles, 2 no exp2, 4 no wgmma in the loop, 8 no barriers in the loop
#define UA_PROBE 0
#endif
#ifndef UA_V_SWAP
// 1 swaps the two strides of V's MN-major descriptor (a probe: vlbo / vsbo in attn_wgmma_d128)
#define UA_V_SWAP 0
#endif

// Shared-memory matrix descriptor with 128-byte swizzle; lbo / sbo in bytes.
// K-major (Q, K): rows of 128 bytes (64 bf16 of the reduction dim), 8-row
// groups 1024 bytes apart (SBO), LBO unused; base 1024-aligned.
__device__ __forceinline__ unsigned long long desc_sw128(unsigned addr, unsigned lbo,
                                                         unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
#ifndef KOPT_EMU
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins registers at this point of the program (after a wgmma wait, before the
// next use), so the compiler cannot move their reads or writes across it.
template <int R>
__device__ __forceinline__ void fence_regs(float* d) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R>
__device__ __forceinline__ void fence_uregs(unsigned* d) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(d[i])::"memory");
}
template <int R>
__device__ __forceinline__ void fence_desc(unsigned long long* d) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+l"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// wgmma with A from registers (the mma.sync A fragment layout per warp).
// S = Q K^T: B = K tile, K-major. O += P V: B = V tile read MN-major
// (imm-trans-b = 1), so V is copied into shared memory in the same swizzled
// row layout as K and never transposed.
__device__ __forceinline__ void wgmma_m64n64k16_rs(float* d, const unsigned (&a)[4],
                                                   unsigned long long db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n128k16_rs_t(float* d, const unsigned (&a)[4],
                                                      unsigned long long db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
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
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
#endif  // KOPT_EMU

// The prefix sums of seqused_k: cu[i] = sum_{k < i} seqused_k[k], cu[n] = total.
// One block of 1024 threads: each thread sums a contiguous run, then a
// Hillis-Steele scan of the 1024 partial sums in shared memory.
extern "C" __global__ void __launch_bounds__(1024)
    unified_attention_cu(const int* __restrict__ seqused_k, int* __restrict__ cu, int num_seqs) {
  __shared__ int part[1024];
  const int t = threadIdx.x;
#if UA_PERSIST   // the workspace is [work counter, num_seqs, finished blocks, 0, cu...]
  if (t == 0) {  // (attn_ws_d128)
    cu[0] = 0;
    cu[1] = num_seqs;
    cu[2] = 0;
    cu[3] = 0;
  }
  cu += 4;
#endif
  const int per = (num_seqs + 1023) / 1024;
  const int b = t * per, e = min(num_seqs, b + per);
  int s = 0;
  for (int i = b; i < e; ++i) s += seqused_k[i];
  part[t] = s;
  __syncthreads();
  for (int off = 1; off < 1024; off *= 2) {
    const int v = t >= off ? part[t - off] : 0;
    __syncthreads();
    part[t] += v;
    __syncthreads();
  }
  int run = t == 0 ? 0 : part[t - 1];
  for (int i = b; i < e; ++i) {
    cu[i] = run;
    run += seqused_k[i];
  }
  if (t == 1023) cu[num_seqs] = part[1023];
}

// The mma.sync path. Sequence blockIdx.z has len queries at rows qs .. of q
// and out; PAGED: its keys through the block table (16-row pages of
// [blocks, 16, hkv, D] caches), else dense rows qs + j of [tokens, hkv, D];
// CAUSAL: key j <= query r, else every key; SPLIT: P as bf16 hi + lo.
template <int D, int DP, int WM, int BN, bool PAGED, bool CAUSAL, bool SPLIT>
__device__ __forceinline__ void attn_tile(const __nv_bfloat16* __restrict__ q,
                                          const __nv_bfloat16* __restrict__ k_cache,
                                          const __nv_bfloat16* __restrict__ v_cache,
                                          const int* __restrict__ block_table,
                                          __nv_bfloat16* __restrict__ out, int len, long long qs,
                                          int hq, int hkv, int max_blocks, unsigned char* smem) {
  constexpr int BM = 64 * WM;      // query rows per block
  constexpr int RS = DP * 2 + 16;  // shared-memory row stride in bytes
  constexpr int CH = D / 8;        // 16-byte chunks of a real row
  constexpr int CHP = DP / 8;      // ... of a padded row
  constexpr int NT = BN / 8;       // n8 tiles of S
  constexpr int DT = DP / 8;       // n8 tiles of O
  const int h = blockIdx.x, seq = blockIdx.z;
  const int qt = gridDim.y - 1 - blockIdx.y;  // longest tiles first
  const int r0 = qt * BM;
  if (r0 >= len) return;  // uniform across the block
  const int hk = h / (hq / hkv);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const unsigned sQ = smem_u32(smem);
  const unsigned sK = sQ + BM * RS;
  const unsigned sV = sK + 2 * BN * RS;

  if (CHP > CH) {  // zero the pad columns (d 72 -> 80) once: cp.async never writes them
    for (int row = tid; row < BM + 4 * BN; row += THREADS)
#pragma unroll
      for (int c = CH; c < CHP; ++c) sts128(sQ + row * RS + c * 16, make_uint4(0u, 0u, 0u, 0u));
  }
  // Q tile
  for (int c = tid; c < BM * CH; c += THREADS) {
    const int row = c / CH, ch = c % CH, r = r0 + row;
    const bool ok = r < len;
    const __nv_bfloat16* src = ok ? q + ((qs + r) * hq + h) * D + ch * 8 : q;
    cp_async16(sQ + row * RS + ch * 16, src, ok ? 16 : 0);
  }
  const long long bt_row = static_cast<long long>(seq) * max_blocks;
  auto load_kv = [&](int t, int b) {
    const unsigned dK = sK + b * BN * RS, dV = sV + b * BN * RS;
#pragma unroll
    for (int i = 0; i < (BN * CH + THREADS - 1) / THREADS; ++i) {
      const int c = tid + i * THREADS;
      if ((BN * CH) % THREADS != 0 && c >= BN * CH) break;
      const int row = c / CH, ch = c % CH, j = t * BN + row;
      const bool ok = j < len;
      long long off = 0;
      if (ok) {
        if (PAGED) {
          const long long phys = block_table[bt_row + (j >> 4)];
          off = ((phys * 16 + (j & 15)) * hkv + hk) * D + ch * 8;
        } else {
          off = ((qs + j) * hkv + hk) * D + ch * 8;
        }
      }
      cp_async16(dK + row * RS + ch * 16, k_cache + off, ok ? 16 : 0);
      cp_async16(dV + row * RS + ch * 16, v_cache + off, ok ? 16 : 0);
    }
  };
  const int kend = CAUSAL ? min(len, r0 + BM) : len;  // keys this block needs
  const int ntiles = (kend + BN - 1) / BN;
  load_kv(0, 0);
  cp_async_commit();

  const int wr0 = warp * 16 * WM;  // the warp's first row in the tile
  const int wrow_lo = r0 + wr0;    // its first query row
  const int wrow_hi = wrow_lo + 16 * WM - 1;
  const float sl2 = 1.4426950408889634f * rsqrtf(static_cast<float>(D));
  const int g = lane >> 2, tig = lane & 3;

  float o[WM][DT][4];
  float m[WM][2], l[WM][2];
#pragma unroll
  for (int mi = 0; mi < WM; ++mi) {
#pragma unroll
    for (int d = 0; d < DT; ++d) o[mi][d][0] = o[mi][d][1] = o[mi][d][2] = o[mi][d][3] = 0.f;
    m[mi][0] = m[mi][1] = -__int_as_float(0x7f800000);
    l[mi][0] = l[mi][1] = 0.f;
  }

  for (int t = 0; t < ntiles; ++t) {
    const int b = t & 1;
    cp_async_wait_all();
    __syncthreads();  // tile t (and Q) visible to all; buffer b ^ 1 free
    if (t + 1 < ntiles) load_kv(t + 1, b ^ 1);
    cp_async_commit();
    const int t0 = t * BN;
    if (CAUSAL && t0 > wrow_hi) continue;  // every key of the tile is after every row of this warp
    const unsigned sKb = sK + b * BN * RS, sVb = sV + b * BN * RS;

    float s[WM][NT][4];
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
#pragma unroll
      for (int n = 0; n < NT; ++n) s[mi][n][0] = s[mi][n][1] = s[mi][n][2] = s[mi][n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
      unsigned a[WM][4];
#pragma unroll
      for (int mi = 0; mi < WM; ++mi)
        ldsm_x4(sQ + (wr0 + mi * 16 + (lane & 15)) * RS + (kk * 2 + (lane >> 4)) * 16, a[mi]);
#pragma unroll
      for (int nj = 0; nj < BN / 16; ++nj) {
        unsigned bb[4];
        ldsm_x4(sKb + (nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * RS +
                    (kk * 2 + ((lane >> 3) & 1)) * 16,
                bb);
#pragma unroll
        for (int mi = 0; mi < WM; ++mi) {
          mma_bf16(s[mi][2 * nj], a[mi], bb[0], bb[1]);
          mma_bf16(s[mi][2 * nj + 1], a[mi], bb[2], bb[3]);
        }
      }
    }
    if ((CAUSAL && t0 + BN - 1 > wrow_lo) ||
        t0 + BN > len) {  // the tile crosses the diagonal or the end
#pragma unroll
      for (int mi = 0; mi < WM; ++mi)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = wrow_lo + mi * 16 + g + (e >> 1) * 8;
            const int j = t0 + n * 8 + 2 * tig + (e & 1);
            if ((CAUSAL && j > r) || j >= len) s[mi][n][e] = -__int_as_float(0x7f800000);
          }
    }
    unsigned p[WM][NT][2], plo[WM][NT][2];
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float mx = m[mi][hf];
#pragma unroll
        for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[mi][n][2 * hf], s[mi][n][2 * hf + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float corr = fast_exp2((m[mi][hf] - mx) * sl2);
        m[mi][hf] = mx;
        const float moff = mx * sl2;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          const float p0 = fast_exp2(fmaf(s[mi][n][2 * hf], sl2, -moff));
          const float p1 = fast_exp2(fmaf(s[mi][n][2 * hf + 1], sl2, -moff));
          sum += p0 + p1;
          const unsigned hi = pack_bf162(p0, p1);
          p[mi][n][hf] = hi;
          if (SPLIT)  // the rounding error of hi, itself rounded to bf16: hi + lo carries 16 bits
            plo[mi][n][hf] =
                pack_bf162(p0 - __uint_as_float(hi << 16), p1 - __uint_as_float(hi & 0xffff0000u));
        }
        l[mi][hf] = l[mi][hf] * corr + sum;
#pragma unroll
        for (int d = 0; d < DT; ++d) {
          o[mi][d][2 * hf] *= corr;
          o[mi][d][2 * hf + 1] *= corr;
        }
      }
#pragma unroll
    for (int kj = 0; kj < BN / 16; ++kj) {
      unsigned a[WM][4], al[WM][4];
#pragma unroll
      for (int mi = 0; mi < WM; ++mi) {
        a[mi][0] = p[mi][2 * kj][0];
        a[mi][1] = p[mi][2 * kj][1];
        a[mi][2] = p[mi][2 * kj + 1][0];
        a[mi][3] = p[mi][2 * kj + 1][1];
        if (SPLIT) {
          al[mi][0] = plo[mi][2 * kj][0];
          al[mi][1] = plo[mi][2 * kj][1];
          al[mi][2] = plo[mi][2 * kj + 1][0];
          al[mi][3] = plo[mi][2 * kj + 1][1];
        }
      }
#pragma unroll
      for (int dj = 0; dj < DP / 16; ++dj) {
        unsigned bb[4];
        ldsm_x4_t(sVb + (kj * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)) * RS +
                      (dj * 2 + (lane >> 4)) * 16,
                  bb);
#pragma unroll
        for (int mi = 0; mi < WM; ++mi) {
          if (SPLIT) {
            mma_bf16(o[mi][2 * dj], al[mi], bb[0], bb[1]);
            mma_bf16(o[mi][2 * dj + 1], al[mi], bb[2], bb[3]);
          }
          mma_bf16(o[mi][2 * dj], a[mi], bb[0], bb[1]);
          mma_bf16(o[mi][2 * dj + 1], a[mi], bb[2], bb[3]);
        }
      }
    }
  }

  // Normalise, stage the bf16 rows in the warp's own Q rows, store 16-byte chunks.
#pragma unroll
  for (int mi = 0; mi < WM; ++mi)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float sum = l[mi][hf];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.f / sum;
      const unsigned rowa = sQ + (wr0 + mi * 16 + g + hf * 8) * RS + tig * 4;
#pragma unroll
      for (int d = 0; d < DT; ++d) {
        __nv_bfloat162 v =
            __floats2bfloat162_rn(o[mi][d][2 * hf] * inv, o[mi][d][2 * hf + 1] * inv);
        sts32(rowa + d * 16, *reinterpret_cast<unsigned*>(&v));
      }
    }
  __syncwarp();
  for (int c = lane; c < 16 * WM * CH; c += 32) {
    const int row = c / CH, ch = c % CH, r = wrow_lo + row;
    if (r >= len) continue;
    const uint4 v = lds128(sQ + (wr0 + row) * RS + ch * 16);
    *reinterpret_cast<uint4*>(out + ((qs + r) * hq + h) * D + ch * 8) = v;
  }
}

// d = 128 on wgmma: NWG consumer warpgroups (4 warps each) per (query head,
// 64 NWG query rows, sequence), sharing the K / V tiles; warp w owns rows
// 16w .. 16w + 15 (warpgroup w / 4 issues the wgmma of rows 64 (w / 4) ..).
// Q is read once into registers (ldmatrix, the A fragments of all 8 k16
// steps). K and V tiles of 64 keys, two buffers each, in two 64-column panels
// of 64 rows x 128 bytes, 16-byte chunk c of row r at chunk c ^ (r % 8) (the
// 128-byte swizzle both descriptors read). Per tile t: S_t = Q K_t^T (8 wgmma
// m64n64k16), then, while the softmax of tile t runs, O += P_{t-1} V_{t-1}
// (8 wgmma m64n128k16: hi and lo halves of P over 4 k16 steps) is still in
// flight; O is rescaled by exp(m_{t-1} - m_t) once that group has completed.
template <int NWG>
__device__ __forceinline__ void attn_wgmma_d128(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
    const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ seqused_k,
    const int* __restrict__ block_table, __nv_bfloat16* __restrict__ out,
    const int* __restrict__ cu, int hq, int hkv, int max_blocks, unsigned char* smem) {
  constexpr int D = 128, BM = 64 * NWG, BN = 64, RS = D * 2 + 16, CH = D / 8;
  constexpr int NT = 128 * NWG;    // threads
  constexpr int RPI = NT / 16;     // tile rows one load pass covers
  constexpr int TB = BN * D * 2;   // bytes of one K or V tile
  constexpr int PANEL = BN * 128;  // bytes of one 64-column panel of a tile
  const int h = blockIdx.x, seq = blockIdx.z;
  const int qt = gridDim.y - 1 - blockIdx.y;  // longest tiles first
  const int len = seqused_k[seq];
  const int r0 = qt * BM;
  if (r0 >= len) return;
  const long long qs = cu[seq];
  const int hk = h / (hq / hkv);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tig = lane & 3;
  const unsigned sQ = smem_u32(smem);
  const unsigned sT = (sQ + BM * RS + 1023u) & ~1023u;  // K0, K1, V0, V1 (the plan adds 1 KiB)
  const long long bt_row = static_cast<long long>(seq) * max_blocks;

  for (int c = tid; c < BM * CH; c += NT) {
    const int row = c / CH, ch = c % CH, r = r0 + row;
    const bool ok = r < len;
    cp_async16(sQ + row * RS + ch * 16, ok ? q + ((qs + r) * hq + h) * D + ch * 8 : q, ok ? 16 : 0);
  }
  // Thread t copies chunk t % 16 (dims 8 (t % 16) ..) of rows t / 16 + RPI i: its
  // swizzled position depends on the row only through r % 8 = (t / 16) % 8.
  const int cc = tid & 15, rr = tid >> 4;
  const unsigned dst_off = (cc >> 3) * PANEL + rr * 128 + (((cc & 7) ^ (rr & 7)) << 4);
  auto load_tile = [&](const __nv_bfloat16* __restrict__ cache, int t, unsigned dst) {
#pragma unroll
    for (int i = 0; i < BN / RPI; ++i) {
      const int j = t * BN + rr + RPI * i;
      const bool ok = j < len;
      long long off = 0;
      if (ok) {
        const long long phys = block_table[bt_row + (j >> 4)];
        off = ((phys * 16 + (j & 15)) * hkv + hk) * D + cc * 8;
      }
      cp_async16(dst + dst_off + i * RPI * 128, cache + off, ok ? 16 : 0);
    }
  };
  const int kend = min(len, r0 + BM);
  const int ntiles = (kend + BN - 1) / BN;
#if UA_WG_SKIP
  // key tiles this warpgroup needs; 0 for the upper warpgroup of a last tile that
  // ends in its lower half (it then only keeps the block's barriers)
  const int wgr0 = r0 + 64 * (warp >> 2);  // the warpgroup's first row
  const int wnt = wgr0 < len ? (min(len, wgr0 + 64) + BN - 1) / BN : 0;
#else
  const int wnt = ntiles;
#endif
  load_tile(k_cache, 0, sT);
  load_tile(v_cache, 0, sT + 2 * TB);
  cp_async_commit();  // Q, K_0, V_0
  if (ntiles > 1) load_tile(k_cache, 1, sT + TB);
  cp_async_commit();  // K_1
  cp_async_wait<1>();
  fence_proxy_async();
  __syncthreads();

  unsigned qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    ldsm_x4(sQ + (16 * warp + (lane & 15)) * RS + (kk * 2 + (lane >> 4)) * 16, qf[kk]);

  const int wrow_lo = r0 + 16 * warp;
  const float sl2 = 1.4426950408889634f * rsqrtf(static_cast<float>(D));
  float o[D / 2], sacc[BN / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) sacc[i] = 0.f;
  float m[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)}, l[2] = {0.f, 0.f};
  unsigned ph[BN / 16][4], pl[BN / 16][4];  // P_{t-1} (in flight in the P V group)
#pragma unroll
  for (int kj = 0; kj < BN / 16; ++kj)
#pragma unroll
    for (int e = 0; e < 4; ++e) ph[kj][e] = pl[kj][e] = 0u;
  const unsigned vlbo = UA_V_SWAP ? 1024u : static_cast<unsigned>(PANEL);
  const unsigned vsbo = UA_V_SWAP ? static_cast<unsigned>(PANEL) : 1024u;

  for (int t = 0; t < ntiles; ++t) {
    const int b = t & 1;
    if (t > 0) {
      cp_async_wait<1>();  // K_t and V_{t-1} have landed (V_t may still be in flight)
      fence_proxy_async();
      if (!(UA_PROBE & 8)) __syncthreads();
      if (!(UA_PROBE & 1) && t + 1 < ntiles)
        load_tile(k_cache, t + 1, sT + (b ^ 1) * TB);  // K_{t-1}'s buffer
      cp_async_commit();
    }
    // By default every warpgroup runs every tile of the block, the lower one also the
    // diagonal tile that its rows all precede (fully masked: P = 0). UA_WG_SKIP=1 skips
    // it, a branch on the warp index around wgmma, which ptxas serializes (C7520: every
    // wgmma waited for); that is the version measured on the H200 on 2026-12-02.
    const bool do_s = t < wnt;
    const bool do_pv = t > 0 && t <= wnt;
    if (do_s || do_pv) {
      fence_regs<D / 2>(o);
      fence_regs<BN / 2>(sacc);
      fence_uregs<BN / 4>(&ph[0][0]);
      fence_uregs<BN / 4>(&pl[0][0]);
      wgmma_fence();
    }
    if (do_s && !(UA_PROBE & 4)) {
      const unsigned long long dk = desc_sw128(sT + b * TB, 16, 1024);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        wgmma_m64n64k16_rs(sacc, qf[kk], dk + (kk >> 2) * (PANEL >> 4) + 2 * (kk & 3), kk > 0);
      wgmma_commit();
    }
    if (do_pv && !(UA_PROBE & 4)) {
      if (do_s) wgmma_fence();
      const unsigned long long dv = desc_sw128(sT + (2 + (b ^ 1)) * TB, vlbo, vsbo);
#pragma unroll
      for (int kj = 0; kj < BN / 16; ++kj) {
        if (UA_P_SPLIT) wgmma_m64n128k16_rs_t(o, pl[kj], dv + kj * (2048 >> 4), 1);
        wgmma_m64n128k16_rs_t(o, ph[kj], dv + kj * (2048 >> 4), 1);
      }
      wgmma_commit();
    }
    if (do_s) {
      if (do_pv)
        wgmma_wait<1>();
      else
        wgmma_wait<0>();
      fence_regs<BN / 2>(sacc);

      const int t0 = t * BN;
      if (t0 + BN - 1 > wrow_lo || t0 + BN > len) {
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = wrow_lo + g + (e >> 1) * 8;
            const int j = t0 + n * 8 + 2 * tig + (e & 1);
            if (j > r || j >= len) sacc[4 * n + e] = -__int_as_float(0x7f800000);
          }
      }
      unsigned nh[BN / 16][4], nl[BN / 16][4];
      float corr[2];
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float mx = m[hf];
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
          mx = fmaxf(mx, fmaxf(sacc[4 * n + 2 * hf], sacc[4 * n + 2 * hf + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        corr[hf] = fast_exp2((m[hf] - mx) * sl2);
        m[hf] = mx;
        const float moff = mx * sl2;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < BN / 8; ++n) {
          float p0 = fmaf(sacc[4 * n + 2 * hf], sl2, -moff);
          float p1 = fmaf(sacc[4 * n + 2 * hf + 1], sl2, -moff);
          if (!(UA_PROBE & 2)) p0 = fast_exp2(p0), p1 = fast_exp2(p1);
          sum += p0 + p1;
          const unsigned hi = pack_bf162(p0, p1);
          // n8 tile n, row half hf -> A fragment register (n & 1) * 2 + hf of k16 step n / 2
          nh[n >> 1][(n & 1) * 2 + hf] = hi;
          nl[n >> 1][(n & 1) * 2 + hf] =
              pack_bf162(p0 - __uint_as_float(hi << 16), p1 - __uint_as_float(hi & 0xffff0000u));
        }
        l[hf] = l[hf] * corr[hf] + sum;
      }
      wgmma_wait<0>();  // P_{t-1} V_{t-1} done
      fence_regs<D / 2>(o);
      fence_uregs<BN / 4>(&ph[0][0]);  // P_{t-1} stays live (read by the async MMAs) until here
      fence_uregs<BN / 4>(&pl[0][0]);
      // UA_LAZY: skip the rescale when no row max of the warp moved (most tiles of a
      // long row); the branch is warp-uniform
      if (!UA_LAZY || __any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
        for (int d = 0; d < D / 8; ++d) {
          o[4 * d] *= corr[0];
          o[4 * d + 1] *= corr[0];
          o[4 * d + 2] *= corr[1];
          o[4 * d + 3] *= corr[1];
        }
      }
#pragma unroll
      for (int kj = 0; kj < BN / 16; ++kj)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          ph[kj][e] = nh[kj][e];
          pl[kj][e] = nl[kj][e];
        }
    } else if (do_pv) {
      wgmma_wait<0>();  // the warpgroup's last P V (its rows end before tile t)
      fence_regs<D / 2>(o);
      fence_uregs<BN / 4>(&ph[0][0]);
      fence_uregs<BN / 4>(&pl[0][0]);
    }
    if (!(UA_PROBE & 8))
      __syncthreads();  // every warp's P_{t-1} V_{t-1} is done: V_{t-1}'s buffer is free
    if (!(UA_PROBE & 1) && t + 1 < ntiles) load_tile(v_cache, t + 1, sT + (2 + (b ^ 1)) * TB);
    cp_async_commit();
  }
  // The last P V (of the warpgroups that need the block's last tile).
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();
  if (wnt == ntiles) {
    fence_regs<D / 2>(o);
    fence_uregs<BN / 4>(&ph[0][0]);
    fence_uregs<BN / 4>(&pl[0][0]);
    wgmma_fence();
    {
      const unsigned long long dv = desc_sw128(sT + (2 + ((ntiles - 1) & 1)) * TB, vlbo, vsbo);
#pragma unroll
      for (int kj = 0; kj < BN / 16; ++kj) {
        if (UA_P_SPLIT) wgmma_m64n128k16_rs_t(o, pl[kj], dv + kj * (2048 >> 4), 1);
        wgmma_m64n128k16_rs_t(o, ph[kj], dv + kj * (2048 >> 4), 1);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs<D / 2>(o);
  }

  if (wnt == 0) return;  // no rows of this warpgroup exist (after the block's last barrier)
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float sum = l[hf];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.f / sum;
    const unsigned rowa = sQ + (16 * warp + g + hf * 8) * RS + tig * 4;
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
      __nv_bfloat162 v =
          __floats2bfloat162_rn(o[4 * d + 2 * hf] * inv, o[4 * d + 2 * hf + 1] * inv);
      sts32(rowa + d * 16, *reinterpret_cast<unsigned*>(&v));
    }
  }
  __syncwarp();
  for (int c = lane; c < 16 * CH; c += 32) {
    const int row = c / CH, ch = c % CH, r = wrow_lo + row;
    if (r >= len) continue;
    const uint4 v = lds128(sQ + (16 * warp + row) * RS + ch * 16);
    *reinterpret_cast<uint4*>(out + ((qs + r) * hq + h) * D + ch * 8) = v;
  }
}

// ------------------------------------------------------------------------------------------
// d = 128, warp-specialized (UA_WGMMA = 3, kernel unified_attention_ws, 384 threads): warpgroup
// 0 is a producer that only copies (Q once, then K_t and V_t into a ring of UA_NS stages,
// cp.async completing on mbarriers), warpgroups 1 and 2 consume 64 query rows each. No
// block-wide barrier in the main loop: a stage is full when its mbarrier has seen the 128
// producer threads' cp.async arrivals, and free again when the 8 consumer warps have arrived on
// its empty mbarrier (after their P V of that tile completed). setmaxnreg moves registers from
// the producer (40) to the consumers (232). S = Q K^T reads Q from shared memory (SS wgmma, Q in
// the K tiles' swizzled layout), so the consumers keep no Q fragments. UA_PINGPONG = 1: the
// two consumer warpgroups take turns issuing their wgmma (named barriers 1 and 2, FA3's
// ping-pong), so one warpgroup's softmax runs while the other's MMAs occupy the tensor cores.
//
// UA_LO_SKIP = 1 (fp16 P V with an adaptive lo product):
// - The producer commits K_t, V_t as one cp.async group; after issuing tile t it waits for group
//   t - 1, converts the 8 chunks of V_{t-1} it copied itself from bf16 to fp16 in place (exact
//   for 2^-14 <= |v| <= 65504, which covers V ~ N(0, 1) bf16; smaller values keep 2^-24
//   absolute), fences the stores for the async proxy and arrives on the stage's V barrier.
// - P = hi + lo with hi = fp16(p), lo = fp16(p - hi) (about 22 bits, more than bf16 hi + lo's
//   16). Alone, fp16 hi failed the tolerance by 1.1x to 3.8x (header), so lo is kept where it
//   matters: rows with few effective keys, whose outputs are small while single p v are O(1).
// - Error model: rounding p in [2^e, 2^(e+1)) to fp16 errs uniformly within +-2^(e-11), so
//   the error has variance <= p^2 2^-22 / 3, independent across keys. Dropping lo on a set of
//   keys gives output element (r, d) the error sum_j (hi_j - p_j) v_jd / l with standard
//   deviation sigma <= 2^-11 / sqrt(3) * VB * sqrt(E2) / l, where E2 = sum of p_j^2 over those
//   keys, l = the row's softmax sum and |v| <= VB. sigma <= TAU holds when E2 * C <= l^2 with
//   C = (2^-11 VB / (sqrt(3) TAU))^2; UA_LO_VB = 4, UA_LO_TAU = 2.5e-5 (atol / 4): C = 2035.
//   E2 and l are kept per row in the scale of the running max (both rescaled when it moves: l
//   by corr, E2 by corr^2); after the decision l only grows, so the final sigma stays <= TAU.
//   VB = 4 bounds the p^2-weighted RMS of v, about 1 for N(0, 1) values (a skip needs
//   l >= 45 sqrt(E2), so many keys share the weight): the actual sigma is about TAU / 4 =
//   atol / 16, so an element needs a deviation of about 16 sigma to fail. p < 2^-14 (fp16
//   subnormal) errs by <= 2^-25 absolute instead, at most 2^-25 VB sqrt(n / 3) / l <= 6e-6
//   for n <= 6294 keys.
// - Per tile each consumer thread sums p^2 (one FFMA per element) and quad-reduces sum p and
//   sum p^2 (l and E2 are then whole-row values); the warpgroup votes with bar.red.and.pred on
//   named barrier 5 + wg (1, 2 are the ping-pong's, 3, 4 the epilogue's): skip when every row
//   meets (E2 + sum_tile p^2) * C <= l_after_tile^2 (rows past the sequence end vote yes). The
//   vote's result goes through __all_sync so ptxas sees a warp-uniform branch (a branch on the
//   bar.red result alone made it serialize the loop's wgmma, C7520; a guard predicate on the
//   wgmma did too). A skip adds the tile's sum p^2 to E2 and omits lo's conversion and its
//   four wgmma. Fully masked tiles (the diagonal tile of the lower warpgroup) always skip.
//
// UA_PERSIST = 1 (persistent blocks; 2: the same kernel, the plan gives it the one-item grid
// above 1024 tokens and the kernel then takes blockIdx's item without the counter):
// - Work item i = (head i % hq, q tile ny - 1 - (i / hq) % ny, sequence i / (hq ny)), the order
//   in which the hardware issues the one-item grid (heads fastest, longest q tiles first), taken
//   dynamically: producer thread 0 atomically increments the workspace's counter (skipping items
//   whose q tile lies past their sequence's end), decodes the item and stores {h, hk, r0, seq}
//   in the slot of Q buffer it % 2 (h = -1: no more work); a named barrier (7) hands it to the
//   producer warpgroup, the Q buffer's full mbarrier (129 arrivals: 128 cp.async + thread 0's
//   plain release arrive after the slot's store) to the consumers.
// - Q double-buffered (2 x 32 KiB, 160 KiB of shared memory in all): the producer refills
//   buffer b only after its empty mbarrier saw the 8 consumer warps once the previous item in b
//   was written out (the output is still staged in the item's own Q region, which the producer
//   does not touch until then). Stage and phase of the K / V ring run on across items (one tile
//   counter in producer and consumers); the consumers also release each item's last stage.
// - The last block to finish (a second counter) zeroes both counters, so a launch without
//   unified_attention_cu before it still starts at 0; unified_attention_cu also zeroes them.
// - The producer keeps its 40 registers: no integer division in its loop (thread 0 decodes),
//   one block-table load per two rows of a tile (32-bit cache rows).
//
// UA_HPAIR = 1 (head pairs; UA_PERSIST = 1, and only where hq / hkv is even, else as above):
// - Why: with 128 rows of one head, warpgroup 0's rows end 64 before the item's last key tile,
//   so it computes that tile fully masked (P = 0), and the diagonal tiles of both warpgroups
//   are half masked: on a 256-token sequence the items compute 12 warpgroup-tiles (64 rows x 64
//   keys) per head where the causal triangle needs about 8. With items of 64 rows of heads h and
//   h + 1 (the same KV head, so one K / V stream still serves both warpgroups), both warpgroups
//   see the same rows, stop at the same tile, and a head takes 10 warpgroup-tiles (s20, 6294
//   tokens: 5100 against 4950, 3 % less).
// - Item i = (head pair i % (hq / 2), 64-row q tile ny - 1 - (i / (hq / 2)) % ny, sequence):
//   pairs fastest, so the pairs of one KV head run side by side as the heads did; the slot's h
//   is the pair's first head; Q row i of the block is row r0 + i % 64 of head h + i / 64.
#ifndef UA_HPAIR
// 1 (with UA_PERSIST = 1; the config's default since 2026-12-04): where hq / hkv is even, a work
// item is 64 query rows of two heads that
// share a KV head (warpgroup w takes head h + w) instead of 128 rows of one head, see
// attn_ws_d128; 0: 128 rows of one head (warpgroup w takes rows 64 w ..)
#define UA_HPAIR 0
#endif
#if UA_HPAIR && UA_PERSIST != 1
#error "UA_HPAIR needs UA_PERSIST = 1 (the items come from the persistent blocks' counter)"
#endif
#ifndef UA_WS128_BN
// keys per tile of attn_ws_d128. 128 (bench/hopper/uattn/bn128/NOTES.md): P hi stays in
// registers, P lo goes through a 16 KiB shared-memory buffer per consumer warpgroup and its P V
// product is an SS wgmma, which frees the registers a 128-key hi + lo tile would need; the ring
// is 2 stages of 64 KiB whose K and V halves are released separately (K_t once S_t completes),
// so K stays one tile ahead as with 3 stages of 64 keys
#define UA_WS128_BN 64
#endif
#if UA_WS128_BN != 64 && UA_WS128_BN != 128
#error "UA_WS128_BN: 64 or 128"
#endif
#ifndef UA_NS
// K / V ring stages of the warp-specialized path (2 x 16 KiB each; 2 x 32 KiB at UA_WS128_BN 128)
#define UA_NS (UA_WS128_BN == 128 ? 2 : 3)
#endif
#ifndef UA_PINGPONG
#define UA_PINGPONG 0
#endif
#if UA_PERSIST && UA_PINGPONG
#error "UA_PERSIST: the ping-pong's named-barrier turns do not carry across work items"
#endif
#ifndef UA_LO_SKIP
// 0: P V in bf16 with P = hi + lo (two products per tile); 1: V converted to fp16 by the producer,
// P = fp16 hi + fp16 lo, and the lo product skipped adaptively (see attn_ws_d128); 2: the fp16
// path with every lo product kept (ablation)
#define UA_LO_SKIP 0
#endif
#ifndef UA_S_RS
// 1: S = Q K^T with Q from registers (RS wgmma, 32 registers of Q fragments loaded once by
// ldmatrix) instead of from shared memory (SS): half the shared-memory reads of S
#define UA_S_RS 0
#endif
#ifndef UA_LO_VB
// UA_LO_SKIP's assumed bound on |v| in the error estimate (an integer)
#define UA_LO_VB 4
#endif
#ifndef UA_LO_TAU
// UA_LO_SKIP's target for the standard deviation of a skipped lo's error in one output (atol / 4)
#define UA_LO_TAU 2.5e-5f
#endif
#if UA_WS128_BN == 128 && (UA_PERSIST != 1 || UA_LO_SKIP != 0 || UA_S_RS != 1 || UA_PINGPONG)
#error "UA_WS128_BN = 128 needs UA_PERSIST = 1, UA_LO_SKIP = 0, UA_S_RS = 1, UA_PINGPONG = 0"
#endif

#ifndef KOPT_EMU
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Arrives on bar when pred is set: a predicated instruction, not a branch (a branch around it
// made ptxas serialize the wgmma of the loop, C7513).
__device__ __forceinline__ void mbar_arrive_if(unsigned bar, bool pred) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::
          "r"(bar),
      "r"(static_cast<int>(pred))
      : "memory");
}
// Arrives on bar once every cp.async this thread issued before has landed (the barrier's
// expected count covers these arrivals: .noinc).
__device__ __forceinline__ void cp_async_mbar_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bar_sync_n(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive_n(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive_if(int id, int n, bool pred) {  // predicated, no branch
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p bar.arrive %0, %1;\n}\n" ::"r"(id),
               "r"(n), "r"(static_cast<int>(pred))
               : "memory");
}
// bar.red.and over the n threads of named barrier id: true when v is true in every one of them.
__device__ __forceinline__ bool bar_red_and(int id, int n, bool v) {
  unsigned r;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.b32 q, %3, 0;\nbar.red.and.pred p, %1, %2, q;\n"
      "selp.b32 %0, 1, 0, p;\n}\n"
      : "=r"(r)
      : "r"(id), "r"(n), "r"(static_cast<int>(v))
      : "memory");
  return r != 0;
}
// fp16 pairs (UA_LO_SKIP): pack two floats (lo in the low half), unpack, and convert a bf16 pair.
__device__ __forceinline__ unsigned pack_h2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float h2_lo(unsigned u) {
  float f;
  asm("{\n.reg .b16 a, b;\nmov.b32 {a, b}, %1;\ncvt.f32.f16 %0, a;\n}\n" : "=f"(f) : "r"(u));
  return f;
}
__device__ __forceinline__ float h2_hi(unsigned u) {
  float f;
  asm("{\n.reg .b16 a, b;\nmov.b32 {a, b}, %1;\ncvt.f32.f16 %0, b;\n}\n" : "=f"(f) : "r"(u));
  return f;
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
// wgmma with A from shared memory (K-major descriptor), B K-major.
__device__ __forceinline__ void wgmma_m64n64k16_ss(float* d, unsigned long long da,
                                                   unsigned long long db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(scale_d));
}
// O += P V in fp16 (UA_LO_SKIP): A = P from registers (f16x2), B = the V tile converted to fp16,
// MN-major as in wgmma_m64n128k16_rs_t.
__device__ __forceinline__ void wgmma_m64n128k16_rs_t_h(float* d, const unsigned (&a)[4],
                                                        unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
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
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
#if UA_WS128_BN == 128
// O += P V with A = P lo from shared memory (K-major descriptor), B = V MN-major (UA_WS128_BN).
__device__ __forceinline__ void wgmma_m64n128k16_ss_t(float* d, unsigned long long da,
                                                      unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 1;\n}\n"
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
// S = Q K^T over 128 keys (defined with attn_ws_small's wrappers below)
__device__ __forceinline__ void wgmma_m64n128k16_rs(float* d, const unsigned (&a)[4],
                                                    unsigned long long db, int scale_d);
#if !UA_WS_SMALL
#error "UA_WS128_BN = 128 uses wgmma_m64n128k16_rs, defined under UA_WS_SMALL"
#endif
#endif
#endif  // KOPT_EMU

// The bf16 pair u as an fp16 pair (exact for 2^-14 <= |x| <= 65504; V ~ N(0, 1) here).
__device__ __forceinline__ unsigned bf2_to_h2(unsigned u) {
  return pack_h2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}
// ------------------------------------------------------------------------------------------
// Steps that the warp-specialized kernels (attn_ws_d128, attn_ws_small, attn_ws_big) run alike,
// written once. They are __forceinline__ and take the callers' register arrays by reference, in
// the order of operations the kernels had when each wrote them out in place, so that every cubin
// stayed byte-identical when they were factored out (the config's default and 32 other variants,
// every measured one among them: bench/hopper/uattn/DEDUP.md, dedup/hash_all.sh). That is not
// automatic: NVVM numbers the loop-carried registers (phi nodes) in an order that depends on how
// the code reached the loop (which function was inlined where), and ptxas allocates differently
// for another order. So each helper is called by the kernel function itself (a wrapper around one
// changed a cubin), and attn_ws_d128 uses only ws_ring_init and ws_release: its mask, softmax,
// O rescale, P hand-over and output staging are the same steps, but moving any of them (or two
// of them) into these helpers renumbered its registers at the default or at UA_HPAIR = 0.
// Check a change here with dedup/hash_all.sh before / after (the PTX with dedup/ptx_dump.py).

// Barriers of a one-item-per-block kernel (tid 0): fullQ (the producer's 128 cp.async arrivals),
// fullK[NS], fullV[NS] (likewise), empty[NS] (the 8 consumer warps), 8 bytes apart.
template <int NS>
__device__ __forceinline__ void ws_ring_init(unsigned bQ, unsigned bK, unsigned bV, unsigned bE) {
  mbar_init(bQ, 128);
  for (int s = 0; s < NS; ++s) {
    mbar_init(bK + 8 * s, 128);
    mbar_init(bV + 8 * s, 128);
    mbar_init(bE + 8 * s, 8);
  }
  mbar_init_fence();
}
template <int N>
__device__ __forceinline__ void ws_zero(float (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) a[i] = 0.f;
}
template <int KJ>
__device__ __forceinline__ void ws_zero_p(unsigned (&ph)[KJ][4], unsigned (&pl)[KJ][4]) {
#pragma unroll
  for (int kj = 0; kj < KJ; ++kj)
#pragma unroll
    for (int e = 0; e < 4; ++e) ph[kj][e] = pl[kj][e] = 0u;
}
// The causal and sequence-end mask of a warp's S tile (BN keys from t0; the warp's rows from
// row_lo; accumulator element e of n8 tile n is row row_lo + g + 8 (e / 2), key t0 + 8 n + 2 tig +
// e % 2), applied only to the tiles that cross the diagonal or the sequence end.
template <int BN>
__device__ __forceinline__ void ws_mask(float (&sacc)[BN / 2], int t0, int row_lo, int len, int g,
                                        int tig) {
  if (t0 + BN - 1 > row_lo || t0 + BN > len) {
#pragma unroll
    for (int n = 0; n < BN / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row_lo + g + (e >> 1) * 8;
        const int j = t0 + n * 8 + 2 * tig + (e & 1);
        if (j > r || j >= len) sacc[4 * n + e] = -__int_as_float(0x7f800000);
      }
  }
}
// Online softmax of a masked S tile, per row half hf (rows g and g + 8 of the warp): the running
// max m (over the 4 lanes of a quad), the rescale factor corr of O and l, l += the lane's part of
// the tile's sum (the quad's lanes are added at the end, ws_stage_out), and P as the A fragments
// of the next P V: nh = bf16(p), nl = bf16(p - nh) (the hi + lo split the tolerance needs, see
// the header). attn_ws_d128 writes the same out, with UA_LO_SKIP's statistics.
template <int BN>
__device__ __forceinline__ void ws_softmax(float (&sacc)[BN / 2], float (&m)[2], float (&l)[2],
                                           float sl2, unsigned (&nh)[BN / 16][4],
                                           unsigned (&nl)[BN / 16][4], float (&corr)[2]) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float mx = m[hf];
#pragma unroll
    for (int n = 0; n < BN / 8; ++n)
      mx = fmaxf(mx, fmaxf(sacc[4 * n + 2 * hf], sacc[4 * n + 2 * hf + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    corr[hf] = fast_exp2((m[hf] - mx) * sl2);
    m[hf] = mx;
    const float moff = mx * sl2;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < BN / 8; ++n) {
      const float p0 = fast_exp2(fmaf(sacc[4 * n + 2 * hf], sl2, -moff));
      const float p1 = fast_exp2(fmaf(sacc[4 * n + 2 * hf + 1], sl2, -moff));
      sum += p0 + p1;
      const unsigned hi = pack_bf162(p0, p1);
      // n8 tile n, row half hf -> A fragment register (n & 1) * 2 + hf of k16 step n / 2
      nh[n >> 1][(n & 1) * 2 + hf] = hi;
      nl[n >> 1][(n & 1) * 2 + hf] =
          pack_bf162(p0 - __uint_as_float(hi << 16), p1 - __uint_as_float(hi & 0xffff0000u));
    }
    l[hf] = l[hf] * corr[hf] + sum;
  }
}
// O (row halves: registers 4 d, 4 d + 1 of row g, 4 d + 2, 4 d + 3 of row g + 8) *= corr.
template <int NO>
__device__ __forceinline__ void ws_rescale(float (&o)[NO], const float (&corr)[2]) {
#pragma unroll
  for (int d = 0; d < NO / 4; ++d) {
    o[4 * d] *= corr[0];
    o[4 * d + 1] *= corr[0];
    o[4 * d + 2] *= corr[1];
    o[4 * d + 3] *= corr[1];
  }
}
// P_t (hi and lo) becomes the operand of the next P V, once P_{t-1} V_{t-1} has completed.
template <int KJ>
__device__ __forceinline__ void ws_take_p(unsigned (&ph)[KJ][4], unsigned (&pl)[KJ][4],
                                          const unsigned (&nh)[KJ][4],
                                          const unsigned (&nl)[KJ][4]) {
#pragma unroll
  for (int kj = 0; kj < KJ; ++kj)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      ph[kj][e] = nh[kj][e];
      pl[kj][e] = nl[kj][e];
    }
}
// A warp's reads of ring stage s (its S and P V wgmma) are done: one arrival on the stage's
// empty barrier among bars (count 8 = the consumer warps). The address is formed after the
// __syncwarp, where the kernels formed it.
__device__ __forceinline__ void ws_release(unsigned bars, int s, int lane) {
  __syncwarp();
  mbar_arrive_if(bars + 8 * s, lane == 0);
}
// O / row sum (the quad's lanes' parts of l added) as bf16 into the warpgroup's Q tile (every
// wgmma that read it has completed once its 4 warps pass named barrier 3 + wg), at off(row,
// chunk) + 4 tig for the warp's rows 16 wl + g (+ 8). Each warp then reads back its own 16 rows
// (__syncwarp).
template <int NO, class Off>
__device__ __forceinline__ void ws_stage_out(const float (&o)[NO], const float (&l)[2], int wg,
                                             int wl, int g, int tig, Off off) {
  bar_sync_n(3 + wg, 128);
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float sum = l[hf];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.f / sum;
    const int row = 16 * wl + g + hf * 8;
#pragma unroll
    for (int d = 0; d < NO / 4; ++d) {
      __nv_bfloat162 v =
          __floats2bfloat162_rn(o[4 * d + 2 * hf] * inv, o[4 * d + 2 * hf + 1] * inv);
      sts32(off(row, d) + tig * 4, *reinterpret_cast<unsigned*>(&v));
    }
  }
  __syncwarp();
}

// The producer's K / V ring of a one-item-per-block kernel (attn_ws_small, attn_ws_big): tile t
// (keys t BN ..) into stage t % NS once the consumers released it (from the second pass on),
// K then V, each published on its full barrier when the thread's cp.async have landed.
// copy_tile(src, dst, j0, nv) issues the thread's copies of one tile (keys from j0; its first row
// rr + 16 i exists when 16 i < nv = len - j0 - rr); it reads the block-table entries again for V
// (L1 hits: holding them across both copies spilled the producer's 40 registers).
template <int NS, int BN, int TB, class CopyTile>
__device__ __forceinline__ void ws_produce_kv(int ntiles, int len, int rr, unsigned bK, unsigned bV,
                                              unsigned bE, unsigned sR, const __nv_bfloat16* kh,
                                              const __nv_bfloat16* vh, CopyTile copy_tile) {
#pragma unroll 1
  for (int t = 0; t < ntiles; ++t) {
    const int s = t % NS;
    if (t >= NS) mbar_wait(bE + 8 * s, ((t / NS) - 1) & 1);
    const int j0 = t * BN;
    const int nv = len - j0 - rr;  // row rr + 16 i exists when 16 i < nv
    const unsigned dk = sR + 2 * s * TB;
    copy_tile(kh, dk, j0, nv);
    cp_async_mbar_arrive(bK + 8 * s);
    copy_tile(vh, dk + TB, j0, nv);
    cp_async_mbar_arrive(bV + 8 * s);
  }
}

// (Its mask, online softmax, O rescale, P hand-over and output staging are ws_mask, ws_softmax
// (plus UA_LO_SKIP's statistics), ws_rescale, ws_take_p and ws_stage_out written out: see the
// helpers' note for why they stay so.)
__device__ __forceinline__ void attn_ws_d128(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
    const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ seqused_k,
    const int* __restrict__ block_table, __nv_bfloat16* __restrict__ out,
    const int* __restrict__ cu, int hq, int hkv, int max_blocks, unsigned char* smem) {
  constexpr int D = 128, BM = 128, BN = UA_WS128_BN, CH = D / 8, NS = UA_NS;
  constexpr int TB = BN * D * 2;   // bytes of one K or V tile (16 KiB; 32 at BN = 128)
  constexpr int PANEL = BN * 128;  // bytes of one 64-column panel of a tile
  // Q: 2 x 16 KiB per buffer, one 64-row x 128-byte panel per warpgroup and 64 columns, panels
  // PANEL apart as in a K tile (so the producer's chunk offset serves both); at BN = 128 the two
  // warpgroups' panels interleave (warpgroup offset QWG = 8 KiB)
  constexpr int QB = 64 * D * 2, QWG = BN == 64 ? QB : 64 * 128;
#if UA_PERSIST
  // Persistent: cu is the plan's workspace [counter, num_seqs, finished blocks, 0, prefix
  // sums...] (written by unified_attention_cu; the last block to finish zeroes the counters
  // again, so a launch without unified_attention_cu before it still finds them at 0); work item i =
  // (head i % hq, q tile ny - 1 - (i / hq) % ny, sequence i / (hq ny)), the order of the one-item
  // grid (heads fastest, longest q tiles first).
  const int tid = threadIdx.x, lane = tid & 31;
  const int g = lane >> 2, tig = lane & 3;
  const int* const cus = cu + 4;
  // Barriers: fullQ[2] (128 cp.async arrivals + thread 0's, which publishes the item),
  // fullK[NS], fullV[NS], empty[NS], emptyQ[2] (8 consumer warps), then the item slots of the
  // two Q buffers ({h, hk, r0, seq}, 16 bytes each, decoded by thread 0 only: the divisions
  // and their loop-invariant parts spilled in the producer's 40 registers), 16-aligned (they
  // are written and read as st / ld.shared.v4: at bQE + 16 = base + 104 they were misaligned,
  // cudaErrorMisalignedAddress on the H200, 2026-12-03); the Q buffers 2 x (2 x 16 KiB) and the
  // ring, 1024-aligned.
  const unsigned base = smem_u32(smem);
  const unsigned bQ = base, bK = base + 16, bV = bK + 8 * NS, bE = bV + 8 * NS;
  // BN = 128: bE releases a stage's K, bEV its V
  const unsigned bEV = bE + 8 * NS, bQE = bE + 8 * NS * (BN == 128 ? 2 : 1);
  const unsigned s_item = (bQE + 16 + 15u) & ~15u;
  const unsigned sQ = (s_item + 32 + 1023u) & ~1023u;
  const unsigned sR = sQ + 4 * QB;  // stage s: K at sR + 2 s TB, V at sR + (2 s + 1) TB
  // BN = 128: the consumer warpgroups' P lo buffers (16 KiB each) after the ring
  const unsigned sPl = sR + 2 * NS * TB;
  int h = 0, seq = 0, len = 0, r0 = 0, hk = 0, ntiles = 0, bt_row = 0;  // the producer's 40 regs
  long long qs = 0;
#if UA_HPAIR
  const bool pair = ((hq / hkv) & 1) == 0;
  const int QT = pair ? 64 : BM;  // query rows of an item (per head)
#else
  constexpr bool pair = false;
  constexpr int QT = BM;
#endif
  auto decode = [&](const uint4& it) {  // the slot's item
    h = static_cast<int>(it.x);
    hk = static_cast<int>(it.y);
    r0 = static_cast<int>(it.z);
    seq = static_cast<int>(it.w);
    len = seqused_k[seq];
    qs = cus[seq];
    bt_row = seq * max_blocks;  // < 2^31: the block table's int entries
    ntiles = (min(len, r0 + QT) + BN - 1) / BN;
  };
  if (tid == 0) {
    for (int b = 0; b < 2; ++b) {
      mbar_init(bQ + 8 * b, 129);
      mbar_init(bQE + 8 * b, 8);
    }
    for (int s = 0; s < NS; ++s) {
      mbar_init(bK + 8 * s, 128);
      mbar_init(bV + 8 * s, 128);
      mbar_init(bE + 8 * s, 8);
      if (BN == 128) mbar_init(bEV + 8 * s, 8);
    }
    mbar_init_fence();
  }
  __syncthreads();
#else
  const int h = blockIdx.x, seq = blockIdx.z;
  const int qt = gridDim.y - 1 - blockIdx.y;  // longest tiles first
  const int len = seqused_k[seq];
  const int r0 = qt * BM;
  if (r0 >= len) return;  // uniform across the block
  const long long qs = cu[seq];
  const int hk = h / (hq / hkv);
  const int tid = threadIdx.x, lane = tid & 31;
  const int g = lane >> 2, tig = lane & 3;
  // Barriers (8 bytes each) at the start: fullQ, fullK[NS], fullV[NS], empty[NS]; then Q of
  // both consumer warpgroups (2 x 16 KiB) and the ring, 1024-aligned (the plan adds the slack).
  const unsigned base = smem_u32(smem);
  const unsigned bQ = base, bK = base + 8, bV = bK + 8 * NS, bE = bV + 8 * NS;
  const unsigned bEV = bE;  // only named here: 128-key tiles (bEV separate) need UA_PERSIST = 1
  const unsigned sQ = (base + 8 * (1 + 3 * NS) + 1023u) & ~1023u;
  const unsigned sR = sQ + 2 * TB;  // stage s: K at sR + 2 s TB, V at sR + (2 s + 1) TB
  const long long bt_row = static_cast<long long>(seq) * max_blocks;
  constexpr bool pair = false;
  const int kend = min(len, r0 + BM);
  const int ntiles = (kend + BN - 1) / BN;
  if (tid == 0) ws_ring_init<NS>(bQ, bK, bV, bE);
  __syncthreads();
#endif

  if (tid < 128) {  // the producer warpgroup
    setmaxnreg_dec<40>();
    // Thread t copies chunk t % 16 of rows t / 16 + 8 i: its swizzled position depends on the
    // row only through r % 8 = (t / 16) % 8.
    const int cc = tid & 15, rr = tid >> 4;
    const unsigned dst_off = (cc >> 3) * PANEL + rr * 128 + (((cc & 7) ^ (rr & 7)) << 4);
    // UA_LO_SKIP: each thread converts the 8 chunks of V it copied itself (visible to it after
    // its cp.async.wait_group), then arrives on the stage's V barrier (count 128).
    auto convert_v = [&](int st) {
      const unsigned dv = sR + (2 * st + 1) * TB + dst_off;
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) {
        uint4 x = lds128(dv + i * 1024);
        x.x = bf2_to_h2(x.x);
        x.y = bf2_to_h2(x.y);
        x.z = bf2_to_h2(x.z);
        x.w = bf2_to_h2(x.w);
        sts128(dv + i * 1024, x);
      }
      fence_proxy_async();  // the generic-proxy stores, before the wgmma (async proxy) reads
      mbar_arrive_if(bV + 8 * st, true);
    };
#if UA_PERSIST
    int gt = 0;  // tiles issued so far: the ring position runs on across items
    for (int it = 0;; ++it) {
      const int qb = it & 1;
      const unsigned bQb = bQ + 8 * qb, sQb = sQ + qb * 2 * QB;
      if (it >= 2) mbar_wait(bQE + 8 * qb, ((it >> 1) - 1) & 1);  // item it - 2 written out
      if (tid == 0) {  // the next item with rows (every one in the benchmark's shapes)
#if UA_HPAIR
        // ceil(seq_len / QT): max_blocks - 2 = ceil(seq_len / 16); head units of a q tile
        const int ny = pair ? (max_blocks + 1) >> 2 : (max_blocks + 5) >> 3;
        const int hu = pair ? hq >> 1 : hq;
#else
        const int ny = (max_blocks + 5) >> 3;  // ceil(seq_len / 128): max_blocks - 2 = ceil(/ 16)
        const int hu = hq;
#endif
        const int nitems = hu * ny * cu[1];
        // a grid of one block per item (the plan's choice for long sequences at UA_PERSIST = 2):
        // block b takes item b (the one-item grid's order) and no other, without the counter
        int next = gridDim.x * gridDim.y * gridDim.z == nitems && it == 0
                       ? blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)
                       : nitems;
        int item, sq, rq;
        do {
          item = gridDim.x * gridDim.y * gridDim.z == nitems ? next
                                                             : atomicAdd(const_cast<int*>(cu), 1);
          next = nitems;
          sq = item / (hu * ny);
          rq = (ny - 1 - (item / hu) % ny) * QT;
        } while (item < nitems && rq >= seqused_k[sq]);
        const int hh = pair ? 2 * (item % hu) : item % hu;  // h = -1: no more work
        sts128(s_item + 16 * qb, make_uint4(item < nitems ? hh : -1, hh / (hq / hkv), rq, sq));
      }
      bar_sync_n(7, 128);  // the producer warpgroup reads the slot
      const uint4 item = lds128(s_item + 16 * qb);
      if (static_cast<int>(item.x) < 0) {  // no more work: publish the end to the consumers
        mbar_arrive_if(bQb, true);
        mbar_arrive_if(bQb, tid == 0);
        if (tid == 0 && gridDim.y * gridDim.z == 1) {  // the last fetch of a persistent block
          int* const ws = const_cast<int*>(cu);  // is done: the last block resets the counters
          __threadfence();
          if (atomicAdd(ws + 2, 1) == static_cast<int>(gridDim.x) - 1) {
            st_relaxed_gpu(ws, 0);  // (atomicExch brings a module-scope helper variable)
            st_relaxed_gpu(ws + 2, 0);
          }
        }
        break;
      }
      decode(item);
#else
    constexpr int gt = 0;
    const unsigned bQb = bQ, sQb = sQ;
#endif
#pragma unroll
      for (int i = 0; i < BM / 8; ++i) {  // Q: block row rr + 8 i, warpgroup (rr + 8 i) / 64
#if UA_HPAIR
        // (rr < 8, so row / 64 = i / 8 is known at compile time: the head offset and the row
        // fold into the unrolled copies; written with row & 63 and row >> 6, they spilled the
        // producer's 40 registers)
        const int row = rr + 8 * i, r = r0 + rr + 8 * (pair ? i & 7 : i);
        const bool ok = r < len;
        cp_async16(sQb + (row >> 6) * QWG + dst_off + ((row & 63) - rr) * 128,
                   ok ? q + ((qs + r) * hq + h + (pair && i >= 8 ? 1 : 0)) * D + cc * 8 : q,
                   ok ? 16 : 0);
#else
      const int row = rr + 8 * i, r = r0 + row;
      const bool ok = r < len;
      cp_async16(sQb + (row >> 6) * QWG + dst_off + ((row & 63) - rr) * 128,
                 ok ? q + ((qs + r) * hq + h) * D + cc * 8 : q, ok ? 16 : 0);
#endif
      }
      cp_async_mbar_arrive(bQb);
      if (UA_PERSIST) mbar_arrive_if(bQb, tid == 0);  // after the slot's store (release)
      for (int t = 0; t < ntiles; ++t) {
        const int s = (gt + t) % NS;
        if (gt + t >= NS) mbar_wait(bE + 8 * s, (((gt + t) / NS) - 1) & 1);
#if UA_WS128_BN == 128
        // K, then (once the consumers released the stage's V) V, each as two 64-row halves:
        // crow[8] for a whole tile spilled the producer's 40 registers (register_probe.diff)
        const unsigned dk = sR + 2 * s * TB + dst_off;
#pragma unroll
        for (int kv = 0; kv < 2; ++kv) {
          if (kv == 1 && gt + t >= NS) mbar_wait(bEV + 8 * s, (((gt + t) / NS) - 1) & 1);
#pragma unroll 1
          for (int hb = 0; hb < 2; ++hb) {
            int crow[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              const int j = t * BN + 64 * hb + 16 * k + rr;
              crow[k] = j < len ? block_table[bt_row + (j >> 4)] * 16 + rr : 0;
            }
#pragma unroll
            for (int i = 0; i < 8; ++i)
              cp_async16(dk + kv * TB + hb * 8192 + i * 1024,
                         (kv ? v_cache : k_cache) +
                             (static_cast<long long>(crow[i >> 1] + 8 * (i & 1)) * hkv + hk) * D +
                             cc * 8,
                         t * BN + 64 * hb + rr + 8 * i < len ? 16 : 0);
          }
          if (kv == 0) cp_async_mbar_arrive(bK + 8 * s);
        }
#elif UA_PERSIST
      // rows rr + 8 i of the tile: rows 2 k and 2 k + 1 lie in cache block t * 4 + k, 8 rows
      // apart; one block-table load per pair and 32-bit cache rows (the 40 registers hold)
      int crow[BN / 16];
#pragma unroll
      for (int k = 0; k < BN / 16; ++k) {
        const int j = t * BN + 16 * k + rr;
        crow[k] = j < len ? block_table[bt_row + (j >> 4)] * 16 + rr : 0;
      }
      const unsigned dk = sR + 2 * s * TB + dst_off;
      auto kv_off = [&](int i) {
        return (static_cast<long long>(crow[i >> 1] + 8 * (i & 1)) * hkv + hk) * D + cc * 8;
      };
#pragma unroll
      for (int i = 0; i < BN / 8; ++i)
        cp_async16(dk + i * 1024, k_cache + kv_off(i), t * BN + rr + 8 * i < len ? 16 : 0);
      cp_async_mbar_arrive(bK + 8 * s);
#pragma unroll
      for (int i = 0; i < BN / 8; ++i)
        cp_async16(dk + TB + i * 1024, v_cache + kv_off(i), t * BN + rr + 8 * i < len ? 16 : 0);
#else
      long long off[BN / 8];
      bool ok[BN / 8];
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) {
        const int j = t * BN + rr + 8 * i;
        ok[i] = j < len;
        off[i] = 0;
        if (ok[i]) {
          const long long phys = block_table[bt_row + (j >> 4)];
          off[i] = ((phys * 16 + (j & 15)) * hkv + hk) * D + cc * 8;
        }
      }
      const unsigned dk = sR + 2 * s * TB + dst_off;
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) cp_async16(dk + i * 1024, k_cache + off[i], ok[i] ? 16 : 0);
      cp_async_mbar_arrive(bK + 8 * s);
#pragma unroll
      for (int i = 0; i < BN / 8; ++i)
        cp_async16(dk + TB + i * 1024, v_cache + off[i], ok[i] ? 16 : 0);
#endif
        if (UA_LO_SKIP) {
          cp_async_commit();  // group t: K_t, V_t
          if (t > 0) {        // V_{t-1} has landed: convert it to fp16 in place, then publish it
            cp_async_wait<1>();
            convert_v((gt + t - 1) % NS);
          }
        } else {
          cp_async_mbar_arrive(bV + 8 * s);
        }
      }
      if (UA_LO_SKIP) {
        cp_async_wait<0>();
        convert_v((gt + ntiles - 1) % NS);
      }
#if UA_PERSIST
      gt += ntiles;
    }
#endif
    return;
  }

  setmaxnreg_inc<232>();
  const int ct = tid - 128, wg = ct >> 7, warp = ct >> 5, wl = warp & 3;
#if UA_PERSIST
  int gt = 0;  // tiles consumed so far (the producer's ring position)
  for (int it = 0;; ++it) {
    const int qb = it & 1;
    mbar_wait(bQ + 8 * qb, (it >> 1) & 1);
    const uint4 item = lds128(s_item + 16 * qb);
    if (static_cast<int>(item.x) < 0) break;
    decode(item);
    const unsigned sQw = sQ + qb * 2 * QB + wg * QWG;
#else
  constexpr int gt = 0;
  const unsigned sQw = sQ + wg * QWG;
#endif
    // the warpgroup's first row (UA_HPAIR: of head h + wg)
    const int wr0 = r0 + (pair ? 0 : 64 * wg);
    const int wrow_lo = wr0 + 16 * wl;
    const float sl2 = 1.4426950408889634f * rsqrtf(static_cast<float>(D));
    float o[D / 2], sacc[BN / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) sacc[i] = 0.f;
    float m[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)}, l[2] = {0.f, 0.f};
#if UA_WS128_BN == 128
    // P_{t-1}: hi in registers, lo in the warpgroup's buffer (K-major, two 128-byte-swizzled
    // panels of 64 keys, 8 KiB each), both read by the P V group in flight
    unsigned ph[BN / 16][4];
    auto& pl = ph;  // (named by the UA_LO_SKIP branches only, which this build excludes)
    const unsigned sPlw = sPl + wg * 16384;
#pragma unroll
    for (int kj = 0; kj < BN / 16; ++kj)
#pragma unroll
      for (int e = 0; e < 4; ++e) ph[kj][e] = 0u;
#else
  unsigned ph[BN / 16][4], pl[BN / 16][4];  // P_{t-1} (in flight in the P V group)
#pragma unroll
  for (int kj = 0; kj < BN / 16; ++kj)
#pragma unroll
    for (int e = 0; e < 4; ++e) ph[kj][e] = pl[kj][e] = 0u;
#endif
    // UA_LO_SKIP: e2 = sum of p^2 (the row's, in the scale of m) over the tiles whose lo product
    // was skipped; skip_pv: P_{t-1} V_{t-1} without its lo product (uniform over the warpgroup).
    float e2[2] = {0.f, 0.f};
    bool skip_pv = false;
    constexpr float kLoB = static_cast<float>(UA_LO_VB) / (2048.f * 1.7320508f * UA_LO_TAU);
    constexpr float kLoC = kLoB * kLoB;  // 2035 at VB = 4, TAU = 2.5e-5
    if (!UA_PERSIST) mbar_wait(bQ, 0);
    if (UA_PINGPONG) bar_arrive_if(1, 256, wg == 1);  // warpgroup 0 issues first
    // P V: lo then hi (bf16), fp16 with UA_LO_SKIP (hi only when skip, a warpgroup-uniform branch)
    auto pv_issue = [&](const unsigned long long* dv, bool skip) {
      if (UA_LO_SKIP) {
        if (skip) {
#pragma unroll
          for (int kj = 0; kj < BN / 16; ++kj) wgmma_m64n128k16_rs_t_h(o, ph[kj], dv[kj]);
        } else {
#pragma unroll
          for (int kj = 0; kj < BN / 16; ++kj) {
            wgmma_m64n128k16_rs_t_h(o, pl[kj], dv[kj]);
            wgmma_m64n128k16_rs_t_h(o, ph[kj], dv[kj]);
          }
        }
      } else {
#pragma unroll
        for (int kj = 0; kj < BN / 16; ++kj) {
#if UA_WS128_BN == 128
          wgmma_m64n128k16_ss_t(
              o, desc_sw128(sPlw, 16, 1024) + (kj >> 2) * (8192 >> 4) + 2 * (kj & 3), dv[kj]);
#else
        if (UA_P_SPLIT) wgmma_m64n128k16_rs_t(o, pl[kj], dv[kj], 1);
#endif
          wgmma_m64n128k16_rs_t(o, ph[kj], dv[kj], 1);
        }
      }
    };

#if UA_S_RS
    // Q's A fragments (the mma layout: ldmatrix of the warp's 16 rows from the swizzled panels)
    unsigned qf[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int row = 16 * wl + (lane & 15), ch = kk * 2 + (lane >> 4);
      ldsm_x4(sQw + (ch >> 3) * PANEL + row * 128 + (((ch & 7) ^ (row & 7)) << 4), qf[kk]);
    }
#else
  unsigned long long dq[D / 16];  // Q's descriptors per k16 step (loop-invariant)
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    dq[kk] = desc_sw128(sQw, 16, 1024) + (kk >> 2) * (PANEL >> 4) + 2 * (kk & 3);
#endif
    // Iteration t issues S_t and (t > 0) P_{t-1} V_{t-1}; the last P V follows the loop.
    for (int t = 0; t < ntiles; ++t) {
      const bool do_pv = t > 0;
      const int s = (gt + t) % NS, sp = (gt + t + NS - 1) % NS;
      mbar_wait(bK + 8 * s, ((gt + t) / NS) & 1);
      if (do_pv) mbar_wait(bV + 8 * sp, ((gt + t - 1) / NS) & 1);
      fence_proxy_async();
      if (UA_PINGPONG) bar_sync_n(1 + wg, 256);
      // every wgmma input (descriptors included) is defined before the fence: ptxas serializes
      // a pipeline stage whose inputs are written inside it (C7513)
      unsigned long long dk[D / 16], dv[BN / 16];
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        dk[kk] = desc_sw128(sR + 2 * s * TB, 16, 1024) + (kk >> 2) * (PANEL >> 4) + 2 * (kk & 3);
#pragma unroll
      for (int kj = 0; kj < BN / 16; ++kj)
        dv[kj] = desc_sw128(sR + (2 * sp + 1) * TB, PANEL, 1024) + kj * (2048 >> 4);
#if UA_S_RS
      fence_uregs<D / 4>(&qf[0][0]);
#else
    fence_desc<D / 16>(dq);
#endif
      fence_desc<D / 16>(dk);
      fence_desc<BN / 16>(dv);
      fence_regs<D / 2>(o);
      fence_regs<BN / 2>(sacc);
      fence_uregs<BN / 4>(&ph[0][0]);
#if UA_WS128_BN != 128
      fence_uregs<BN / 4>(&pl[0][0]);
#endif
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
#if UA_S_RS
#if UA_WS128_BN == 128
        wgmma_m64n128k16_rs(sacc, qf[kk], dk[kk], kk > 0);
#else
        wgmma_m64n64k16_rs(sacc, qf[kk], dk[kk], kk > 0);
#endif
#else
      wgmma_m64n64k16_ss(sacc, dq[kk], dk[kk], kk > 0);
#endif
      wgmma_commit();
      if (do_pv) {
        wgmma_fence();
        pv_issue(dv, skip_pv);
        wgmma_commit();
      }
      if (do_pv)
        wgmma_wait<1>();
      else
        wgmma_wait<0>();
      fence_regs<BN / 2>(sacc);
#if UA_WS128_BN == 128
      ws_release(bE, s, lane);  // S_t of this warp is done: K_t's half of stage s is free
#endif
      // the other warpgroup's turn, once this one's S has completed (arriving right after the
      // commits, as FA3 does, made ptxas serialize the wgmma: C7514)
      if (UA_PINGPONG) bar_arrive_n(2 - wg, 256);
      const int t0 = t * BN;
      if (t0 + BN - 1 > wrow_lo || t0 + BN > len) {
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = wrow_lo + g + (e >> 1) * 8;
            const int j = t0 + n * 8 + 2 * tig + (e & 1);
            if (j > r || j >= len) sacc[4 * n + e] = -__int_as_float(0x7f800000);
          }
      }
      unsigned nh[BN / 16][4], nl[BN / 16][4];
      float corr[2], tsum2[2] = {0.f, 0.f};
      bool lo_ok = true;
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float mx = m[hf];
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
          mx = fmaxf(mx, fmaxf(sacc[4 * n + 2 * hf], sacc[4 * n + 2 * hf + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        corr[hf] = fast_exp2((m[hf] - mx) * sl2);
        m[hf] = mx;
        const float moff = mx * sl2;
        float sum = 0.f, sum2 = 0.f;
#pragma unroll
        for (int n = 0; n < BN / 8; ++n) {
          const float p0 = fast_exp2(fmaf(sacc[4 * n + 2 * hf], sl2, -moff));
          const float p1 = fast_exp2(fmaf(sacc[4 * n + 2 * hf + 1], sl2, -moff));
          sum += p0 + p1;
          if (UA_LO_SKIP) {  // keep p; hi / lo after the vote
            sacc[4 * n + 2 * hf] = p0;
            sacc[4 * n + 2 * hf + 1] = p1;
            sum2 = fmaf(p0, p0, fmaf(p1, p1, sum2));
          } else {
            const unsigned hi = pack_bf162(p0, p1);
            nh[n >> 1][(n & 1) * 2 + hf] = hi;
            nl[n >> 1][(n & 1) * 2 + hf] =
                pack_bf162(p0 - __uint_as_float(hi << 16), p1 - __uint_as_float(hi & 0xffff0000u));
          }
        }
        if (UA_LO_SKIP) {  // l and e2 are the whole row's (quad sums), kept in all 4 lanes
          sum += __shfl_xor_sync(0xffffffffu, sum, 1);
          sum2 += __shfl_xor_sync(0xffffffffu, sum2, 1);
          sum += __shfl_xor_sync(0xffffffffu, sum, 2);
          sum2 += __shfl_xor_sync(0xffffffffu, sum2, 2);
          e2[hf] *= corr[hf] * corr[hf];
          tsum2[hf] = sum2;
        }
        l[hf] = l[hf] * corr[hf] + sum;
        if (UA_LO_SKIP)  // rows past the sequence end are never written: they do not vote
          lo_ok = lo_ok && (wrow_lo + g + 8 * hf >= len || kLoC * (e2[hf] + sum2) <= l[hf] * l[hf]);
      }
      bool skip = false;
      if (UA_LO_SKIP == 1) skip = __all_sync(0xffffffffu, bar_red_and(5 + wg, 128, lo_ok));
#ifdef KOPT_EMU
      if (UA_LO_SKIP && (ct & 127) == 0) ++g_lo_stats[skip];
#endif
      if (UA_LO_SKIP) {
        if (skip) {
          e2[0] += tsum2[0];
          e2[1] += tsum2[1];
#pragma unroll
          for (int hf = 0; hf < 2; ++hf)
#pragma unroll
            for (int n = 0; n < BN / 8; ++n)
              nh[n >> 1][(n & 1) * 2 + hf] =
                  pack_h2(sacc[4 * n + 2 * hf], sacc[4 * n + 2 * hf + 1]);
        } else {
#pragma unroll
          for (int hf = 0; hf < 2; ++hf)
#pragma unroll
            for (int n = 0; n < BN / 8; ++n) {
              const float p0 = sacc[4 * n + 2 * hf], p1 = sacc[4 * n + 2 * hf + 1];
              const unsigned hi = pack_h2(p0, p1);
              nh[n >> 1][(n & 1) * 2 + hf] = hi;
              nl[n >> 1][(n & 1) * 2 + hf] = pack_h2(p0 - h2_lo(hi), p1 - h2_hi(hi));
            }
        }
      }
      wgmma_wait<0>();  // P_{t-1} V_{t-1} done
      fence_regs<D / 2>(o);
      fence_uregs<BN / 4>(&ph[0][0]);
#if UA_WS128_BN != 128
      fence_uregs<BN / 4>(&pl[0][0]);
#endif
#pragma unroll
      for (int d = 0; d < D / 8; ++d) {
        o[4 * d] *= corr[0];
        o[4 * d + 1] *= corr[0];
        o[4 * d + 2] *= corr[1];
        o[4 * d + 3] *= corr[1];
      }
#pragma unroll
      for (int kj = 0; kj < BN / 16; ++kj)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          ph[kj][e] = nh[kj][e];
#if UA_WS128_BN != 128
          if (!skip) pl[kj][e] = nl[kj][e];
#endif
        }
#if UA_WS128_BN == 128
      // P_t lo to the buffer, once every warp of the warpgroup is past P_{t-1} V_{t-1} (which
      // read it); published to the next P V (async proxy) by the fence and the second barrier
      bar_sync_n(8 + wg, 128);
#pragma unroll
      for (int kj = 0; kj < BN / 16; ++kj)
#pragma unroll
        for (int e = 0; e < 4; ++e) {  // A fragment e: row g + 8 (e & 1), keys 16 kj + 8 (e >> 1)
          const int row = 16 * wl + g + 8 * (e & 1), key = 16 * kj + 8 * (e >> 1) + 2 * tig;
          sts32(sPlw + (key >> 6) * 8192 + row * 128 + ((((key & 63) >> 3) ^ (row & 7)) << 4) +
                    (key & 7) * 2,
                nl[kj][e]);
        }
      fence_proxy_async();
      bar_sync_n(8 + wg, 128);
#endif
      skip_pv = skip;
      if (do_pv)  // S_{t-1} and P_{t-1} V_{t-1} of this warp are done: release stage sp
        ws_release(BN == 128 ? bEV : bE, sp, lane);
    }
    {  // the last P V
      const int sp = (gt + ntiles - 1) % NS;
      mbar_wait(bV + 8 * sp, ((gt + ntiles - 1) / NS) & 1);
      fence_proxy_async();
      if (UA_PINGPONG) bar_sync_n(1 + wg, 256);
      unsigned long long dv[BN / 16];
#pragma unroll
      for (int kj = 0; kj < BN / 16; ++kj)
        dv[kj] = desc_sw128(sR + (2 * sp + 1) * TB, PANEL, 1024) + kj * (2048 >> 4);
      fence_desc<BN / 16>(dv);
      fence_regs<D / 2>(o);
      fence_uregs<BN / 4>(&ph[0][0]);
#if UA_WS128_BN != 128
      fence_uregs<BN / 4>(&pl[0][0]);
#endif
      wgmma_fence();
      pv_issue(dv, skip_pv);
      wgmma_commit();
      if (UA_PINGPONG) bar_arrive_if(2, 256, wg == 0);  // warpgroup 1's last turn
      wgmma_wait<0>();
      fence_regs<D / 2>(o);
      if (UA_PERSIST)  // the last stage of the item is free (the next item's tiles follow)
        ws_release(BN == 128 ? bEV : bE, sp, lane);
    }

    // Every S of this warpgroup has completed (each warp waited for its own): after a barrier of
    // its 4 warps, the warpgroup's Q region (16 KiB) stages the output, 256-byte rows with the
    // 16-byte chunks XOR-swizzled by row % 8 (conflict-free stores and loads).
    bar_sync_n(3 + wg, 128);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float sum = l[hf];
      if (!UA_LO_SKIP) {  // else already the row's sum
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      }
      const float inv = 1.f / sum;
      const int row = 16 * wl + g + hf * 8;
#pragma unroll
      for (int d = 0; d < D / 8; ++d) {
        __nv_bfloat162 v =
            __floats2bfloat162_rn(o[4 * d + 2 * hf] * inv, o[4 * d + 2 * hf + 1] * inv);
#if UA_WS128_BN == 128  // in Q's two panels (the other warpgroup's panels lie between)
        sts32(sQw + (d >> 3) * PANEL + row * 128 + (((d & 7) ^ (row & 7)) << 4) + tig * 4,
              *reinterpret_cast<unsigned*>(&v));
#else
      sts32(sQw + row * 256 + ((d ^ (row & 7)) << 4) + tig * 4, *reinterpret_cast<unsigned*>(&v));
#endif
      }
    }
    __syncwarp();
    for (int c = lane; c < 16 * CH; c += 32) {
      const int row = 16 * wl + c / CH, ch = c % CH, r = wr0 + row;
      if (r >= len) continue;
#if UA_WS128_BN == 128
      const uint4 v = lds128(sQw + (ch >> 3) * PANEL + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
#else
    const uint4 v = lds128(sQw + row * 256 + ((ch ^ (row & 7)) << 4));
#endif
      *reinterpret_cast<uint4*>(out + ((qs + r) * hq + h + (pair ? wg : 0)) * D + ch * 8) = v;
    }
#if UA_PERSIST
    __syncwarp();  // the warp's staged rows are read: the Q buffer may take item it + 2
    mbar_arrive_if(bQE + 8 * qb, lane == 0);
    gt += ntiles;
  }
#endif
}

#if UA_WS_SMALL
// ------------------------------------------------------------------------------------------
// d = 64, 72, 80, warp-specialized (UA_WS_SMALL = 1; kernel unified_attention_ws, 384 threads,
// the plan's grid (hq, ceil(seq_len / 128), sequences) as at d = 128): attn_ws_d128's design
// (producer warpgroup with cp.async on full / empty mbarriers through the 16-row page table,
// two consumer warpgroups of 64 query rows, S = Q K^T with Q's A fragments in registers (RS),
// P = bf16 hi + lo with two P V products per tile, S_t issued before P_{t-1} V_{t-1} so the
// softmax of tile t runs under the P V of tile t - 1, causal masking on the tiles that cross
// the diagonal or the sequence end), with:
// - Head size padded to DP = 16 ceil(d / 16) (72 -> 80). A 64- (or BN-) row operand tile (Q of
//   a warpgroup, K_t, V_t) holds columns 0 .. 63 in one panel of 128-byte rows with the 128-byte
//   swizzle (16-byte chunk c of row r at c ^ (r % 8)) and, for DP = 80, columns 64 .. 79 in a
//   tail panel of 32-byte rows with the 32-byte swizzle (chunk c of row r at c ^ ((r / 4) % 2);
//   descriptor layout type 3), the layout that bench/hopper/afwd/attention_forward_ws.cu
//   measured correct on the H200. S's fifth k16 step reads the tail panels (K-major, SBO 256);
//   P V is one n64 wgmma on V's first panel plus one n16 on its tail (MN-major, SBO 256). d = 72's
//   pad columns 72 .. 79 are zeroed once in Q and in every ring tile (no cp.async writes them),
//   so S is exact; O's pad columns are never stored.
// - UA_WS_BN keys per tile (128: S as m64n128k16; 64: m64n64k16): at these head sizes a tile's
//   tensor work is small against the per-tile chain of the consumer (barrier waits, the S
//   latency, the row max, the exponentials, the P split, the O rescale), so larger tiles halve
//   the chain's fixed part per key (bench/hopper/afwd/NOTES.md: 128-key tiles looked ~20 %
//   faster at d = 72 there). Registers at 128: O 40 + S 64 + P_{t-1} hi / lo 64 + Q 20 per
//   consumer thread, under the 232 of setmaxnreg.
// - UA_WS_PP = 1: the two consumer warpgroups take turns issuing their wgmma (named barriers 1
//   and 2), so one warpgroup's softmax runs under the other's MMAs (FA3's ping-pong; measured
//   faster at d = 72 in bench/hopper/afwd, slower at d = 128 here).
// - Producer: per tile, one block-table load per 16-row page for the 128-byte panels (thread t
//   copies chunk t % 8 of rows t / 8 + 16 i, all in page i of the tile) and one or two for the
//   tail chunks; 32-bit cache rows (block * 16 + row) so the 40 registers hold.
#ifndef UA_WS_BN
#define UA_WS_BN 128
#endif
#ifndef UA_WS_NS
// ring stages (a K and a V tile of UA_WS_BN x DP bf16 each)
#define UA_WS_NS 3
#endif
#ifndef UA_WS_PP
// 1: the consumers' ping-pong (measured faster at d 72 / 80: s5 1057 against 1198 us at 0)
#define UA_WS_PP 1
#endif
#ifndef UA_WS_PREG
// registers of the producer warpgroup (setmaxnreg.dec) and of the consumers (.inc), 40 / 232 as
// at d = 128. Measured (H200, 2026-12-04 01:25 UTC): with 72 / 216 here, attn_ws_d128 in the same
// kernel took 135.4 instead of 113.6 us on s21 (no spills either way): ptxas seems to compile
// every region of the kernel for the smallest count that any setmaxnreg of it names, so the
// two paths must name the same ones
#define UA_WS_PREG 40
#endif
#ifndef UA_WS_CREG
#define UA_WS_CREG 232
#endif
static_assert(UA_WS_BN == 64 || UA_WS_BN == 128, "UA_WS_BN: 64 or 128");
static_assert(UA_WS_PREG * 128 + UA_WS_CREG * 256 <= 168 * 384,
              "setmaxnreg: the launch's registers");

#ifndef KOPT_EMU
__device__ __forceinline__ void wgmma_m64n128k16_rs(float* d, const unsigned (&a)[4],
                                                    unsigned long long db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
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
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
// O += P V on the first 64 columns (V MN-major, imm-trans-b = 1) and on the 16-column tail.
__device__ __forceinline__ void wgmma_m64n64k16_rs_t(float* d, const unsigned (&a)[4],
                                                     unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void wgmma_m64n16k16_rs_t(float* d, const unsigned (&a)[4],
                                                     unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
#endif  // KOPT_EMU

// Shared-memory matrix descriptor; lbo / sbo in bytes; mode 1 = 128-byte swizzle, 3 = 32-byte.
__device__ __forceinline__ unsigned long long ws_desc(unsigned addr, unsigned lbo, unsigned sbo,
                                                      unsigned mode) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(sbo >> 4) << 32) | ((unsigned long long)mode << 62);
}
// Byte offset of 16-byte chunk c (columns 8c .. 8c + 7) of row r of a ROWS-row tile: chunks
// 0 .. 7 in the 128-byte-swizzled panel, 8 and 9 (DP = 80) in the 32-byte-swizzled tail panel.
template <int ROWS>
__device__ __forceinline__ unsigned ws_chunk_off(int r, int c) {
  if (c < 8) return r * 128 + (((c & 7) ^ (r & 7)) << 4);
  return ROWS * 128 + r * 32 + (((c - 8) ^ ((r >> 2) & 1)) << 4);
}

// One instance for the three head sizes (D at run time, DP = 80; d = 64 zero-pads 16 columns
// too, the cost of its one short workload): with two template instances in the kernel ptxas
// spilled 12 bytes whatever the producer's register count, with one it spills none.
__device__ __forceinline__ void attn_ws_small(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
    const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ seqused_k,
    const int* __restrict__ block_table, __nv_bfloat16* __restrict__ out,
    const int* __restrict__ cu, int hq, int hkv, const int D, int max_blocks, unsigned char* smem,
    long long qs_given = -1) {  // the sequence's first query row, or -1: read it from cu
  constexpr int DP = 80;        // padded head size: a 128-byte panel and a 32-byte tail panel
  constexpr int BM = 128, BN = UA_WS_BN, NS = UA_WS_NS;
  constexpr int CHP = DP / 8;       // 16-byte chunks of a padded row
  constexpr int KS = DP / 16;       // k16 steps of S
  constexpr int NO = DP / 2;        // O accumulator registers per thread
  constexpr int TBQ = 64 * DP * 2;  // bytes of one warpgroup's Q tile
  constexpr int TB = BN * DP * 2;   // bytes of one K or V tile
  static_assert(1024 + 2 * TBQ + 2 * NS * TB <= 232448, "shared memory: fewer stages or keys");
  const int CH = D >> 3;  // real 16-byte chunks of a row (8, 9, 10)
  const int CT = CH - 8;  // ... of its tail (0, 1, 2)
  const int h = blockIdx.x, seq = blockIdx.z;
  const int qt = gridDim.y - 1 - blockIdx.y;  // longest tiles first
  const int len = seqused_k[seq];
  const int r0 = qt * BM;
  if (r0 >= len) return;  // uniform across the block
#if UA_PERSIST            // the workspace's prefix sums follow the work counter, num_seqs, ...
  cu += 4;
#endif
  const long long qs = qs_given >= 0 ? qs_given : cu[seq];
  const int hk = h / (hq / hkv);
  const int tid = threadIdx.x, lane = tid & 31;
  const int g = lane >> 2, tig = lane & 3;
  // Barriers (8 bytes each) at the start: fullQ, fullK[NS], fullV[NS], empty[NS]; then Q of
  // both consumer warpgroups and the ring, 1024-aligned (the plan adds the slack).
  const unsigned base = smem_u32(smem);
  const unsigned bQ = base, bK = base + 8, bV = bK + 8 * NS, bE = bV + 8 * NS;
  const unsigned sQ = (base + 8 * (1 + 3 * NS) + 1023u) & ~1023u;
  const unsigned sR = sQ + 2 * TBQ;     // stage s: K at sR + 2 s TB, V at sR + (2 s + 1) TB
  const int bt_row = seq * max_blocks;  // < 2^31: the block table's int entries
  const int ntiles = (min(len, r0 + BM) + BN - 1) / BN;
  if (tid == 0) ws_ring_init<NS>(bQ, bK, bV, bE);
  if (CH < CHP) {  // zero the pad chunks (d 64: columns 64 .. 79, d 72: 72 .. 79) of every tile
    for (int row = tid; row < BM + 2 * NS * BN; row += 384)  // once: no cp.async writes them
      for (int c = CH; c < CHP; ++c)
        sts128(row < BM ? sQ + (row >> 6) * TBQ + ws_chunk_off<64>(row & 63, c)
                        : sR + (row - BM) / BN * TB + ws_chunk_off<BN>((row - BM) % BN, c),
               make_uint4(0u, 0u, 0u, 0u));
    fence_proxy_async();  // generic stores, read by wgmma (async proxy)
  }
  __syncthreads();

  if (tid < 128) {  // the producer warpgroup
    setmaxnreg_dec<UA_WS_PREG>();
    // 128-byte panels: thread t copies chunk t % 8 of rows t / 8 + 16 i (of a K / V tile: page
    // i); the swizzled position depends on the row only through r % 8 = (t / 8) % 8. The tail
    // chunks: c = t + 128 i (i < 2, c < rows x CT) is row c / CT, chunk 8 + c % CT (the same
    // chunk in every pass).
    const int cc = tid & 7, rr = tid >> 3;
    const unsigned dst_off = rr * 128 + ((cc ^ (rr & 7)) << 4);
    const int tch = CT == 2 ? tid & 1 : 0;  // the thread's tail chunk - 8
    auto trow_of = [&](int i) { return CT == 2 ? (tid >> 1) + 64 * i : tid + 128 * i; };
#pragma unroll
    for (int i = 0; i < BM / 16; ++i) {  // Q: 128 rows (warpgroup row / 64's tile)
      const int row = rr + 16 * i, r = r0 + row;
      const bool ok = r < len;
      cp_async16(sQ + (row >> 6) * TBQ + ws_chunk_off<64>(row & 63, cc),
                 ok ? q + ((qs + r) * hq + h) * D + cc * 8 : q, ok ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = trow_of(i), r = r0 + row;
      if (tid + 128 * i >= BM * CT) break;
      const bool ok = r < len;
      cp_async16(sQ + (row >> 6) * TBQ + ws_chunk_off<64>(row & 63, 8 + tch),
                 ok ? q + ((qs + r) * hq + h) * D + (8 + tch) * 8 : q, ok ? 16 : 0);
    }
    cp_async_mbar_arrive(bQ);
    // K / V element (cache row cr, chunk cc of head hk) at kh / vh + cr * rs, the tail chunk
    // tdel further: one 32 x 32 -> 64-bit multiply-add per copy, 32-bit cache rows (64-bit
    // element offsets per copy spilled the producer)
    constexpr int NTL = BN * 2 / 128;  // tail passes at d = 80
    const __nv_bfloat16* const kh = k_cache + hk * D + cc * 8;
    const __nv_bfloat16* const vh = v_cache + hk * D + cc * 8;
    const int rs = hkv * D, tdel = (8 + tch - cc) * 8;
    // Page i of the tile holds rows rr + 16 i; cache row (block * 16 + row in block) 0 (a
    // valid address, copied as 0 bytes: zero fill) past the sequence end.
    ws_produce_kv<NS, BN, TB>(
        ntiles, len, rr, bK, bV, bE, sR, kh, vh,
        [&](const __nv_bfloat16* __restrict__ src, unsigned dst, int j0, int nv) {
#pragma unroll
          for (int i = 0; i < BN / 16; ++i) {
            const int cr = 16 * i < nv ? block_table[bt_row + ((j0 + 16 * i) >> 4)] * 16 + rr : 0;
            cp_async16(dst + dst_off + i * 16 * 128, src + static_cast<long long>(cr) * rs,
                       16 * i < nv ? 16 : 0);
          }
#pragma unroll
          for (int i = 0; i < NTL; ++i) {
            if (tid + 128 * i >= BN * CT) break;
            const int row = trow_of(i), j = j0 + row;
            const int cr = j < len ? block_table[bt_row + (j >> 4)] * 16 + (j & 15) : 0;
            cp_async16(dst + ws_chunk_off<BN>(row, 8 + tch),
                       src + (static_cast<long long>(cr) * rs + tdel), j < len ? 16 : 0);
          }
        });
    return;
  }

  setmaxnreg_inc<UA_WS_CREG>();
  const int ct = tid - 128, wg = ct >> 7, wl = (ct >> 5) & 3;
  const unsigned sQw = sQ + wg * TBQ;
  const int wrow_lo = r0 + 64 * wg + 16 * wl;
  const float sl2 = 1.4426950408889634f * rsqrtf(static_cast<float>(D));
  float o[NO], sacc[BN / 2];
  ws_zero(o);
  ws_zero(sacc);
  float m[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)}, l[2] = {0.f, 0.f};
  unsigned ph[BN / 16][4], pl[BN / 16][4];  // P_{t-1} (in flight in the P V group)
  ws_zero_p(ph, pl);
  // P V of the V tile at va: per 16 keys (2048 bytes of the first panel, 512 of the tail), lo
  // then hi, one n64 on the first panel [+ one n16 on the tail]
  auto pv_issue = [&](unsigned va) {
#pragma unroll
    for (int kj = 0; kj < BN / 16; ++kj) {
      const unsigned long long dv = ws_desc(va, BN * 128, 1024, 1) + kj * (2048 >> 4);
      if (UA_P_SPLIT) wgmma_m64n64k16_rs_t(o, pl[kj], dv);
      wgmma_m64n64k16_rs_t(o, ph[kj], dv);
      {
        const unsigned long long dt = ws_desc(va + BN * 128, 32, 256, 3) + kj * (512 >> 4);
        if (UA_P_SPLIT) wgmma_m64n16k16_rs_t(o + 32, pl[kj], dt);
        wgmma_m64n16k16_rs_t(o + 32, ph[kj], dt);
      }
    }
  };
  mbar_wait(bQ, 0);
  unsigned qf[KS][4];  // Q's A fragments (rows 16 wl .. of the warpgroup, k16 step kk)
#pragma unroll
  for (int kk = 0; kk < KS; ++kk)
    ldsm_x4(sQw + ws_chunk_off<64>(16 * wl + (lane & 15), 2 * kk + (lane >> 4)), qf[kk]);
  if (UA_WS_PP) bar_arrive_if(1, 256, wg == 1);  // warpgroup 0 issues first
  // Iteration t issues S_t and (t > 0) P_{t-1} V_{t-1}; the last P V follows the loop.
  for (int t = 0; t < ntiles; ++t) {
    const bool do_pv = t > 0;
    const int s = t % NS, sp = (t + NS - 1) % NS;
    mbar_wait(bK + 8 * s, (t / NS) & 1);
    if (do_pv) mbar_wait(bV + 8 * sp, ((t - 1) / NS) & 1);
    fence_proxy_async();  // the cp.async (generic proxy) writes, before wgmma reads them
    if (UA_WS_PP) bar_sync_n(1 + wg, 256);
    const unsigned ka = sR + 2 * s * TB, va = sR + (2 * sp + 1) * TB;
    fence_uregs<4 * KS>(&qf[0][0]);
    fence_regs<NO>(o);
    fence_regs<BN / 2>(sacc);
    fence_uregs<BN / 4>(&ph[0][0]);
    fence_uregs<BN / 4>(&pl[0][0]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      // k16 step kk: 32 bytes into the 128-byte panel's rows, or the tail panel (kk = 4)
      const unsigned long long dk =
          kk < 4 ? ws_desc(ka, 16, 1024, 1) + 2 * kk : ws_desc(ka + BN * 128, 16, 256, 3);
      if (BN == 128)
        wgmma_m64n128k16_rs(sacc, qf[kk], dk, kk > 0);
      else
        wgmma_m64n64k16_rs(sacc, qf[kk], dk, kk > 0);
    }
    wgmma_commit();
    if (do_pv) {
      wgmma_fence();
      pv_issue(va);
      wgmma_commit();
    }
    if (do_pv)
      wgmma_wait<1>();
    else
      wgmma_wait<0>();
    fence_regs<BN / 2>(sacc);
    if (UA_WS_PP) bar_arrive_n(2 - wg, 256);  // the other warpgroup's turn, S_t done
    ws_mask<BN>(sacc, t * BN, wrow_lo, len, g, tig);
    unsigned nh[BN / 16][4], nl[BN / 16][4];
    float corr[2];
    ws_softmax<BN>(sacc, m, l, sl2, nh, nl, corr);
    wgmma_wait<0>();  // P_{t-1} V_{t-1} done
    fence_regs<NO>(o);
    fence_uregs<BN / 4>(&ph[0][0]);
    fence_uregs<BN / 4>(&pl[0][0]);
    ws_rescale(o, corr);
    ws_take_p(ph, pl, nh, nl);
    if (do_pv) ws_release(bE, sp, lane);  // S_{t-1} and P_{t-1} V_{t-1} of this warp are done
  }
  {  // the last P V
    const int sp = (ntiles - 1) % NS;
    mbar_wait(bV + 8 * sp, ((ntiles - 1) / NS) & 1);
    fence_proxy_async();
    if (UA_WS_PP) bar_sync_n(1 + wg, 256);
    const unsigned va = sR + (2 * sp + 1) * TB;
    fence_regs<NO>(o);
    fence_uregs<BN / 4>(&ph[0][0]);
    fence_uregs<BN / 4>(&pl[0][0]);
    wgmma_fence();
    pv_issue(va);
    wgmma_commit();
    if (UA_WS_PP) bar_arrive_if(2, 256, wg == 0);  // warpgroup 1's last turn
    wgmma_wait<0>();
    fence_regs<NO>(o);
  }

  // The warpgroup's Q tile (read only by its own warps' ldmatrix, long done) stages the output
  // in the same chunk layout; each warp writes and reads its own 16 rows.
  ws_stage_out(o, l, wg, wl, g, tig,
               [&](int row, int c) { return sQw + ws_chunk_off<64>(row, c); });
  for (int c = lane; c < 16 * CH; c += 32) {
    const int row = 16 * wl + c / CH, ch = c - (c / CH) * CH, r = r0 + 64 * wg + row;
    if (r >= len) continue;
    const uint4 v = lds128(sQw + ws_chunk_off<64>(row, ch));
    *reinterpret_cast<uint4*>(out + ((qs + r) * hq + h) * D + ch * 8) = v;
  }
}
#endif  // UA_WS_SMALL

// 256 threads: the two-warpgroup wgmma path (UA_WGMMA = 2); every other path
// runs 128 (THREADS). The register cap (255) is the same as (128, 2)'s.
extern "C" __global__ void __launch_bounds__(256, 1)
    unified_attention_fa2(const __nv_bfloat16* __restrict__ q,
                          const __nv_bfloat16* __restrict__ k_cache,
                          const __nv_bfloat16* __restrict__ v_cache,
                          const int* __restrict__ seqused_k, const int* __restrict__ block_table,
                          __nv_bfloat16* __restrict__ out, const int* __restrict__ cu,
                          int num_query_heads, int num_kv_heads, int head_size, int block_size,
                          int max_blocks) {
  extern __shared__ __align__(128) unsigned char smem[];
  if (block_size != 16) return;
#if UA_WS_SMALL  // unified_attention_ws takes d <= 80 from 8 pages on (the plan's rule; max_blocks
  if (head_size <= 80 && max_blocks >= 10) return;  // = ceil(seq_len / 16) + 2)
#endif
#if UA_WS_BIG                    // d 192 / 256: unified_attention_ws_big (the plan gives this
  if (head_size >= 192) return;  // launch one block there, or does not run it)
#endif
#if UA_PERSIST  // the workspace's prefix sums follow the work counter, num_seqs, ...
  cu += 4;
#endif
  const int len = seqused_k[blockIdx.z];
  const long long qs = cu[blockIdx.z];
#define KOPT_UA_CASE(D, DP, WM, BN)                                                              \
  case D:                                                                                        \
    attn_tile<D, DP, WM, BN, true, true, UA_P_SPLIT>(q, k_cache, v_cache, block_table, out, len, \
                                                     qs, num_query_heads, num_kv_heads,          \
                                                     max_blocks, smem);                          \
    break;
  switch (head_size) {
    KOPT_UA_CASE(64, 64, 2, 64)
    KOPT_UA_CASE(72, 80, 2, 64)
    KOPT_UA_CASE(80, 80, 2, 64)
    case 128:
      if (UA_WGMMA == 3)
        break;  // unified_attention_ws (the plan gives this launch one block)
      else if (UA_WGMMA == 2)
        attn_wgmma_d128<2>(q, k_cache, v_cache, seqused_k, block_table, out, cu, num_query_heads,
                           num_kv_heads, max_blocks, smem);
      else if (UA_WGMMA == 1)
        attn_wgmma_d128<1>(q, k_cache, v_cache, seqused_k, block_table, out, cu, num_query_heads,
                           num_kv_heads, max_blocks, smem);
      else
        attn_tile<128, 128, 2, UA_BN128, true, true, UA_P_SPLIT>(q, k_cache, v_cache, block_table,
                                                                 out, len, qs, num_query_heads,
                                                                 num_kv_heads, max_blocks, smem);
      break;
      KOPT_UA_CASE(192, 192, 1, 32)
      KOPT_UA_CASE(256, 256, 1, 32)
    default:
      break;
  }
#undef KOPT_UA_CASE
}

// 384 threads: the warp-specialized d = 128 path (UA_WGMMA = 3); every other head size and path
// is unified_attention_fa2 (the plan gives this launch one block there, which returns).
extern "C" __global__ void __launch_bounds__(384, 1)
    unified_attention_ws(const __nv_bfloat16* __restrict__ q,
                         const __nv_bfloat16* __restrict__ k_cache,
                         const __nv_bfloat16* __restrict__ v_cache,
                         const int* __restrict__ seqused_k, const int* __restrict__ block_table,
                         __nv_bfloat16* __restrict__ out, const int* __restrict__ cu,
                         int num_query_heads, int num_kv_heads, int head_size, int block_size,
                         int max_blocks) {
  extern __shared__ __align__(128) unsigned char smem[];
#if UA_WS_SMALL == 1  // d 64 / 72 / 80 (attn_ws_small) when seq_len > 112 (max_blocks =
  // ceil(seq_len / 16) + 2 >= 10; the plan's rule): below, unified_attention_fa2 is faster (s15,
  // 7 tokens: 11.6 us there, 12.7 here; H200, 2026-12-04)
  if (block_size != 16) return;
  if ((head_size == 64 || head_size == 72 || head_size == 80) && max_blocks >= 10)
    attn_ws_small(q, k_cache, v_cache, seqused_k, block_table, out, cu, num_query_heads,
                  num_kv_heads, head_size, max_blocks, smem);
  if (head_size <= 80) return;
#endif
  if (UA_WGMMA != 3 || head_size != 128 || block_size != 16) return;
  attn_ws_d128(q, k_cache, v_cache, seqused_k, block_table, out, cu, num_query_heads, num_kv_heads,
               max_blocks, smem);
}

#if UA_WS_SMALL == 2
// UA_WS_SMALL = 2: d 64 / 72 / 80 (from 8 pages on) in a kernel of their own, so that
// unified_attention_ws keeps the shipped machine code for d = 128 (with attn_ws_small inlined
// beside attn_ws_d128, ptxas compiled the d = 128 path differently: s20 891 instead of 865 us,
// s21 120 instead of 114, H200 2026-12-04). Candidate plans only (bench/hopper/uattn/small):
// - num_seqs = 0 (cand_k4pp): a fourth launch after unified_attention_cu; the other head sizes
//   give it one block, which returns (measured: 2.0-3.2 us more on every other workload).
// - num_seqs > 0 (cand_k3pp): this kernel replaces unified_attention_cu as the plan's first
//   launch, so the plan keeps three launches: block (0, 0, 0) writes the prefix sums cu[] (and
//   UA_PERSIST's counters) as unified_attention_cu does, with its 384 threads, for the launches
//   after it; a block of d <= 80 work sums seqused_k before its own sequence itself (the other
//   blocks of this launch cannot wait for block 0). Scratch: the first 4 KiB of the dynamic
//   shared memory (the plan gives 4096 bytes where there is no d <= 80 work).
extern "C" __global__ void __launch_bounds__(384, 1)
    unified_attention_ws_small(const __nv_bfloat16* __restrict__ q,
                               const __nv_bfloat16* __restrict__ k_cache,
                               const __nv_bfloat16* __restrict__ v_cache,
                               const int* __restrict__ seqused_k,
                               const int* __restrict__ block_table, __nv_bfloat16* __restrict__ out,
                               int* __restrict__ cu, int num_query_heads, int num_kv_heads,
                               int head_size, int block_size, int max_blocks, int num_seqs) {
  extern __shared__ __align__(128) unsigned char smem[];
#if UA_WS_BIG == 2  // every d <= 80 length here: the plan of UA_WS_BIG 2 does
  // not launch unified_attention_fa2 (its second launch is unified_attention_ws_big)
  const bool work = block_size == 16 && (head_size == 64 || head_size == 72 || head_size == 80);
#else
  const bool work = block_size == 16 && max_blocks >= 10 &&
                    (head_size == 64 || head_size == 72 || head_size == 80);
#endif
  long long qs = -1;
  if (num_seqs > 0) {
    const int t = threadIdx.x;
    const unsigned part = smem_u32(smem);  // 384 ints of scratch
    if (blockIdx.x + blockIdx.y + blockIdx.z == 0) {
      int* c = cu;
#if UA_PERSIST  // the workspace is [work counter, num_seqs, finished blocks, 0, cu...]
      if (t == 0) {
        c[0] = 0;
        c[1] = num_seqs;
        c[2] = 0;
        c[3] = 0;
      }
      c += 4;
#endif
      // unified_attention_cu's scan with 384 threads: contiguous runs, then Hillis-Steele
      const int per = (num_seqs + 383) / 384;
      const int b = t * per, e = min(num_seqs, b + per);
      int sum = 0;
      for (int i = b; i < e; ++i) sum += seqused_k[i];
      sts32(part + 4 * t, static_cast<unsigned>(sum));
      __syncthreads();
      for (int off = 1; off < 384; off *= 2) {
        const int v = t >= off ? static_cast<int>(lds32(part + 4 * (t - off))) : 0;
        __syncthreads();
        sts32(part + 4 * t, lds32(part + 4 * t) + static_cast<unsigned>(v));
        __syncthreads();
      }
      int run = t == 0 ? 0 : static_cast<int>(lds32(part + 4 * (t - 1)));
      for (int i = b; i < e; ++i) {
        c[i] = run;
        run += seqused_k[i];
      }
      if (t == 383) c[num_seqs] = static_cast<int>(lds32(part + 4 * 383));
      __syncthreads();  // the scratch is read: the barriers of attn_ws_small may go there
    }
    if (!work) return;
    // this block's sequence start: a tree sum of seqused_k[0 .. seq) over the 384 threads
    const int seq = blockIdx.z;
    int sum = 0;
    for (int i = t; i < seq; i += 384) sum += seqused_k[i];
    sts32(part + 4 * t, static_cast<unsigned>(sum));
    __syncthreads();
    for (int n = 256; n > 0; n >>= 1) {  // 384 = 256 + 128: fold the top 128 in first
      if (t < n && t + n < 384)
        sts32(part + 4 * t, lds32(part + 4 * t) + lds32(part + 4 * (t + n)));
      __syncthreads();
    }
    qs = static_cast<int>(lds32(part));
    __syncthreads();
  }
  if (work)
    attn_ws_small(q, k_cache, v_cache, seqused_k, block_table, out, cu, num_query_heads,
                  num_kv_heads, head_size, max_blocks, smem, qs);
}
#endif

#if UA_WS_BIG
// ------------------------------------------------------------------------------------------
// d = 192, 256, warp-specialized (UA_WS_BIG = 1; kernel unified_attention_ws_big, 384 threads,
// grid (hq, ceil(seq_len / 128), sequences), longest q tiles first): attn_ws_small's design
// (producer warpgroup with cp.async on full / empty mbarriers through the 16-row page table; two
// consumer warpgroups of 64 query rows; P = bf16 hi + lo, two P V products per tile, which the
// tolerance requires (header); S_t issued before P_{t-1} V_{t-1}; online softmax; causal mask on
// the tiles that cross the diagonal or the sequence end), with what the registers force:
// - O is 64 x d fp32 per warpgroup: d / 2 = 128 (d 256) / 96 (d 192) registers per consumer
//   thread. Q's A fragments would be another d / 4 (64 / 48), so S = Q K^T is an SS wgmma (Q read
//   from shared memory every tile) and the tiles are UA_WB_BN = 32 keys: S 16 + P_{t-1} hi / lo
//   16 (in flight in the P V group) + P_t hi / lo 16 being built, so the consumer's peak stays
//   near 128 + 48 + addresses and softmax state under setmaxnreg's 232. 48- and 64-key tiles
//   (UA_WB_BN 48 / 64, S as m64n48k16 / m64n64k16; 3 / 2 stages) add 24 / 48 registers at d 256
//   and halve / third Q's per-key shared-memory reads: options to measure.
// - Every tile (Q of a warpgroup: 64 rows; K_t, V_t: BN rows) is d / 64 panels of 128-byte rows
//   with the 128-byte swizzle (16-byte chunk c of row r at panel c / 8, chunk (c % 8) ^ (r % 8)):
//   d = 192 is 3 panels, 256 is 4, no pad columns. S's k16 step kk reads panel kk / 4 of Q and
//   K (K-major, SBO 1024); P V is ONE m64n{d}k16 per 16 keys and P term (V MN-major, the panels
//   LBO = BN x 128 bytes apart, as attn_ws_d128's two-panel n128).
// - Shared memory: 1 KiB barriers / alignment slack + Q 2 x 64 x d + UA_WB_NS stages of a K and
//   a V tile (BN x d each): d 256, 32 keys, 4 stages: 1024 + 65536 + 131072 = 197632 bytes.
// - Producer (40 registers, the launch's 168 x 384 budget with the consumers' 232): per tile the
//   BN / 16 block-table entries once (shared by the K and V copies), then BN x d / 8 / 128
//   16-byte copies per thread for K and as many for V (copy i of thread t: chunk t + 128 i of
//   the tile, row (t + 128 i) / (d / 8)).
// - UA_WB_PP (default 1): the consumers take turns issuing their wgmma (named barriers 1 / 2),
//   as attn_ws_small; 0: both issue freely.
#ifndef UA_WB_BN
#define UA_WB_BN 32
#endif
#ifndef UA_WB_NS
#define UA_WB_NS 4
#endif
#ifndef UA_WB_PP
#define UA_WB_PP 1
#endif
#ifndef UA_WB_SKIP
// 1: a warpgroup does not issue the wgmma of the tiles wholly after its rows (warpgroup 0 of a
// diagonal q tile: up to 64 keys); 0: it computes them and masks them as attn_ws_small does
#define UA_WB_SKIP 1
#endif
#ifndef UA_WB_PREG
#define UA_WB_PREG 40
#endif
#ifndef UA_WB_CREG
#define UA_WB_CREG 232
#endif
static_assert(UA_WB_BN == 32 || UA_WB_BN == 48 || UA_WB_BN == 64, "UA_WB_BN: 32, 48 or 64");
static_assert(UA_WB_PREG * 128 + UA_WB_CREG * 256 <= 168 * 384,
              "setmaxnreg: the launch's registers");

#ifndef KOPT_EMU
__device__ __forceinline__ void wgmma_m64n32k16_ss(float* d, unsigned long long da,
                                                   unsigned long long db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_m64n48k16_ss(float* d, unsigned long long da,
                                                   unsigned long long db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23"
      "}, %24, %25, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
      : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_m64n192k16_rs_t(float* d, const unsigned (&a)[4],
                                                      unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
      "}, {%96, %97, %98, %99}, %100, p, 1, 1, 1;\n}\n"
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
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void wgmma_m64n256k16_rs_t(float* d, const unsigned (&a)[4],
                                                      unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "
      "%127"
      "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
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
#endif  // KOPT_EMU

// Byte offset of 16-byte chunk c (columns 8c .. 8c + 7) of row r of a ROWS-row tile of 64-column
// 128-byte-swizzled panels.
template <int ROWS>
__device__ __forceinline__ unsigned wb_off(int r, int c) {
  return (c >> 3) * (ROWS * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

template <int D>
__device__ __forceinline__ void attn_ws_big(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
    const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ seqused_k,
    const int* __restrict__ block_table, __nv_bfloat16* __restrict__ out,
    const int* __restrict__ cu, int hq, int hkv, int max_blocks, unsigned char* smem) {
  constexpr int BM = 128, BN = UA_WB_BN, NS = UA_WB_NS;
  constexpr int CH = D / 8;        // 16-byte chunks of a row
  constexpr int KS = D / 16;       // k16 steps of S
  constexpr int NO = D / 2;        // O accumulator registers per thread
  constexpr int TBQ = 64 * D * 2;  // bytes of one warpgroup's Q tile
  constexpr int TB = BN * D * 2;   // bytes of one K or V tile
  static_assert(1024 + 2 * TBQ + 2 * NS * TB <= 232448, "shared memory: fewer stages or keys");
  const int h = blockIdx.x, seq = blockIdx.z;
  const int qt = gridDim.y - 1 - blockIdx.y;  // longest tiles first
  const int len = seqused_k[seq];
  const int r0 = qt * BM;
  if (r0 >= len) return;  // uniform across the block
#if UA_PERSIST            // the workspace's prefix sums follow the work counter, num_seqs, ...
  cu += 4;
#endif
  const long long qs = cu[seq];
  const int hk = h / (hq / hkv);
  const int tid = threadIdx.x, lane = tid & 31;
  const int g = lane >> 2, tig = lane & 3;
  // Barriers (8 bytes each) at the start: fullQ, fullK[NS], fullV[NS], empty[NS]; then Q of
  // both consumer warpgroups and the ring, 1024-aligned (the plan adds the slack).
  const unsigned base = smem_u32(smem);
  const unsigned bQ = base, bK = base + 8, bV = bK + 8 * NS, bE = bV + 8 * NS;
  const unsigned sQ = (base + 8 * (1 + 3 * NS) + 1023u) & ~1023u;
  const unsigned sR = sQ + 2 * TBQ;     // stage s: K at sR + 2 s TB, V at sR + (2 s + 1) TB
  const int bt_row = seq * max_blocks;  // < 2^31: the block table's int entries
  const int ntiles = (min(len, r0 + BM) + BN - 1) / BN;
  if (tid == 0) ws_ring_init<NS>(bQ, bK, bV, bE);
  __syncthreads();

  if (tid < 128) {  // the producer warpgroup
    setmaxnreg_dec<UA_WB_PREG>();
    // Thread t copies chunk t % 8 of every panel of rows t / 8 + 16 i (of a K / V tile: page i),
    // so its swizzled position, its row within the page and its page are fixed per pass: per
    // tile two 64-bit row addresses (K, V) per page and immediate panel offsets (a mapping with
    // a chunk index t + 128 i per copy spilled the producer's 40 registers at d 192)
    const int cc = tid & 7, rr = tid >> 3;
    const unsigned dst_off = rr * 128 + ((cc ^ (rr & 7)) << 4);
#pragma unroll
    for (int i = 0; i < BM / 16; ++i) {  // Q: 128 rows (warpgroup row / 64's tile)
      const int row = rr + 16 * i, r = r0 + row;
      const bool ok = r < len;
      const __nv_bfloat16* src = q + ((qs + r) * hq + h) * D + cc * 8;
#pragma unroll
      for (int p = 0; p < D / 64; ++p)
        cp_async16(
            sQ + (row >> 6) * TBQ + p * (64 * 128) + (row & 63) * 128 + ((cc ^ (row & 7)) << 4),
            ok ? src + 64 * p : q, ok ? 16 : 0);
    }
    cp_async_mbar_arrive(bQ);
    // K / V chunk cc of panel p of cache row cr (block * 16 + row in block) of head hk at kh / vh
    // + cr * rs + 64 p: one 32 x 32 -> 64-bit multiply-add per page (32-bit cache rows)
    const __nv_bfloat16* const kh = k_cache + hk * D + cc * 8;
    const __nv_bfloat16* const vh = v_cache + hk * D + cc * 8;
    const int rs = hkv * D;
    ws_produce_kv<NS, BN, TB>(
        ntiles, len, rr, bK, bV, bE, sR, kh, vh,
        [&](const __nv_bfloat16* __restrict__ src, unsigned dst, int j0, int nv) {
#pragma unroll
          for (int i = 0; i < BN / 16; ++i) {
            const bool ok = 16 * i < nv;
            const int cr = ok ? block_table[bt_row + (j0 >> 4) + i] * 16 + rr : 0;
            const __nv_bfloat16* rp = src + static_cast<long long>(cr) * rs;
#pragma unroll
            for (int p = 0; p < D / 64; ++p)
              cp_async16(dst + p * (BN * 128) + i * (16 * 128) + dst_off, rp + 64 * p, ok ? 16 : 0);
          }
        });
    return;
  }

  setmaxnreg_inc<UA_WB_CREG>();
  const int ct = tid - 128, wg = ct >> 7, wl = (ct >> 5) & 3;
  const unsigned sQw = sQ + wg * TBQ;
  const int wrow_lo = r0 + 64 * wg + 16 * wl;
  // UA_WB_SKIP: tiles that start after the warpgroup's last row are masked whole; their S and
  // P V products are not issued (the mask below still sets S to -inf, so P = 0 and the stage
  // protocol, the ping-pong turns and the softmax state are as if they ran)
  const int wg_last = r0 + 64 * wg + 63;
  const float sl2 = 1.4426950408889634f * rsqrtf(static_cast<float>(D));
  float o[NO], sacc[BN / 2];
  ws_zero(o);
  ws_zero(sacc);
  float m[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)}, l[2] = {0.f, 0.f};
  unsigned ph[BN / 16][4], pl[BN / 16][4];  // P_{t-1} (in flight in the P V group)
  ws_zero_p(ph, pl);
  // P V of the V tile at va: per 16 keys (2048 bytes into every panel) lo then hi, one n = d
  // wgmma each
  auto pv_issue = [&](unsigned va) {
#pragma unroll
    for (int kj = 0; kj < BN / 16; ++kj) {
      const unsigned long long dv = desc_sw128(va, BN * 128, 1024) + kj * (2048 >> 4);
      if (D == 256) {
        if (UA_P_SPLIT) wgmma_m64n256k16_rs_t(o, pl[kj], dv);
        wgmma_m64n256k16_rs_t(o, ph[kj], dv);
      } else {
        if (UA_P_SPLIT) wgmma_m64n192k16_rs_t(o, pl[kj], dv);
        wgmma_m64n192k16_rs_t(o, ph[kj], dv);
      }
    }
  };
  const unsigned long long dq0 = desc_sw128(sQw, 16, 1024);
  mbar_wait(bQ, 0);
  if (UA_WB_PP) bar_arrive_if(1, 256, wg == 1);  // warpgroup 0 issues first
  // Iteration t issues S_t and (t > 0) P_{t-1} V_{t-1}; the last P V follows the loop.
  for (int t = 0; t < ntiles; ++t) {
    const bool do_pv = t > 0;
    const int s = t % NS, sp = (t + NS - 1) % NS;
    mbar_wait(bK + 8 * s, (t / NS) & 1);
    if (do_pv) mbar_wait(bV + 8 * sp, ((t - 1) / NS) & 1);
    fence_proxy_async();  // the cp.async (generic proxy) writes, before wgmma reads them
    if (UA_WB_PP) bar_sync_n(1 + wg, 256);
    const unsigned long long dk0 = desc_sw128(sR + 2 * s * TB, 16, 1024);
    const unsigned va = sR + (2 * sp + 1) * TB;
    fence_regs<NO>(o);
    fence_regs<BN / 2>(sacc);
    fence_uregs<BN / 4>(&ph[0][0]);
    fence_uregs<BN / 4>(&pl[0][0]);
    const bool live = !UA_WB_SKIP || t * BN <= wg_last;
    const bool live_pv = do_pv && (!UA_WB_SKIP || (t - 1) * BN <= wg_last);
    wgmma_fence();
    if (live) {
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        // k16 step kk: panel kk / 4, 32 bytes into its 128-byte rows per step
        const unsigned long long da = dq0 + (kk >> 2) * ((64 * 128) >> 4) + 2 * (kk & 3);
        const unsigned long long db = dk0 + (kk >> 2) * ((BN * 128) >> 4) + 2 * (kk & 3);
        if (BN == 32)
          wgmma_m64n32k16_ss(sacc, da, db, kk > 0);
        else if (BN == 48)
          wgmma_m64n48k16_ss(sacc, da, db, kk > 0);
        else
          wgmma_m64n64k16_ss(sacc, da, db, kk > 0);
      }
    }
    wgmma_commit();  // an empty group when !live
    if (do_pv) {
      wgmma_fence();
      if (live_pv) pv_issue(va);
      wgmma_commit();
    }
    if (do_pv)
      wgmma_wait<1>();
    else
      wgmma_wait<0>();
    fence_regs<BN / 2>(sacc);
    if (UA_WB_PP) bar_arrive_n(2 - wg, 256);  // the other warpgroup's turn, S_t done
    ws_mask<BN>(sacc, t * BN, wrow_lo, len, g, tig);
    unsigned nh[BN / 16][4], nl[BN / 16][4];
    float corr[2];
    ws_softmax<BN>(sacc, m, l, sl2, nh, nl, corr);
    wgmma_wait<0>();  // P_{t-1} V_{t-1} done
    fence_regs<NO>(o);
    fence_uregs<BN / 4>(&ph[0][0]);
    fence_uregs<BN / 4>(&pl[0][0]);
    ws_rescale(o, corr);
    ws_take_p(ph, pl, nh, nl);
    if (do_pv) ws_release(bE, sp, lane);  // S_{t-1} and P_{t-1} V_{t-1} of this warp are done
  }
  {  // the last P V
    const int sp = (ntiles - 1) % NS;
    mbar_wait(bV + 8 * sp, ((ntiles - 1) / NS) & 1);
    fence_proxy_async();
    if (UA_WB_PP) bar_sync_n(1 + wg, 256);
    const unsigned va = sR + (2 * sp + 1) * TB;
    fence_regs<NO>(o);
    fence_uregs<BN / 4>(&ph[0][0]);
    fence_uregs<BN / 4>(&pl[0][0]);
    wgmma_fence();
    if (!UA_WB_SKIP || (ntiles - 1) * BN <= wg_last) pv_issue(va);
    wgmma_commit();
    if (UA_WB_PP) bar_arrive_if(2, 256, wg == 0);  // warpgroup 1's last turn
    wgmma_wait<0>();
    fence_regs<NO>(o);
  }

  // The warpgroup's Q tile stages the output in the same chunk layout once all four warps'
  // wgmma (which read it as the A operand) are done; each warp writes and reads its own 16 rows.
  ws_stage_out(o, l, wg, wl, g, tig, [&](int row, int c) { return sQw + wb_off<64>(row, c); });
#pragma unroll 4
  for (int c = lane; c < 16 * CH; c += 32) {
    const int row = 16 * wl + c / CH, ch = c % CH, r = r0 + 64 * wg + row;
    if (r >= len) continue;
    const uint4 v = lds128(sQw + wb_off<64>(row, ch));
    *reinterpret_cast<uint4*>(out + ((qs + r) * hq + h) * D + ch * 8) = v;
  }
}

// UA_WS_BIG = 1: d 192 / 256 in a kernel of their own (so that no shipped kernel's machine code
// changes; inside unified_attention_ws, attn_ws_small slowed d = 128 by 3-5 %). The candidate
// plans (bench/hopper/uattn/big) give it the grid (hq, ceil(seq_len / 128), sequences) for d 192
// / 256 and one block, which returns, for the other head sizes. The prefix sums cu[] come from
// the plan's first launch (unified_attention_ws_small with num_seqs), which runs before it.
extern "C" __global__ void __launch_bounds__(384, 1)
    unified_attention_ws_big(const __nv_bfloat16* __restrict__ q,
                             const __nv_bfloat16* __restrict__ k_cache,
                             const __nv_bfloat16* __restrict__ v_cache,
                             const int* __restrict__ seqused_k, const int* __restrict__ block_table,
                             __nv_bfloat16* __restrict__ out, const int* __restrict__ cu,
                             int num_query_heads, int num_kv_heads, int head_size, int block_size,
                             int max_blocks) {
  extern __shared__ __align__(128) unsigned char smem[];
  if (block_size != 16) return;
  if (head_size == 256)
    attn_ws_big<256>(q, k_cache, v_cache, seqused_k, block_table, out, cu, num_query_heads,
                     num_kv_heads, max_blocks, smem);
  else if (head_size == 192)
    attn_ws_big<192>(q, k_cache, v_cache, seqused_k, block_table, out, cu, num_query_heads,
                     num_kv_heads, max_blocks, smem);
}
#endif  // UA_WS_BIG

// attention_forward (configs/bench/attention_forward.json): bidirectional
// attention over one packed sequence, q, k, v [seq_len, heads, head_dim], no
// GQA; the same mma.sync path with dense K/V rows, no causal mask, and one
// bf16 P (that config's atol 1e-2 admits bf16 P's ~1e-3 error). Grid
// (heads, ceil(seq_len / 128)); head_dim 64, 72, 80, 128.
extern "C" __global__ void __launch_bounds__(THREADS, 2)
    attention_forward_fa2(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                          const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ out,
                          int seq_len, int num_heads, int head_dim) {
  extern __shared__ __align__(128) unsigned char smem[];
#define KOPT_AF_CASE(D, DP, BN)                                                                \
  case D:                                                                                      \
    attn_tile<D, DP, 2, BN, false, false, false>(q, k, v, nullptr, out, seq_len, 0, num_heads, \
                                                 num_heads, 0, smem);                          \
    break;
  switch (head_dim) {
    KOPT_AF_CASE(64, 64, 64)
    KOPT_AF_CASE(72, 80, 64)
    KOPT_AF_CASE(80, 80, 64)
    KOPT_AF_CASE(128, 128, 32)
    default:
      break;
  }
#undef KOPT_AF_CASE
}
