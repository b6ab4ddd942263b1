// CPU check of chunk_delta_rule_output_baseline against the reference kernel (both emulated).
#include <cstdio>
#include <random>

#include "../../../../configs/bench/chunk_delta_rule_output_baseline.cu"
#include "../../../../configs/bench/chunk_delta_rule_output_reference.cu"
#include "emu.h"
typedef __nv_bfloat16 bf;
int main(int argc, char** argv) {
  const int B = 2, T = argc > 1 ? atoi(argv[1]) : 130, HQ = 2, HV = 4, K = 128, V = 128, C = 64;
  const int NC = (T + C - 1) / C;
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.f, 0.02f), n1(0.f, 1.f);
  std::uniform_real_distribution<float> ud(-1.f, 0.f);
  auto bfv = [&](size_t n, auto& d) {
    std::vector<bf> v(n);
    for (auto& x : v) x = __float2bfloat16(d(rng));
    return v;
  };
  auto q = bfv(size_t(B) * T * HQ * K, nd), kk = bfv(size_t(B) * T * HQ * K, n1),
       v = bfv(size_t(B) * T * HV * V, nd);
  auto h = bfv(size_t(B) * NC * HV * K * V, nd);
  std::vector<float> g(size_t(B) * T * HV);
  for (auto& x : g) x = ud(rng);
  std::vector<bf> o1(size_t(B) * T * HV * V, {0x7fc0}), o2 = o1;
  emu_launch({unsigned(NC), unsigned(HV), unsigned(B)}, {unsigned(V), 1, 1}, 0, [&] {
    chunk_delta_rule_output_ref(q.data(), kk.data(), v.data(), h.data(), g.data(), o1.data(), T, HQ,
                                HV, K, V, C);
  });
  emu_launch({unsigned(NC), unsigned(HV), unsigned(B)}, {256, 1, 1}, SMEM_BYTES, [&] {
    chunk_delta_rule_output_baseline(q.data(), kk.data(), v.data(), h.data(), g.data(), o2.data(),
                                     T, HQ, HV, K, V, C);
  });
  size_t bad = 0;
  double maxd = 0, maxa = 0;
  for (size_t i = 0; i < o1.size(); ++i) {
    double a = __bfloat162float(o1[i]), b = __bfloat162float(o2[i]), d = std::fabs(a - b);
    maxd = std::max(maxd, d);
    maxa = std::max(maxa, std::fabs(a));
    if (!(d <= 2e-5 + 2e-2 * std::fabs(a))) {
      if (bad < 5) printf("  out[%zu]: ref %g got %g\n", i, a, b);
      ++bad;
    }
  }
  printf("out: %zu / %zu mismatched, max abs diff %g (max |ref| %g)\n", bad, o1.size(), maxd, maxa);
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad != 0;
}
