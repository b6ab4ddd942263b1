// Runs attention_forward_ws (configs/bench/attention_forward_ws.cu) on the CPU through
// bench/hopper/emu's model of the PTX primitives (wgmma with its 128- and 32-byte-swizzled
// descriptors, cp.async on mbarriers, setmaxnreg as a no-op) and compares every output element
// with a float64 reference under attention_forward's tolerance (atol 1e-2, rtol 2e-2). Checks
// the kernel's indexing and control flow against the operand layouts it assumes, not the GPU.
//
//   g++ -std=c++20 -O2 -fno-ipa-icf -pthread -I bench/hopper/emu -I bench/hopper/emu/stub
//   -DKOPT_EMU \
//       bench/hopper/afwd/af_emu.cpp -o /tmp/af_emu && /tmp/af_emu [len heads d ...]
// (-fno-ipa-icf: g++ 12.2 at -O2 folds af_sdesc<2> into af_sdesc<1>, which breaks d = 128 here
// only; the kernel itself is unaffected, NVRTC compiles it.) Exit status 0 when every case passes.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "../../../configs/bench/attention_forward_ws.cu"
#include "emu.h"

namespace {

std::vector<__nv_bfloat16> randn(size_t n, std::mt19937& g) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x.v = f2bf(d(g));
  return v;
}

// The plan's launch: rows per block in row mode, threads, shared bytes (the kernel's layout:
// 1 KiB of barriers and slack, NC Q tiles of 64 rows, 2 NS K / V tiles of BN keys).
// AF_WG3 with AF_EMU_NC2 set: d <= 80 launched with 384 threads (two consumers, 128 rows).
bool nc2() {
  return std::getenv("AF_EMU_NC2") != nullptr;
}
int plan_threads(int d) {
  return AF_WG3 && (d > 80 || !nc2()) ? 512 : 384;
}
int plan_rows(int d) {
  return AF_WG3 && d <= 80 && !nc2() ? 192 : 128;
}
unsigned plan_shared(int d) {
  const int dp = (d + 15) / 16 * 16, dl = AF_TAIL128 && dp % 64 ? 128 : dp;
  const int nc = plan_rows(d) / 64, bn = d <= 80 ? AF_BN72 : 64;
  const int ns = d == 128 ? AF_NS128 : nc == 3 ? AF_NS3 : AF_NS;
  return 1024 + nc * 64 * dl * 2 + 2 * ns * bn * dl * 2;
}

// split < 0: the plan's rule (split when heads x ceil(len / rows) <= 66)
bool run_forward(int len, int heads, int d, unsigned seed, int split = -1) {
  if (split < 0) split = heads * ((len + plan_rows(d) - 1) / plan_rows(d)) <= 66;
  std::mt19937 g(seed);
  auto q = randn(static_cast<size_t>(len) * heads * d, g);
  auto k = randn(q.size(), g);
  auto vv = randn(q.size(), g);
  if (std::getenv("AF_EMU_ZERO_Q"))  // debugging: uniform P (out = the mean of V)
    for (auto& x : q) x.v = 0;
  if (const char* c = std::getenv("AF_EMU_QCOLS"))  // debugging: q nonzero only in [a, b)
    for (size_t i = 0; i < q.size(); ++i) {
      const int e = static_cast<int>(i % d), a = std::atoi(c),
                b = std::atoi(std::strchr(c, ',') + 1);
      if (e < a || e >= b) q[i].v = 0;
    }
  std::vector<__nv_bfloat16> out(q.size(), __nv_bfloat16{0x7fc0});  // NaN: unwritten
  const int bm = split ? 64 : plan_rows(d);
  launch({static_cast<unsigned>(heads), static_cast<unsigned>((len + bm - 1) / bm), 1},
         plan_threads(d), plan_shared(d), [&] {
           attention_forward_ws(q.data(), k.data(), vv.data(), out.data(), len, heads, d, split);
         });
  double worst = 0;
  long fails = 0, total = 0, unwritten = 0;
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
      for (int e = 0; e < d; ++e) {
        ++total;
        const float got = bf2f(out[(static_cast<long long>(r) * heads + h) * d + e].v);
        if (std::isnan(got)) {
          ++unwritten, ++fails, worst = 1e30;
          continue;
        }
        const double ref = bf2f(f2bf(static_cast<float>(acc[e] / l)));
        const double x = std::fabs(got - ref) / (1e-2 + 0.02 * std::fabs(ref));
        worst = std::max(worst, x);
        if (x > 1) ++fails;
      }
    }
  const bool ok = fails == 0 && total > 0;
  std::printf(
      "attention_forward_ws split %d d%d heads %d len %d: %s  worst %.3f of the tolerance, %ld / "
      "%ld failing, %ld unwritten\n",
      split, d, heads, len, ok ? "ok  " : "FAIL", worst, fails, total, unwritten);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  bool ok = true;
  if (argc >= 5) {  // len heads d split (split -1: the plan's rule) ...
    for (int i = 1; i + 3 < argc; i += 4)
      ok &= run_forward(std::atoi(argv[i]), std::atoi(argv[i + 1]), std::atoi(argv[i + 2]), 7 + i,
                        std::atoi(argv[i + 3]));
    return ok ? 0 : 1;
  }
  for (int split = 0; split < 2; ++split) {
    ok &= run_forward(1, 2, 128, 1, split);
    ok &= run_forward(70, 1, 72, 2, split);
    ok &= run_forward(300, 2, 72, 3, split);
    ok &= run_forward(200, 1, 128, 4, split);
    ok &= run_forward(130, 1, 64, 5, split);
    ok &= run_forward(1, 1, 72, 6, split);
    ok &= run_forward(64, 1, 72, 7, split);
    ok &= run_forward(65, 1, 128, 8, split);
    ok &= run_forward(600, 1, 72, 9, split);
  }
  return ok ? 0 : 1;
}
