// CPU check of chunk_gated_delta_rule_state_baseline against the reference kernel (both emulated).
#include <cstdio>
#include <random>

#include "../../../../configs/bench/chunk_gated_delta_rule_state_baseline.cu"
#include "../../../../configs/bench/chunk_gated_delta_rule_state_reference.cu"
#include "emu.h"
typedef __nv_bfloat16 bf;
int main(int argc, char** argv) {
  const int B = 2, T = argc > 1 ? atoi(argv[1]) : 130, HK = 2, HV = 4, K = 128, V = 128, SC = 3,
            C = 64;
  const int NC = (T + C - 1) / C;
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 0.02f);
  std::uniform_real_distribution<float> ud(-1.f, 0.f);
  auto bfv = [&](size_t n) {
    std::vector<bf> v(n);
    for (auto& x : v) x = __float2bfloat16(nd(rng));
    return v;
  };
  auto kk = bfv(size_t(B) * T * HK * K), w = bfv(size_t(B) * T * HV * K),
       u = bfv(size_t(B) * T * HV * V);
  std::vector<float> g(size_t(B) * T * HV);
  for (auto& x : g) x = ud(rng);
  std::vector<float> st(size_t(SC) * HV * K * V);
  for (auto& x : st) x = nd(rng);
  std::vector<int> si = {2, 0};
  auto st1 = st, st2 = st;
  std::vector<bf> h1(size_t(B) * NC * HV * K * V, {0x7fc0}),
      h2 = h1, v1(size_t(B) * T * HV * V, {0x7fc0}), v2 = v1;
  emu_launch({unsigned(HV), unsigned(B), unsigned((V + 31) / 32)}, {32, 1, 1}, 0, [&] {
    chunk_gated_delta_rule_state_ref(kk.data(), w.data(), u.data(), g.data(), st1.data(), si.data(),
                                     h1.data(), v1.data(), T, HK, HV, K, V, C);
  });
  emu_launch({unsigned(HV), unsigned(B), unsigned(V / 32)}, {256, 1, 1}, SMEM_BYTES, [&] {
    chunk_gated_delta_rule_state_baseline(kk.data(), w.data(), u.data(), g.data(), st2.data(),
                                          si.data(), h2.data(), v2.data(), T, HK, HV, K, V, C);
  });
  auto cmp = [](const char* name, auto get1, auto get2, size_t n, double atol, double rtol) {
    size_t bad = 0;
    double maxd = 0;
    for (size_t i = 0; i < n; ++i) {
      double a = get1(i), b = get2(i), d = std::fabs(a - b);
      maxd = std::max(maxd, d);
      if (!(d <= atol + rtol * std::fabs(a))) {
        if (bad < 5) printf("  %s[%zu]: ref %g got %g\n", name, i, a, b);
        ++bad;
      }
    }
    printf("%s: %zu / %zu mismatched, max abs diff %g\n", name, bad, n, maxd);
    return bad;
  };
  size_t bad = 0;
  bad += cmp(
      "state", [&](size_t i) { return st1[i]; }, [&](size_t i) { return st2[i]; }, st.size(), 1e-5,
      1e-3);
  bad += cmp(
      "h", [&](size_t i) { return __bfloat162float(h1[i]); },
      [&](size_t i) { return __bfloat162float(h2[i]); }, h1.size(), 2e-4, 2e-2);
  bad += cmp(
      "v_new", [&](size_t i) { return __bfloat162float(v1[i]); },
      [&](size_t i) { return __bfloat162float(v2[i]); }, v1.size(), 2e-4, 2e-2);
  size_t changed = 0;
  for (size_t i = 0; i < st.size(); ++i) changed += st[i] != st2[i];
  printf("state elements changed %zu (expect %d)\n", changed, B * HV * K * V);
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad != 0;
}
