// Static checks on real cubins, compiled here with NVRTC (no GPU needed):
// kernels are listed; writable module-scope device variables, device
// malloc/free and device printf are reported; __constant__ and __shared__
// data are not. Bytes that are not a 64-bit ELF (or a damaged cubin) raise
// kopt::error, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "common/error.hpp"
#include "compile/compiler.hpp"
#include "core/cubin_inspect.hpp"

using namespace kopt;
using namespace kopt::harness;

namespace {

std::string compile_ok(const std::string& source) {
  compile::request r;
  r.source = source;
  r.arch = "sm_90a";
  const auto res = compile::compile_in_process(r);
  if (!res.ok()) throw std::runtime_error("test kernel does not compile:\n" + res.log);
  return res.cubin;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

const char* kClean = R"(
__device__ __forceinline__ float twice(float v) { return 2.0f * v; }
extern "C" __global__ void clean_a(const float* __restrict__ x, float* __restrict__ y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = twice(x[i]);
}
extern "C" __global__ void clean_b(float* y) { y[threadIdx.x] = 0.0f; }
)";

// One cubin shared by the tests that only read it (NVRTC takes a moment).
const std::string& clean_cubin() {
  static const std::string c = compile_ok(kClean);
  return c;
}

}  // namespace

TEST(CubinInspect, CleanKernelsAreListedWithoutProblems) {
  const auto f = inspect_cubin(clean_cubin());
  EXPECT_EQ(f.kernels, (std::vector<std::string>{"clean_a", "clean_b"}));
  EXPECT_TRUE(f.writable_globals.empty()) << joined(f.writable_globals);
  EXPECT_TRUE(f.undefined_functions.empty()) << joined(f.undefined_functions);
  EXPECT_TRUE(f.problems().empty()) << joined(f.problems());
}

TEST(CubinInspect, MangledKernelNamesAreListedAsTheyAre) {
  const auto f = inspect_cubin(compile_ok("__global__ void cxx_kernel(int* p) { *p = 1; }\n"));
  ASSERT_EQ(f.kernels.size(), 1u);
  EXPECT_NE(f.kernels[0].find("cxx_kernel"), std::string::npos) << f.kernels[0];
  EXPECT_NE(f.kernels[0], "cxx_kernel");  // C++ linkage: mangled
}

TEST(CubinInspect, WritableDeviceVariableIsReported) {
  const auto f = inspect_cubin(compile_ok(R"(
__device__ int counter;
extern "C" __global__ void count(int* out) { out[0] = atomicAdd(&counter, 1); }
)"));
  EXPECT_TRUE(has(f.kernels, "count"));
  EXPECT_TRUE(has(f.writable_globals, "counter")) << joined(f.writable_globals);
  const auto p = f.problems();
  EXPECT_TRUE(any_contains(p, "'counter'")) << joined(p);
  EXPECT_TRUE(any_contains(p, "workspace")) << joined(p);
}

TEST(CubinInspect, InitializedDeviceVariableIsReported) {
  const auto f = inspect_cubin(compile_ok(R"(
__device__ int done_flag[2] = {0, 7};
extern "C" __global__ void flag(int* out) { if (done_flag[0] == 0) { done_flag[0] = 1; out[0] = done_flag[1]; } }
)"));
  EXPECT_TRUE(has(f.writable_globals, "done_flag")) << joined(f.writable_globals);
  EXPECT_FALSE(f.problems().empty());
}

TEST(CubinInspect, DeviceMallocAndFreeAreReported) {
  const auto f = inspect_cubin(compile_ok(R"(
extern "C" __global__ void alloc(int n, int* out) {
  int* p = static_cast<int*>(malloc(n * sizeof(int)));
  p[0] = n;
  out[0] = p[0];
  free(p);
}
)"));
  EXPECT_TRUE(has(f.undefined_functions, "malloc")) << joined(f.undefined_functions);
  EXPECT_TRUE(has(f.undefined_functions, "free")) << joined(f.undefined_functions);
  const auto p = f.problems();
  EXPECT_TRUE(any_contains(p, "memory allocation ('malloc')")) << joined(p);
  EXPECT_TRUE(any_contains(p, "memory allocation ('free')")) << joined(p);
}

TEST(CubinInspect, DevicePrintfIsReported) {
  const auto f = inspect_cubin(compile_ok(R"(
extern "C" __global__ void chatty(const int* x) { printf("x = %d\n", x[threadIdx.x]); }
)"));
  EXPECT_TRUE(has(f.undefined_functions, "vprintf")) << joined(f.undefined_functions);
  EXPECT_TRUE(any_contains(f.problems(), "device printf is not allowed")) << joined(f.problems());
}

TEST(CubinInspect, ConstantAndSharedDataAreNotReported) {
  const auto f = inspect_cubin(compile_ok(R"(
__constant__ float coeffs[16];
extern "C" __global__ void poly(const float* x, float* y) {
  __shared__ float tile[256];
  tile[threadIdx.x] = x[threadIdx.x] * coeffs[threadIdx.x & 15];
  __syncthreads();
  y[threadIdx.x] = tile[255 - threadIdx.x];
}
)"));
  EXPECT_TRUE(has(f.kernels, "poly"));
  EXPECT_TRUE(f.writable_globals.empty()) << joined(f.writable_globals);
  EXPECT_TRUE(f.undefined_functions.empty()) << joined(f.undefined_functions);
  EXPECT_TRUE(f.problems().empty()) << joined(f.problems());
}

TEST(CubinInspect, MathLibraryTablesOfSinCosAreNotState) {
  // sinf/cosf with full range reduction pull in __cudart_i2opi_f, a table
  // the math library keeps in .nv.global.init; a candidate using them is
  // honest. A variable of its own next to them is still reported.
  const auto f = inspect_cubin(compile_ok(R"(
__device__ int mine;
extern "C" __global__ void rope(const float* x, float* y) {
  float s, c;
  sincosf(x[threadIdx.x] * 1000.0f, &s, &c);
  y[threadIdx.x] = s + cosf(x[threadIdx.x] * 3000.0f) + c + (float)mine;
}
)"));
  EXPECT_FALSE(has(f.writable_globals, "__cudart_i2opi_f")) << joined(f.writable_globals);
  EXPECT_TRUE(has(f.writable_globals, "mine")) << joined(f.writable_globals);
}

TEST(CubinInspect, ProblemsFromHandBuiltFacts) {
  cubin_facts f;
  f.undefined_functions = {"__nv_aligned_device_malloc", "some_extern_fn", "vprintf"};
  const auto p = f.problems();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_TRUE(any_contains(p, "memory allocation ('__nv_aligned_device_malloc')")) << joined(p);
  EXPECT_TRUE(any_contains(p, "external device function 'some_extern_fn'")) << joined(p);
  EXPECT_TRUE(any_contains(p, "printf")) << joined(p);
  EXPECT_TRUE(cubin_facts{}.problems().empty());
}

TEST(CubinInspect, GarbageIsAnError) {
  EXPECT_THROW(inspect_cubin(""), kopt::error);
  EXPECT_THROW(inspect_cubin("hello, this is not an ELF file at all; it is long enough to read a header........"),
               kopt::error);
  EXPECT_THROW(inspect_cubin(std::string(64, '\0')), kopt::error);
  EXPECT_THROW(inspect_cubin(std::string(4096, '\xAB')), kopt::error);
  // A 32-bit ELF header.
  std::string elf32 = clean_cubin();
  elf32[4] = 1;
  EXPECT_THROW(inspect_cubin(elf32), kopt::error);
  // Big-endian.
  std::string be = clean_cubin();
  be[5] = 2;
  EXPECT_THROW(inspect_cubin(be), kopt::error);
  // Truncated: the section headers are at the end of a cubin.
  EXPECT_THROW(inspect_cubin(std::string_view(clean_cubin()).substr(0, 200)), kopt::error);
  // Cut inside the section header table (e_shoff at 0x28).
  std::uint64_t shoff = 0;
  std::memcpy(&shoff, clean_cubin().data() + 0x28, 8);
  ASSERT_LT(shoff + 10, clean_cubin().size());
  EXPECT_THROW(inspect_cubin(std::string_view(clean_cubin()).substr(0, shoff + 10)), kopt::error);
}

TEST(CubinInspect, CorruptedHeadersAreErrors) {
  const std::string& good = clean_cubin();
  auto patch = [&](std::size_t off, const void* v, std::size_t n) {
    std::string s = good;
    std::memcpy(s.data() + off, v, n);
    return s;
  };
  const std::uint64_t huge = ~std::uint64_t{0} - 8;
  EXPECT_THROW(inspect_cubin(patch(0x28, &huge, 8)), kopt::error);  // e_shoff
  const std::uint16_t bad_size = 32;
  EXPECT_THROW(inspect_cubin(patch(0x3A, &bad_size, 2)), kopt::error);  // e_shentsize
  const std::uint16_t bad_index = 0xFFF0;
  EXPECT_THROW(inspect_cubin(patch(0x3E, &bad_index, 2)), kopt::error);  // e_shstrndx
}

TEST(CubinInspect, RandomCorruptionNeverCrashes) {
  // Whatever the damage, the result is facts or kopt::error (ASan/UBSan
  // would abort on an out-of-bounds read).
  const std::string& good = clean_cubin();
  std::mt19937_64 rng(2024);
  std::uniform_int_distribution<std::size_t> pos(0, good.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  int errors = 0, parsed = 0;
  for (int it = 0; it < 2000; ++it) {
    std::string s = good;
    const int flips = 1 + it % 8;
    for (int k = 0; k < flips; ++k) s[pos(rng)] = static_cast<char>(byte(rng));
    try {
      (void)inspect_cubin(s);
      ++parsed;
    } catch (const kopt::error&) {
      ++errors;
    }
  }
  EXPECT_EQ(errors + parsed, 2000);
  EXPECT_GT(parsed, 0);
}
