// Runs the kernel of configs/bench/mla_decode_attention_baseline.cu on the CPU through
// mla_emu.h's model of the PTX primitives (clusters and distributed shared memory included), on
// the config's three workload shapes with the launch plan's split (cluster size), and on edge
// cases: variable sequence lengths (a partial last tile, ranks with two tiles, ranks without a
// tile, a sequence of one position), a partial group of heads (nhead not a multiple of 16),
// clusters of 1 and 3 and peaked softmaxes (q scaled so that the running max moves between
// tiles and ranks). Each output element is compared with a float64 reference under the config's
// tolerance (atol 1e-3, rtol 0.02, every element) against the reference rounded to bf16.
// kv_cache holds batch * ctx_len rows as in the config (ctx_len = the longest sequence), so
// MLA_SPEC's guessed rows exist; its guess holds on the workload shapes and fails on the
// variable-length cases (the reload path).
// A check of the kernel's indexing, synchronisation and control flow, not of the GPU.
//
//   g++ -std=c++20 -O2 -pthread -I bench/hopper/mla/stub -DKOPT_EMU [-DMLA_P_SPLIT=0 ...]
//       bench/hopper/mla/mla_emu.cpp -o /tmp/mla_emu && /tmp/mla_emu [case names...]
//
// Exit status 0 when every case passes.
#include <cstdio>
#include <random>
#include <string>

#include "../../../configs/bench/mla_decode_attention_baseline.cu"

namespace {

constexpr double kAtol = 1e-3, kRtol = 0.02;  // configs/bench/mla_decode_attention.json

// The plan's cluster size: min(MLA_SPLIT_MAX, ceil(ctx_len / 32), max(1, 132 / units)).
int plan_split(int batch, int ctx_len, int nhead, int split_max = 8) {
  const int units = batch * ((nhead + 15) / 16);
  return std::min({split_max, (ctx_len + 31) / 32, std::max(1, 132 / units)});
}

struct mla_case {
  std::string name;
  int nhead;
  std::vector<int> lens;
  int cs;
  float qscale;
  unsigned seed;
};

bool run(mla_case c) {
  std::mt19937 gen(c.seed);
  if (c.lens.empty())  // 40 random lengths in [1, 80]
    for (int i = 0; i < 40; ++i) c.lens.push_back(1 + static_cast<int>(gen() % 80));
  std::normal_distribution<float> nd(0.f, 1.f);
  const int B = static_cast<int>(c.lens.size()), H = c.nhead;
  long long rows = 0;
  int ctx_len = 0;  // the plan's ctx_len: the longest sequence (MLA_SPEC guesses every length)
  for (int l : c.lens) rows += l, ctx_len = std::max(ctx_len, l);
  // kopt allocates batch * ctx_len rows (the config's kv_cache shape); MLA_SPEC may read them
  std::vector<__nv_bfloat16> q(static_cast<size_t>(B) * H * MLA_DQK),
      kv(std::max(rows, static_cast<long long>(B) * ctx_len) * MLA_DQK);
  for (auto& x : q) x.v = f2bf(bf2f(f2bf(nd(gen))) * c.qscale);
  for (auto& x : kv) x.v = f2bf(nd(gen));
  std::vector<__nv_bfloat16> out(static_cast<size_t>(B) * H * MLA_DV, __nv_bfloat16{0x7fc0});
  const unsigned grid = c.cs * B * ((H + 15) / 16);
  const auto t0 = std::chrono::steady_clock::now();
  launch_clusters(grid, c.cs, MLA_THREADS, MLA_SMEM + MLA_PUSH * 36864 + MLA_BULK * 16, [&] {
    mla_decode_baseline(q.data(), kv.data(), c.lens.data(), out.data(), H
#if MLA_SPEC
                        ,
                        ctx_len
#endif
    );
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double worst = 0, max_abs = 0, max_ref = 0;
  long fails = 0, unwritten = 0, total = 0;
  long long o = 0;
  for (int i = 0; i < B; ++i) {
    const int L = c.lens[i];
    for (int h = 0; h < H; ++h) {
      const __nv_bfloat16* qv = &q[(static_cast<size_t>(i) * H + h) * MLA_DQK];
      std::vector<double> s(L);
      double mx = -1e300;
      for (int p = 0; p < L; ++p) {
        const __nv_bfloat16* kr = &kv[(o + p) * MLA_DQK];
        double d = 0;
        for (int e = 0; e < MLA_DQK; ++e) d += static_cast<double>(bf2f(qv[e].v)) * bf2f(kr[e].v);
        s[p] = d / 24.0;
        mx = std::max(mx, s[p]);
      }
      double l = 0;
      for (int p = 0; p < L; ++p) l += (s[p] = std::exp(s[p] - mx));
      for (int col = 0; col < MLA_DV; ++col) {
        double y = 0;
        for (int p = 0; p < L; ++p) y += s[p] * bf2f(kv[(o + p) * MLA_DQK + col].v);
        const double ref = bf2f(f2bf(static_cast<float>(y / l)));
        const float got = bf2f(out[(static_cast<size_t>(i) * H + h) * MLA_DV + col].v);
        ++total;
        if (std::isnan(got)) {
          ++unwritten, ++fails;
          continue;
        }
        const double err = std::fabs(got - ref), r = err / (kAtol + kRtol * std::fabs(ref));
        worst = std::max(worst, r);
        max_abs = std::max(max_abs, err);
        max_ref = std::max(max_ref, std::fabs(ref));
        if (r > 1) ++fails;
      }
    }
    o += L;
  }
  const bool ok = fails == 0 && total > 0;
  std::printf(
      "%-16s B %d H %3d cluster %d grid %4u: %s worst %.3f of the tolerance, max |err| %.2e "
      "(max |ref| %.3f), %ld / %ld failing, %ld unwritten (%.1f s)\n",
      c.name.c_str(), B, H, c.cs, grid, ok ? "ok  " : "FAIL", worst, max_abs, max_ref, fails, total,
      unwritten, secs);
  std::fflush(stdout);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<mla_case> cases = {
      // the config's workloads, with the plan's split
      {"s0_b4_l128_h128", 128, std::vector<int>(4, 128), plan_split(4, 128, 128), 1.f, 1},
      {"s1_b1_l256_h16", 16, std::vector<int>(1, 256), plan_split(1, 256, 16), 1.f, 2},
      {"s2_b7_l256_h16", 16, std::vector<int>(7, 256), plan_split(7, 256, 16), 1.f, 3},
      // edges: ranks with 2 tiles / none, partial tiles, one-position sequence, 20 heads
      {"varlen_h20", 20, {1, 77, 300}, plan_split(3, 300, 20), 1.f, 4},
      // 40 sequences of 1..80 positions: the prefix sum's strided loop (sequence index > 32)
      {"batch40_varlen", 16, {}, plan_split(40, 80, 16), 1.f, 10},
      {"cluster1_multi", 16, {100, 64}, 1, 1.f, 5},  // MLA_SPLIT_MAX = 1: every tile in one block
      {"cluster3_peaked", 48, {256, 200}, 3, 4.f, 6},
      {"cluster7", 16, {224, 100}, 7, 2.f, 11},  // the largest receive buffer (MLA_PUSH 1)
      // MLA_SPEC: sequences 0, 1 match the guess, 2 (length) and 3 (offset) do not
      {"spec_mixed", 16, {256, 256, 100, 256}, 8, 1.f, 12},
      {"s1_peaked", 16, std::vector<int>(1, 256), plan_split(1, 256, 16), 3.f, 7},
      // the pack's candidates: cand_split4 (two tiles per block on s1 / s2), cand_split1
      {"s2_split4", 16, std::vector<int>(7, 256), plan_split(7, 256, 16, 4), 1.f, 8},
      {"s0_split1", 128, std::vector<int>(4, 128), plan_split(4, 128, 128, 1), 1.f, 9},
  };
  bool all = true;
  int ran = 0;
  for (const auto& c : cases) {
    bool sel = argc <= 1;
    for (int a = 1; a < argc; ++a) sel |= c.name == argv[a];
    if (!sel) continue;
    all &= run(c);
    ++ran;
  }
  std::printf(
      "%s (%d cases, MLA_P_SPLIT %d, MLA_XCHG %d, MLA_PUSH %d, MLA_SPEC %d, MLA_ILP %d, MLA_BULK "
      "%d)\n",
      all && ran ? "ALL OK" : "FAILURES", ran, MLA_P_SPLIT, MLA_XCHG, MLA_PUSH, MLA_SPEC, MLA_ILP,
      MLA_BULK);
  return all && ran ? 0 : 1;
}
