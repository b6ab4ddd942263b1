// A CPU model of the CUDA and PTX primitives that configs/bench/mla_decode_attention_baseline.cu
// uses, clusters included, so that its kernel runs on the host (mla_emu.cpp).
// bench/hopper/emu/emu.h runs one block at a time from global state; this kernel's blocks meet at
// cluster barriers and read each other's shared memory, so here every block of a cluster runs at
// once (one std::thread per CUDA thread), each with its own shared memory, barriers and operand
// slots. The operand layouts of ldmatrix (x4, .trans) and mma.m16n8k16 are the PTX ISA's, as in
// emu.h; cp.async copies read their source at issue and land at cp.async.wait_group 0 (reads before
// it see stale bytes: shared memory starts as 0xFF bytes, NaN in bf16 and fp32). Every
// shared-memory access (local and through mapa) is checked for alignment and bounds against the
// launch's dynamic shared memory, which starts at shared address 16 (only 16-byte alignment of the
// base assumed). A check of the kernel's indexing, synchronisation and control flow against this
// model, not of the model against the hardware.
#pragma once
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__
#define __align__(n)

struct dim3e {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3e threadIdx, blockIdx;
inline dim3e gridDim, blockDim;

struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct __nv_bfloat16 {
  uint16_t v;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline uint16_t f2bf(float f) {  // round to nearest even (NaN kept as a NaN)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | ((u & 0xffff) ? 0x40 : 0));
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf2f(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return {{f2bf(lo)}, {f2bf(hi)}};
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
using std::fmaxf;
using std::min;

// ------------------------------------------------------------ blocks and clusters
constexpr unsigned kSmemBase = 16;  // shared address of a block's first dynamic byte
constexpr int kMaxThreads = 1024;
struct slot {
  unsigned u[8];
  float f;
};
// An mbarrier (MLA_BULK): arrivals and transaction bytes of the current phase; bulk copies
// queued on it land when a thread waits on it (so a read before the wait sees stale bytes).
struct mbar_state {
  unsigned count = 0, pending = 0, phase = 0;  // phase: completed phases
  long long tx = 0;
};
struct bulk_copy {
  unsigned dst, bar;
  std::vector<unsigned char> data;
};
struct block_ctx {
  std::mutex mu;  // mbarriers and bulk copies
  std::condition_variable cv;
  std::map<unsigned, mbar_state> mbar;
  std::vector<bulk_copy> bulk;
  std::vector<uint4> mem;  // 16-aligned
  unsigned bytes = 0;
  std::unique_ptr<std::barrier<>> bar;
  std::vector<std::unique_ptr<std::barrier<>>> warp_bar;
  std::vector<slot> slots;
  unsigned char* data() { return reinterpret_cast<unsigned char*>(mem.data()); }
};
struct cluster_ctx {
  std::vector<std::unique_ptr<block_ctx>> blocks;
  std::unique_ptr<std::barrier<>> bar;
};
inline thread_local block_ctx* t_blk = nullptr;
inline thread_local unsigned t_rank = 0;
inline cluster_ctx* g_cluster = nullptr;
inline unsigned g_cluster_size = 1;

inline unsigned char* emu_smem() {
  return t_blk->data();
}
inline unsigned char* smem_at_blk(block_ctx* b, unsigned a, unsigned n, unsigned align,
                                  const char* what) {
  if (a % align != 0 || a < kSmemBase || a - kSmemBase + n > b->bytes) {
    std::fprintf(stderr,
                 "emu: %s at shared address %u (%u bytes, needs %u-byte alignment, dynamic shared "
                 "memory [%u, %u)), thread %u of block %u\n",
                 what, a, n, align, kSmemBase, kSmemBase + b->bytes, threadIdx.x, blockIdx.x);
    std::abort();
  }
  return b->data() + (a - kSmemBase);
}
inline unsigned char* smem_at(unsigned a, unsigned n, unsigned align, const char* what) {
  return smem_at_blk(t_blk, a, n, align, what);
}
inline unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(static_cast<const unsigned char*>(p) - t_blk->data()) + kSmemBase;
}
inline int tid_() {
  return static_cast<int>(threadIdx.x);
}
inline void emu_jitter(int one_in = 4);
inline void warp_sync() {
  emu_jitter(16);  // a delayed lane delays its warp's collective
  t_blk->warp_bar[tid_() / 32]->arrive_and_wait();
}
// MLA_EMU_JITTER=N (environment): before every block barrier, cluster barrier and cp.async
// wait a thread sleeps 0..N microseconds with probability 1/4 (before a warp collective: 1/16),
// to vary the interleavings (a missing barrier then shows as stale or overwritten shared memory
// more often).
inline int emu_jitter_us() {
  static const int j = [] {
    const char* e = std::getenv("MLA_EMU_JITTER");
    return e ? std::atoi(e) : 0;
  }();
  return j;
}
inline void emu_jitter(int one_in) {
  if (emu_jitter_us() <= 0) return;
  thread_local unsigned x = 2463534242u ^ static_cast<unsigned>(tid_() * 2654435761u + blockIdx.x);
  x ^= x << 13, x ^= x >> 17, x ^= x << 5;
  if ((x >> 24) % one_in == 0)
    std::this_thread::sleep_for(std::chrono::microseconds((x >> 2) % emu_jitter_us()));
}
inline void __syncwarp() {
  warp_sync();
}
inline void __syncthreads() {
  emu_jitter();
  t_blk->bar->arrive_and_wait();
}
inline unsigned cluster_rank() {
  return t_rank;
}
inline unsigned cluster_size() {
  return g_cluster_size;
}
inline void cluster_sync() {
  emu_jitter();
  g_cluster->bar->arrive_and_wait();
}
inline thread_local std::barrier<>::arrival_token* t_arrival = nullptr;
inline void cluster_arrive_relaxed() {
  if (t_arrival) std::abort();  // two arrivals without a wait
  t_arrival = new std::barrier<>::arrival_token(g_cluster->bar->arrive());
}
inline void cluster_wait() {
  if (!t_arrival) std::abort();  // a wait without an arrival
  g_cluster->bar->wait(std::move(*t_arrival));
  delete t_arrival;
  t_arrival = nullptr;
}
// mapa: the cluster address of shared address a of block rank (rank + 1 in bits 24..).
inline unsigned mapa(unsigned a, unsigned rank) {
  if (rank >= g_cluster_size || a >= (1u << 24)) {
    std::fprintf(stderr, "emu: mapa of %u to rank %u (cluster of %u)\n", a, rank, g_cluster_size);
    std::abort();
  }
  return ((rank + 1) << 24) | a;
}
inline unsigned char* dsmem_at(unsigned ca, unsigned n, const char* what) {
  const unsigned r = (ca >> 24) - 1;
  if ((ca >> 24) == 0 || r >= g_cluster_size) {
    std::fprintf(stderr, "emu: %s of %#x: not a cluster address\n", what, ca);
    std::abort();
  }
  return smem_at_blk(g_cluster->blocks[r].get(), ca & 0xffffffu, n, n, what);
}
inline float2 ld_dsmem_f2(unsigned ca) {
  float2 v;
  std::memcpy(&v, dsmem_at(ca, 8, "ld.shared::cluster.v2"), 8);
  return v;
}
inline float4 ld_dsmem_f4(unsigned ca) {
  float4 v;
  std::memcpy(&v, dsmem_at(ca, 16, "ld.shared::cluster.v4"), 16);
  return v;
}

inline void sts_f2(unsigned a, float x, float y) {
  const float v[2] = {x, y};
  std::memcpy(smem_at(a, 8, 8, "st.shared.v2.f32"), v, 8);
}
inline void sts_u2(unsigned a, unsigned x, unsigned y) {
  const unsigned v[2] = {x, y};
  std::memcpy(smem_at(a, 8, 8, "st.shared.v2.b32"), v, 8);
}
inline void sts_f1(unsigned a, float x) {
  std::memcpy(smem_at(a, 4, 4, "st.shared.f32"), &x, 4);
}
inline float lds_f1(unsigned a) {
  float v;
  std::memcpy(&v, smem_at(a, 4, 4, "ld.shared.f32"), 4);
  return v;
}
inline float4 lds_f4(unsigned a) {
  float4 v;
  std::memcpy(&v, smem_at(a, 16, 16, "ld.shared.v4.f32"), 16);
  return v;
}
inline void sts_u4(unsigned a, uint4 v) {
  std::memcpy(smem_at(a, 16, 16, "st.shared.v4.b32"), &v, 16);
}
inline void mbar_init(unsigned bar, unsigned count) {
  smem_at(bar, 8, 8, "mbarrier.init");
  std::lock_guard<std::mutex> lk(t_blk->mu);
  t_blk->mbar[bar] = mbar_state{count, count, 0, 0};
}
inline void fence_mbar_init() {}
inline void fence_proxy_async() {}
// Lands the copies queued on bar and completes its phase when every arrival and byte is in.
inline void mbar_settle_locked(unsigned bar) {
  auto it = t_blk->mbar.find(bar);
  if (it == t_blk->mbar.end()) {
    std::fprintf(stderr, "emu: mbarrier %u used before mbarrier.init\n", bar);
    std::abort();
  }
  auto& q = t_blk->bulk;
  for (size_t i = 0; i < q.size();)
    if (q[i].bar == bar) {
      std::memcpy(smem_at(q[i].dst, static_cast<unsigned>(q[i].data.size()), 16, "bulk copy"),
                  q[i].data.data(), q[i].data.size());
      it->second.tx -= static_cast<long long>(q[i].data.size());
      q.erase(q.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  if (it->second.pending == 0 && it->second.tx == 0) {
    ++it->second.phase;
    it->second.pending = it->second.count;
    t_blk->cv.notify_all();
  }
}
inline void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  smem_at(bar, 8, 8, "mbarrier.arrive");
  std::lock_guard<std::mutex> lk(t_blk->mu);
  auto it = t_blk->mbar.find(bar);
  if (it == t_blk->mbar.end() || it->second.pending == 0) std::abort();
  it->second.tx += bytes;
  --it->second.pending;
  mbar_settle_locked(bar);
  t_blk->cv.notify_all();
}
// cp.async.bulk global -> shared: 16-aligned addresses, a multiple of 16 bytes; the source is
// read at issue.
inline void bulk_g2s(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  smem_at(dst, bytes, 16, "cp.async.bulk destination");
  if (reinterpret_cast<std::uintptr_t>(src) % 16 != 0 || bytes % 16 != 0) {
    std::fprintf(stderr, "emu: cp.async.bulk source %p / %u bytes not 16-aligned\n", src, bytes);
    std::abort();
  }
  bulk_copy c{dst, bar, std::vector<unsigned char>(bytes)};
  std::memcpy(c.data.data(), src, bytes);
  std::lock_guard<std::mutex> lk(t_blk->mu);
  t_blk->bulk.push_back(std::move(c));
  t_blk->cv.notify_all();
}
// try_wait.parity P succeeds once the phase of parity P has completed.
inline void mbar_wait(unsigned bar, unsigned parity) {
  smem_at(bar, 8, 8, "mbarrier.try_wait");
  emu_jitter();
  std::unique_lock<std::mutex> lk(t_blk->mu);
  for (;;) {
    mbar_settle_locked(bar);
    if ((t_blk->mbar[bar].phase & 1u) != (parity & 1u)) return;
    t_blk->cv.wait(lk);
  }
}
inline float2 lds_f2(unsigned a) {
  float2 v;
  std::memcpy(&v, smem_at(a, 8, 8, "ld.shared.v2.f32"), 8);
  return v;
}
inline uint4 lds_u4(unsigned a) {
  uint4 v;
  std::memcpy(&v, smem_at(a, 16, 16, "ld.shared.v4.b32"), 16);
  return v;
}
inline void st_dsmem_f2(unsigned ca, float2 v) {
  std::memcpy(dsmem_at(ca, 8, "st.shared::cluster.v2"), &v, 8);
}
inline void st_dsmem_u4(unsigned ca, uint4 v) {
  std::memcpy(dsmem_at(ca, 16, "st.shared::cluster.v4"), &v, 16);
}
inline void sts_u1(unsigned a, unsigned x) {
  std::memcpy(smem_at(a, 4, 4, "st.shared.b32"), &x, 4);
}
inline uint4 ld_dsmem_u4(unsigned ca) {
  uint4 v;
  std::memcpy(&v, dsmem_at(ca, 16, "ld.shared::cluster.v4.b32"), 16);
  return v;
}
// fp16 pairs (cvt.rn.f16x2.f32: round to nearest even, subnormals kept; lo in the low half)
inline unsigned pack_h2(float lo, float hi) {
  const _Float16 a = static_cast<_Float16>(lo), b = static_cast<_Float16>(hi);
  uint16_t ua, ub;
  std::memcpy(&ua, &a, 2);
  std::memcpy(&ub, &b, 2);
  return static_cast<unsigned>(ua) | (static_cast<unsigned>(ub) << 16);
}
inline float2 unpack_h2(unsigned u) {
  const uint16_t ua = static_cast<uint16_t>(u & 0xffff), ub = static_cast<uint16_t>(u >> 16);
  _Float16 a, b;
  std::memcpy(&a, &ua, 2);
  std::memcpy(&b, &ub, 2);
  return {static_cast<float>(a), static_cast<float>(b)};
}
inline float fast_exp2(float x) {
  return std::exp2(x);
}

// cp.async.cg 16 with src-size: the source is read at issue, the copy lands at wait_group 0.
struct pending_copy {
  unsigned dst;
  unsigned char data[16];
};
inline thread_local std::vector<pending_copy> t_copies;
inline void cp_async16(unsigned dst, const void* src, int bytes) {
  smem_at(dst, 16, 16, "cp.async destination");
  if (reinterpret_cast<std::uintptr_t>(src) % 16 != 0 || bytes < 0 || bytes > 16) {
    std::fprintf(stderr, "emu: cp.async source %p (%d bytes) not 16-aligned, thread %u\n", src,
                 bytes, threadIdx.x);
    std::abort();
  }
  pending_copy c{dst, {}};
  if (bytes > 0) std::memcpy(c.data, src, bytes);
  t_copies.push_back(c);
}
inline void cp_async_commit() {}
inline void cp_async_wait_all() {
  emu_jitter();
  for (auto& c : t_copies) std::memcpy(smem_at(c.dst, 16, 16, "cp.async"), c.data, 16);
  t_copies.clear();
}

inline float __shfl_xor_sync(unsigned, float v, int m) {
  const int t = tid_();
  auto& s = t_blk->slots;
  s[t].f = v;
  warp_sync();
  const float r = s[(t & ~31) | ((t & 31) ^ m)].f;
  warp_sync();
  return r;
}

inline int __shfl_xor_sync(unsigned, int v, int m) {
  const int t = tid_();
  auto& s = t_blk->slots;
  s[t].u[7] = static_cast<unsigned>(v);
  warp_sync();
  const int r = static_cast<int>(s[(t & ~31) | ((t & 31) ^ m)].u[7]);
  warp_sync();
  return r;
}

// ldmatrix x4: lane l gives the address of row l % 8 of matrix l / 8; lane t gets, of matrix
// i, row t / 4, columns 2 (t % 4), + 1 (transposed: rows 2 (t % 4), + 1 of column t / 4).
inline void ldsm_generic(unsigned addr, unsigned (&r)[4], bool trans) {
  const int t = tid_(), w0 = t & ~31, l = t & 31;
  auto& s = t_blk->slots;
  smem_at(addr, 16, 16, "ldmatrix row");
  s[t].u[0] = addr;
  warp_sync();
  for (int i = 0; i < 4; ++i) {
    uint16_t e[2];
    for (int h = 0; h < 2; ++h) {
      const int row = trans ? 2 * (l % 4) + h : l / 4;
      const int col = trans ? l / 4 : 2 * (l % 4) + h;
      std::memcpy(&e[h], smem_at(s[w0 + 8 * i + row].u[0] + 2 * col, 2, 2, "ldmatrix"), 2);
    }
    r[i] = static_cast<unsigned>(e[0]) | (static_cast<unsigned>(e[1]) << 16);
  }
  warp_sync();
}
inline void ldsm_x4(unsigned addr, unsigned (&r)[4]) {
  ldsm_generic(addr, r, false);
}
inline void ldsm_x4_t(unsigned addr, unsigned (&r)[4]) {
  ldsm_generic(addr, r, true);
}
inline float lo_bf(unsigned u) {
  return bf2f(static_cast<uint16_t>(u & 0xffff));
}
inline float hi_bf(unsigned u) {
  return bf2f(static_cast<uint16_t>(u >> 16));
}
// mma.m16n8k16 bf16, fp32 accumulate. A: a0 (g, 2t..), a1 (g + 8, 2t..), a2 (g, 2t + 8..),
// a3 (g + 8, 2t + 8..); B: b0 (k 2t.., n g), b1 (k 2t + 8.., n g); C: c0, c1 (g, 2t..),
// c2, c3 (g + 8, 2t..).
inline void mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  const int t = tid_(), w0 = t & ~31, l = t & 31;
  auto& s = t_blk->slots;
  for (int i = 0; i < 4; ++i) s[t].u[i] = a[i];
  s[t].u[4] = b0;
  s[t].u[5] = b1;
  warp_sync();
  auto A = [&](int r, int k) {
    const unsigned u = s[w0 + 4 * (r % 8) + (k % 8) / 2].u[(r / 8) + 2 * (k / 8)];
    return (k % 2) ? hi_bf(u) : lo_bf(u);
  };
  auto B = [&](int k, int n) {
    const unsigned u = s[w0 + 4 * n + (k % 8) / 2].u[4 + k / 8];
    return (k % 2) ? hi_bf(u) : lo_bf(u);
  };
  float d[4];
  for (int e = 0; e < 4; ++e) {
    const int r = l / 4 + 8 * (e / 2), n = 2 * (l % 4) + (e % 2);
    float acc = c[e];
    for (int k = 0; k < 16; ++k) acc += A(r, k) * B(k, n);
    d[e] = acc;
  }
  warp_sync();
  for (int e = 0; e < 4; ++e) c[e] = d[e];
}

// Runs body over a 1-D grid of grid_x blocks in clusters of cs (grid_x a multiple of cs), one
// cluster at a time, every block of it at once; shared_bytes of dynamic shared memory per block.
inline void launch_clusters(unsigned grid_x, unsigned cs, int threads, unsigned shared_bytes,
                            const std::function<void()>& body) {
  if (cs < 1 || grid_x % cs != 0 || threads % 32 != 0 || threads * cs > 8 * kMaxThreads) {
    std::fprintf(stderr, "emu: bad launch (grid %u, cluster %u, %d threads)\n", grid_x, cs,
                 threads);
    std::abort();
  }
  gridDim = {grid_x, 1, 1};
  blockDim = {static_cast<unsigned>(threads), 1, 1};
  g_cluster_size = cs;
  for (unsigned c0 = 0; c0 < grid_x; c0 += cs) {
    cluster_ctx cl;
    cl.bar = std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(cs) * threads);
    for (unsigned r = 0; r < cs; ++r) {
      auto b = std::make_unique<block_ctx>();
      b->mem.resize((shared_bytes + 15) / 16 + 1);
      std::memset(b->mem.data(), 0xFF, b->mem.size() * 16);  // stale bytes: NaN
      b->bytes = shared_bytes;
      b->bar = std::make_unique<std::barrier<>>(threads);
      for (int w = 0; w < threads / 32; ++w)
        b->warp_bar.push_back(std::make_unique<std::barrier<>>(32));
      b->slots.resize(threads);
      cl.blocks.push_back(std::move(b));
    }
    g_cluster = &cl;
    std::vector<std::thread> ts;
    for (unsigned r = 0; r < cs; ++r)
      for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, r, t] {
          threadIdx = {static_cast<unsigned>(t), 0, 0};
          blockIdx = {c0 + r, 0, 0};
          t_blk = cl.blocks[r].get();
          t_rank = r;
          t_copies.clear();
          body();
          if (!t_copies.empty()) {
            std::fprintf(stderr, "emu: thread %d of block %u exits with cp.async in flight\n", t,
                         c0 + r);
            std::abort();
          }
        });
    for (auto& th : ts) th.join();
  }
}
