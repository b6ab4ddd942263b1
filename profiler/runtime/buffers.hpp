// Device and host memory of one evaluation (private to the worker's
// evaluator): guarded device allocations (canary regions on both sides of
// every buffer, so a write past either end is seen after the call) and the
// pool of page-locked host blocks that checked outputs are downloaded into.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda_check.hpp"
#include "runtime/kernels.hpp"

namespace kopt::harness::detail {

inline constexpr std::int64_t guard_bytes = 64 * 1024;
inline constexpr std::int64_t align_bytes = 256;

// A device allocation with canary-filled guard regions on both sides, so a
// write past either end is seen after the call. The canary is random per
// 8-byte word (kernels::canary_byte) and refreshed with a fresh seed before
// every call (refresh), so a kernel cannot restore it from a neighbouring
// word or keep state in it from one call to the next. Memory is scrubbed
// (zeroed) before it is freed, so a later allocation holds nothing of it.
class guarded {
 public:
  guarded() = default;
  guarded(std::int64_t bytes, std::uint64_t canary_seed, cudaStream_t s) : bytes_(bytes) {
    padded_ = (std::max<std::int64_t>(bytes, 1) + align_bytes - 1) / align_bytes * align_bytes;
    KOPT_CUDA(cudaMalloc(&base_, static_cast<std::size_t>(total())));
    refresh(canary_seed, s);
  }
  guarded(guarded&& o) noexcept { *this = std::move(o); }
  guarded& operator=(guarded&& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(bytes_, o.bytes_);
    std::swap(padded_, o.padded_);
    std::swap(seed_, o.seed_);
    return *this;
  }
  guarded(const guarded&) = delete;
  guarded& operator=(const guarded&) = delete;
  ~guarded() {
    if (!base_) return;
    // Synchronous memset on the default stream, then free (which waits for
    // the device anyway): nothing the buffer held survives into the next
    // allocation a candidate might read past its own buffers.
    KOPT_CUDA_NOTHROW(cudaMemset(base_, 0, static_cast<std::size_t>(total())));
    KOPT_CUDA_NOTHROW(cudaFree(base_));
  }
  void* data() const { return static_cast<char*>(base_) + guard_bytes; }
  std::int64_t bytes() const { return bytes_; }
  std::uint64_t seed() const { return seed_; }
  // Queues fresh canaries (new seed) into both guard regions.
  void refresh(std::uint64_t canary_seed, cudaStream_t s) {
    seed_ = canary_seed;
    KOPT_CUDA(kernels::fill_canary(front(), guard_bytes, seed_, s));
    KOPT_CUDA(kernels::fill_canary(back(), back_bytes(), seed_, s));
  }
  // Queues a count of damaged guard bytes into *d_count (device-side check,
  // used after timed samples where a download per sample would cost more).
  void check(unsigned long long* d_count, cudaStream_t s) const {
    KOPT_CUDA(kernels::count_canary_damage(front(), guard_bytes, seed_, d_count, s));
    KOPT_CUDA(kernels::count_canary_damage(back(), back_bytes(), seed_, d_count, s));
  }
  // The two guard regions, for a download checked on the host.
  const void* front() const { return base_; }
  void* front() { return base_; }
  const void* back() const { return static_cast<const char*>(base_) + guard_bytes + bytes_; }
  void* back() { return static_cast<char*>(base_) + guard_bytes + bytes_; }
  std::int64_t back_bytes() const { return padded_ - bytes_ + guard_bytes; }
  // Bytes of a downloaded region that differ from the host's own copy of
  // the canary (computed here from the seed, which never leaves the host
  // except as an argument of the harness's fill and count kernels).
  std::uint64_t host_damage(const unsigned char* region, std::int64_t n) const {
    std::uint64_t bad = 0;
    for (std::int64_t w = 0; w * 8 < n; ++w) {
      const std::uint64_t word = kernels::canary_word(seed_, w);  // canary_byte, a word at a time
      for (std::int64_t b = w * 8; b < n && b < w * 8 + 8; ++b)
        bad += region[b] != static_cast<unsigned char>(word >> (8 * (b & 7)));
    }
    return bad;
  }

 private:
  std::int64_t total() const { return guard_bytes + padded_ + guard_bytes; }
  void* base_ = nullptr;
  std::int64_t bytes_ = 0, padded_ = 0;
  std::uint64_t seed_ = 0;
};

// Host memory for the downloads of checked outputs: page-locked and reused.
// A fresh pageable buffer per download (zero-filled, page-faulted, then a
// staged copy) cost about 50 ms per seed for a 58 MB output on the H200
// machine, more than the kernel checks themselves (phase times of the
// throughput benchmark, docs/benchmarks.md). Beyond pinned_cap the pool
// hands out plain heap memory rather than pin more.
class host_pool {
 public:
  class block {
   public:
    block() = default;
    block(host_pool* pool, char* p, std::size_t cap, std::size_t n, bool pinned)
        : pool_(pool), p_(p), cap_(cap), n_(n), pinned_(pinned) {}
    block(block&& o) noexcept { *this = std::move(o); }
    block& operator=(block&& o) noexcept {
      if (this != &o) {
        release();
        pool_ = std::exchange(o.pool_, nullptr);
        p_ = std::exchange(o.p_, nullptr);
        cap_ = std::exchange(o.cap_, 0);
        n_ = std::exchange(o.n_, 0);
        pinned_ = std::exchange(o.pinned_, false);
      }
      return *this;
    }
    block(const block&) = delete;
    block& operator=(const block&) = delete;
    ~block() { release(); }
    char* data() const { return p_; }
    std::size_t size() const { return n_; }
    // Never reuse this memory: a copy into it may still be in flight (an
    // error between issuing the copies and waiting for them).
    void abandon() { p_ = nullptr; }

   private:
    void release() {
      if (!p_) return;
      if (pinned_)
        pool_->free_.emplace(cap_, p_);
      else
        delete[] p_;
      p_ = nullptr;
    }
    host_pool* pool_ = nullptr;
    char* p_ = nullptr;
    std::size_t cap_ = 0, n_ = 0;
    bool pinned_ = false;
  };

  host_pool() = default;
  host_pool(const host_pool&) = delete;
  host_pool& operator=(const host_pool&) = delete;
  ~host_pool() {
    for (auto& [cap, p] : free_) cudaFreeHost(p);
  }

  block acquire(std::size_t n) {
    const std::size_t want = std::max<std::size_t>(n, 1);
    // The smallest free block that fits, unless it would waste most of itself.
    if (auto it = free_.lower_bound(want);
        it != free_.end() && it->first <= 4 * want + (std::size_t{1} << 20)) {
      block b(this, it->second, it->first, n, true);
      free_.erase(it);
      return b;
    }
    // At the cap, give back free blocks (largest first) before pinning more.
    while (pinned_total_ + want > pinned_cap && !free_.empty()) {
      auto last = std::prev(free_.end());
      cudaFreeHost(last->second);
      pinned_total_ -= last->first;
      free_.erase(last);
    }
    if (pinned_total_ + want <= pinned_cap) {
      void* p = nullptr;
      if (cudaMallocHost(&p, want) == cudaSuccess) {
        pinned_total_ += want;
        return block(this, static_cast<char*>(p), want, n, true);
      }
      cudaGetLastError();  // not sticky; fall back to the heap
    }
    return block(this, new char[want], want, n, false);
  }

 private:
  static constexpr std::size_t pinned_cap = std::size_t{2} << 30;
  std::multimap<std::size_t, char*> free_;
  std::size_t pinned_total_ = 0;
};

using host_blocks = std::vector<host_pool::block>;

inline std::vector<const char*> data_of(const host_blocks& v) {
  std::vector<const char*> out;
  for (const auto& b : v) out.push_back(b.data());
  return out;
}
inline std::vector<const char*> data_of(const std::vector<std::string>& v) {
  std::vector<const char*> out;
  for (const auto& b : v) out.push_back(b.data());
  return out;
}

}  // namespace kopt::harness::detail
