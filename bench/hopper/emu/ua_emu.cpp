// Runs the kernels of configs/bench/unified_attention_baseline.cu on the CPU
// through emu.h's model of the PTX primitives, on small shapes that exercise
// every path (paged + causal with varlen sequences and GQA, d 64 / 72 / 128 /
// 256, partial tiles; the dense bidirectional attention_forward entry), and
// compares each output element with a float64 reference under the configs'
// tolerances. A check of the kernels' indexing and control flow, not of the
// GPU (see emu.h).
//
//   g++ -std=c++20 -O2 -pthread -I bench/hopper/emu -I bench/hopper/emu/stub -DKOPT_EMU
//   [-DUA_WGMMA=1|2|3] [-DUA_PERSIST=1 [-DUA_HPAIR=1]] [-DUA_WS_SMALL=2 [-DUA_WS_BIG=1|2]] \
//   [-DUA_S_RS=1 -DUA_WS128_BN=128 (with UA_PERSIST=1 and UA_WS_SMALL)] \
//   [-fsanitize=alignment -fno-sanitize-recover=alignment] \
//       bench/hopper/emu/ua_emu.cpp -o /tmp/ua_emu && /tmp/ua_emu
//
// (emu.h checks the alignment and bounds of every shared-memory access against the plan's
// shared_bytes; the sanitizer option adds the kernels' global 16-byte stores.)
//
// --big (UA_WS_BIG builds): the d 192 / 256 cases of unified_attention_ws_big (run_big_cases);
// UA_EMU_K3=1 runs unified_attention_ws_small first to write the prefix sums, as the plans do.
// Exit status 0 when every case passes.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "../../../configs/bench/unified_attention_baseline.cu"
#include "emu.h"

namespace {

std::vector<__nv_bfloat16> randn(size_t n, std::mt19937& g) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x.v = f2bf(d(g));
  return v;
}

// The plans' shared_bytes (configs/bench/unified_attention.json, attention_forward.json).
unsigned ua_fa2_shared(int hs) {
  const int one_128 = std::min(1, 128 / hs) * std::min(1, hs / 128);
  return (64 + 64 * std::min(1, 191 / hs) + 128 + 128 * std::min(1, 127 / hs)) *
             (32 * ((hs + 15) / 16) + 16) +
         one_128 * (UA_WGMMA % 2 * 14336 + UA_WGMMA / 2 * 31744);
}
// UA_WS128_BN = 128: Q 64 KiB, a ring of 2 x 64 KiB, 2 x 16 KiB of P lo, 2 KiB of slack
constexpr unsigned kUaWsShared =
    UA_WS128_BN == 128 ? 231424 : 133120 + 32768 * std::min(1, UA_PERSIST);
#if UA_WS_SMALL  // d 64 / 72 / 80 on unified_attention_ws (attn_ws_small): 2 KiB of barriers and
// alignment slack, Q 2 x 64 x 80 bf16, UA_WS_NS stages of a K and a V tile of UA_WS_BN x 80
constexpr unsigned kUaWsSmallShared = 22528 + 320 * UA_WS_NS * UA_WS_BN;
#else
constexpr unsigned kUaWsSmallShared = 0;
#endif
#if UA_WS_BIG  // d 192 / 256 on unified_attention_ws_big: 1 KiB of barriers and alignment slack,
// Q 2 x 64 x d bf16, UA_WB_NS stages of a K and a V tile of UA_WB_BN x d
unsigned ua_ws_big_shared(int d) {
  return 1024 + d * (256 + 4 * UA_WB_NS * UA_WB_BN);
}
#endif
// The kernel the plan runs for head size d and max_blocks mb (ceil(seq_len / 16) + 2): the
// warp-specialized one (d = 128 at UA_WGMMA = 3; d <= 80 at UA_WS_SMALL from mb = 10 on), else
// unified_attention_fa2 (the other launch gets one block, which returns).
bool ws_path(int d, int mb) {
  return (UA_WGMMA == 3 && d == 128) ||
         (UA_WS_SMALL && d <= 80 && (mb >= 10 || (UA_WS_SMALL == 2 && UA_WS_BIG == 2))) ||
         (UA_WS_BIG && d >= 192);
}
unsigned af_fa2_shared(int hd) {
  return (256 + 128 * std::min(1, 127 / hd)) * (32 * ((hd + 15) / 16) + 16);
}

struct verdict {
  double worst = 0;  // max |diff| / (atol + rtol |ref|)
  long fails = 0, unwritten = 0, total = 0;
};

void judge(verdict& v, float got, double ref, double atol, double rtol) {
  ++v.total;
  if (std::isnan(got)) {
    ++v.unwritten;
    ++v.fails;
    v.worst = 1e30;
    return;
  }
  const double refb = bf2f(f2bf(static_cast<float>(ref)));
  const double r = std::fabs(got - refb) / (atol + rtol * std::fabs(refb));
  v.worst = std::max(v.worst, r);
  if (r > 1) ++v.fails;
}

// UA_EMU_DIGEST set: the report line ends with a 64-bit FNV-1a hash of the output's bits, so two
// builds (a source refactor before / after) can be shown to compute bit-identical outputs.
unsigned long long digest(const std::vector<__nv_bfloat16>& out) {
  unsigned long long h = 1469598103934665603ull;
  for (const auto& x : out) {
    h = (h ^ (x.v & 0xff)) * 1099511628211ull;
    h = (h ^ (x.v >> 8)) * 1099511628211ull;
  }
  return h;
}

bool report(const std::string& name, const verdict& v, unsigned long long dig = 0) {
  const bool ok = v.fails == 0 && v.total > 0;
  std::printf("%-44s %s  worst %.3f of the tolerance, %ld / %ld failing, %ld unwritten",
              name.c_str(), ok ? "ok  " : "FAIL", v.worst, v.fails, v.total, v.unwritten);
  if (std::getenv("UA_EMU_DIGEST")) std::printf("  digest %016llx", dig);
  std::printf("\n");
  return ok;
}

// unified_attention: paged, causal, GQA, sequences of the given lengths.
bool run_unified(std::vector<int> lens, int hq, int hkv, int d, unsigned seed) {
  std::mt19937 g(seed);
  const int n = static_cast<int>(lens.size());
  int maxlen = 0, tokens = 0;
  for (int l : lens) maxlen = std::max(maxlen, l), tokens += l;
  const int mb = (maxlen + 15) / 16 + 2, nb = mb * n + 64;
  auto q = randn(static_cast<size_t>(tokens) * hq * d, g);
  auto kc = randn(static_cast<size_t>(nb) * 16 * hkv * d, g);
  auto vc = randn(static_cast<size_t>(nb) * 16 * hkv * d, g);
  std::vector<int> perm(nb);
  for (int i = 0; i < nb; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), g);
  std::vector<int> bt(perm.begin(), perm.begin() + n * mb);
  std::vector<int> cu(n + 1, 0);
  for (int i = 0; i < n; ++i) cu[i + 1] = cu[i] + lens[i];
  std::vector<__nv_bfloat16> out(q.size(), __nv_bfloat16{0x7fc0});  // NaN: unwritten
  const bool wg = (UA_WGMMA && d == 128) || ws_path(d, mb);
  const int bm = ((UA_WGMMA == 1 && d == 128) || (d >= 192 && !UA_WS_BIG)) ? 64 : 128;
  dim3e grid{static_cast<unsigned>(hq), static_cast<unsigned>((maxlen + bm - 1) / bm),
             static_cast<unsigned>(n)};
#if UA_PERSIST  // the workspace is [work counter, num_seqs, finished blocks, 0, cu...]
  cu.insert(cu.begin(), {0, n, 0, 0});
  // the plan's grid: min(132, work items) blocks (at UA_PERSIST = 2 only up to 1024 tokens;
  // longer sequences keep the one-item grid, each block taking its own item)
  if (UA_WGMMA == 3 && d == 128 && !(UA_PERSIST == 2 && maxlen > 1024)) {
    const char* ge = std::getenv("UA_EMU_GRID");
    const unsigned items = grid.x * grid.y * grid.z;
    grid = {std::min(items, ge ? static_cast<unsigned>(std::atoi(ge)) : 132u), 1, 1};
  }
#endif
#if UA_WS_SMALL == 2  // its own kernel unified_attention_ws_small. UA_EMU_K3 set: the three-
  // launch plan (cand_k3pp), in which it runs first with num_seqs and writes the prefix sums
  // itself (compared with the host's), then the kernel of the head size reads them
  const bool k3 = std::getenv("UA_EMU_K3") != nullptr, small = d <= 80 && ws_path(d, mb);
  if (k3) {
    std::vector<int> cuk(cu.size(), -7);  // not zero: every entry must be written
    launch(small ? grid : dim3e{1, 1, 1}, 384, small ? kUaWsSmallShared : 4096u, [&] {
      unified_attention_ws_small(q.data(), kc.data(), vc.data(), lens.data(), bt.data(), out.data(),
                                 cuk.data(), hq, hkv, d, 16, mb, n);
    });
    if (cuk != cu) {
      std::printf("unified_attention_ws_small: the prefix sums it wrote differ from the host's\n");
      return false;
    }
  }
  if (small) {
    if (!k3)
      launch(grid, 384, kUaWsSmallShared, [&] {
        unified_attention_ws_small(q.data(), kc.data(), vc.data(), lens.data(), bt.data(),
                                   out.data(), cu.data(), hq, hkv, d, 16, mb, 0);
      });
  } else
#endif
#if UA_WS_BIG
      if (d >= 192) {  // unified_attention_ws_big; with UA_EMU_K3 the prefix sums came from above
    launch(grid, 384, ua_ws_big_shared(d), [&] {
      unified_attention_ws_big(q.data(), kc.data(), vc.data(), lens.data(), bt.data(), out.data(),
                               cu.data(), hq, hkv, d, 16, mb);
    });
  } else
#endif
      if (ws_path(d, mb))  // the warp-specialized kernel (the plan's fa2 launch returns)
    launch(grid, 384, d <= 80 ? kUaWsSmallShared : kUaWsShared, [&] {
      unified_attention_ws(q.data(), kc.data(), vc.data(), lens.data(), bt.data(), out.data(),
                           cu.data(), hq, hkv, d, 16, mb);
    });
  else
    launch(grid, UA_WGMMA == 2 && d == 128 ? 256 : 128, ua_fa2_shared(d), [&] {
      unified_attention_fa2(q.data(), kc.data(), vc.data(), lens.data(), bt.data(), out.data(),
                            cu.data(), hq, hkv, d, 16, mb);
    });
#if UA_PERSIST
  // the last block zeroed the counters: a second launch without unified_attention_cu before it
  // must do the whole work again (the one judged below)
  if (UA_WGMMA == 3 && d == 128) {
    if (cu[0] != 0 || cu[2] != 0) {
      std::printf("persistent counters not reset: %d %d\n", cu[0], cu[2]);
      return false;
    }
    std::fill(out.begin(), out.end(), __nv_bfloat16{0x7fc0});
    launch(grid, 384, kUaWsShared, [&] {
      unified_attention_ws(q.data(), kc.data(), vc.data(), lens.data(), bt.data(), out.data(),
                           cu.data(), hq, hkv, d, 16, mb);
    });
  }
  cu.erase(cu.begin(), cu.begin() + 4);
#endif
  verdict v;
  for (int s = 0; s < n; ++s)
    for (int h = 0; h < hq; ++h) {
      const int hk = h / (hq / hkv);
      for (int r = 0; r < lens[s]; ++r) {
        std::vector<double> sc(r + 1), acc(d, 0.0);
        double mx = -1e300, l = 0;
        for (int j = 0; j <= r; ++j) {
          const long long row =
              (static_cast<long long>(bt[s * mb + j / 16]) * 16 + j % 16) * hkv + hk;
          double dot = 0;
          for (int e = 0; e < d; ++e)
            dot += static_cast<double>(
                       bf2f(q[((cu[s] + r) * static_cast<long long>(hq) + h) * d + e].v)) *
                   bf2f(kc[row * d + e].v);
          sc[j] = dot / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, sc[j]);
        }
        for (int j = 0; j <= r; ++j) {
          const long long row =
              (static_cast<long long>(bt[s * mb + j / 16]) * 16 + j % 16) * hkv + hk;
          const double p = std::exp(sc[j] - mx);
          l += p;
          for (int e = 0; e < d; ++e) acc[e] += p * bf2f(vc[row * d + e].v);
        }
        for (int e = 0; e < d; ++e)
          judge(v, bf2f(out[((cu[s] + r) * static_cast<long long>(hq) + h) * d + e].v), acc[e] / l,
                1e-4, 0.02);
      }
    }
  std::string name = "unified d" + std::to_string(d) + " hq" + std::to_string(hq) + "/" +
                     std::to_string(hkv) +
                     (wg ? (ws_path(d, mb)  ? " wgmma ws"
                            : UA_WGMMA == 2 ? " wgmma x2"
                                            : " wgmma")
                         : " mma.sync") +
                     " lens";
  for (int l : lens) name += " " + std::to_string(l);
  return report(name, v, digest(out));
}

// attention_forward: one dense sequence, no mask, heads = KV heads.
bool run_forward(int len, int heads, int d, unsigned seed) {
  std::mt19937 g(seed);
  auto q = randn(static_cast<size_t>(len) * heads * d, g);
  auto k = randn(q.size(), g);
  auto vv = randn(q.size(), g);
  std::vector<__nv_bfloat16> out(q.size(), __nv_bfloat16{0x7fc0});
  launch({static_cast<unsigned>(heads), static_cast<unsigned>((len + 127) / 128), 1}, 128,
         af_fa2_shared(d),
         [&] { attention_forward_fa2(q.data(), k.data(), vv.data(), out.data(), len, heads, d); });
  verdict v;
  for (int h = 0; h < heads; ++h)
    for (int r = 0; r < len; ++r) {
      std::vector<double> sc(len), acc(d, 0.0);
      double mx = -1e300, l = 0;
      for (int j = 0; j < len; ++j) {
        double dot = 0;
        for (int e = 0; e < d; ++e)
          dot += static_cast<double>(bf2f(q[(static_cast<long long>(r) * heads + h) * d + e].v)) *
                 bf2f(k[(static_cast<long long>(j) * heads + h) * d + e].v);
        sc[j] = dot / std::sqrt(static_cast<double>(d));
        mx = std::max(mx, sc[j]);
      }
      for (int j = 0; j < len; ++j) {
        const double p = std::exp(sc[j] - mx);
        l += p;
        for (int e = 0; e < d; ++e)
          acc[e] += p * bf2f(vv[(static_cast<long long>(j) * heads + h) * d + e].v);
      }
      for (int e = 0; e < d; ++e)
        judge(v, bf2f(out[(static_cast<long long>(r) * heads + h) * d + e].v), acc[e] / l, 1e-2,
              0.02);
    }
  return report("attention_forward d" + std::to_string(d) + " heads " + std::to_string(heads) +
                    " len " + std::to_string(len),
                v, digest(out));
}

}  // namespace

// UA_WS_SMALL: causal paged cases for d 64 / 72 / 80 on the warp-specialized kernel: several
// sequences per launch, lengths that are not multiples of the 64-row warpgroup or the 128-row
// block or the key tile, 1-token sequences, GQA, and enough tiles for the ring to wrap.
bool run_small_cases() {
  bool ok = true;
  ok &= run_unified({300, 129, 1, 64}, 4, 2, 72, 31);
  ok &= run_unified({257, 200, 7}, 2, 1, 80, 32);
  ok &= run_unified({130, 65, 7, 128}, 3, 3, 64, 33);
  ok &= run_unified({700}, 1, 1, 72, 34);
  ok &= run_unified({450, 16}, 2, 1, 80, 35);
  ok &= run_unified({113, 50}, 2, 2, 64, 36);  // 8 pages: the first length on this kernel
  ok &= run_unified({112, 7}, 2, 1, 72, 37);   // 7 pages: unified_attention_fa2 (mma.sync)
  ok &= run_unified({7}, 2, 2, 64, 38);
  ok &= run_unified({200, 77}, 4, 2, 128, 1);  // the d = 128 kernel in the same build
  return ok;
}

// UA_WS_BIG: causal paged cases for d 192 / 256 on unified_attention_ws_big: several sequences
// per launch, lengths that are not multiples of the 32-key tile, the 64-row warpgroup or the
// 128-row block (1-token and 15 / 17-token sequences: one page, a partial second page), GQA,
// and enough tiles for the 4-stage ring to wrap many times.
bool run_big_cases() {
  bool ok = true;
  ok &= run_unified({300, 129, 1, 64}, 4, 2, 256, 41);
  ok &= run_unified({257, 17, 200}, 2, 1, 192, 42);
  ok &= run_unified({130, 15, 7, 128}, 3, 3, 256, 43);
  ok &= run_unified({461}, 2, 1, 192, 44);
  ok &= run_unified({72}, 4, 1, 256, 45);       // s14's length
  ok &= run_unified({333, 96}, 8, 2, 256, 46);  // hq 8 / hkv 2 (s8's group of 8)
  ok &= run_unified({200, 77}, 4, 2, 128, 1);   // the d = 128 kernel in the same build
  ok &= run_unified({113, 7}, 2, 1, 72, 37);    // d <= 80 (7 tokens: UA_WS_BIG 2 routing)
  return ok;
}

// level 0: small cases (the CTest, tests/cli/bench_baseline_emu_test.cpp), 1: the d 128 case
// of level 2 only (--quick), 2: every case.
bool run_cases(int level) {
  bool ok = true;
  if (level == 0) {
    ok &= run_unified({150, 40}, 2, 1, 128, 11);
    ok &= run_unified({70}, 2, 2, 72, 12);
    ok &= run_unified({40, 9}, 1, 1, 256, 13);
    ok &= run_forward(90, 1, 72, 14);
#if UA_WS_SMALL  // d 72 long enough for the warp-specialized small-d kernel
    ok &= run_unified({257, 40}, 2, 1, 72, 16);
#if UA_WS_SMALL == 2  // and the three-launch plan, whose first launch writes the prefix sums
    setenv("UA_EMU_K3", "1", 1);
    ok &= run_unified({257, 40}, 2, 1, 72, 17);
    ok &= run_unified({150, 40}, 2, 1, 128, 18);
    unsetenv("UA_EMU_K3");
#endif
#endif
    return ok;
  }
  ok &= run_unified({200, 77}, 4, 2, 128, 1);
  if (level == 1) return ok;
  ok &= run_unified({150}, 2, 1, 72, 2);
  ok &= run_unified({100, 33}, 2, 2, 256, 3);
  ok &= run_unified({7}, 2, 2, 64, 4);
  ok &= run_unified({1, 16}, 2, 1, 80, 5);
  ok &= run_forward(150, 2, 72, 6);
  ok &= run_forward(70, 1, 128, 7);
  if (UA_WS_SMALL) ok &= run_small_cases();
  if (UA_WS_BIG) ok &= run_big_cases();
  return ok;
}

#ifndef UA_EMU_NO_MAIN
int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--len") {  // --len L [hq hkv]: one d = 128 sequence
    const int len = std::atoi(argv[2]), hq = argc > 3 ? std::atoi(argv[3]) : 1,
              hkv = argc > 4 ? std::atoi(argv[4]) : 1;
    const bool ok = run_unified({len}, hq, hkv, 128, 21);
#if UA_LO_SKIP
    std::printf("lo products skipped: %ld of %ld (warpgroup, tile) pairs\n", g_lo_stats[1].load(),
                g_lo_stats[0].load() + g_lo_stats[1].load());
#endif
    return ok ? 0 : 1;
  }
  if (argc > 2 && std::string(argv[1]) == "--lens") {  // --lens L1,L2,... [hq hkv]: d = 128
    std::vector<int> lens;
    for (const char* c = argv[2]; *c;) {
      char* e;
      lens.push_back(static_cast<int>(std::strtol(c, &e, 10)));
      c = *e ? e + 1 : e;
    }
    const int hq = argc > 3 ? std::atoi(argv[3]) : 1, hkv = argc > 4 ? std::atoi(argv[4]) : 1;
    return run_unified(lens, hq, hkv, 128, 22) ? 0 : 1;
  }
  if (argc > 1 && std::string(argv[1]) == "--small") return run_small_cases() ? 0 : 1;
  if (argc > 1 && std::string(argv[1]) == "--big") return run_big_cases() ? 0 : 1;
  if (argc > 3 && std::string(argv[1]) == "--dlens") {  // --dlens D L1,L2,... [hq hkv]
    std::vector<int> lens;
    for (const char* c = argv[3]; *c;) {
      char* e;
      lens.push_back(static_cast<int>(std::strtol(c, &e, 10)));
      c = *e ? e + 1 : e;
    }
    const int hq = argc > 4 ? std::atoi(argv[4]) : 1, hkv = argc > 5 ? std::atoi(argv[5]) : 1;
    return run_unified(lens, hq, hkv, std::atoi(argv[2]), 23) ? 0 : 1;
  }
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  return run_cases(quick ? 1 : 2) ? 0 : 1;
}
#endif
