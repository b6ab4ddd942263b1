// Kernel signatures read from the cubin's .nv.info sections (NVRTC in this
// process, no GPU): parameter sizes and offsets for pointers, ints, 64-bit
// integers, doubles and a struct by value; and the launch-plan check that
// refuses a plan whose arguments do not match (issue 18: such a plan
// crashed the worker or read garbage), a kernel the module does not have,
// and a generator kernel with the wrong signature.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "compile/compiler.hpp"
#include "config/operator.hpp"
#include "core/kernel_params.hpp"

using namespace kopt;

namespace {

compile::result build(const std::string& source) {
  compile::request rq;
  rq.source = source;
  rq.arch = "sm_90a";
  rq.name = "params_test.cu";
  auto r = compile::compile_in_process(rq);
  EXPECT_TRUE(r.ok()) << r.log;
  return r;
}

config::launch_arg tensor(const std::string& n) {
  config::launch_arg a;
  a.k = config::launch_arg::kind::tensor;
  a.name = n;
  return a;
}
config::launch_arg integer(const std::string& e, config::dtype t) {
  config::launch_arg a;
  a.k = config::launch_arg::kind::integer;
  a.name = e;
  a.type = t;
  return a;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

}  // namespace

TEST(KernelParams, SizesAndOffsetsFromTheCubin) {
  const auto r = build(R"(
struct pair3 { float a, b, c; };
extern "C" __global__ void mixed(const float* x, int n, long long m, double d, pair3 p, char c, float* y) {
  if (n + m + c > 0) y[0] = x[0] + d + p.a;
}
extern "C" __global__ void none() {}
)");
  ASSERT_TRUE(r.ok());
  const auto sigs = harness::kernel_parameters(r.cubin);
  ASSERT_TRUE(sigs.params.count("mixed")) << "no .nv.info.mixed";
  const auto& ps = sigs.params.at("mixed");
  ASSERT_EQ(ps.size(), 7u);
  const std::uint32_t sizes[] = {8, 4, 8, 8, 12, 1, 8};
  const std::uint32_t offsets[] = {0, 8, 16, 24, 32, 44, 48};
  for (std::size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(ps[i].ordinal, i);
    EXPECT_EQ(ps[i].size, sizes[i]) << "parameter " << i;
    EXPECT_EQ(ps[i].offset, offsets[i]) << "parameter " << i;
  }
  EXPECT_TRUE(sigs.functions.count("none"));
  EXPECT_TRUE(sigs.params.count("none") == 0 || sigs.params.at("none").empty());
}

TEST(KernelParams, APlanThatDoesNotMatchTheSignatureIsRefused) {
  const auto r = build(
      R"(extern "C" __global__ void vadd(const float* a, const float* b, float* out, int n) {})");
  ASSERT_TRUE(r.ok());
  const auto sigs = harness::kernel_parameters(r.cubin);
  config::launch l;
  l.kernel = "vadd";
  l.args = {tensor("a"), tensor("b"), tensor("out"), integer("n", config::dtype::int32)};
  EXPECT_TRUE(harness::launch_signature_problems({l}, sigs, "seed").empty());
  // int64 where the kernel takes int.
  l.args[3] = integer("n", config::dtype::int64);
  auto p = harness::launch_signature_problems({l}, sigs, "seed");
  ASSERT_EQ(p.size(), 1u) << joined(p);
  EXPECT_NE(
      p[0].find(
          "argument 3 is int \"n\" as int64 (8 bytes), but parameter 3 of the kernel is 4 bytes"),
      std::string::npos)
      << p[0];
  // One missing.
  l.args = {tensor("a"), tensor("b"), tensor("out")};
  p = harness::launch_signature_problems({l}, sigs, "seed");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("passes 3 argument(s) but the kernel takes 4"), std::string::npos) << p[0];
  // n first (the replay corpus's answer 19: it crashed the worker).
  l.args = {integer("n", config::dtype::int32), tensor("a"), tensor("b"), tensor("out")};
  p = harness::launch_signature_problems({l}, sigs, "candidate");
  EXPECT_EQ(p.size(), 2u) << joined(p);
  // A kernel the module does not have.
  l.kernel = "vadd2";
  p = harness::launch_signature_problems({l}, sigs, "reference");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("has no kernel 'vadd2' (kernels there: vadd)"), std::string::npos) << p[0];
}

TEST(KernelParams, GeneratorKernelsHaveTheirFixedSignature) {
  const auto good = build(
      R"(extern "C" __global__ void gen(float* d, long long n, unsigned long long seed) { if (n) d[0] = seed; })");
  EXPECT_TRUE(
      harness::generator_signature_problems("gen", harness::kernel_parameters(good.cubin), "g")
          .empty());
  const auto bad = build(R"(extern "C" __global__ void gen(float* d, int n) { if (n) d[0] = 1; })");
  const auto p =
      harness::generator_signature_problems("gen", harness::kernel_parameters(bad.cubin), "g");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("kernel(T* data, long long n, unsigned long long seed)"), std::string::npos)
      << p[0];
  EXPECT_FALSE(
      harness::generator_signature_problems("other", harness::kernel_parameters(good.cubin), "g")
          .empty());
}

TEST(KernelParams, SharedMemoryLimitsPerArchitecture) {
  EXPECT_EQ(harness::max_shared_optin_bytes("sm_90a"), 232448);
  EXPECT_EQ(harness::max_shared_optin_bytes("sm_80"), 166912);
  EXPECT_EQ(harness::max_shared_optin_bytes("sm_89"), 101376);
  EXPECT_FALSE(harness::max_shared_optin_bytes("sm_999").has_value());
}

TEST(KernelParams, TruncatedImagesThrowKoptErrors) {
  const auto r = build(R"(extern "C" __global__ void k(int* p) { p[0] = 1; })");
  for (std::size_t cut : {std::size_t{0}, std::size_t{16}, std::size_t{64}, r.cubin.size() / 2}) {
    try {
      (void)harness::kernel_parameters(std::string_view(r.cubin).substr(0, cut));
    } catch (const kopt::error&) {
    }
  }
}
