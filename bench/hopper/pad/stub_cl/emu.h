// A CPU model of the CUDA primitives that the split-context kernels of
// configs/bench/paged_attention_decode_baseline.cu (PAD_SPLIT = 1, also PAD_CLUSTER = 1) use,
// with thread-block clusters: the blocks of one cluster run together (one std::thread per CUDA
// thread, each block with its own shared memory, block barrier, warp barriers and shuffle
// slots), so that a block can read a peer's shared memory (DSMEM) between cluster barriers.
// The same subset of bench/hopper/emu/emu.h's interface as the pad kernel needs (that header
// keeps one block's state in globals, so it runs one block at a time): shuffles, barriers,
// cp.async groups that land only at the wait covering them, shared-memory bounds and alignment
// checks against the launch's shared_bytes. Built by pad_emu.cpp with -DPAD_EMU_CL and
// -I bench/hopper/pad/stub_cl ahead of -I bench/hopper/pad/stub.
// DSMEM rules checked: a peer load names a rank inside the cluster and an in-bounds, aligned
// address, and it happens after the first cluster barrier and before the second (a block's
// shared memory may be gone once every block has passed its last barrier); every thread of a
// cluster passes the same number of cluster barriers, and an even one (the merge's protocol: a
// barrier before and one after the peer loads; a thread leaving early drops out of the
// barrier, so a mismatch is reported, not a hang).
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
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

struct __nv_bfloat16 {
  uint16_t v;
};
inline uint16_t f2bf(float f) {  // round to nearest even (finite values)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return static_cast<uint16_t>(u >> 16);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf2f(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline int atomicAdd(int* p, int v) {
  return std::atomic_ref<int>(*p).fetch_add(v);
}
inline void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
using std::max;
using std::min;

// ---------------------------------------------------------------- blocks and clusters
constexpr unsigned kSmemBytes = 256 * 1024;
constexpr unsigned kSmemBase = 16;          // the shared address of a block's byte 0
inline unsigned g_smem_bytes = kSmemBytes;  // the launch's dynamic shared memory
struct emu_block {
  alignas(1024) unsigned char mem[kSmemBytes];
  std::unique_ptr<std::barrier<>> bar;
  std::vector<std::unique_ptr<std::barrier<>>> warp;
  float shfl[1024];
};
struct emu_cluster {
  std::vector<emu_block*> blocks;
  std::unique_ptr<std::barrier<>> bar;
};
inline thread_local emu_block* t_blk = nullptr;
inline thread_local emu_cluster* t_cl = nullptr;
inline thread_local int t_csync = 0;  // cluster barriers this thread has passed
inline unsigned char* emu_block_smem() {
  return t_blk->mem;
}

inline unsigned char* smem_in(unsigned char* base, unsigned a, unsigned n, unsigned align,
                              const char* what) {
  if (a % align != 0 || a < kSmemBase || a - kSmemBase + n > g_smem_bytes) {
    std::fprintf(stderr,
                 "emu: %s at shared address %u (%u bytes; needs %u-byte alignment, dynamic shared "
                 "memory [%u, %u)), thread %u of block (%u, %u, %u)\n",
                 what, a, n, align, kSmemBase, kSmemBase + g_smem_bytes, threadIdx.x, blockIdx.x,
                 blockIdx.y, blockIdx.z);
    std::abort();
  }
  return base + (a - kSmemBase);
}
inline unsigned char* smem_at(unsigned a, unsigned n, unsigned align, const char* what) {
  return smem_in(t_blk->mem, a, n, align, what);
}
inline unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(static_cast<const unsigned char*>(p) - t_blk->mem) + kSmemBase;
}

inline void __syncthreads() {
  t_blk->bar->arrive_and_wait();
}
inline float __shfl_xor_sync(unsigned, float v, int m) {
  const int t = threadIdx.x;
  auto& wb = *t_blk->warp[t / 32];
  t_blk->shfl[t] = v;
  wb.arrive_and_wait();
  const float r = t_blk->shfl[(t & ~31) | ((t & 31) ^ m)];
  wb.arrive_and_wait();
  return r;
}

// cp.async: copies queue per thread; commit closes a group; wait_group N lands every group
// but the newest N.
inline thread_local std::vector<std::vector<std::function<void()>>>* t_groups = nullptr;
inline thread_local std::vector<std::function<void()>> t_open;
inline void cp_async16(unsigned dst, const void* src, int bytes) {
  smem_at(dst, 16, 16, "cp.async destination");
  if (reinterpret_cast<std::uintptr_t>(src) % 16 != 0) {
    std::fprintf(stderr, "emu: cp.async source %p not 16-aligned, thread %u\n", src, threadIdx.x);
    std::abort();
  }
  unsigned char buf[16] = {};
  if (bytes > 0) std::memcpy(buf, src, bytes);
  std::vector<unsigned char> data(buf, buf + 16);
  t_open.push_back([dst, data] { std::memcpy(smem_at(dst, 16, 16, "cp.async"), data.data(), 16); });
}
inline void cp_async_commit() {
  t_groups->push_back(std::move(t_open));
  t_open.clear();
}
template <int N>
inline void cp_async_wait() {
  auto& gs = *t_groups;
  while (static_cast<int>(gs.size()) > N) {
    for (auto& c : gs.front()) c();
    gs.erase(gs.begin());
  }
}

// ---------------------------------------------------------------- cluster primitives
inline void cluster_sync() {
  t_cl->bar->arrive_and_wait();
  ++t_csync;
}
inline unsigned cluster_size() {
  return static_cast<unsigned>(t_cl->blocks.size());
}
template <class V>
inline V cluster_ld(unsigned a, unsigned rank) {
  if (rank >= t_cl->blocks.size() || t_csync % 2 != 1) {
    std::fprintf(stderr,
                 "emu: DSMEM load of rank %u (cluster of %zu) after %d cluster barriers, thread %u "
                 "of block (%u, %u, %u)\n",
                 rank, t_cl->blocks.size(), t_csync, threadIdx.x, blockIdx.x, blockIdx.y,
                 blockIdx.z);
    std::abort();
  }
  V v;
  std::memcpy(&v, smem_in(t_cl->blocks[rank]->mem, a, sizeof(V), sizeof(V), "DSMEM load"),
              sizeof(V));
  return v;
}

// Runs `body` for the blocks of cluster (cluster x consecutive blocks along x) `c0` of the
// grid, every thread of the cluster at once; the cluster's shared memory is poisoned first.
template <class F>
void run_cluster(dim3e c0, unsigned cx, int threads, F& body) {
  emu_cluster cl;
  std::vector<std::unique_ptr<emu_block>> owned;
  for (unsigned r = 0; r < cx; ++r) {
    owned.push_back(std::make_unique<emu_block>());
    emu_block* b = owned.back().get();
    std::memset(b->mem, 0xA5, sizeof b->mem);
    b->bar = std::make_unique<std::barrier<>>(threads);
    for (int w = 0; w < threads / 32; ++w) b->warp.push_back(std::make_unique<std::barrier<>>(32));
    cl.blocks.push_back(b);
  }
  cl.bar = std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(cx) * threads);
  std::vector<int> syncs(static_cast<size_t>(cx) * threads, -1);
  std::vector<std::thread> ts;
  for (unsigned r = 0; r < cx; ++r)
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, r, t] {
        threadIdx = {static_cast<unsigned>(t), 0, 0};
        blockIdx = {c0.x + r, c0.y, c0.z};
        t_blk = cl.blocks[r];
        t_cl = &cl;
        t_csync = 0;
        std::vector<std::vector<std::function<void()>>> groups;
        t_groups = &groups;
        t_open.clear();
        body();
        if (!groups.empty() || !t_open.empty()) {
          std::fprintf(stderr, "emu: cp.async copies not waited for at exit\n");
          std::abort();
        }
        syncs[r * threads + t] = t_csync;
        cl.bar->arrive_and_drop();  // a thread that leaves no longer counts
      });
  for (auto& th : ts) th.join();
  for (int s : syncs)
    if (s != syncs[0] || s % 2 != 0) {  // the merge's protocol: none or both barriers
      std::fprintf(stderr,
                   "emu: threads of cluster (%u, %u, %u) passed %d and %d cluster barriers\n", c0.x,
                   c0.y, c0.z, syncs[0], s);
      std::abort();
    }
}
