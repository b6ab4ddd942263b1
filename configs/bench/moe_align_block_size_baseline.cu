// moe_align_block_size baseline (kopt bench, optimized reference kernel)
//
// What: n = tokens * top_k flat entries f with expert ids. For each expert e
// with c_e > 0, in increasing e: the f with id e in increasing order, then
// (-c_e mod block_size) sentinels n. P = total length -> num_tokens_post_pad;
// expert_ids[b] = expert of block b for b < P / block_size. The outputs have
// the worst-case length max_len: sorted_token_ids[i >= P] = n,
// expert_ids[b >= P / block_size] = -1. Everything exact.
//
// Techniques:
// - One block of 1024 threads, one launch: at these sizes (n <= 64K) the op
//   is latency-bound; one block needs no global synchronisation or second
//   launch (vLLM also uses a single block for its align kernel).
// - Pass 1: histogram with shared-memory atomics; padded counts
//   ceil(c_e / bs) * bs are scanned with warp shuffles (E <= 1024) into each
//   expert's start; thread e writes its padding sentinels and its block ids,
//   all threads fill the tails past P.
// - Pass 2, a stable counting sort without sorting: tiles of 32 warps x 32
//   lanes x 16 batches; warp w owns a contiguous segment of the tile; per batch
//   __match_any_sync groups equal ids, a lane's rank = its group's running
//   count in the warp's histogram (shared memory) + lower lanes in the group;
//   after the tile one thread per expert converts the 32 per-warp counts into
//   offsets (warp order) from the expert's running start, and each entry is
//   stored at offset + rank: ascending f inside every expert, deterministic.
// - Rank and id per batch packed in one register (no spills at 64 registers).
// Measured on H200 (2026-12-01, driver 580.159.04, `kopt bench --seeds 1`): moe_align_block_size: 0.0 % of speed of light (weighted over 6 shapes), 3.37x the naive reference, 1 launch-bound shapes

#define THREADS 1024
#define NWARPS (THREADS / 32)
#define B 16       // batches of 32 entries per warp per tile
#define MAX_E 256  // experts supported (shared memory: NWARPS * MAX_E ints)
#define TILE (NWARPS * 32 * B)

extern "C" __global__ void __launch_bounds__(THREADS)
moe_align_block_size_baseline(const int* __restrict__ topk_ids, int* __restrict__ sorted_token_ids,
                              int* __restrict__ expert_ids, int* __restrict__ num_tokens_post_pad,
                              int n, int num_experts, int block_size, int max_len) {
  __shared__ int hist[NWARPS][MAX_E];  // per-warp counts, then per-warp offsets
  __shared__ int base[MAX_E];          // counts, then each expert's running position
  __shared__ int wsum[NWARPS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int E = num_experts;
  if (E > MAX_E || E < 1) return;  // not built for more experts (uniform)

  // Pass 1: counts, padded offsets, padding, block ids, tails.
  for (int e = tid; e < E; e += THREADS) base[e] = 0;
  __syncthreads();
  for (int f = tid; f < n; f += THREADS) {
    const int id = __ldg(topk_ids + f);
    if (id >= 0 && id < E) atomicAdd(&base[id], 1);
  }
  __syncthreads();
  const int cnt = tid < E ? base[tid] : 0;
  const int padded = (cnt + block_size - 1) / block_size * block_size;
  int incl = padded;
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  if (lane == 31) wsum[warp] = incl;
  __syncthreads();
  int before = 0, total = 0;
  for (int w = 0; w < NWARPS; ++w) {
    const int s = wsum[w];
    if (w < warp) before += s;
    total += s;
  }
  const int start = before + incl - padded;  // exclusive prefix of the padded counts
  if (tid == 0) num_tokens_post_pad[0] = total;
  if (tid < E) {
    for (int p = start + cnt; p < start + padded; ++p) sorted_token_ids[p] = n;
    for (int b = start / block_size; b < (start + padded) / block_size; ++b) expert_ids[b] = tid;
  }
  for (int i = total + tid; i < max_len; i += THREADS) sorted_token_ids[i] = n;
  const int max_blocks = (max_len + block_size - 1) / block_size;
  for (int b = total / block_size + tid; b < max_blocks; b += THREADS) expert_ids[b] = -1;
  __syncthreads();  // everyone has read base[] as counts
  if (tid < E) base[tid] = start;

  // Pass 2: stable scatter of the entries, tile by tile.
  const unsigned int lt_mask = (1u << lane) - 1u;
  for (int t0 = 0; t0 < n; t0 += TILE) {
    for (int i = tid; i < NWARPS * E; i += THREADS) hist[i / E][i % E] = 0;
    __syncthreads();
    const int seg = t0 + warp * 32 * B;  // this warp's contiguous segment
    int packed[B];                       // (rank << 9) | (id + 1); 0: nothing to write
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const int f = seg + b * 32 + lane;
      int id = f < n ? __ldg(topk_ids + f) : -1;
      if (id >= E) id = -1;  // dropped
      const unsigned int peers = __match_any_sync(0xffffffffu, id);
      const int below = __popc(peers & lt_mask);
      const int run = id >= 0 ? hist[warp][id] : 0;
      packed[b] = ((run + below) << 9) | (id + 1);
      __syncwarp();
      if (id >= 0 && below == 0) hist[warp][id] = run + __popc(peers);
      __syncwarp();
    }
    __syncthreads();
    if (tid < E) {
      int run = base[tid];
      for (int w = 0; w < NWARPS; ++w) {
        const int c = hist[w][tid];
        hist[w][tid] = run;
        run += c;
      }
      base[tid] = run;
    }
    __syncthreads();
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const int id = (packed[b] & 511) - 1;
      if (id >= 0) sorted_token_ids[hist[warp][id] + (packed[b] >> 9)] = seg + b * 32 + lane;
    }
    __syncthreads();  // hist is reset by the next tile
  }
}
