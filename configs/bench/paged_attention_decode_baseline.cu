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
// Measured on H200 (2026-12-01, driver 580.159.04, `kopt bench --seeds 1`):
// paged_attention_decode: 11.5 % of speed of light (weighted over 5 shapes), 1.05x the naive
// reference, 0 launch-bound shapes; paged_attention_decode_fp16: 2.9 % of speed of light (weighted
// over 3 shapes), 1.12x the naive reference, 0 launch-bound shapes
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define BS 16  // tokens per cache block
#define X 8    // elements per 16-byte chunk
#define GC 8   // query heads accumulated at once
#ifndef PAD_SPLIT
#define PAD_SPLIT 0  // 0: the kernels below; 1: the split-context kernels at the end of the file
#endif

__device__ __forceinline__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_f(__half v) {
  return __half2float(v);
}
// One 8-dimension step of a score: t + q[0..7] . k[0..7] in d order (the reference's order), q
// read as two float4 broadcasts. Shared by both kernels' score loops.
__device__ __forceinline__ float dot8_step(const float* q, const float* kf, float t) {
  const float4* q4 = reinterpret_cast<const float4*>(q);
  const float4 a = q4[0], b = q4[1];
  t = fmaf(a.x, kf[0], t);
  t = fmaf(a.y, kf[1], t);
  t = fmaf(a.z, kf[2], t);
  t = fmaf(a.w, kf[3], t);
  t = fmaf(b.x, kf[4], t);
  t = fmaf(b.y, kf[5], t);
  t = fmaf(b.z, kf[6], t);
  t = fmaf(b.w, kf[7], t);
  return t;
}
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16(v);
}
__device__ __forceinline__ void store(__half* p, float v) {
  *p = __float2half_rn(v);
}

template <typename T>
struct __align__(16) chunk8 {
  T v[8];
};

#if !PAD_SPLIT
template <typename T>
__device__ __forceinline__ void paged_attention(
    const T* __restrict__ query, const T* __restrict__ k_cache, const T* __restrict__ v_cache,
    const int* __restrict__ block_tables, const int* __restrict__ seq_lens, T* __restrict__ out,
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
            acc[g] = dot8_step(qs + (g0 + g) * D + c * X, kf, acc[g]);
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
    for (int p = n + lane; p < (n + BS - 1) / BS * BS; p += 32)
      s[p] = 0.0f;  // tail of the last block
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
  paged_attention(query, k_cache, v_cache, block_tables, seq_lens, out, num_heads, num_kv_heads,
                  head_size, max_blocks);
}

extern "C" __global__ void __launch_bounds__(256)
    paged_attention_decode_baseline_fp16(const __half* query, const __half* k_cache,
                                         const __half* v_cache, const int* block_tables,
                                         const int* seq_lens, __half* out, int num_heads,
                                         int num_kv_heads, int head_size, int max_blocks) {
  paged_attention(query, k_cache, v_cache, block_tables, seq_lens, out, num_heads, num_kv_heads,
                  head_size, max_blocks);
}
#endif  // !PAD_SPLIT

#if PAD_SPLIT
// ---------------------------------------------------------------------------------------------
// PAD_SPLIT = 1: split context (flash-decoding), one launch.
//
// Why: one block per (sequence, kv head) leaves the small-batch shapes with 2-32 blocks that
// walk the whole context serially (latency-bound), and its loads are issued one position or
// one cache block at a time (too few bytes in flight for the large batches).
//
// - Grid (splits, kv heads, sequences); split z of a sequence takes its cache blocks
//   [z * bps, (z + 1) * bps) (bps from the launch plan, so that the grid fills the GPU); the
//   splits of one (sequence, kv head) are neighbours in blockIdx.x, so they run together.
// - A block copies a tile of up to PAD_TB cache blocks of K and of V (each a contiguous
//   16 D-element piece of the cache per kv head) and its query heads with 16-byte cp.async,
//   all issued before any is waited for (every byte of the tile in flight at once); with more
//   than one tile the next tile's copies are issued before the current tile is computed.
// - Scores: a warp takes one cache block (lane: slot lane % 16, chunk parity lane / 16, so a
//   quarter-warp reads 128 contiguous bytes of K) and a share of the head's 8-element chunks;
//   when the tile has fewer blocks than warps the chunks are split across warps and summed in
//   shared memory in a fixed order. Up to GC query heads per pass from one K read.
// - Online softmax across tiles in fp32 (a warp per query head): running max, sum and the
//   rescale factor in shared memory; positions past seq_len get -inf (probability 0) and
//   their V values are zeroed (stale cache bytes could be NaN).
// - P V: a thread per (dimension, GC heads); the 16 values of a cache block for one dimension
//   are 32 contiguous bytes, read in an order that alternates per group of 4 threads (no
//   bank conflict).
// - Combine: with one active split the block writes out directly. Otherwise each split
//   writes its unnormalized accumulators and (max, sum) to the workspace, then takes a ticket
//   from a zero-initialized per-(sequence, kv head) counter; the last split to arrive merges
//   them (weights exp(m_z - M) / L) and resets the counter to 0.
// - PAD_CLUSTER = 1 (launch cluster = grid x, at most 8 splits): the merge without global
//   memory. The splits of a (sequence, kv head) are one cluster; each keeps its accumulators
//   and (max, sum) in its own shared memory, and after a cluster barrier split z merges the
//   z-th slice of the outputs from every active split's shared memory (DSMEM loads issued
//   together), then a second barrier keeps the peers' shared memory alive until all have read.
//   This removes four dependent global round trips (workspace stores + fence, the atomic
//   ticket, the (max, sum) and accumulator loads) from the small shapes' critical path.
//   Not measured on a GPU yet (bench/hopper/pad/NOTES.md).
// - General: any num_seqs, seq_lens[i] <= 16 * max_blocks (read from seq_lens; every position
//   through the block table), any G = HQ / HKV, head sizes that are multiples of 8.
// - Measured on H200 (2026-12-04 04:35 UTC, driver 580.159.04, kopt eval --seeds 1, same run as
//   PAD_SPLIT = 0): the configs' baselines since then. paged_attention_decode (PAD_NT = 128)
//   17.9 % of speed of light weighted, 5/5 correct (11.3 % before; s0 55.0 against 79.5 us, s1
//   12.9 against 39.8); paged_attention_decode_fp16 (PAD_NT = 256) 7.5 %, 3/3 correct (2.8 %;
//   8.6-9.4 against 21.3-27.8 us). PAD_NT = 256 on bf16: 11.7 % (s0 93.6 us). With the
//   configs' corrected byte counts (used blocks only) and 3 input sets (05:17 UTC): 16.5 % and
//   5.0 %, every workload correct, the same times.
#ifndef PAD_TB
#define PAD_TB 4  // cache blocks per tile
#endif
#ifndef PAD_NT
#define PAD_NT 128  // threads per block (the launch plan's block size)
#endif
// PAD_CLUSTER 1: the splits of one (sequence, kv head) form a cluster and merge through DSMEM
// (the launch's cluster = grid x <= 8); 0: through the workspace and a ticket.
#ifndef PAD_CLUSTER
#define PAD_CLUSTER 0
#endif
// PAD_PF 1: at the start, an L2 prefetch of the lines the block writes last (its output and,
// with the ticket merge, its workspace record and counter), so that their address translation
// and L2 fill overlap the first loads.
#ifndef PAD_PF
#define PAD_PF 0
#endif
#ifndef PAD_MINB  // blocks per SM that ptxas must allow (registers): the large batches want 5 of
#define PAD_MINB (640 / PAD_NT)  // 128 threads (with 35 KiB of shared memory each at d 128)
#endif

#ifndef KOPT_EMU
__device__ __forceinline__ unsigned pad_smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void pad_cp16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void pad_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void pad_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ unsigned pad_dyn_smem() {
  unsigned r;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void pad_fail() {
  __trap();
}
#if PAD_PF
__device__ __forceinline__ void pad_prefetch(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
#endif
#define PAD_SMEM_DECL extern __shared__ __align__(16) unsigned char pad_smem[];
#if PAD_CLUSTER
// Thread-block cluster primitives (sm_90): the barrier of every thread of the cluster, with
// release / acquire semantics for shared memory at cluster scope; the cluster's block count;
// loads from the shared memory of block `rank` of the cluster at this block's shared address
// a (mapa: the same offset in the peer's window).
__device__ __forceinline__ void pad_cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;\n" ::
          : "memory");
}
__device__ __forceinline__ unsigned pad_cluster_size() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ float2 pad_peer_ld2(unsigned a, unsigned rank) {
  unsigned p;
  float2 v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(p) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];"
               : "=f"(v.x), "=f"(v.y)
               : "r"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ float4 pad_peer_ld4(unsigned a, unsigned rank) {
  unsigned p;
  float4 v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(p) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(p)
               : "memory");
  return v;
}
#endif
#else  // the CPU model (bench/hopper/pad/pad_emu.cpp, bench/hopper/emu/emu.h)
inline unsigned pad_smem_u32(const void* p) {
  return smem_u32(p);
}
inline void pad_cp16(unsigned dst, const void* src) {
  cp_async16(dst, src, 16);
}
inline void pad_commit() {
  cp_async_commit();
}
template <int N>
inline void pad_wait() {
  cp_async_wait<N>();
}
inline unsigned pad_dyn_smem() {
  return g_smem_bytes;
}
inline void pad_fail() {
  std::fprintf(stderr,
               "emu: shared-memory layout larger than the launch's shared_bytes, or a cluster "
               "that is not the grid's x extent\n");
  std::abort();
}
#if PAD_PF
inline void pad_prefetch(const void*) {}
#endif
#define PAD_SMEM_DECL unsigned char* pad_smem = emu_block_smem();
#if PAD_CLUSTER  // stub_cl/emu.h: the blocks of a cluster run together
inline void pad_cluster_sync() {
  cluster_sync();
}
inline unsigned pad_cluster_size() {
  return cluster_size();
}
inline float2 pad_peer_ld2(unsigned a, unsigned rank) {
  return cluster_ld<float2>(a, rank);
}
inline float4 pad_peer_ld4(unsigned a, unsigned rank) {
  return cluster_ld<float4>(a, rank);
}
#endif
#endif

template <typename T>
__device__ __forceinline__ void pad_split(const T* __restrict__ query,
                                          const T* __restrict__ k_cache,
                                          const T* __restrict__ v_cache,
                                          const int* __restrict__ block_tables,
                                          const int* __restrict__ seq_lens, T* __restrict__ out,
                                          int HQ, int HKV, int D, int max_blocks, int bps,
                                          float* __restrict__ part, int* __restrict__ counters) {
  PAD_SMEM_DECL
  const int G = HQ / HKV;
  const int z = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z, nz = gridDim.x;
  const int tid = threadIdx.x, NT = blockDim.x, lane = tid & 31, warp = tid >> 5, NW = NT >> 5;
  const int* bt = block_tables + static_cast<long long>(seq) * max_blocks;
  const int j_begin = z * bps;
  const int tile = min(PAD_TB, bps), stages = bps > PAD_TB ? 2 : 1;
  // The first tile's table entries and the sequence length: independent loads, issued
  // together (the entries exist up to max_blocks whatever the length).
#if PAD_PF
  if (tid == 0) {
    const long long pr = static_cast<long long>(seq) * HKV + kvh;
    pad_prefetch(out + pr * G * D);
#if !PAD_CLUSTER
    pad_prefetch(counters + pr);
    pad_prefetch(part + (pr * nz + z) * G * D);
#endif
  }
#endif
  int blk_pre[PAD_TB];
#pragma unroll
  for (int b = 0; b < PAD_TB; ++b)
    blk_pre[b] = (b < tile && j_begin + b < max_blocks) ? __ldg(bt + j_begin + b) : 0;
  const int n = min(seq_lens[seq], max_blocks * BS);
  const int nblk = (n + BS - 1) / BS;
  const int j_end = min(j_begin + bps, nblk);
  const long long pair = static_cast<long long>(seq) * HKV + kvh;
  const long long q0 = pair * G * D;  // (seq * HQ + kvh * G) * D
  if (j_begin >= j_end) {             // an empty split (nothing of this sequence), or seq_len <= 0
    if (n <= 0 && z == 0)
      for (int i = tid; i < G * D; i += NT) store(out + q0 + i, 0.0f);
#if PAD_CLUSTER
    // An empty split of a sequence that several splits share: the cluster's two barriers below
    // wait for every thread of every block of the cluster.
    if ((nblk + bps - 1) / bps > 1) {
      pad_cluster_sync();
      pad_cluster_sync();
    }
#endif
    return;
  }
  const int na = (nblk + bps - 1) / bps;  // the splits that hold part of this sequence

  // Shared memory (the launch plan's shared_bytes follows this layout).
  const int kvblk = D * BS;                 // elements of one cache block of one kv head, K or V
  T* kvs = reinterpret_cast<T*>(pad_smem);  // [stages][tile][K, V][kvblk]
  T* qraw = kvs + static_cast<long long>(stages) * tile * 2 * kvblk;  // [G][D]
  float* qs = reinterpret_cast<float*>(qraw + G * D);                 // [G][D]
  const int redw = BS * max(NW, tile);
  float* red = qs + G * D;                               // [G][Q][P] partial scores
  float* prob = red + G * redw;                          // [G][tile * 16]
  float* accs = prob + G * tile * BS;                    // [G][D] accumulators between tiles
  float2* wz = reinterpret_cast<float2*>(accs + G * D);  // [na][G] (max, sum), then merge weights
  float* st_m = reinterpret_cast<float*>(wz + nz * G);
  float* st_l = st_m + G;
  float* st_a = st_l + G;
  int* flag = reinterpret_cast<int*>(st_a + G);
  if (reinterpret_cast<unsigned char*>(flag + 1) - pad_smem >
      static_cast<long long>(pad_dyn_smem()))
    pad_fail();

  const int ntiles = (j_end - j_begin + tile - 1) / tile;
  const int pieces = kvblk / X;  // 16-byte pieces of one cache block's K (or V)
  auto issue_tile = [&](int it) {
    const int j0 = j_begin + it * tile, nb = min(tile, j_end - j0);
    T* dst = kvs + static_cast<long long>(it % stages) * tile * 2 * kvblk;
#pragma unroll
    for (int b = 0; b < PAD_TB; ++b) {
      if (b < nb) {
        const long long blk = it == 0 ? blk_pre[b] : __ldg(bt + j0 + b);
        const T* ks = k_cache + (blk * HKV + kvh) * static_cast<long long>(kvblk);
        const T* vs = v_cache + (blk * HKV + kvh) * static_cast<long long>(kvblk);
        const unsigned kd = pad_smem_u32(dst + b * 2 * kvblk), vd = kd + kvblk * sizeof(T);
        for (int i = tid; i < pieces; i += NT) {
          pad_cp16(kd + i * 16, ks + i * X);
          pad_cp16(vd + i * 16, vs + i * X);
        }
      }
    }
  };
  issue_tile(0);
  {
    const unsigned qd = pad_smem_u32(qraw);
    for (int i = tid; i < G * D / X; i += NT) pad_cp16(qd + i * 16, query + q0 + i * X);
  }
  pad_commit();

  const float rsq = sqrtf(static_cast<float>(D));
  const int nch = D / X;
  const int ngc = (G + GC - 1) / GC;
  // The workspace: unnormalized accumulators [seq][kv head][split][G][D] (16-byte aligned per
  // record), then (max, sum) [seq][kv head][split][G].
  const long long nrec = static_cast<long long>(gridDim.z) * HKV * nz;
  for (int it = 0; it < ntiles; ++it) {
    if (it + 1 < ntiles) {
      issue_tile(it + 1);
      pad_commit();
      pad_wait<1>();
    } else {
      pad_wait<0>();
    }
    __syncthreads();
    if (it == 0) {
      // 8 elements per step (one 16-byte read, two float4 writes): not a chain of 2-byte loads
      for (int i = tid; i < G * D / X; i += NT) {
        const chunk8<T> c = reinterpret_cast<const chunk8<T>*>(qraw)[i];
        float4* d4 = reinterpret_cast<float4*>(qs + i * X);
        d4[0] = make_float4(to_f(c.v[0]), to_f(c.v[1]), to_f(c.v[2]), to_f(c.v[3]));
        d4[1] = make_float4(to_f(c.v[4]), to_f(c.v[5]), to_f(c.v[6]), to_f(c.v[7]));
      }
      for (int g = tid; g < G; g += NT) {
        st_m[g] = -__int_as_float(0x7f800000);
        st_l[g] = 0.0f;
      }
      __syncthreads();
    }
    const T* kt = kvs + static_cast<long long>(it % stages) * tile * 2 * kvblk;
    const int j0 = j_begin + it * tile, nb = min(tile, j_end - j0), P = nb * BS, pos0 = j0 * BS;
    // Chunk pairs per cache block: enough to give every warp work when nb < NW.
    const int Q = min(max(1, NW / nb), (nch + 1) / 2);

    // ---- scores: red[g][qq][p] = sum over this warp's chunks of q_g . K_p
    for (int u = warp; u < nb * Q; u += NW) {
      const int b = u % nb, qq = u / nb, slot = lane & 15, h = lane >> 4;
      const chunk8<T>* kp = reinterpret_cast<const chunk8<T>*>(kt + b * 2 * kvblk) + slot;
      for (int g0 = 0; g0 < G; g0 += GC) {
        float acc[GC];
#pragma unroll
        for (int g = 0; g < GC; ++g) acc[g] = 0.0f;
        for (int c = 2 * qq + h; c < nch; c += 2 * Q) {
          const chunk8<T> kc = kp[c * BS];  // K[blk, kvh, c, slot, 0..7]
          float kf[X];
#pragma unroll
          for (int e = 0; e < X; ++e) kf[e] = to_f(kc.v[e]);
#pragma unroll
          for (int g = 0; g < GC; ++g) {
            if (g0 + g < G) {
              acc[g] = dot8_step(qs + (g0 + g) * D + c * X, kf, acc[g]);
            }
          }
        }
#pragma unroll
        for (int g = 0; g < GC; ++g) acc[g] += __shfl_xor_sync(0xffffffffu, acc[g], 16);
        if (h == 0) {
#pragma unroll
          for (int g = 0; g < GC; ++g)
            if (g0 + g < G) red[(g0 + g) * redw + qq * P + b * BS + slot] = acc[g];
        }
      }
    }
    __syncthreads();

    // ---- online softmax
    if (P <= 32) {
      // A tile of 16 or 32 positions: a segment of P lanes per query head, every head at once
      // (segmented shuffles stay inside their aligned P-lane segment); warp-uniform trip count.
      for (int i0 = warp * 32; i0 < G * P; i0 += NT) {
        const int i = i0 + lane, g = i / P, p = i % P;
        const bool valid = i < G * P;
        float s = -__int_as_float(0x7f800000);
        if (valid && pos0 + p < n) {
          s = 0.0f;
          for (int qq = 0; qq < Q; ++qq) s += red[g * redw + qq * P + p];
          s = s / rsq;
        }
        float mt = s;
        for (int o = P / 2; o > 0; o >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
        const float mo = valid ? st_m[g] : 0.0f, mn = fmaxf(mo, mt);
        const float e = valid ? expf(s - mn) : 0.0f;
        float sum = e;
        for (int o = P / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (valid) {
          prob[g * tile * BS + p] = e;
          if (p == 0) {  // after the shuffles, so after every lane of the segment read st_m[g]
            const float a = expf(mo - mn);
            st_a[g] = a;
            st_l[g] = st_l[g] * a + sum;
            st_m[g] = mn;
          }
        }
      }
    } else {
      // Longer tiles: a warp per query head.
      for (int g = warp; g < G; g += NW) {
        float* pg = prob + g * tile * BS;
        float mt = -__int_as_float(0x7f800000);
        for (int p = lane; p < P; p += 32) {
          float s = 0.0f;
          for (int qq = 0; qq < Q; ++qq) s += red[g * redw + qq * P + p];
          s = pos0 + p < n ? s / rsq : -__int_as_float(0x7f800000);
          pg[p] = s;
          mt = fmaxf(mt, s);
        }
        for (int o = 16; o > 0; o >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
        const float mo = st_m[g], mn = fmaxf(mo, mt);
        float sum = 0.0f;
        for (int p = lane; p < P; p += 32) {
          const float e = expf(pg[p] - mn);
          pg[p] = e;
          sum += e;
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) {
          const float a = expf(mo - mn);
          st_a[g] = a;
          st_l[g] = st_l[g] * a + sum;
          st_m[g] = mn;
        }
      }
    }
    __syncthreads();

    // ---- P V: a thread per (dimension, GC heads)
    const bool last = it + 1 == ntiles;
    for (int u = tid; u < ngc * D; u += NT) {
      const int d = u % D, g0 = (u / D) * GC;
      float acc[GC];
#pragma unroll
      for (int g = 0; g < GC; ++g)
        acc[g] = (it == 0 || g0 + g >= G) ? 0.0f : accs[(g0 + g) * D + d] * st_a[g0 + g];
      const int h0 = (d >> 2) & 1;
      for (int b = 0; b < nb; ++b) {
        const chunk8<T>* vp =
            reinterpret_cast<const chunk8<T>*>(kt + b * 2 * kvblk + kvblk + d * BS);
        const chunk8<T> c0 = vp[h0], c1 = vp[h0 ^ 1];  // V[blk, kvh, d, 0..15]
        float vf[BS];
#pragma unroll
        for (int t = 0; t < X; ++t) {
          vf[t] = to_f(h0 ? c1.v[t] : c0.v[t]);
          vf[t + X] = to_f(h0 ? c0.v[t] : c1.v[t]);
        }
        const int cnt = n - (pos0 + b * BS);  // valid slots of this cache block
        if (cnt < BS) {
#pragma unroll
          for (int t = 0; t < BS; ++t) vf[t] = t < cnt ? vf[t] : 0.0f;
        }
#pragma unroll
        for (int g = 0; g < GC; ++g) {
          if (g0 + g < G) {
            const float4* s4 =
                reinterpret_cast<const float4*>(prob + (g0 + g) * tile * BS + b * BS);
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
      for (int g = 0; g < GC; ++g) {
        if (g0 + g < G) {
          if (!last)
            accs[(g0 + g) * D + d] = acc[g];
          else if (na == 1)
            store(out + q0 + static_cast<long long>(g0 + g) * D + d, acc[g] / st_l[g0 + g]);
          else
#if PAD_CLUSTER
            accs[(g0 + g) * D + d] = acc[g];  // read by the cluster's merge
#else
            part[((pair * nz + z) * G + g0 + g) * D + d] = acc[g];
#endif
        }
      }
    }
    if (!last) __syncthreads();  // the next iteration refills this stage and the score buffers
  }
  if (na == 1) return;

#if PAD_CLUSTER
  // ---- several splits, one cluster (split z = cluster rank z): each active split's (max, sum)
  // next to its accumulators in its own shared memory; after a cluster barrier split z merges
  // the z-th slice of the G * D outputs from the na active splits' shared memory (DSMEM), so
  // no workspace store, fence, ticket or L2 round trip; the second barrier keeps every block
  // (and its shared memory) alive until its peers have read it.
  if (pad_cluster_size() != static_cast<unsigned>(nz) || na > 8) pad_fail();
  for (int g = tid; g < G; g += NT) wz[g] = make_float2(st_m[g], st_l[g]);
  pad_cluster_sync();
  {
    const int units = G * D / 4, per = (units + na - 1) / na, u_end = min(units, (z + 1) * per);
    const unsigned wz_a = pad_smem_u32(wz), acc_a = pad_smem_u32(accs);
    for (int u = z * per + tid; u < u_end; u += NT) {
      const int g = u * 4 / D;
      // every split's (max, sum) and accumulators at once (independent DSMEM loads)
      float2 ml[8];
      float4 a[8];
#pragma unroll
      for (int s = 0; s < 8; ++s) {
        if (s < na) {
          ml[s] = pad_peer_ld2(wz_a + g * 8, s);
          a[s] = pad_peer_ld4(acc_a + u * 16, s);
        }
      }
      float M = -__int_as_float(0x7f800000);
#pragma unroll
      for (int s = 0; s < 8; ++s)
        if (s < na) M = fmaxf(M, ml[s].x);
      float L = 0.0f;
#pragma unroll
      for (int s = 0; s < 8; ++s)
        if (s < na) L += ml[s].y * expf(ml[s].x - M);
      float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int s = 0; s < 8; ++s) {
        if (s < na) {
          const float w = expf(ml[s].x - M) / L;
          o.x = fmaf(w, a[s].x, o.x);
          o.y = fmaf(w, a[s].y, o.y);
          o.z = fmaf(w, a[s].z, o.z);
          o.w = fmaf(w, a[s].w, o.w);
        }
      }
      T* op = out + q0 + 4 * u;
      store(op, o.x);
      store(op + 1, o.y);
      store(op + 2, o.z);
      store(op + 3, o.w);
    }
  }
  pad_cluster_sync();
#else
  // ---- several splits: publish (max, sum), take a ticket; the last one merges
  float2* rec_ml = reinterpret_cast<float2*>(part + nrec * G * D) + (pair * nz + z) * G;
  for (int g = tid; g < G; g += NT) rec_ml[g] = make_float2(st_m[g], st_l[g]);
  __threadfence();  // this block's record is visible device-wide before its ticket
  __syncthreads();
  if (tid == 0) *flag = atomicAdd(counters + pair, 1) == na - 1;
  __syncthreads();
  if (!*flag) return;
  __threadfence();
  // Every (max, sum) at once (one load per thread, not a chain per head), then the weights
  // exp(m_s - M) / L in place.
  const float2* ml0 = reinterpret_cast<const float2*>(part + nrec * G * D) + pair * nz * G;
  for (int i = tid; i < na * G; i += NT) wz[i] = __ldcg(ml0 + i);
  __syncthreads();
  for (int g = tid; g < G; g += NT) {
    float M = -__int_as_float(0x7f800000);
    for (int s = 0; s < na; ++s) M = fmaxf(M, wz[s * G + g].x);
    float L = 0.0f;
    for (int s = 0; s < na; ++s) L += wz[s * G + g].y * expf(wz[s * G + g].x - M);
    for (int s = 0; s < na; ++s) wz[s * G + g].x = expf(wz[s * G + g].x - M) / L;
  }
  __syncthreads();
  // 4 dimensions per thread and step; the loads of up to 8 splits are issued together
  // (predicated, not a chain of L2 round trips).
  const float4* acc0 = reinterpret_cast<const float4*>(part + pair * nz * G * D);
  for (int u = tid; u < G * D / 4; u += NT) {
    const int g = u * 4 / D;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s0 = 0; s0 < na; s0 += 8) {
      float4 a[8];
#pragma unroll
      for (int k = 0; k < 8; ++k)
        a[k] = s0 + k < na ? __ldcg(acc0 + (s0 + k) * (G * D / 4) + u)
                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float w = s0 + k < na ? wz[(s0 + k) * G + g].x : 0.0f;
        o.x = fmaf(w, a[k].x, o.x);
        o.y = fmaf(w, a[k].y, o.y);
        o.z = fmaf(w, a[k].z, o.z);
        o.w = fmaf(w, a[k].w, o.w);
      }
    }
    T* op = out + q0 + 4 * u;
    store(op, o.x);
    store(op + 1, o.y);
    store(op + 2, o.z);
    store(op + 3, o.w);
  }
  if (tid == 0) counters[pair] = 0;  // ready for the next call without a refill
#endif  // PAD_CLUSTER
}

extern "C" __global__ void __launch_bounds__(PAD_NT, PAD_MINB)
    paged_attention_decode_split_bf16(const __nv_bfloat16* query, const __nv_bfloat16* k_cache,
                                      const __nv_bfloat16* v_cache, const int* block_tables,
                                      const int* seq_lens, __nv_bfloat16* out, int num_heads,
                                      int num_kv_heads, int head_size, int max_blocks, int bps,
                                      float* partials, int* counters) {
  pad_split(query, k_cache, v_cache, block_tables, seq_lens, out, num_heads, num_kv_heads,
            head_size, max_blocks, bps, partials, counters);
}

extern "C" __global__ void __launch_bounds__(PAD_NT, PAD_MINB)
    paged_attention_decode_split_fp16(const __half* query, const __half* k_cache,
                                      const __half* v_cache, const int* block_tables,
                                      const int* seq_lens, __half* out, int num_heads,
                                      int num_kv_heads, int head_size, int max_blocks, int bps,
                                      float* partials, int* counters) {
  pad_split(query, k_cache, v_cache, block_tables, seq_lens, out, num_heads, num_kv_heads,
            head_size, max_blocks, bps, partials, counters);
}
#endif  // PAD_SPLIT
