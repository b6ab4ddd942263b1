// CPU check of the wgmma path of configs/bench/fp8_blockscale_fused_moe_baseline.cu
// (TC_FP8 = 1 fmoe_tc1, TC2_V = 2 fmoe_tc2, with the routing) on a small problem, through the
// model of bench/hopper/emu/emu.h (one std::thread per CUDA thread; wgmma at issue; cp.async
// lands at its wait or mbarrier arrive). It checks the kernels' indexing, swizzles, fragment
// maps, k permutation, mbarrier ring and scales against a double-precision reference, not the
// model against the hardware.
//   g++ -O2 -std=c++20 -pthread [-DTC2_TM=128 -DWG_OVL=1 -DY16=1 ...] emu_fmoe.cpp -o emu_fmoe
//   (-DFMOE_PERSIST_DRAFT -DTC1_PERSIST=1 ...: the draft fp8_blockscale_fused_moe_persist.cu)
//   ./emu_fmoe [tokens hidden inter experts top_k]
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "../emu/emu.h"

typedef unsigned int u32;
typedef unsigned long long u64;
using std::max;
using std::min;

struct uint2 {
  unsigned x, y;
};
struct float2 {
  float x, y;
};
inline float2 make_float2(float a, float b) {
  return {a, b};
}
// ---- f16 and e4m3
inline uint16_t f2h(float f) {  // round to nearest even, finite values (subnormals included)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const float a = std::fabs(f);
  if (a >= 65520.f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a < 6.103515625e-05f) {  // subnormal: multiples of 2^-24
    const float q = std::nearbyint(a * 16777216.f);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(q));
  }
  int e;
  const float m = std::frexp(a, &e);     // a = m 2^e, m in [0.5, 1)
  float q = std::nearbyint(m * 2048.f);  // 11 significant bits
  if (q >= 2048.f) {
    q /= 2.f;
    ++e;
  }
  const uint32_t exp = static_cast<uint32_t>(e - 1 + 15), man = static_cast<uint32_t>(q) - 1024u;
  return static_cast<uint16_t>(sign | (exp << 10) | man);
}
inline float h2f(uint16_t h) {
  const uint32_t sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  float v = exp == 0 ? std::ldexp(static_cast<float>(man), -24)
                     : std::ldexp(static_cast<float>(man + 1024), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}
inline float e4m3_to_f(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  float v = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.f + m / 8.f, e - 7);
  if (e == 15 && m == 7) v = NAN;
  return s ? -v : v;
}
inline uint8_t f_to_e4m3(float f) {  // nearest (ties: either), saturating
  uint8_t best = 0;
  float bd = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_f(static_cast<uint8_t>(c));
    if (std::isnan(v)) continue;
    const float d = std::fabs(v - f);
    if (d < bd) bd = d, best = static_cast<uint8_t>(c);
  }
  return best;
}
static float g_e4m3[256];
struct __half {
  uint16_t v;
};
struct __half2 {
  __half x, y;
};
inline float __half2float(__half h) {
  return h2f(h.v);
}
inline __half __float2half_rn(float f) {
  return {f2h(f)};
}
inline __half2 __floats2half2_rn(float a, float b) {
  return {{f2h(a)}, {f2h(b)}};
}
struct __nv_fp8_e4m3 {
  uint8_t __x;
  __nv_fp8_e4m3() = default;
  explicit __nv_fp8_e4m3(float f) : __x(f_to_e4m3(f)) {}
};
inline u32 f8x2_to_h2(u32 v16) {
  return f2h(g_e4m3[v16 & 0xff]) | (static_cast<u32>(f2h(g_e4m3[(v16 >> 8) & 0xff])) << 16);
}
// ---- primitives of the other paths (compiled, not run here)
inline void mma16816(float*, u32, u32, u32, u32, u32, u32) {
  std::abort();
}
inline uint4 ldg_stream(const void* p) {
  uint4 r;
  std::memcpy(&r, p, 16);
  return r;
}
inline void cp_async16(void* d, const void* s) {
  cp_async16(smem_u32(d), s, 16);
}
inline unsigned __ballot_sync(unsigned, bool v) {
  const int t = tid_();
  g_slot[t].u[0] = v;
  warp_sync();
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= (g_slot[(t & ~31) + i].u[0] ? 1u : 0u) << i;
  warp_sync();
  return r;
}
inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __shfl_up_sync(unsigned, int v, int o) {
  const int t = tid_();
  g_slot[t].u[1] = static_cast<unsigned>(v);
  warp_sync();
  const int l = t & 31;
  const int r = l >= o ? static_cast<int>(g_slot[t - o].u[1]) : v;
  warp_sync();
  return r;
}
inline int __shfl_sync(unsigned, int v, int src) {
  const int t = tid_();
  g_slot[t].u[2] = static_cast<unsigned>(v);
  warp_sync();
  const int r = static_cast<int>(g_slot[(t & ~31) + src].u[2]);
  warp_sync();
  return r;
}
// ---- wgmma path primitives
inline u32 smem_addr(const void* p) {
  return smem_u32(p);
}
inline void mbar_arrive(u32 bar) {
  mbar_arrive_if(bar, true);
}
inline void cp_async16z(u32 dst, const void* src, int b) {
  cp_async16(dst, src, b);
}
inline void cp_async_arrive_noinc(u32 bar) {
  cp_async_mbar_arrive(bar);
}
inline u32 lds32a(u32 a) {
  u32 v;
  std::memcpy(&v, smem + a, 4);
  return v;
}
// K-major 128-byte-swizzled operand, 1-byte elements: (row, k) -> address
inline unsigned addr8(unsigned long long desc, int k, int row) {
  const unsigned start = static_cast<unsigned>(desc & 0x3FFF) << 4;
  const unsigned sbo = static_cast<unsigned>((desc >> 32) & 0x3FFF) << 4;
  const unsigned a = start + (row % 8) * 128 + (row / 8) * sbo + k;
  return a ^ (((a >> 7) & 7) << 4);
}
inline void wgmma_m64n128k32_e4m3(float* d, unsigned long long da, unsigned long long db) {
  const int t = tid_(), t0 = t & ~127;
  g_slot[t].addr = da;
  g_slot[t].u[0] = static_cast<unsigned>(db);
  g_slot[t].u[1] = static_cast<unsigned>(db >> 32);
  wg_sync();
  const unsigned long long dA = g_slot[t0].addr;
  const unsigned long long dB =
      g_slot[t0].u[0] | (static_cast<unsigned long long>(g_slot[t0].u[1]) << 32);
  if (dA != da || dB != db) std::abort();  // descriptors must be warpgroup-uniform
  const int w = (t - t0) / 32, l = t % 32;
  float out[64];
  for (int j = 0; j < 16; ++j)
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * w + l / 4 + 8 * (e / 2), n = 8 * j + 2 * (l % 4) + (e % 2);
      float s = d[4 * j + e];
      for (int k = 0; k < 32; ++k)
        s += g_e4m3[smem[addr8(dA, k, r)]] * g_e4m3[smem[addr8(dB, k, n)]];
      out[4 * j + e] = s;
    }
  wg_sync();
  for (int i = 0; i < 64; ++i) d[i] = out[i];
}
inline void wgmma_rs_n_(float* d, const u32* a, unsigned long long db, int N) {
  const int t = tid_(), t0 = t & ~127;
  for (int i = 0; i < 4; ++i) g_slot[t].u[i] = a[i];
  g_slot[t].addr = db;
  wg_sync();
  const unsigned long long desc = g_slot[t0].addr;
  if (desc != db) std::abort();
  auto A = [&](int r, int k) {
    const int w = r / 16, rr = r % 16, g = rr % 8, tt = (k % 8) / 2, reg = (rr / 8) + 2 * (k / 8);
    const unsigned u = g_slot[t0 + 32 * w + 4 * g + tt].u[reg];
    return h2f(static_cast<uint16_t>((k % 2) ? u >> 16 : u & 0xffff));
  };
  const int w = (t - t0) / 32, l = t % 32;
  float out[64];
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * w + l / 4 + 8 * (e / 2), n = 8 * j + 2 * (l % 4) + (e % 2);
      float s = d[4 * j + e];
      for (int k = 0; k < 16; ++k) {
        uint16_t b;
        std::memcpy(&b, smem + desc_addr(desc, k, n, false), 2);
        s += A(r, k) * h2f(b);
      }
      out[4 * j + e] = s;
    }
  wg_sync();
  for (int i = 0; i < N / 2; ++i) d[i] = out[i];
}
inline void wgmma_rs_m64n64k16(float* d, const u32* a, unsigned long long db) {
  wgmma_rs_n_(d, a, db, 64);
}
inline void wgmma_rs_m64n128k16(float* d, const u32* a, unsigned long long db) {
  wgmma_rs_n_(d, a, db, 128);
}

#define FMOE_EMU 1
#define FMOE_SHARED static
#ifdef FMOE_PERSIST_DRAFT  // the unmeasured persistent variants
#include "fp8_blockscale_fused_moe_persist.cu"
#else
#include "../../../configs/bench/fp8_blockscale_fused_moe_baseline.cu"
#endif
#ifndef TC1_PERSIST
#define TC1_PERSIST 0
#endif
#ifndef TC2_PERSIST
#define TC2_PERSIST 0
#endif

int main(int argc, char** argv) {
  for (int c = 0; c < 256; ++c) g_e4m3[c] = e4m3_to_f(static_cast<uint8_t>(c));
  const int T = argc > 1 ? atoi(argv[1]) : 100, D = argc > 2 ? atoi(argv[2]) : 1024,
            I = argc > 3 ? atoi(argv[3]) : 768, E = argc > 4 ? atoi(argv[4]) : 3,
            K = argc > 5 ? atoi(argv[5]) : 2;
  std::mt19937 rng(7);
  std::normal_distribution<float> nh(0.f, 170.f), nw(0.f, 112.f);
  std::uniform_real_distribution<float> ua(1.6e-4f, 1.9e-4f), uw(0.0085f, 0.0095f);
  auto q8 = [&](float v) { return f_to_e4m3(std::max(-448.f, std::min(448.f, v))); };
  std::vector<uint8_t> hs(static_cast<size_t>(T) * D), w1(static_cast<size_t>(E) * 2 * I * D),
      w2(static_cast<size_t>(E) * D * I);
  std::vector<uint8_t> lut(4096);  // fast quantizer: table over a grid
  for (auto& v : hs) v = q8(nh(rng));
  for (auto& v : w1) v = q8(nw(rng));
  for (auto& v : w2) v = q8(nw(rng));
  std::vector<float> as(static_cast<size_t>(T) * (D / 128)),
      s1(static_cast<size_t>(E) * (2 * I / 128) * (D / 128)),
      s2(static_cast<size_t>(E) * (D / 128) * (I / 128));
  for (auto& v : as) v = ua(rng);
  for (auto& v : s1) v = uw(rng);
  for (auto& v : s2) v = uw(rng);
  std::vector<int> ids(static_cast<size_t>(T) * K);
  for (int t = 0; t < T; ++t) {
    std::vector<int> p(E);
    for (int e = 0; e < E; ++e) p[e] = e;
    std::shuffle(p.begin(), p.end(), rng);
    for (int s = 0; s < K; ++s) ids[t * K + s] = p[s];
  }
  const int slots = T * K;
  std::vector<int> lists(static_cast<size_t>(E) * T + 64), counts(E);
  std::vector<__half> act(static_cast<size_t>(slots) * I);
  std::vector<float> y(static_cast<size_t>(slots) * D, NAN);
  // routing: fmoe_stage1 with gemv = 0
  launch({static_cast<unsigned>(E), 1, 1}, GV_THREADS, [&] {
    fmoe_stage1(hs.data(), as.data(), w1.data(), s1.data(), ids.data(), act.data(), lists.data(),
                counts.data(), T, D, I, K, 0);
  });
  const int tb = (slots + 63) / 64 + E;
#if TC1_PERSIST
  launch({7, 1, 1}, 384, [&] {  // fewer CTAs than tiles: several tiles per CTA
#else
  launch({static_cast<unsigned>(I / 128), static_cast<unsigned>(tb), 1}, 384, [&] {
#endif
    fmoe_tc1(hs.data(), as.data(), w1.data(), s1.data(), lists.data(), counts.data(), act.data(), T,
             D, I, K, E, 1);
  });
  const bool run2 = D % 256 == 0;  // fmoe_tc2 (TC2_V 2) needs hidden % 256 == 0
  const int tb2 = (slots + TC2_TM - 1) / TC2_TM + E;
  if (run2)
    launch({TC2_PERSIST ? 5u : static_cast<unsigned>(D / 256),
            TC2_PERSIST ? 1u : static_cast<unsigned>(tb2), 1},
           384, [&] {
             fmoe_tc2(act.data(), w2.data(), s2.data(), lists.data(), counts.data(), y.data(), T, D,
                      I, E, 1);
           });
  // reference
  auto perm16 = [](int k) { return ((k & 2) << 2) | ((k >> 2) << 1) | (k & 1); };
  double max_ra = 0, max_ry = 0, rms_a = 0, rms_y = 0;
  long bad_a = 0, bad_y = 0;
  for (int f = 0; f < slots; ++f) {
    const int t = f / K, e = ids[f];
    std::vector<double> a_ref(I);
    std::vector<float> a_k(I);
    for (int i = 0; i < I; ++i) {
      double zg = 0, zu = 0;
      for (int d = 0; d < D; ++d) {
        const double h = g_e4m3[hs[static_cast<size_t>(t) * D + d]] * as[t * (D / 128) + d / 128];
        const size_t rg = (static_cast<size_t>(e) * 2 * I + i) * D + d,
                     ru = rg + static_cast<size_t>(I) * D;
        zg += h * g_e4m3[w1[rg]] *
              s1[(static_cast<size_t>(e) * (2 * I / 128) + i / 128) * (D / 128) + d / 128];
        zu += h * g_e4m3[w1[ru]] *
              s1[(static_cast<size_t>(e) * (2 * I / 128) + (I + i) / 128) * (D / 128) + d / 128];
      }
      a_ref[i] = zg / (1.0 + std::exp(-zg)) * zu;
      a_k[i] = h2f(act[static_cast<size_t>(f) * I + (i & ~15) + perm16(i & 15)].v);
      rms_a += a_ref[i] * a_ref[i];
    }
    for (int i = 0; i < I; ++i) {
      const double err = std::fabs(a_k[i] - a_ref[i]);
      max_ra = std::max(max_ra, err / (std::fabs(a_ref[i]) + 1e-3));
      if (err > 2e-3 * std::fabs(a_ref[i]) + 1e-4 || std::isnan(a_k[i])) ++bad_a;
    }
    for (int d = 0; d < (run2 ? D : 0); ++d) {
      double yr = 0;
      for (int i = 0; i < I; ++i)
        yr += static_cast<double>(a_k[i]) * g_e4m3[w2[(static_cast<size_t>(e) * D + d) * I + i]] *
              s2[(static_cast<size_t>(e) * (D / 128) + d / 128) * (I / 128) + i / 128];
#if Y16
      const double yk =
          h2f(reinterpret_cast<const uint16_t*>(y.data())[static_cast<size_t>(f) * D + d]);
      const double ytol = 1e-3;
#else
      const double yk = y[static_cast<size_t>(f) * D + d];
      const double ytol = 1e-4;
#endif
      rms_y += yr * yr;
      const double err = std::fabs(yk - yr);
      max_ry = std::max(max_ry, err / (std::fabs(yr) + 1e-2));
      if (!(err <= ytol * std::fabs(yr) + 1e-3)) ++bad_y;
    }
  }
  std::printf("tokens %d hidden %d inter %d experts %d top_k %d: counts", T, D, I, E, K);
  for (int e = 0; e < E; ++e) std::printf(" %d", counts[e]);
  std::printf(
      "\nact: rms %.4g, %ld bad of %d, max rel %.3g\ny:   rms %.4g, %ld bad of %d, max rel %.3g\n",
      std::sqrt(rms_a / (static_cast<double>(slots) * I)), bad_a, slots * I, max_ra,
      std::sqrt(rms_y / (static_cast<double>(slots) * D)), bad_y, slots * D, max_ry);
  return bad_a || bad_y ? 1 : 0;
}
