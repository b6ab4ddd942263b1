// CPU model run of bench/hopper/moetopk/moe_topk_seg.cu: the kernel's real source is compiled
// for the host with a small CUDA shim (below): one std::thread per lane, 32 per warp; the
// warp collectives it uses (__shfl_xor_sync, __shfl_sync, __shfl_down_sync with width,
// __ballot_sync, __reduce_max_sync / __reduce_min_sync) meet at a per-warp barrier where every lane
// deposits its operand and reads the one it asks for. The kernel uses no shared memory and no block
// barrier, so warps run one at a time. Outputs are compared EXACTLY (ids and weights bit for bit
// where the reference's order is decided; weights also under the config's tolerance) with a host
// reference that computes the reference kernel's arithmetic (fmaxf max, sequential sum, p = expf(x
// - max) / sum) and orders by sorting (p descending, id ascending); for rows with NaN / inf the
// reference kernel's own selection loop is used instead (sorting is undefined there). What this
// checks: indexing, lane / segment mapping, the sort networks, the rounds, the owner / id decoding,
// the tie and near-tie checks, the exact path and the grid-stride loop. What it does not: the GPU's
// expf and the reference's expf are the same code (NVRTC, same flags), which the model assumes by
// using the host's expf for both; timing; memory ordering.
//   g++ -O2 -std=c++20 -ffp-contract=off -pthread moetopk_emu.cpp -o /tmp/moetopk_emu
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

// ---- CUDA shim -------------------------------------------------------------------------
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __launch_bounds__(...)
struct dim3e {
  unsigned x = 1, y = 1, z = 1;
};
thread_local dim3e threadIdx, blockIdx;
dim3e gridDim;
struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) {
  return {a, b, c, d};
}
inline float4 __ldcs(const float4* p) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16) {
    std::fprintf(stderr, "emu: misaligned float4 load\n");
    std::abort();
  }
  return *p;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
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
inline int __ffs(unsigned x) {
  return x ? __builtin_ctz(x) + 1 : 0;
}
using std::max;
using std::min;

struct Warp {
  std::barrier<> bar{32};
  unsigned slot[32];
};
thread_local Warp* t_warp;
thread_local int t_lane;
static long long g_exact_rows = 0;  // fast-path rows that took the exact path
static std::mutex g_mu;
#define MT_EXACT_HOOK()                     \
  do {                                      \
    if (t_lane == 0) {                      \
      std::lock_guard<std::mutex> lk(g_mu); \
      ++g_exact_rows;                       \
    }                                       \
  } while (0)

inline unsigned xchg(unsigned v, int src) {
  t_warp->slot[t_lane] = v;
  t_warp->bar.arrive_and_wait();
  const unsigned r = t_warp->slot[src];
  t_warp->bar.arrive_and_wait();
  return r;
}
inline unsigned __shfl_xor_sync(unsigned, unsigned v, int m) {
  return xchg(v, t_lane ^ m);
}
inline float __shfl_xor_sync(unsigned, float v, int m) {
  return __uint_as_float(xchg(__float_as_uint(v), t_lane ^ m));
}
inline int __shfl_xor_sync(unsigned, int v, int m) {
  return static_cast<int>(xchg(static_cast<unsigned>(v), t_lane ^ m));
}
inline float __shfl_sync(unsigned, float v, int src) {
  return __uint_as_float(xchg(__float_as_uint(v), src & 31));
}
inline unsigned __shfl_down_sync(unsigned, unsigned v, unsigned d, int w) {
  const int l = t_lane % w;
  return xchg(v, l + static_cast<int>(d) < w ? t_lane + static_cast<int>(d) : t_lane);
}
inline unsigned __ballot_sync(unsigned, bool p) {
  t_warp->slot[t_lane] = p;
  t_warp->bar.arrive_and_wait();
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= (t_warp->slot[i] ? 1u : 0u) << i;
  t_warp->bar.arrive_and_wait();
  return r;
}
inline unsigned __reduce_max_sync(unsigned, unsigned v) {
  t_warp->slot[t_lane] = v;
  t_warp->bar.arrive_and_wait();
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r = std::max(r, t_warp->slot[i]);
  t_warp->bar.arrive_and_wait();
  return r;
}
inline unsigned __reduce_min_sync(unsigned, unsigned v) {
  t_warp->slot[t_lane] = v;
  t_warp->bar.arrive_and_wait();
  unsigned r = ~0u;
  for (int i = 0; i < 32; ++i) r = std::min(r, t_warp->slot[i]);
  t_warp->bar.arrive_and_wait();
  return r;
}

#include "../../../configs/bench/moe_topk_gating_softmax_seg.cu"

// Runs the kernel over grid x block(32 * MT_WARPS): 32 persistent lane threads take the warps
// one after another.
static void launch(int grid, const float* x, float* w, int* id, int tokens, int E, int k) {
  gridDim.x = grid;
  const int nw = grid * MT_WARPS;
  Warp warp;
  std::vector<std::thread> ts;
  for (int l = 0; l < 32; ++l)
    ts.emplace_back([&, l] {
      t_warp = &warp;
      t_lane = l;
      for (int wi = 0; wi < nw; ++wi) {
        blockIdx.x = wi / MT_WARPS;
        threadIdx.x = (wi % MT_WARPS) * 32 + l;
        moe_topk_gating_softmax_seg(x, w, id, tokens, E, k);
        warp.bar.arrive_and_wait();  // every lane leaves the warp before the next starts
      }
    });
  for (auto& t : ts) t.join();
}

// ---- host reference --------------------------------------------------------------------
static void reference(const float* x, int E, int k, float* w, int* id) {
  float mx = -INFINITY;
  for (int e = 0; e < E; ++e) mx = std::fmax(mx, x[e]);
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) sum += expf(x[e] - mx);
  std::vector<float> p(E);
  bool finite = std::isfinite(sum);
  for (int e = 0; e < E; ++e) p[e] = expf(x[e] - mx) / sum;
  if (finite) {  // sort-based
    std::vector<int> o(E);
    std::iota(o.begin(), o.end(), 0);
    std::stable_sort(o.begin(), o.end(), [&](int a, int b) { return p[a] > p[b]; });
    for (int s = 0; s < k; ++s) {
      w[s] = s < E ? p[o[s]] : -INFINITY;
      id[s] = s < E ? o[s] : -1;
    }
    return;
  }
  int prev_id = -1;  // the reference kernel's loop (NaN / inf rows)
  float prev_p = INFINITY;
  for (int s = 0; s < k; ++s) {
    int best = -1;
    float best_p = -INFINITY;
    for (int e = 0; e < E; ++e) {
      const bool after = p[e] < prev_p || (p[e] == prev_p && e > prev_id);
      if (after && (best < 0 || p[e] > best_p)) {
        best = e;
        best_p = p[e];
      }
    }
    w[s] = best_p;
    id[s] = best;
    prev_id = best;
    prev_p = best_p;
  }
}

struct Stats {
  long long rows = 0, bad_id = 0, bad_w = 0, w_not_bitexact = 0;
};

// tokens rows of E logits made by gen(row, e); compares every row.
static Stats run_case(const char* name, int tokens, int E, int k,
                      const std::function<float(int, int)>& gen, int grid = -1, int misalign = 0) {
  std::vector<float> buf(static_cast<size_t>(tokens) * E + 8);
  float* x = buf.data() + misalign;  // vector storage is 16-aligned for float on glibc
  if (reinterpret_cast<std::uintptr_t>(buf.data()) % 16) {
    std::fprintf(stderr, "host buffer not 16-aligned\n");
    std::abort();
  }
  for (int r = 0; r < tokens; ++r)
    for (int e = 0; e < E; ++e) x[static_cast<size_t>(r) * E + e] = gen(r, e);
  std::vector<float> w(static_cast<size_t>(tokens) * k, 12345.f), rw(k);
  std::vector<int> id(static_cast<size_t>(tokens) * k, -77), rid(k);
  if (grid < 0)
    grid = std::max(1, (tokens * E + 32 * MT_V * MT_WARPS - 1) / (32 * MT_V * MT_WARPS));
  const long long ex0 = g_exact_rows;
  launch(grid, x, w.data(), id.data(), tokens, E, k);
  Stats st;
  for (int r = 0; r < tokens; ++r) {
    reference(x + static_cast<size_t>(r) * E, E, k, rw.data(), rid.data());
    ++st.rows;
    bool idok = true, wok = true, exact = true;
    for (int s = 0; s < k; ++s) {
      const float a = w[static_cast<size_t>(r) * k + s], b = rw[s];
      if (id[static_cast<size_t>(r) * k + s] != rid[s]) idok = false;
      const bool same = (std::isnan(a) && std::isnan(b)) || a == b;
      if (!same) exact = false;
      const float d = std::fabs(a - b);
      if (!same && !(d <= 1e-6f || d <= 1e-4f * std::fabs(b))) wok = false;
    }
    if (!idok) {
      if (st.bad_id < 3) {
        std::printf("  %s row %d ids:", name, r);
        for (int s = 0; s < k; ++s)
          std::printf(" %d/%d", id[static_cast<size_t>(r) * k + s], rid[s]);
        std::printf("\n");
      }
      ++st.bad_id;
    }
    st.bad_w += !wok;
    st.w_not_bitexact += !exact;
  }
  std::printf(
      "%-34s tokens %6d E %4d k %d grid %5d: rows %lld, id mismatches %lld, weight "
      "fails %lld, weights not bit-equal %lld, exact-path rows %lld\n",
      name, tokens, E, k, grid, st.rows, st.bad_id, st.bad_w, st.w_not_bitexact,
      g_exact_rows - ex0);
  return st;
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && !std::strcmp(argv[1], "--quick");
  long long fails = 0;
  auto acc = [&](const Stats& s) { fails += s.bad_id + s.bad_w; };
  // N(0,1) on the config's 10 workloads (the worker's generator: normal(0, 1) fp32)
  const int shapes[10][2] = {{1, 128},    {129, 128},  {256, 128},  {520, 128},  {1019, 128},
                             {2044, 128}, {4083, 128}, {8192, 128}, {8037, 256}, {13526, 256}};
  for (int i = 0; i < 10; ++i) {
    std::mt19937 rng(1000 + i);
    std::normal_distribution<float> nd(0.f, 1.f);
    const int T = quick ? std::min(shapes[i][0], 600) : shapes[i][0];
    std::vector<float> vals(static_cast<size_t>(T) * shapes[i][1]);
    for (auto& v : vals) v = nd(rng);
    const int E = shapes[i][1];
    char nm[64];
    std::snprintf(nm, sizeof nm, "normal s%d", i);
    acc(run_case(nm, T, E, 8, [&](int r, int e) { return vals[static_cast<size_t>(r) * E + e]; }));
  }
  // adversarial rows, each family over the fast shapes and others
  for (int E : {128, 256, 64, 512, 96, 100, 33, 300, 600}) {
    for (int k : {8, 1, 4}) {
      if (quick && k != 8 && E != 128) continue;
      std::mt19937 rng(7 * E + k);
      std::normal_distribution<float> nd(0.f, 1.f);
      const int T = quick ? 97 : 390;  // 30 rows per family
      std::vector<float> vals(static_cast<size_t>(T) * E);
      // row families by r % 13
      for (int r = 0; r < T; ++r) {
        float* v = &vals[static_cast<size_t>(r) * E];
        for (int e = 0; e < E; ++e) v[e] = nd(rng);
        const int fam = r % 13;
        if (fam == 1) {  // exact duplicate logits among the top (and elsewhere)
          for (int e = 0; e < E; ++e) v[e] = static_cast<float>(static_cast<int>(v[e] * 2)) * 0.5f;
        } else if (fam == 2) {  // all equal
          for (int e = 0; e < E; ++e) v[e] = 0.37f;
        } else if (fam == 3) {  // adjacent-float pairs: distinct logits, p may be equal
          for (int e = 0; e + 1 < E; e += 2)
            v[e + 1] = std::nextafter(v[e], (e & 2) ? 10.f : -10.f);
        } else if (fam == 4) {  // near ties at the 8th / 9th boundary: a cluster of 1-ulp steps
          float b = 2.5f;
          for (int e = 0; e < E; e += 3) {
            v[e] = b;
            b = std::nextafter(b, -10.f);
          }
        } else if (fam == 5) {  // one huge logit: the rest underflow (clamped keys, p = 0)
          v[r % E] = 120.f;
        } else if (fam == 6) {  // wide spread: the top 8 reach below e = 2^-31
          for (int e = 0; e < E; ++e) v[e] = -3.f * e;
        } else if (fam == 7) {  // -inf entries
          for (int e = 0; e < E; e += 2) v[e] = -INFINITY;
        } else if (fam == 8) {  // a NaN
          v[(r * 7) % E] = NAN;
        } else if (fam == 9) {  // +inf
          v[(r * 5) % E] = INFINITY;
        } else if (fam == 10) {  // a top value repeated in several lanes, same local index
          for (int e = 0; e < E; e += 16) v[e] = 3.0f;
        } else if (fam == 12) {  // the top 10 a few ulps apart (1..12 ulps of x): both sides of
          // the 4-ulp acceptance margin, where the tree and the sequential sum can differ
          std::uniform_int_distribution<int> ud(1, 12);
          float b = 2.0f + 0.25f * nd(rng);
          for (int t = 0; t < 10 && t * 7 < E; ++t) {
            v[(t * 7 + r) % E] = b;
            const int g = ud(rng);
            for (int u = 0; u < g; ++u) b = std::nextafter(b, -10.f);
          }
        } else if (fam == 11) {  // the top 8 all in one lane's 16 values (lane exhaustion)
          for (int e = 0; e < E; ++e) v[e] = -5.f + 0.001f * nd(rng);
          for (int q = 0; q < 4 && q * 4 * (E / MT_V) < E; ++q)
            for (int c = 0; c < 4; ++c) {
              const int e = q * 4 * std::max(1, E / MT_V) + c;
              if (e < E) v[e] = 4.f - 0.1f * (q * 4 + c);
            }
        }
      }
      char nm[64];
      std::snprintf(nm, sizeof nm, "adversarial E%d k%d", E, k);
      acc(run_case(nm, T, E, k,
                   [&](int r, int e) { return vals[static_cast<size_t>(r) * E + e]; }));
    }
  }
  // grid-stride loop (a grid smaller than the plan's), odd row counts, a misaligned input
  {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> vals(3001 * 256);
    for (auto& v : vals) v = nd(rng);
    acc(run_case(
        "grid 3, E128", 1003, 128, 8, [&](int r, int e) { return vals[r * 128 + e]; }, 3));
    acc(run_case(
        "grid 2, E256", 777, 256, 8, [&](int r, int e) { return vals[r * 256 + e]; }, 2));
    acc(run_case(
        "misaligned (+1 float), E128", 301, 128, 8, [&](int r, int e) { return vals[r * 128 + e]; },
        -1, 1));
    acc(run_case("tokens 3, E128", 3, 128, 8, [&](int r, int e) { return vals[r * 128 + e]; }));
  }
  std::printf(fails ? "FAILED: %lld rows\n" : "ALL OK\n", fails);
  return fails != 0;
}
