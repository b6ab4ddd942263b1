// A CPU model of the CUDA and PTX primitives that
// configs/bench/unified_attention_baseline.cu uses, so that its kernels run on
// the host (ua_emu.cpp). One block at a time, one std::thread per CUDA
// thread; warp- and warpgroup-collective operations (ldmatrix, mma,
// shuffles, wgmma) meet at a barrier where every lane deposits its operands
// and then reads what it needs. cp.async copies land only at the
// cp.async.wait_group that covers their group, so a read before the wait sees
// stale bytes, as on the GPU. wgmma runs at issue (its asynchrony is not
// modelled). The operand layouts are the ones the kernel assumes (PTX ISA:
// mma.m16n8k16 fragments, ldmatrix, wgmma register-A fragments and the
// 128-byte-swizzled K-major / MN-major shared-memory layouts): this checks
// the kernel's indexing and control flow against that model, not the model
// against the hardware.
// Alignment and bounds are checked (the GPU faults, the host's memcpy would not): every
// shared-memory access (st / ld.shared 4 and 16 bytes, cp.async 16, ldmatrix row addresses 16,
// mbarriers 8, the base of a 128-byte-swizzled wgmma matrix 1024 with the descriptors' base
// offset 0) must be aligned and lie inside the launch's dynamic shared memory (the plan's
// shared_bytes, launch()'s argument), which starts at shared address UA_EMU_SMEM_BASE (default
// 16: only 16-byte alignment of the dynamic base is assumed, so a kernel that does not round
// its 1024-aligned regions up itself fails here); cp.async's global source must be 16-aligned.
// Global vector stores (the kernels' uint4 output stores) are checked when compiled with
// -fsanitize=alignment -fno-sanitize-recover=alignment (uint4 is 16-aligned here, as in CUDA).
// A failed check prints what and where, then aborts.
#pragma once
#include <atomic>
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
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__
#define __align__(n)  // the definition of smem below carries the alignment

struct dim3e {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3e threadIdx, blockIdx;
inline dim3e gridDim, blockDim;

struct alignas(16) uint4 {  // CUDA's uint4 is 16-aligned
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}

struct __nv_bfloat16 {
  uint16_t v;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
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
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return {{f2bf(lo)}, {f2bf(hi)}};
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline int atomicAdd(int* p, int v) {  // device-scope atomic (the persistent kernel's counter)
  return std::atomic_ref<int>(*p).fetch_add(v);
}
inline void st_relaxed_gpu(int* p, int v) {
  std::atomic_ref<int>(*p).store(v, std::memory_order_relaxed);
}
inline void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}
using std::max;
using std::min;

// ---------------------------------------------------------------- the block
constexpr int kMaxThreads = 1024;
alignas(1024) inline unsigned char smem[256 * 1024];  // the block's shared memory
#ifndef UA_EMU_SMEM_BASE
#define UA_EMU_SMEM_BASE 16
#endif
constexpr unsigned kSmemBase = UA_EMU_SMEM_BASE;  // the shared address of smem[0]
static_assert(kSmemBase % 16 == 0 && kSmemBase < 1024);
inline unsigned g_smem_bytes = sizeof smem;  // the launch's dynamic shared memory
// smem's bytes [a, a + n) of shared address a, which must be align-aligned and in bounds.
inline unsigned char* smem_at(unsigned a, unsigned n, unsigned align, const char* what) {
  if (a % align != 0 || a < kSmemBase || a - kSmemBase + n > g_smem_bytes) {
    std::fprintf(stderr,
                 "emu: %s at shared address %u (%u bytes; needs %u-byte alignment, dynamic shared "
                 "memory [%u, %u)), thread %u of block (%u, %u, %u)\n",
                 what, a, n, align, kSmemBase, kSmemBase + g_smem_bytes, threadIdx.x, blockIdx.x,
                 blockIdx.y, blockIdx.z);
    std::abort();
  }
  return smem + (a - kSmemBase);
}
inline std::barrier<>* g_block_bar = nullptr;
inline std::barrier<>* g_warp_bar[32] = {};
inline std::barrier<>* g_wg_bar[8] = {};  // per warpgroup (wgmma)
inline thread_local std::vector<std::vector<std::function<void()>>>* t_groups = nullptr;
inline thread_local std::vector<std::function<void()>> t_open;  // copies not yet committed

// Operand exchange for collectives: every thread writes its slot, then reads.
struct slot {
  unsigned u[8];
  unsigned long long addr;
  float f[8];
  const float* fp;
};
inline slot g_slot[kMaxThreads];

inline int tid_() {
  return threadIdx.x;
}
inline void warp_sync() {
  g_warp_bar[tid_() / 32]->arrive_and_wait();
}
inline void block_sync() {
  g_block_bar->arrive_and_wait();
}
inline void wg_sync() {
  g_wg_bar[tid_() / 128]->arrive_and_wait();
}
inline bool __all_sync(unsigned, bool v) {
  const int t = tid_();
  g_slot[t].u[0] = v;
  warp_sync();
  bool r = true;
  for (int i = 0; i < 32; ++i) r &= g_slot[(t & ~31) + i].u[0] != 0;
  warp_sync();
  return r;
}
inline bool __any_sync(unsigned, bool v) {
  const int t = tid_();
  g_slot[t].u[0] = v;
  warp_sync();
  bool r = false;
  for (int i = 0; i < 32; ++i) r |= g_slot[(t & ~31) + i].u[0] != 0;
  warp_sync();
  return r;
}
inline void __syncthreads() {
  block_sync();
}
inline void __syncwarp() {
  warp_sync();
}

inline float __shfl_xor_sync(unsigned, float v, int m) {
  const int t = tid_();
  g_slot[t].f[0] = v;
  warp_sync();
  const float r = g_slot[(t & ~31) | ((t & 31) ^ m)].f[0];
  warp_sync();
  return r;
}

inline unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(static_cast<const unsigned char*>(p) - smem) + kSmemBase;
}
inline void sts128(unsigned a, uint4 v) {
  std::memcpy(smem_at(a, 16, 16, "st.shared.v4"), &v, 16);
}
inline void sts32(unsigned a, unsigned v) {
  std::memcpy(smem_at(a, 4, 4, "st.shared.b32"), &v, 4);
}
inline unsigned lds32(unsigned a) {
  unsigned v;
  std::memcpy(&v, smem_at(a, 4, 4, "ld.shared.b32"), 4);
  return v;
}
inline uint4 lds128(unsigned a) {
  uint4 v;
  std::memcpy(&v, smem_at(a, 16, 16, "ld.shared.v4"), 16);
  return v;
}
inline float fast_exp2(float x) {
  return std::exp2(x);
}

// cp.async: copies queue per thread; commit closes a group; wait_group N lands
// every group but the newest N.
inline void cp_async16(unsigned dst, const void* src, int bytes) {
  smem_at(dst, 16, 16, "cp.async destination");
  if (reinterpret_cast<std::uintptr_t>(src) % 16 != 0) {
    std::fprintf(stderr, "emu: cp.async source %p not 16-aligned, thread %u\n", src, threadIdx.x);
    std::abort();
  }
  unsigned char buf[16] = {};
  if (bytes > 0) std::memcpy(buf, src, bytes);  // the source is read at issue (it does not change)
  std::vector<unsigned char> data(buf, buf + 16);
  t_open.push_back([dst, data] { std::memcpy(smem_at(dst, 16, 16, "cp.async"), data.data(), 16); });
}
inline void cp_async_commit() {
  t_groups->push_back(std::move(t_open));
  t_open.clear();
}
inline void cp_async_land(int keep) {
  auto& gs = *t_groups;
  while (static_cast<int>(gs.size()) > keep) {
    for (auto& c : gs.front()) c();
    gs.erase(gs.begin());
  }
}
inline void cp_async_wait_all() {
  cp_async_land(0);
}
template <int N>
inline void cp_async_wait() {
  cp_async_land(N);
}
inline void fence_proxy_async() {}

// ldmatrix x4: lane l gives the address of row l % 8 of matrix l / 8; lane t
// gets, of matrix i, row t / 4, columns 2 (t % 4) and 2 (t % 4) + 1
// (transposed: rows 2 (t % 4), 2 (t % 4) + 1 of column t / 4), low half first.
inline void ldsm_generic(unsigned addr, unsigned (&r)[4], bool trans) {
  const int t = tid_(), w0 = t & ~31, l = t & 31;
  smem_at(addr, 16, 16, "ldmatrix row");
  g_slot[t].u[0] = addr;
  warp_sync();
  for (int i = 0; i < 4; ++i) {
    uint16_t e[2];
    for (int h = 0; h < 2; ++h) {
      const int row = trans ? 2 * (l % 4) + h : l / 4;
      const int col = trans ? l / 4 : 2 * (l % 4) + h;
      const unsigned a = g_slot[w0 + 8 * i + row].u[0] + 2 * col;
      std::memcpy(&e[h], smem_at(a, 2, 2, "ldmatrix"), 2);
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

// mma.m16n8k16 (bf16, fp32 accumulate). A: a0 (g, 2t..), a1 (g + 8, 2t..),
// a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..); B: b0 (k 2t.., n g), b1 (k 2t + 8.., n g);
// C: c0, c1 (g, 2t..), c2, c3 (g + 8, 2t..).
inline void mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  const int t = tid_(), w0 = t & ~31, l = t & 31;
  for (int i = 0; i < 4; ++i) g_slot[t].u[i] = a[i];
  g_slot[t].u[4] = b0;
  g_slot[t].u[5] = b1;
  warp_sync();
  auto A = [&](int r, int k) {
    const int g = r % 8, tt = (k % 8) / 2, reg = (r / 8) + 2 * (k / 8);
    const unsigned u = g_slot[w0 + 4 * g + tt].u[reg];
    return (k % 2) ? hi_bf(u) : lo_bf(u);
  };
  auto B = [&](int k, int n) {
    const int tt = (k % 8) / 2, reg = 4 + k / 8;
    const unsigned u = g_slot[w0 + 4 * n + tt].u[reg];
    return (k % 2) ? hi_bf(u) : lo_bf(u);
  };
  float d[4];
  for (int e = 0; e < 4; ++e) {
    const int r = l / 4 + 8 * (e / 2), n = 2 * (l % 4) + (e % 2);
    float s = c[e];
    for (int k = 0; k < 16; ++k) s += A(r, k) * B(k, n);
    d[e] = s;
  }
  warp_sync();
  for (int e = 0; e < 4; ++e) c[e] = d[e];
}

// ------------------------------------------- mbarriers and named barriers (warp-specialized path)
// One lock and condition variable for all of them; the state is reset per block (launch).
inline std::mutex g_sync_mu;
inline std::condition_variable g_sync_cv;
struct mbar_state {
  unsigned count = 0, pending = 0, phase = 0;  // phase: completed phases
};
inline std::map<unsigned, mbar_state> g_mbar;  // by shared-memory address
struct named_bar {
  int arrived = 0;
  unsigned gen = 0;
};
inline named_bar g_named[16];
struct named_red {
  int arrived = 0;
  unsigned gen = 0;
  bool acc = true, result = true;
};
inline named_red g_red[16];
inline void sync_reset() {
  std::lock_guard<std::mutex> lk(g_sync_mu);
  g_mbar.clear();
  for (auto& b : g_named) b = named_bar{};
  for (auto& b : g_red) b = named_red{};
}
// UA_EMU_JITTER=N (environment): before every mbarrier wait and arrive, a thread sleeps
// 0..N microseconds with probability 1/4, to vary the interleavings the protocol must survive.
inline int emu_jitter_us() {
  static const int j = [] {
    const char* e = std::getenv("UA_EMU_JITTER");
    return e ? std::atoi(e) : 0;
  }();
  return j;
}
inline void emu_jitter() {
  if (emu_jitter_us() <= 0) return;
  thread_local unsigned x = 2463534242u ^ static_cast<unsigned>(tid_() * 2654435761u);
  x ^= x << 13, x ^= x >> 17, x ^= x << 5;
  if ((x & 3) == 0)
    std::this_thread::sleep_for(std::chrono::microseconds((x >> 2) % emu_jitter_us()));
}
inline void mbar_check(unsigned bar) {
  smem_at(bar, 8, 8, "mbarrier");
}
inline void mbar_init(unsigned bar, unsigned count) {
  mbar_check(bar);
  std::lock_guard<std::mutex> lk(g_sync_mu);
  g_mbar[bar] = mbar_state{count, count, 0};
}
inline void mbar_init_fence() {}
inline void mbar_arrive_locked(unsigned bar) {
  mbar_check(bar);
  auto it = g_mbar.find(bar);
  if (it == g_mbar.end()) std::abort();  // arrive on an uninitialised barrier
  if (--it->second.pending == 0) {
    ++it->second.phase;
    it->second.pending = it->second.count;
    g_sync_cv.notify_all();
  }
}
inline void mbar_arrive_if(unsigned bar, bool pred) {
  if (!pred) return;
  emu_jitter();
  std::lock_guard<std::mutex> lk(g_sync_mu);
  mbar_arrive_locked(bar);
}
// try_wait.parity P succeeds once the phase of parity P has completed: the current
// (incomplete) phase has the other parity.
inline void mbar_wait(unsigned bar, unsigned parity) {
  mbar_check(bar);
  emu_jitter();
  std::unique_lock<std::mutex> lk(g_sync_mu);
  g_sync_cv.wait(lk, [&] {
    auto it = g_mbar.find(bar);
    return it != g_mbar.end() && (it->second.phase & 1u) != (parity & 1u);
  });
}
// cp.async.mbarrier.arrive.noinc: the thread's earlier copies land, then it arrives.
inline void cp_async_mbar_arrive(unsigned bar) {
  emu_jitter();
  cp_async_land(0);
  for (auto& c : t_open) c();
  t_open.clear();
  std::lock_guard<std::mutex> lk(g_sync_mu);
  mbar_arrive_locked(bar);
}
inline void bar_arrive_n(int id, int n) {
  std::lock_guard<std::mutex> lk(g_sync_mu);
  auto& b = g_named[id];
  if (++b.arrived == n) {
    b.arrived = 0;
    ++b.gen;
    g_sync_cv.notify_all();
  }
}
inline void bar_arrive_if(int id, int n, bool pred) {
  if (pred) bar_arrive_n(id, n);
}
inline void bar_sync_n(int id, int n) {
  std::unique_lock<std::mutex> lk(g_sync_mu);
  auto& b = g_named[id];
  const unsigned gen = b.gen;
  if (++b.arrived == n) {
    b.arrived = 0;
    ++b.gen;
    g_sync_cv.notify_all();
    return;
  }
  g_sync_cv.wait(lk, [&] { return b.gen != gen; });
}
// bar.red.and.pred: every thread of the n gets the AND of their values (g_red).
inline std::atomic<long> g_lo_stats[2];  // UA_LO_SKIP decisions of thread 0 of a warpgroup
inline bool bar_red_and(int id, int n, bool v) {
  std::unique_lock<std::mutex> lk(g_sync_mu);
  auto& b = g_red[id];
  const unsigned gen = b.gen;
  b.acc = b.acc && v;
  if (++b.arrived == n) {
    b.result = b.acc;
    b.acc = true;
    b.arrived = 0;
    ++b.gen;
    g_sync_cv.notify_all();
    return b.result;
  }
  g_sync_cv.wait(lk, [&] { return b.gen != gen; });
  return b.result;
}
// fp16 pairs (round to nearest even, subnormals kept: the GPU's cvt.rn.f16x2.f32)
inline unsigned pack_h2(float lo, float hi) {
  const _Float16 a = static_cast<_Float16>(lo), b = static_cast<_Float16>(hi);
  uint16_t ua, ub;
  std::memcpy(&ua, &a, 2);
  std::memcpy(&ub, &b, 2);
  return static_cast<unsigned>(ua) | (static_cast<unsigned>(ub) << 16);
}
inline float h2f(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}
inline float h2_lo(unsigned u) {
  return h2f(static_cast<uint16_t>(u & 0xffff));
}
inline float h2_hi(unsigned u) {
  return h2f(static_cast<uint16_t>(u >> 16));
}
template <int N>
inline void setmaxnreg_dec() {}
template <int N>
inline void setmaxnreg_inc() {}
template <int R>
inline void fence_desc(unsigned long long*) {}

// ------------------------------------------------------------------ wgmma
inline void wgmma_fence() {}
inline void wgmma_commit() {}
template <int N>
inline void wgmma_wait() {}
template <int R>
inline void fence_regs(float*) {}
template <int R>
inline void fence_uregs(unsigned*) {}

// Shared-memory address of element (row, col) of a wgmma B operand, from its
// descriptor. K-major (trans 0, B stored [N][K]): ((8, m), (8, 2)) : ((128 B,
// SBO), (2 B, 16 B)); MN-major (trans 1, B stored [K][N]): N in 64-element
// atoms LBO apart, K rows 128 B apart in groups of 8, groups SBO apart. Then
// the 128-byte swizzle: address bits [4, 7) ^= bits [7, 10). The 32-byte
// swizzle (layout type 3, attention_forward_ws's tail panels): rows of 32 B
// (16-element MN atoms), address bit 4 ^= bit 7.
inline unsigned desc_addr(unsigned long long desc, int k, int n, bool trans) {
  const unsigned start = static_cast<unsigned>(desc & 0x3FFF) << 4;
  const unsigned lbo = static_cast<unsigned>((desc >> 16) & 0x3FFF) << 4;
  const unsigned sbo = static_cast<unsigned>((desc >> 32) & 0x3FFF) << 4;
  const unsigned mode = static_cast<unsigned>(desc >> 62);
  if (mode != 1 && mode != 3) {
    std::fprintf(stderr, "emu: descriptor layout type %u not modelled\n", mode);
    std::abort();
  }
  // the 128-byte swizzle repeats every 1024 bytes: with the descriptor's base offset (bits
  // 49-51) 0 the matrix starts 1024-aligned, steps along K inside the atom (address bits 4-6)
  // aside (the 32-byte swizzle's tail panels are not checked)
  if (mode == 1 && (((start >> 7) & 7) != 0 || ((desc >> 49) & 7) != 0)) {
    std::fprintf(
        stderr, "emu: wgmma descriptor start %u: 128-byte-swizzled base not 1024-aligned\n", start);
    std::abort();
  }
  const unsigned rb = mode == 1 ? 128 : 32;  // bytes of a swizzle row
  unsigned a;
  if (!trans)
    a = start + (n % 8) * rb + (n / 8) * sbo + (k / 8) * 16 + (k % 8) * 2;
  else
    a = start + (n % (rb / 2)) * 2 + (n / (rb / 2)) * lbo + (k % 8) * rb + (k / 8) * sbo;
  return mode == 1 ? a ^ (((a >> 7) & 7) << 4) : a ^ (((a >> 7) & 1) << 4);
}

// wgmma m64nNk16 with A from registers (warp w of the warpgroup: rows 16w.., the mma A layout)
// and D in the mma C layout per n8 tile (d[4j + e]).
template <int N>
inline void wgmma_rs(float* d, const unsigned (&a)[4], unsigned long long db, int scale_d,
                     bool trans, bool f16 = false) {
  const int t = tid_(), t0 = t & ~127;  // the warpgroup's first thread
  for (int i = 0; i < 4; ++i) g_slot[t].u[i] = a[i];
  g_slot[t].addr = db;
  wg_sync();
  const unsigned long long desc = g_slot[t0].addr;
  auto A = [&](int r, int k) {
    const int w = r / 16, rr = r % 16, g = rr % 8, tt = (k % 8) / 2, reg = (rr / 8) + 2 * (k / 8);
    const unsigned u = g_slot[t0 + 32 * w + 4 * g + tt].u[reg];
    return f16 ? ((k % 2) ? h2_hi(u) : h2_lo(u)) : ((k % 2) ? hi_bf(u) : lo_bf(u));
  };
  const int w = (t - t0) / 32, l = t % 32;
  std::vector<float> out(N / 2);
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * w + l / 4 + 8 * (e / 2), n = 8 * j + 2 * (l % 4) + (e % 2);
      float s = scale_d ? d[4 * j + e] : 0.f;
      for (int k = 0; k < 16; ++k) {
        uint16_t b;
        std::memcpy(&b, smem_at(desc_addr(desc, k, n, trans), 2, 2, "wgmma B"), 2);
        s += A(r, k) * (f16 ? h2f(b) : bf2f(b));
      }
      out[4 * j + e] = s;
    }
  wg_sync();
  for (int i = 0; i < N / 2; ++i) d[i] = out[i];
}
// wgmma m64nNk16 with A from shared memory (K-major descriptor, rows = M): D as above.
template <int N>
inline void wgmma_ss(float* d, unsigned long long da, unsigned long long db, int scale_d,
                     bool trans_b = false) {
  const int t = tid_(), t0 = t & ~127;
  g_slot[t].addr = da;
  g_slot[t].u[0] = static_cast<unsigned>(db);
  g_slot[t].u[1] = static_cast<unsigned>(db >> 32);
  wg_sync();
  const unsigned long long dA = g_slot[t0].addr;
  const unsigned long long dB =
      g_slot[t0].u[0] | (static_cast<unsigned long long>(g_slot[t0].u[1]) << 32);
  const int w = (t - t0) / 32, l = t % 32;
  std::vector<float> out(N / 2);
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * w + l / 4 + 8 * (e / 2), n = 8 * j + 2 * (l % 4) + (e % 2);
      float s = scale_d ? d[4 * j + e] : 0.f;
      for (int k = 0; k < 16; ++k) {
        uint16_t a, b;
        std::memcpy(&a, smem_at(desc_addr(dA, k, r, false), 2, 2, "wgmma A"), 2);
        std::memcpy(&b, smem_at(desc_addr(dB, k, n, trans_b), 2, 2, "wgmma B"), 2);
        s += bf2f(a) * bf2f(b);
      }
      out[4 * j + e] = s;
    }
  wg_sync();
  for (int i = 0; i < N / 2; ++i) d[i] = out[i];
}
inline void wgmma_m64n64k16_ss(float* d, unsigned long long da, unsigned long long db,
                               int scale_d) {
  wgmma_ss<64>(d, da, db, scale_d);
}
inline void wgmma_m64n128k16_ss(float* d, unsigned long long da, unsigned long long db,
                                int scale_d) {
  wgmma_ss<128>(d, da, db, scale_d);
}
// B MN-major (imm-trans-b = 1): P V with P from shared memory (unified_attention UA_WS128_BN).
inline void wgmma_m64n128k16_ss_t(float* d, unsigned long long da, unsigned long long db) {
  wgmma_ss<128>(d, da, db, 1, true);
}
inline void wgmma_m64n32k16_ss(float* d, unsigned long long da, unsigned long long db,
                               int scale_d) {
  wgmma_ss<32>(d, da, db, scale_d);
}
inline void wgmma_m64n48k16_ss(float* d, unsigned long long da, unsigned long long db,
                               int scale_d) {
  wgmma_ss<48>(d, da, db, scale_d);
}
inline void wgmma_m64n192k16_rs_t(float* d, const unsigned (&a)[4], unsigned long long db) {
  wgmma_rs<192>(d, a, db, 1, true);
}
inline void wgmma_m64n256k16_rs_t(float* d, const unsigned (&a)[4], unsigned long long db) {
  wgmma_rs<256>(d, a, db, 1, true);
}
inline void wgmma_m64n128k16_rs(float* d, const unsigned (&a)[4], unsigned long long db,
                                int scale_d) {
  wgmma_rs<128>(d, a, db, scale_d, false);
}
inline void wgmma_m64n64k16_rs(float* d, const unsigned (&a)[4], unsigned long long db,
                               int scale_d) {
  wgmma_rs<64>(d, a, db, scale_d, false);
}
inline void wgmma_m64n128k16_rs_t(float* d, const unsigned (&a)[4], unsigned long long db,
                                  int scale_d) {
  wgmma_rs<128>(d, a, db, scale_d, true);
}
inline void wgmma_m64n128k16_rs_t(float* d, const unsigned (&a)[4], unsigned long long db) {
  wgmma_rs<128>(d, a, db, 1, true);
}
inline void wgmma_m64n64k16_rs_t(float* d, const unsigned (&a)[4], unsigned long long db) {
  wgmma_rs<64>(d, a, db, 1, true);
}
inline void wgmma_m64n16k16_rs_t(float* d, const unsigned (&a)[4], unsigned long long db) {
  wgmma_rs<16>(d, a, db, 1, true);
}
inline void wgmma_m64n128k16_rs_t_h(float* d, const unsigned (&a)[4], unsigned long long db) {
  wgmma_rs<128>(d, a, db, 1, true, true);
}

// Runs kernel(args...) over the grid, one block at a time, with shared_bytes of dynamic shared
// memory (the plan's shared_bytes).
template <class F>
void launch(dim3e grid, int threads, unsigned shared_bytes, F&& body) {
  if (shared_bytes > sizeof smem) std::abort();
  g_smem_bytes = shared_bytes;
  gridDim = grid;
  blockDim = {static_cast<unsigned>(threads), 1, 1};
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        std::memset(smem, 0xA5, sizeof smem);  // stale bytes, not zeros
        std::barrier<> bb(threads);
        std::vector<std::unique_ptr<std::barrier<>>> wb;
        for (int w = 0; w < threads / 32; ++w) {
          wb.push_back(std::make_unique<std::barrier<>>(32));
          g_warp_bar[w] = wb.back().get();
        }
        std::vector<std::unique_ptr<std::barrier<>>> gb;
        for (int w = 0; w < (threads + 127) / 128; ++w) {
          gb.push_back(std::make_unique<std::barrier<>>(std::min(128, threads - 128 * w)));
          g_wg_bar[w] = gb.back().get();
        }
        g_block_bar = &bb;
        sync_reset();
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
          ts.emplace_back([&, t] {
            threadIdx = {static_cast<unsigned>(t), 0, 0};
            blockIdx = {x, y, z};
            std::vector<std::vector<std::function<void()>>> groups;
            t_groups = &groups;
            t_open.clear();
            body();
          });
        for (auto& th : ts) th.join();
      }
}
