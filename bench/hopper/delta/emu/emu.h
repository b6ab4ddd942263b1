// Minimal CPU emulation of the CUDA features the delta kernels use: one std::thread per
// CUDA thread, blocks run one after another, __syncthreads = block barrier, mma.sync and
// cp.async emulated (cp.async synchronously). For checking index math and fragment layouts.
#pragma once
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>
#define DELTA_CPU_EMU 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static
using std::max;
using std::min;
struct dim3 {
  unsigned x = 0, y = 0, z = 0;
};
struct float2 {
  float x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline float2 make_float2(float a, float b) {
  return {a, b};
}
struct __nv_bfloat16 {
  unsigned short b;
};
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 v) {
  return v.b;
}
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) {
  return {b};
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return {static_cast<unsigned short>((x >> 16) | 0x40)};
  x += 0x7fffu + ((x >> 16) & 1u);
  return {static_cast<unsigned short>(x >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 v) {
  uint32_t x = uint32_t(v.b) << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}

inline dim3 blockIdx, blockDim, gridDim;
inline thread_local dim3 threadIdx;
inline unsigned char* dsmem = nullptr;
inline std::barrier<>* g_block_bar = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> g_warp_bar;
inline void __syncthreads() {
  g_block_bar->arrive_and_wait();
}
inline void warp_sync() {
  g_warp_bar[threadIdx.x / 32]->arrive_and_wait();
}

struct MmaSlot {
  uint32_t a[4], b[2];
};
inline std::vector<MmaSlot> g_mma;
inline float bfl(uint32_t r, int hi) {
  return __bfloat162float({static_cast<unsigned short>(hi ? r >> 16 : r & 0xffff)});
}
// mma.m16n8k16.row.col bf16 -> f32, d += a b, PTX fragment layouts.
inline void mma16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const int lane = threadIdx.x & 31, wbase = threadIdx.x & ~31;
  MmaSlot& me = g_mma[threadIdx.x];
  memcpy(me.a, a, 16);
  memcpy(me.b, b, 8);
  warp_sync();
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const MmaSlot& s = g_mma[wbase + l];
    const int gq = l >> 2, t = l & 3;
    for (int i = 0; i < 2; ++i) {
      A[gq][2 * t + i] = bfl(s.a[0], i);
      A[gq + 8][2 * t + i] = bfl(s.a[1], i);
      A[gq][2 * t + 8 + i] = bfl(s.a[2], i);
      A[gq + 8][2 * t + 8 + i] = bfl(s.a[3], i);
      B[2 * t + i][gq] = bfl(s.b[0], i);
      B[2 * t + 8 + i][gq] = bfl(s.b[1], i);
    }
  }
  warp_sync();
  const int gq = lane >> 2, t = lane & 3;
  const int rows[4] = {gq, gq, gq + 8, gq + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int e = 0; e < 4; ++e) {
    float s = d[e];
    for (int kk = 0; kk < 16; ++kk) s += A[rows[e]][kk] * B[kk][cols[e]];
    d[e] = s;
  }
}
inline void cp_async16(void* dst, const void* src, bool pred) {
  if (pred)
    memcpy(dst, src, 16);
  else
    memset(dst, 0, 16);
}
inline void cp_async4(void* dst, const void* src, bool pred) {
  if (pred)
    memcpy(dst, src, 4);
  else
    memset(dst, 0, 4);
}
inline void cp_async_commit() {}
template <int N>
inline void cp_async_wait() {}

// Launch f() over grid x block, blocks sequentially; fills smem with garbage first.
inline void emu_launch(dim3 grid, dim3 block, size_t smem, const std::function<void()>& f) {
  const unsigned nt = block.x * std::max(1u, block.y) * std::max(1u, block.z);
  std::vector<unsigned char> sm(smem + 16);
  blockDim = block;
  gridDim = grid;
  for (unsigned z = 0; z < std::max(1u, grid.z); ++z)
    for (unsigned y = 0; y < std::max(1u, grid.y); ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        for (size_t i = 0; i < sm.size(); ++i) sm[i] = 0xff;  // NaN-ish garbage
        dsmem = sm.data();
        blockIdx = {x, y, z};
        std::barrier<> bar(nt);
        g_block_bar = &bar;
        g_warp_bar.clear();
        for (unsigned w = 0; w < (nt + 31) / 32; ++w)
          g_warp_bar.emplace_back(new std::barrier<>(std::min(32u, nt - 32 * w)));
        g_mma.assign(nt, {});
        std::vector<std::thread> th;
        for (unsigned t = 0; t < nt; ++t)
          th.emplace_back([t, &f] {
            threadIdx = {t, 0, 0};
            f();
          });
        for (auto& t : th) t.join();
      }
}
