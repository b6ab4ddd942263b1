// mla_decode_attention baseline (kopt bench): DeepSeek MLA decode attention on
// the absorbed latent KV cache, split-KV across a thread-block cluster.
//
// What: sequence i owns rows [o_i, o_i + len_i) of kv_cache (packed, o_i = sum
// of the previous seq_lens); every head of it reads the same latent rows: K =
// the full 576-wide row, V = its first 512 entries. s_p = (q . K_p) / 24 in
// fp32, softmax over p in fp32 (no mask), out = bf16(sum_p prob_p V_p).
//
// Launch plan (configs/bench/mla_decode_attention.json): one launch, grid =
// SPLIT x batch x ceil(nhead / 16) blocks of 128 threads, cluster (SPLIT):
// the SPLIT blocks of a cluster share one (sequence, group of 16 heads) and
// split its context; SPLIT = min(MLA_SPLIT_MAX, ceil(ctx_len / 32), 132 /
// units) so that the grid fills the H200's 132 SMs without empty blocks (the
// workloads: 4 x 32 units = 128 blocks, 8 x 1 and 8 x 7). One block per SM
// (69 KB of shared memory, 128 threads): the work is a few microseconds, so
// what counts is the number of SMs that load in parallel and the single launch.
//
// Techniques:
// - All 16 heads of a block share each latent row: a tile of 32 rows (36 KB)
//   is read from global memory once per block (cp.async, 16-byte chunks,
//   zero-filled past the sequence end) and used by every head for both Q K^T
//   and P V (V is the K row's prefix, so it is not loaded again). The 16 Q
//   rows (18 KB) are loaded once. Rows are padded to 1168 bytes (73 x 16,
//   odd): every ldmatrix phase hits 8 distinct bank groups.
// - Block rank r of a cluster takes the tiles r, r + SPLIT, ... of its
//   sequence (one tile each on the workloads), with an online softmax across
//   its tiles; any length works (variable seq_lens, ranks without a tile).
// - S = Q K^T on mma.sync.m16n8k16 bf16 (fp32 accumulate): M = the 16 heads,
//   N = 32 positions, K = 576 split over the 4 warps (144 deep each, so every
//   warp reads only its quarter of Q and K); the 4 partial S tiles are summed
//   in shared memory by the softmax step.
// - Softmax in fp32, 8 threads per head row (max and sum by shuffles), exp2
//   with log2(e) / 24 folded in; the running max / sum of a row stay in the
//   registers of its 8 threads across tiles.
// - P V with P split into two bf16 terms, hi = bf16(p) and lo = bf16(p - hi),
//   two MMAs per step (16 mantissa bits of p). One bf16 P (MLA_P_SPLIT 0) reached 0.70 of
//   the tolerance on s0 in the CPU emulator (bench/hopper/mla/mla_emu.cpp; 0.32 with the
//   split), too close for a check that must match every element; the second MMA is cheap here.
//   Warp w owns output columns [128 w, 128 w + 128): 16 n8 tiles, 64 fp32
//   accumulators per thread; V fragments by ldmatrix.trans.
// - Combine through distributed shared memory (MLA_PUSH 0, the default: pull): each block
//   leaves its unnormalised 16 x 512 fp32 partial O and its (max, sum) per head in its own
//   shared memory; after a cluster barrier, block r combines its 1 / SPLIT of the (head,
//   8-column) outputs from the SPLIT partials (mapa + ld.shared::cluster.v4), normalises, and
//   writes bf16 with 16-byte stores. A second cluster barrier keeps every block's shared
//   memory alive until its peers have read it. No workspace, no atomics, no second launch.
//   MLA_PUSH 1: every block stores its partial into the owners' receive buffers (36 KB more
//   shared memory) and combines from local shared memory after a single cluster barrier.
//   MLA_XCHG 1: the partials cross the cluster as fp16 O / l (16 instead of 32 bytes per 8
//   columns). MLA_SPEC 1 (below) takes the seq_lens round trip off the critical path.
// Measured on H200 (2026-12-04 01:47 UTC, driver 580.159.04, kopt eval --max-time 0.2; files in
// bench/suite/results/2026-12-04/mla/): every variant correct on all 3 workloads; the config's
// default since then, MLA_PUSH 1 + MLA_XCHG 1 + MLA_SPEC 1: s0 7.9 us, s1 6.2 us, s2 6.4 us,
// 2.7 % of speed of light weighted (the workloads are a few MB: launch-bound), against 10.3 /
// 9.1 / 9.3 us (2.0 %, 2 input sets) for the pull combine without them; push alone 9.7 / 7.1,
// fp16 partials alone (xchg16) 2.5 %; clusters of 4 2.0 %, no cluster 1.4 %; one bf16 P 2.0 %
// (no faster, and 0.70 of the tolerance on the CPU). The naive reference: 0.1 %.
// Heads beyond nhead in the last group are zero rows in shared memory and are
// not stored. A sequence of length 0 gives 0 / 0 (NaN), as the reference does.
#include <cuda_bf16.h>

#define MLA_DQK 576  // kv_lora_rank + qk_rope_head_dim
#define MLA_DV 512   // kv_lora_rank
#define MLA_HG 16    // heads per block: one m16 tile
#define MLA_TILE 32  // latent rows per tile
#define MLA_THREADS 128
#define MLA_CMAX 8                // largest cluster the combine handles (portable cluster size)
#define MLA_CHUNKS (MLA_DQK / 8)  // 16-byte chunks per row: 72
#ifndef MLA_XCHG
// How the partials cross the cluster: 0 = unnormalised fp32 O (32 bytes per 8 columns);
// 1 = O / l of the block in fp16 (16 bytes: 40 % fewer DSMEM bytes with the (max, sum) pair;
// error <= 2^-12 |O / l|, a convex combination of V values, against atol 1e-3).
#define MLA_XCHG 0
#endif
#ifndef MLA_PUSH
// 0: pull (cluster barrier, every block reads its share of the peers' partials, a second
// barrier before exit); 1: push (every block stores its partial into the owners' receive
// buffers, one cluster barrier, then every block combines from its own shared memory).
#define MLA_PUSH 0
#endif
#ifndef MLA_SPEC
// 1: the kernel also takes ctx_len and issues its first KV tile's copies for the offset
// seq * ctx_len and length ctx_len before seq_lens arrives (every length equals ctx_len in
// the config's workloads, and those rows exist: kv_cache holds batch * ctx_len rows); when
// seq_lens says otherwise, it waits for those copies and loads the right rows. Takes the
// seq_lens round trip (a DRAM latency after kopt's L2 flush) off the critical path.
#define MLA_SPEC 0
#endif
#ifndef MLA_ILP
// 1: the MMA loops reordered for instruction-level parallelism (all asm here is volatile, so
// the source order is the issue order): Q K^T loads the next k16 step's fragments before the
// current step's MMAs and alternates two accumulator sets (dependent MMAs 8 apart instead of
// 4); P V loads the 8 V fragments of a k16 step first, then the 16 hi MMAs, then the 16 lo
// MMAs (dependent MMAs 16 apart instead of back to back). 0: the first version's loops.
#define MLA_ILP 0
#endif
#ifndef MLA_BULK
// 1: Q and KV rows arrive by cp.async.bulk (one 1152-byte copy per row, issued by warp 0,
// completing on an mbarrier) instead of 27 16-byte cp.async per thread; rows without a copy
// (past the sequence end or nhead) are zeroed by st.shared. 0: cp.async.
#define MLA_BULK 0
#endif
#ifndef MLA_P_SPLIT
// 1: P as bf16 hi + lo (two P V MMAs); 0: one bf16 P (ablation for the emulator's error figures)
#define MLA_P_SPLIT 1
#endif

// Shared memory (bytes from the dynamic base, which is 16-aligned).
#define MLA_ROW_B (MLA_DQK * 2 + 16)  // 1168: padded row stride of Q and KV
#define MLA_SQ 0
#define MLA_SKV (MLA_SQ + MLA_HG * MLA_ROW_B)            // 18688: KV tile; after the loop, O
#define MLA_SS (MLA_SKV + MLA_TILE * MLA_ROW_B)          // 56064: 4 partial S tiles (fp32)
#define MLA_S_STRIDE 40                                  // floats per S row (pad: 2-way stores)
#define MLA_SP (MLA_SS + 4 * MLA_HG * MLA_S_STRIDE * 4)  // 66304: P hi (bf16)
#define MLA_P_STRIDE 80                                  // bytes per P row (5 x 16: conflict-free)
#define MLA_SPLO (MLA_SP + MLA_HG * MLA_P_STRIDE)        // 67584: P lo
#define MLA_SALPHA (MLA_SPLO + MLA_HG * MLA_P_STRIDE)    // 68864: per-row rescale of O
#define MLA_SML (MLA_SALPHA + MLA_HG * 4)                // 68928: per-row (max, sum)
#define MLA_SMEM (MLA_SML + MLA_HG * 8)                  // 69056 (the plan's shared_bytes)
#define MLA_O_STRIDE 520                                 // floats per O row (pad: 2-way stores)
#define MLA_O16_STRIDE 1040  // bytes per fp16 O row (MLA_XCHG 1; 260 words: conflict-free)
static_assert(MLA_SKV + MLA_HG * MLA_O_STRIDE * 4 <= MLA_SS, "O overlays the KV tile");
// MLA_PUSH 1: receive buffers after MLA_SMEM (the plan adds 36864 bytes): partial O of every
// source rank q, [q][16 rows][ceil(64 / cs) * 8 columns] (fp32 at most 7 x 16 x 80 x 4 = 35840
// bytes, cs = 7), then (max, sum) [q][16 rows] (1024 bytes).
#define MLA_SR MLA_SMEM
#define MLA_SRML (MLA_SR + 35840)
// MLA_BULK 1: the mbarrier after everything else (the plan adds 16 bytes)
#define MLA_SBAR (MLA_SMEM + MLA_PUSH * 36864)

// The PTX primitives. KOPT_EMU (bench/hopper/mla/mla_emu.cpp) replaces them
// with a CPU model of their semantics, clusters included, to run this kernel
// on the host.
#ifndef KOPT_EMU
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
__device__ __forceinline__ void sts_f2(unsigned addr, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ void sts_u2(unsigned addr, unsigned a, unsigned b) {
  asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(addr), "r"(a), "r"(b) : "memory");
}
__device__ __forceinline__ void sts_f1(unsigned addr, float a) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(a) : "memory");
}
__device__ __forceinline__ float lds_f1(unsigned addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ float4 lds_f4(unsigned addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
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
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned cluster_size() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}
// Arrive with release, wait with acquire: shared-memory writes before it are
// visible to every block of the cluster after it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}
// The split form (MLA_PUSH 1): arrive at the start, wait before the first remote access, so that
// every block of the cluster has started (its shared memory exists) before anyone writes to it.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}
__device__ __forceinline__ unsigned mapa(unsigned addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ float2 ld_dsmem_f2(unsigned caddr) {
  float2 v;
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n"
               : "=f"(v.x), "=f"(v.y)
               : "r"(caddr)
               : "memory");
  return v;
}
__device__ __forceinline__ void sts_u4(unsigned addr, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// the initialised mbarrier is visible to the async proxy (the bulk copies' complete_tx)
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// generic-proxy accesses of shared memory before it are ordered before later async-proxy ones
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_g2s(unsigned dst, const void* src, unsigned bytes,
                                         unsigned bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ float2 lds_f2(unsigned addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint4 lds_u4(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
__device__ __forceinline__ void st_dsmem_f2(unsigned caddr, float2 v) {
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(caddr), "f"(v.x), "f"(v.y)
               : "memory");
}
__device__ __forceinline__ void st_dsmem_u4(unsigned caddr, uint4 v) {
  asm volatile("st.shared::cluster.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(caddr), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void sts_u1(unsigned addr, unsigned a) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(a) : "memory");
}
__device__ __forceinline__ uint4 ld_dsmem_u4(unsigned caddr) {
  uint4 v;
  asm volatile("ld.shared::cluster.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(caddr)
               : "memory");
  return v;
}
// fp16 pair, round to nearest even (lo in the low half)
__device__ __forceinline__ unsigned pack_h2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float2 unpack_h2(unsigned u) {
  float2 v;
  asm("{\n.reg .f16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}\n"
      : "=f"(v.x), "=f"(v.y)
      : "r"(u));
  return v;
}
__device__ __forceinline__ float4 ld_dsmem_f4(unsigned caddr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(caddr)
               : "memory");
  return v;
}
#endif  // KOPT_EMU

__device__ __forceinline__ unsigned pack_bf162(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}
__device__ __forceinline__ float bf_lo(unsigned u) {
  return __uint_as_float(u << 16);
}
__device__ __forceinline__ float bf_hi(unsigned u) {
  return __uint_as_float(u & 0xffff0000u);
}

extern "C" __global__ void __launch_bounds__(MLA_THREADS, 1)
    mla_decode_baseline(const __nv_bfloat16* __restrict__ q,
                        const __nv_bfloat16* __restrict__ kv_cache,
                        const int* __restrict__ seq_lens, __nv_bfloat16* __restrict__ out, int nhead
#if MLA_SPEC
                        ,
                        int ctx_len
#endif
    ) {
#ifdef KOPT_EMU
  unsigned char* const smem = emu_smem();
#else
  extern __shared__ __align__(16) unsigned char smem[];
#endif
  const unsigned base = smem_u32(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tq = lane & 3;  // mma fragment row / column pair
  const int cs = static_cast<int>(cluster_size()), rank = static_cast<int>(cluster_rank());
  const int ngroups = (nhead + MLA_HG - 1) / MLA_HG;
  const int unit = static_cast<int>(blockIdx.x) / cs;
  const int seq = unit / ngroups, h0 = (unit % ngroups) * MLA_HG;
  const float NEG_INF = __int_as_float(0xff800000);
  // exp(s / 24 - m / 24) = 2^((s - m) * log2(e) / 24), s the raw dot product
  const float kScale = 1.4426950408889634f / 24.0f;
#if MLA_PUSH
  cluster_arrive_relaxed();  // waited for before the first remote store
#endif

#if MLA_BULK
  const unsigned bar = base + MLA_SBAR;
  if (tid == 0) {
    mbar_init(bar, 1);
    fence_mbar_init();
  }
  __syncthreads();
  unsigned phase = 0;
  bool pending = false;  // a phase with copies in flight (the same in every thread)
  const int nq = min(MLA_HG, nhead - h0);
  // One phase of the mbarrier: warp 0 arms it with the bytes of the valid rows and issues one
  // bulk copy per row; every thread zeroes the rows without a copy (past the sequence end,
  // past nhead), which the MMAs then read as zeros (no NaN from stale bytes).
  auto issue = [&](bool with_q, int p0, long long oo, int ll, bool tile) {
    const int nkv = tile ? min(MLA_TILE, ll - p0) : 0, nqq = with_q ? nq : 0;
    if (warp == 0) {
      if (lane == 0) mbar_arrive_expect_tx(bar, (nkv + nqq) * (MLA_DQK * 2));
      __syncwarp();
      if (lane < nkv)
        bulk_g2s(base + MLA_SKV + lane * MLA_ROW_B, kv_cache + (oo + p0 + lane) * MLA_DQK,
                 MLA_DQK * 2, bar);
      if (lane < nqq)
        bulk_g2s(base + MLA_SQ + lane * MLA_ROW_B,
                 q + (static_cast<long long>(seq) * nhead + h0 + lane) * MLA_DQK, MLA_DQK * 2, bar);
    }
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    if (tile)
      for (int c = tid; c < (MLA_TILE - nkv) * MLA_CHUNKS; c += MLA_THREADS)
        sts_u4(base + MLA_SKV + (nkv + c / MLA_CHUNKS) * MLA_ROW_B + (c % MLA_CHUNKS) * 16, z);
    for (int c = tid; c < (MLA_HG - nqq) * MLA_CHUNKS && with_q; c += MLA_THREADS)
      sts_u4(base + MLA_SQ + (nqq + c / MLA_CHUNKS) * MLA_ROW_B + (c % MLA_CHUNKS) * 16, z);
    pending = true;
  };
  auto wait = [&] {
    mbar_wait(bar, phase);
    phase ^= 1;
    pending = false;
  };
#if MLA_SPEC
  // Q and the first tile for o = seq * ctx_len, len = ctx_len, before seq_lens is known.
  const long long o_spec = static_cast<long long>(seq) * ctx_len;
  bool spec = rank * MLA_TILE < ctx_len;
  issue(true, rank * MLA_TILE, o_spec, ctx_len, spec);
#endif
  const int len = seq_lens[seq];
  int o32 = 0;
  for (int j = lane; j < seq; j += 32) o32 += seq_lens[j];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) o32 += __shfl_xor_sync(0xffffffffu, o32, off);
  const long long o = o32;
#if MLA_SPEC
  spec = spec && o == o_spec && len == ctx_len;  // the same for every thread of the block
  if (!spec) {  // wrong rows: let the phase complete, then load the right ones
    wait();
    fence_proxy_async();
    __syncthreads();
    if (rank * MLA_TILE < len) issue(false, rank * MLA_TILE, o, len, true);
  }
#else
  issue(true, rank * MLA_TILE, o, len, rank * MLA_TILE < len);
#endif
#else
  // Q first (its addresses need no seq_lens): 16 rows of 72 chunks; rows past nhead are zeros
  // (no NaN into the MMAs).
  for (int c = tid; c < MLA_HG * MLA_CHUNKS; c += MLA_THREADS) {
    const int r = c / MLA_CHUNKS, k = c % MLA_CHUNKS;
    const bool ok = h0 + r < nhead;
    const __nv_bfloat16* src =
        ok ? q + (static_cast<long long>(seq) * nhead + h0 + r) * MLA_DQK + k * 8 : q;
    cp_async16(base + MLA_SQ + r * MLA_ROW_B + k * 16, src, ok ? 16 : 0);
  }
  cp_async_commit();
#if MLA_SPEC
  // The first tile for o = seq * ctx_len, len = ctx_len, before seq_lens is known.
  const long long o_spec = static_cast<long long>(seq) * ctx_len;
  bool spec = rank * MLA_TILE < ctx_len;
  if (spec) {
    const int p0 = rank * MLA_TILE;
    for (int c = tid; c < MLA_TILE * MLA_CHUNKS; c += MLA_THREADS) {
      const int r = c / MLA_CHUNKS, k = c % MLA_CHUNKS;
      const bool ok = p0 + r < ctx_len;
      const __nv_bfloat16* src = ok ? kv_cache + (o_spec + p0 + r) * MLA_DQK + k * 8 : kv_cache;
      cp_async16(base + MLA_SKV + r * MLA_ROW_B + k * 16, src, ok ? 16 : 0);
    }
  }
#endif
  // o = sum of the previous lengths: every warp sums them itself (lane j takes j, j + 32, ..),
  // so the first KV copies wait for one load latency and no barrier.
  const int len = seq_lens[seq];
  int o32 = 0;
  for (int j = lane; j < seq; j += 32) o32 += seq_lens[j];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) o32 += __shfl_xor_sync(0xffffffffu, o32, off);
  const long long o = o32;  // rows of kv_cache: batch * ctx_len < 2^31 (int32 seq_lens)
#if MLA_SPEC
  spec = spec && o == o_spec && len == ctx_len;  // the same for every thread of the block
  if (!spec) cp_async_wait_all();  // wrong rows in flight: let them land before reloading
#endif

#endif

  // Softmax state of head row srow (8 threads per row, identical copies).
  const int srow = tid >> 3, ssub = tid & 7;
  float m_run = NEG_INF, l_run = 0.f;
  float acc[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;

  for (int t = rank; t * MLA_TILE < len; t += cs) {
    const int p0 = t * MLA_TILE;
#if MLA_BULK
    if (t != rank) issue(false, p0, o, len, true);
    wait();
#else
#if MLA_SPEC
    if (!(spec && t == rank))
#endif
      for (int c = tid; c < MLA_TILE * MLA_CHUNKS; c += MLA_THREADS) {
        const int r = c / MLA_CHUNKS, k = c % MLA_CHUNKS;
        const bool ok = p0 + r < len;
        const __nv_bfloat16* src = ok ? kv_cache + (o + p0 + r) * MLA_DQK + k * 8 : kv_cache;
        cp_async16(base + MLA_SKV + r * MLA_ROW_B + k * 16, src, ok ? 16 : 0);
      }
    cp_async_commit();
    cp_async_wait_all();
#endif
    __syncthreads();

    // Partial S of depth [144 warp, 144 warp + 144): 9 k16 steps x 4 n8 tiles.
#if MLA_ILP
    float s[4][4], s2[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = 0.f, s2[j][e] = 0.f;
    {
      unsigned fa[2][4], fb[2][8];
      auto load_qk = [&](int kk, unsigned(&a)[4], unsigned(&b)[8]) {
        const int d0 = warp * 144 + kk * 16;
        ldsm_x4(base + MLA_SQ + (lane & 15) * MLA_ROW_B + (d0 + 8 * (lane >> 4)) * 2, a);
#pragma unroll
        for (int jp = 0; jp < 2; ++jp) {
          unsigned r[4];
          ldsm_x4(base + MLA_SKV + (16 * jp + 8 * (lane >> 4) + (lane & 7)) * MLA_ROW_B +
                      (d0 + 8 * ((lane >> 3) & 1)) * 2,
                  r);
#pragma unroll
          for (int i = 0; i < 4; ++i) b[4 * jp + i] = r[i];
        }
      };
      load_qk(0, fa[0], fb[0]);
#pragma unroll
      for (int kk = 0; kk < 9; ++kk) {
        const int c = kk & 1;
        if (kk + 1 < 9) load_qk(kk + 1, fa[c ^ 1], fb[c ^ 1]);
        float(&sa)[4][4] = c ? s2 : s;
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_bf16(sa[j], fa[c], fb[c][2 * j], fb[c][2 * j + 1]);
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] += s2[j][e];
#else
    float s[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < 9; ++kk) {
      const int d0 = warp * 144 + kk * 16;
      unsigned a[4];
      ldsm_x4(base + MLA_SQ + (lane & 15) * MLA_ROW_B + (d0 + 8 * (lane >> 4)) * 2, a);
#pragma unroll
      for (int jp = 0; jp < 2; ++jp) {
        unsigned b[4];
        ldsm_x4(base + MLA_SKV + (16 * jp + 8 * (lane >> 4) + (lane & 7)) * MLA_ROW_B +
                    (d0 + 8 * ((lane >> 3) & 1)) * 2,
                b);
        mma_bf16(s[2 * jp], a, b[0], b[1]);
        mma_bf16(s[2 * jp + 1], a, b[2], b[3]);
      }
    }
#endif
    {
      const unsigned sw = base + MLA_SS + warp * (MLA_HG * MLA_S_STRIDE * 4);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        sts_f2(sw + (g * MLA_S_STRIDE + 8 * j + 2 * tq) * 4, s[j][0], s[j][1]);
        sts_f2(sw + ((g + 8) * MLA_S_STRIDE + 8 * j + 2 * tq) * 4, s[j][2], s[j][3]);
      }
    }
    __syncthreads();

    // Softmax: thread (srow, ssub) owns positions p0 + 4 ssub .. + 3 of its row.
    {
      float x[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const float4 v =
            lds_f4(base + MLA_SS + ((w * MLA_HG + srow) * MLA_S_STRIDE + 4 * ssub) * 4);
        x[0] += v.x, x[1] += v.y, x[2] += v.z, x[3] += v.w;
      }
      float mt = NEG_INF;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (p0 + 4 * ssub + e >= len) x[e] = NEG_INF;
        mt = fmaxf(mt, x[e]);
      }
#pragma unroll
      for (int off = 1; off < 8; off <<= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, off));
      const float m_new = fmaxf(m_run, mt);  // finite: the tile holds >= 1 position
      const float alpha = fast_exp2((m_run - m_new) * kScale);
      float p[4], ls = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = fast_exp2((x[e] - m_new) * kScale);
        ls += p[e];
      }
#pragma unroll
      for (int off = 1; off < 8; off <<= 1) ls += __shfl_xor_sync(0xffffffffu, ls, off);
      l_run = l_run * alpha + ls;
      m_run = m_new;
      const unsigned h01 = pack_bf162(p[0], p[1]), h23 = pack_bf162(p[2], p[3]);
      const unsigned l01 = pack_bf162(p[0] - bf_lo(h01), p[1] - bf_hi(h01));
      const unsigned l23 = pack_bf162(p[2] - bf_lo(h23), p[3] - bf_hi(h23));
      sts_u2(base + MLA_SP + srow * MLA_P_STRIDE + ssub * 8, h01, h23);
      sts_u2(base + MLA_SPLO + srow * MLA_P_STRIDE + ssub * 8, l01, l23);
      if (ssub == 0) sts_f1(base + MLA_SALPHA + srow * 4, alpha);
    }
    __syncthreads();

    // O = alpha O + P V on columns [128 warp, 128 warp + 128).
    {
      const float a0 = lds_f1(base + MLA_SALPHA + g * 4);
      const float a1 = lds_f1(base + MLA_SALPHA + (g + 8) * 4);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        acc[j][0] *= a0, acc[j][1] *= a0;
        acc[j][2] *= a1, acc[j][3] *= a1;
      }
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        unsigned ph[4], pl[4];
        const unsigned pa = (lane & 15) * MLA_P_STRIDE + (16 * kk + 8 * (lane >> 4)) * 2;
        ldsm_x4(base + MLA_SP + pa, ph);
        ldsm_x4(base + MLA_SPLO + pa, pl);
#if MLA_ILP
        unsigned b[8][4];
#pragma unroll
        for (int jp = 0; jp < 8; ++jp)
          ldsm_x4_t(base + MLA_SKV + (16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1)) * MLA_ROW_B +
                        (128 * warp + 16 * jp + 8 * (lane >> 4)) * 2,
                    b[jp]);
#pragma unroll
        for (int jp = 0; jp < 8; ++jp) {
          mma_bf16(acc[2 * jp], ph, b[jp][0], b[jp][1]);
          mma_bf16(acc[2 * jp + 1], ph, b[jp][2], b[jp][3]);
        }
        if (MLA_P_SPLIT)
#pragma unroll
          for (int jp = 0; jp < 8; ++jp) {
            mma_bf16(acc[2 * jp], pl, b[jp][0], b[jp][1]);
            mma_bf16(acc[2 * jp + 1], pl, b[jp][2], b[jp][3]);
          }
#else
#pragma unroll
        for (int jp = 0; jp < 8; ++jp) {
          unsigned b[4];
          ldsm_x4_t(base + MLA_SKV + (16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1)) * MLA_ROW_B +
                        (128 * warp + 16 * jp + 8 * (lane >> 4)) * 2,
                    b);
          mma_bf16(acc[2 * jp], ph, b[0], b[1]);
          if (MLA_P_SPLIT) mma_bf16(acc[2 * jp], pl, b[0], b[1]);
          mma_bf16(acc[2 * jp + 1], ph, b[2], b[3]);
          if (MLA_P_SPLIT) mma_bf16(acc[2 * jp + 1], pl, b[2], b[3]);
        }
#endif
      }
    }
#if MLA_BULK
    fence_proxy_async();  // this tile's reads and zero stores before the next tile's copies
#endif
    __syncthreads();  // the next tile's copies overwrite the KV tile and P
  }
#if MLA_BULK
  if (pending) wait();  // a rank without a tile still has its Q copies in flight
#else
  cp_async_wait_all();  // a rank without a tile still has its Q copies in flight
#endif

    // This block's partial (over the KV tile, unused now) and its (max, sum) per row.
#if MLA_XCHG
  if (ssub == 0) sts_f2(base + MLA_SML + srow * 8, m_run, l_run);
  __syncthreads();  // the fragment rows g, g + 8 need their sums
  {
    const float l0 = lds_f1(base + MLA_SML + g * 8 + 4),
                l1 = lds_f1(base + MLA_SML + (g + 8) * 8 + 4);
    const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;  // 0: no tile
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int col = 128 * warp + 8 * j + 2 * tq;
      sts_u1(base + MLA_SKV + g * MLA_O16_STRIDE + col * 2,
             pack_h2(acc[j][0] * i0, acc[j][1] * i0));
      sts_u1(base + MLA_SKV + (g + 8) * MLA_O16_STRIDE + col * 2,
             pack_h2(acc[j][2] * i1, acc[j][3] * i1));
    }
  }
#else
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int col = 128 * warp + 8 * j + 2 * tq;
    sts_f2(base + MLA_SKV + (g * MLA_O_STRIDE + col) * 4, acc[j][0], acc[j][1]);
    sts_f2(base + MLA_SKV + ((g + 8) * MLA_O_STRIDE + col) * 4, acc[j][2], acc[j][3]);
  }
  if (ssub == 0) sts_f2(base + MLA_SML + srow * 8, m_run, l_run);
#endif
#if MLA_PUSH
  __syncthreads();  // the staged partial is complete
  {
    // Rank r owns the 8-column groups [64 r / cs, 64 (r + 1) / cs) of every row; group cg
    // belongs to rank ((cg + 1) cs - 1) / 64. Consecutive threads take consecutive groups of a
    // row: the remote stores are contiguous 16-byte runs.
    constexpr int kEsz = MLA_XCHG ? 2 : 4;       // bytes per staged element
    const int wcols = ((64 + cs - 1) / cs) * 8;  // columns per receive row
    cluster_wait();                              // every block of the cluster has started
    for (int u = tid; u < MLA_HG * 64; u += MLA_THREADS) {
      const int row = u >> 6, cg = u & 63;
      if (h0 + row >= nhead) continue;  // no rank combines it
      const int owner = ((cg + 1) * cs - 1) / 64;
      const int lc = (cg - (owner * 64) / cs) * 8;
      const unsigned dst = mapa(base + MLA_SR + ((rank * MLA_HG + row) * wcols + lc) * kEsz, owner);
#if MLA_XCHG
      st_dsmem_u4(dst, lds_u4(base + MLA_SKV + row * MLA_O16_STRIDE + cg * 16));
#else
      const unsigned src = base + MLA_SKV + (row * MLA_O_STRIDE + cg * 8) * 4;
      st_dsmem_u4(dst, lds_u4(src));
      st_dsmem_u4(dst + 16, lds_u4(src + 16));
#endif
    }
    if (tid < MLA_HG * cs) {
      const int row = tid & (MLA_HG - 1), owner = tid / MLA_HG;
      st_dsmem_f2(mapa(base + MLA_SRML + (rank * MLA_HG + row) * 8, owner),
                  lds_f2(base + MLA_SML + row * 8));
    }
    cluster_sync();  // every partial has arrived; after it, no block touches another's memory
    const int cg0 = (rank * 64) / cs, ncg = ((rank + 1) * 64) / cs - cg0;
    for (int u = tid; u < MLA_HG * ncg; u += MLA_THREADS) {
      const int row = u / ncg, lc = (u - row * ncg) * 8, col = cg0 * 8 + lc;
      if (h0 + row >= nhead) continue;
      float mq[MLA_CMAX], lq[MLA_CMAX], mx = NEG_INF;
#pragma unroll
      for (int r = 0; r < MLA_CMAX; ++r)
        if (r < cs) {
          const float2 v = lds_f2(base + MLA_SRML + (r * MLA_HG + row) * 8);
          mq[r] = v.x, lq[r] = v.y;
          mx = fmaxf(mx, v.x);
        }
      float sum = 0.f, y[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int r = 0; r < MLA_CMAX; ++r)
        if (r < cs) {
          const unsigned a = base + MLA_SR + ((r * MLA_HG + row) * wcols + lc) * kEsz;
#if MLA_XCHG
          const float w = fast_exp2((mq[r] - mx) * kScale) * lq[r];  // the partial is O / l
          const uint4 v = lds_u4(a);
          const float2 v0 = unpack_h2(v.x), v1 = unpack_h2(v.y), v2 = unpack_h2(v.z),
                       v3 = unpack_h2(v.w);
          sum += w;
          y[0] += w * v0.x, y[1] += w * v0.y, y[2] += w * v1.x, y[3] += w * v1.y;
          y[4] += w * v2.x, y[5] += w * v2.y, y[6] += w * v3.x, y[7] += w * v3.y;
#else
          const float w = fast_exp2((mq[r] - mx) * kScale);  // 0 for a rank without a tile
          const float4 v0 = lds_f4(a), v1 = lds_f4(a + 16);
          sum += w * lq[r];
          y[0] += w * v0.x, y[1] += w * v0.y, y[2] += w * v0.z, y[3] += w * v0.w;
          y[4] += w * v1.x, y[5] += w * v1.y, y[6] += w * v1.z, y[7] += w * v1.w;
#endif
        }
      const float inv = 1.0f / sum;
      uint4 ov;
      ov.x = pack_bf162(y[0] * inv, y[1] * inv);
      ov.y = pack_bf162(y[2] * inv, y[3] * inv);
      ov.z = pack_bf162(y[4] * inv, y[5] * inv);
      ov.w = pack_bf162(y[6] * inv, y[7] * inv);
      *reinterpret_cast<uint4*>(out + (static_cast<long long>(seq) * nhead + h0 + row) * MLA_DV +
                                col) = ov;
    }
  }
#else
  cluster_sync();

  // Combine: 16 rows x 64 groups of 8 columns; rank r takes a contiguous 1 / cs of them.
  const int per = (MLA_HG * 64 + cs - 1) / cs;
  const int u_end = min(MLA_HG * 64, (rank + 1) * per);
  for (int u = rank * per + tid; u < u_end; u += MLA_THREADS) {
    const int row = u >> 6, col = (u & 63) * 8;
    if (h0 + row >= nhead) continue;
    float mq[MLA_CMAX], lq[MLA_CMAX], mx = NEG_INF;
#pragma unroll
    for (int r = 0; r < MLA_CMAX; ++r)
      if (r < cs) {
        const float2 v = ld_dsmem_f2(mapa(base + MLA_SML + row * 8, r));
        mq[r] = v.x, lq[r] = v.y;
        mx = fmaxf(mx, v.x);
      }
    float sum = 0.f, y[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int r = 0; r < MLA_CMAX; ++r)
      if (r < cs) {
#if MLA_XCHG
        const float w = fast_exp2((mq[r] - mx) * kScale) * lq[r];  // the partial is O / l
        const uint4 v = ld_dsmem_u4(mapa(base + MLA_SKV + row * MLA_O16_STRIDE + col * 2, r));
        const float2 v0 = unpack_h2(v.x), v1 = unpack_h2(v.y), v2 = unpack_h2(v.z),
                     v3 = unpack_h2(v.w);
        sum += w;
        y[0] += w * v0.x, y[1] += w * v0.y, y[2] += w * v1.x, y[3] += w * v1.y;
        y[4] += w * v2.x, y[5] += w * v2.y, y[6] += w * v3.x, y[7] += w * v3.y;
#else
        const float w = fast_exp2((mq[r] - mx) * kScale);  // 0 for a rank without a tile
        const unsigned a = mapa(base + MLA_SKV + (row * MLA_O_STRIDE + col) * 4, r);
        const float4 v0 = ld_dsmem_f4(a), v1 = ld_dsmem_f4(a + 16);
        sum += w * lq[r];
        y[0] += w * v0.x, y[1] += w * v0.y, y[2] += w * v0.z, y[3] += w * v0.w;
        y[4] += w * v1.x, y[5] += w * v1.y, y[6] += w * v1.z, y[7] += w * v1.w;
#endif
      }
    const float inv = 1.0f / sum;
    uint4 ov;
    ov.x = pack_bf162(y[0] * inv, y[1] * inv);
    ov.y = pack_bf162(y[2] * inv, y[3] * inv);
    ov.z = pack_bf162(y[4] * inv, y[5] * inv);
    ov.w = pack_bf162(y[6] * inv, y[7] * inv);
    *reinterpret_cast<uint4*>(out + (static_cast<long long>(seq) * nhead + h0 + row) * MLA_DV +
                              col) = ov;
  }
  cluster_sync();  // every peer has read this block's shared memory
#endif
}
