// The static integrity rules of issue 17 on real cubins compiled here with
// NVRTC (no GPU needed): writable state is decided by section flags, never by
// names (a variable named like a math-library table, a `const` object and a
// string literal in the writable .nv.global.init are refused), a read-only
// table is accepted, the math library's own tables are accepted only by
// their exact bytes, and clock reads are found in the PTX and the SASS and
// refused by compile::integrity_problems unless the operator allows them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "compile/compiler.hpp"
#include "core/cubin_inspect.hpp"
#include "core/cubin_rules.hpp"
#include "core/elf_view.hpp"

using namespace kopt;
using namespace kopt::harness;

namespace {

compile::result compile_ok(const std::string& source) {
  compile::request r;
  r.source = source;
  r.arch = "sm_90a";
  auto res = compile::compile_in_process(r);
  if (!res.ok()) throw std::runtime_error("test kernel does not compile:\n" + res.log);
  return res;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}
bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

}  // namespace

TEST(CubinRules, WritableVariableNamedLikeAMathTableIsRefused) {
  // The name the old check exempted, on a variable of the candidate's own:
  // uninitialised (.nv.global) and initialised with other bytes.
  const auto r = compile_ok(R"(
__device__ unsigned int __cudart_i2opi_f[6];
__device__ unsigned int __cudart_sin_cos_coeffs[32] = {1, 2, 3};
extern "C" __global__ void k(const float* x, float* y) {
  if (__cudart_i2opi_f[0] == 0) { __cudart_i2opi_f[0] = 1; y[0] = x[0]; } else { y[0] = 0.0f; }
  __cudart_sin_cos_coeffs[1] += 1;
  y[1] = (float)__cudart_sin_cos_coeffs[threadIdx.x & 31];
}
)");
  EXPECT_TRUE(any_contains(r.integrity_problems, "'__cudart_i2opi_f'"))
      << joined(r.integrity_problems);
  EXPECT_TRUE(any_contains(r.integrity_problems, "'__cudart_sin_cos_coeffs'"))
      << joined(r.integrity_problems);
  EXPECT_TRUE(any_contains(r.integrity_problems, "workspace")) << joined(r.integrity_problems);
  const auto f = inspect_cubin(r.cubin);
  EXPECT_TRUE(f.exempt_tables.empty()) << joined(f.exempt_tables);
}

TEST(CubinRules, ConstObjectInAWritableSectionIsRefused) {
  // CUDA places `__device__ const` data in .nv.global.init (writable): a
  // cast makes it state, so it is refused whatever the declaration says.
  const auto r = compile_ok(R"(
__device__ const int table[4] = {1, 2, 3, 4};
extern "C" __global__ void k(const float* x, float* y) {
  int* w = const_cast<int*>(table);
  w[threadIdx.x & 3] += 1;
  y[threadIdx.x] = x[threadIdx.x] * (float)table[threadIdx.x & 3];
}
)");
  EXPECT_TRUE(
      any_contains(r.integrity_problems, "'table' sits in the writable section .nv.global.init"))
      << joined(r.integrity_problems);
}

TEST(CubinRules, StringLiteralInAWritableSectionIsRefused) {
  const auto r = compile_ok(R"(
extern "C" __global__ void k(const float* x, float* y) {
  const char* s = "state lives here";
  char* w = const_cast<char*>(s);
  if (w[0] == 's') { w[0] = 'S'; y[0] = x[0]; }
}
)");
  EXPECT_TRUE(any_contains(r.integrity_problems, "a string literal"))
      << joined(r.integrity_problems);
}

TEST(CubinRules, ReadOnlyTableIsAccepted) {
  // A __constant__ table (read-only bank) is fine, and the math library's
  // own reduction table (pulled in by sinf) is accepted by its exact bytes.
  const auto r = compile_ok(R"(
__constant__ float coeffs[8] = {1, 2, 3, 4, 5, 6, 7, 8};
extern "C" __global__ void k(const float* x, float* y) {
  y[threadIdx.x] = sinf(x[threadIdx.x] * 1000.0f) * coeffs[threadIdx.x & 7];
}
)");
  EXPECT_TRUE(r.integrity_problems.empty()) << joined(r.integrity_problems);
  EXPECT_TRUE(r.clock_reads.empty()) << joined(r.clock_reads);
  EXPECT_TRUE(compile::integrity_problems(r, false).empty());
  const auto f = inspect_cubin(r.cubin);
  EXPECT_TRUE(has(f.exempt_tables, "__cudart_i2opi_f")) << joined(f.exempt_tables);
  // Both are hashed by the worker around every call.
  EXPECT_TRUE(has(f.module_data_symbols, "coeffs")) << joined(f.module_data_symbols);
  EXPECT_TRUE(has(f.module_data_symbols, "__cudart_i2opi_f")) << joined(f.module_data_symbols);
}

TEST(CubinRules, DoubleMathTablesAreAcceptedByContent) {
  const auto r = compile_ok(R"(
extern "C" __global__ void k(const double* x, double* y) { y[threadIdx.x] = sin(x[threadIdx.x] * 1e6) + cos(x[0]); }
)");
  EXPECT_TRUE(r.integrity_problems.empty()) << joined(r.integrity_problems);
  const auto f = inspect_cubin(r.cubin);
  EXPECT_TRUE(has(f.exempt_tables, "__cudart_i2opi_d")) << joined(f.exempt_tables);
}

TEST(CubinRules, ClockReadsAreFoundInPtxAndSassAndRefused) {
  const auto r = compile_ok(R"(
extern "C" __global__ void k(const float* x, float* y, long long* t) {
  const long long c = clock64();
  unsigned long long g;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
  y[threadIdx.x] = x[threadIdx.x];
  if (threadIdx.x == 0) t[0] = c + (long long)g;
}
)");
  EXPECT_TRUE(r.integrity_problems.empty())
      << joined(r.integrity_problems);  // not a cubin problem by itself
  EXPECT_TRUE(has(r.clock_reads, "PTX: %clock64")) << joined(r.clock_reads);
  EXPECT_TRUE(has(r.clock_reads, "PTX: %globaltimer")) << joined(r.clock_reads);
  EXPECT_TRUE(any_contains(r.clock_reads, "SASS .text.k: SR_CLOCKLO")) << joined(r.clock_reads);
  EXPECT_TRUE(any_contains(r.clock_reads, "SASS .text.k: SR_GLOBALTIMERLO"))
      << joined(r.clock_reads);
  const auto refused = compile::integrity_problems(r, false);
  ASSERT_EQ(refused.size(), 1u) << joined(refused);
  EXPECT_NE(refused[0].find("reads a clock"), std::string::npos) << refused[0];
  EXPECT_NE(refused[0].find("integrity.allow_clock_reads"), std::string::npos) << refused[0];
  EXPECT_TRUE(compile::integrity_problems(r, true).empty());
  // The clock reads survive the cache's JSON.
  const auto back = compile::result::from_json(r.to_json());
  EXPECT_EQ(back.clock_reads, r.clock_reads);
}

TEST(CubinRules, ThirtyTwoBitClockIsFound) {
  const auto r = compile_ok(R"(
extern "C" __global__ void k(unsigned* t) { t[threadIdx.x] = (unsigned)clock(); }
)");
  EXPECT_FALSE(r.clock_reads.empty());
  EXPECT_TRUE(any_contains(r.clock_reads, "SASS")) << joined(r.clock_reads);
  EXPECT_FALSE(compile::integrity_problems(r, false).empty());
}

TEST(CubinRules, PtxScanIgnoresCommentsAndRegisterNames) {
  EXPECT_TRUE(find_clock_reads_ptx(
                  "mov.u32 %r1, %r2; // %clock in a comment\n\tadd.s64 %rd3, %rd1, %rd2;\n")
                  .empty());
  EXPECT_EQ(find_clock_reads_ptx("mov.u32 %r1, %clock;\nmov.u32 %r2, %globaltimer_lo;\n"),
            (std::vector<std::string>{"PTX: %clock", "PTX: %globaltimer_lo"}));
  EXPECT_TRUE(clock_read_problem({}).empty());
}

TEST(CubinRules, CleanKernelHasNoClockReadsAndNoData) {
  const auto r = compile_ok(R"(
extern "C" __global__ void k(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
)");
  EXPECT_TRUE(r.clock_reads.empty()) << joined(r.clock_reads);
  EXPECT_TRUE(r.integrity_problems.empty()) << joined(r.integrity_problems);
  const elf_view elf(r.cubin);
  EXPECT_TRUE(check_data_sections(elf).module_data_symbols.empty());
}
