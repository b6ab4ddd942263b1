// Compiling candidates: NVRTC in process (ok, syntax error with its log,
// defines), ptxas reports, cache keys, and the isolated compiler that runs
// the real `kopt-worker compile` child with a time limit and an on-disk
// cache (hit on the second call, torn entries ignored, a compiler that runs
// too long is killed). Finally every kernel of configs/examples/*.json
// (reference, baseline, seed at default parameters) must compile for sm_90a
// with no integrity problems. No GPU is needed.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "../common/test_util.hpp"
#include "common/hash.hpp"
#include "compile/compiler.hpp"
#include "config/operator.hpp"
#include "core/cubin_inspect.hpp"
#include "core/plan.hpp"

namespace fs = std::filesystem;
using namespace kopt;
using namespace kopt::compile;
using namespace std::chrono_literals;

namespace {

const char* kAxpy = R"(
extern "C" __global__ void axpy(const float* __restrict__ x, float* __restrict__ y, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

request req(const std::string& source) {
  request r;
  r.source = source;
  r.arch = "sm_90a";
  return r;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// Exponential template instantiation: keeps the front end busy for hours.
const char* kTemplateBomb = R"(
template <int D, long long I> struct T { static constexpr long long v = T<D - 1, 2 * I>::v + T<D - 1, 2 * I + 1>::v; };
template <long long I> struct T<0, I> { static constexpr long long v = 1; };
extern "C" __global__ void bomb(long long* o) { *o = T<40, 0>::v; }
)";

}  // namespace

TEST(CompileInProcess, Ok) {
  const auto r = compile_in_process(req(kAxpy));
  ASSERT_TRUE(r.ok()) << r.log;
  EXPECT_EQ(r.st, result::status::ok);
  ASSERT_GT(r.cubin.size(), 64u);
  EXPECT_EQ(r.cubin.substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(r.cubin_hash, sha256_hex(r.cubin));
  EXPECT_EQ(r.key, cache_key(req(kAxpy)));
  EXPECT_FALSE(r.nvrtc_version.empty());
  EXPECT_FALSE(r.cached);
  EXPECT_GT(r.duration_ms, 0.0);
  EXPECT_TRUE(r.integrity_problems.empty()) << joined(r.integrity_problems);
  ASSERT_TRUE(r.kernels.count("axpy")) << r.log;
  EXPECT_GT(r.kernels.at("axpy").registers, 0);
  EXPECT_EQ(r.kernels.at("axpy").spill_store_bytes, 0);
  EXPECT_TRUE(contains(r.log, "axpy")) << r.log;  // the ptxas -v report
  EXPECT_EQ(harness::inspect_cubin(r.cubin).kernels, std::vector<std::string>{"axpy"});
}

TEST(CompileInProcess, SyntaxErrorWithLog) {
  const auto r = compile_in_process(req("extern \"C\" __global__ void broken(int* p) { p[0] = ; }\n"));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.st, result::status::error);
  EXPECT_TRUE(r.cubin.empty());
  EXPECT_TRUE(r.cubin_hash.empty());
  EXPECT_TRUE(contains(r.log, "error")) << r.log;
  EXPECT_TRUE(contains(r.log, "candidate.cu")) << r.log;  // the request's name
  EXPECT_STREQ(status_name(r.st), "compile_error");
}

TEST(CompileInProcess, DefinesAreUsed) {
  const std::string src = R"(
#ifndef BLOCK
#error BLOCK must be defined
#endif
static_assert(BLOCK == 128 && VEC == 4, "unexpected parameters");
extern "C" __global__ void __launch_bounds__(BLOCK) k(float* y) { y[threadIdx.x] = VEC; }
)";
  auto r = req(src);
  EXPECT_FALSE(compile_in_process(r).ok());  // no defines: #error
  EXPECT_TRUE(contains(compile_in_process(r).log, "BLOCK must be defined"));
  r.defines = {{"BLOCK", 128}, {"VEC", 4}};
  const auto ok = compile_in_process(r);
  EXPECT_TRUE(ok.ok()) << ok.log;
  r.defines["VEC"] = 8;
  const auto bad = compile_in_process(r);
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(contains(bad.log, "unexpected parameters")) << bad.log;
  // Negative values pass through as well.
  request n = req("static_assert(OFFSET == -3, \"neg\");\nextern \"C\" __global__ void k(int* p) { p[0] = OFFSET; }\n");
  n.defines = {{"OFFSET", -3}};
  EXPECT_TRUE(compile_in_process(n).ok()) << compile_in_process(n).log;
}

TEST(CompileInProcess, OptionsAreUsed) {
  const std::string src = R"(
#ifndef __CUDACC_RTC__
#error not nvrtc
#endif
extern "C" __global__ void k(float* y) { y[0] = __expf(y[1]); }
)";
  auto r = req(src);
  r.options = {"--use_fast_math", "-lineinfo"};
  EXPECT_TRUE(compile_in_process(r).ok());
  r.options = {"--definitely-not-an-nvrtc-option"};
  const auto bad = compile_in_process(r);
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(bad.log.empty());
}

TEST(CompileInProcess, SharedMemoryAndIntegrityProblemsAreReported) {
  const auto r = compile_in_process(req(R"(
__device__ int hidden_state;
extern "C" __global__ void tiled(float* y) {
  __shared__ float tile[512];
  tile[threadIdx.x] = y[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = tile[511 - threadIdx.x] + hidden_state++;
}
)"));
  ASSERT_TRUE(r.ok()) << r.log;
  ASSERT_TRUE(r.kernels.count("tiled")) << r.log;
  EXPECT_EQ(r.kernels.at("tiled").shared_static_bytes, 2048);
  ASSERT_FALSE(r.integrity_problems.empty());
  EXPECT_TRUE(contains(joined(r.integrity_problems), "hidden_state")) << joined(r.integrity_problems);
}

TEST(CompileInProcess, NonexistentArchitectureIsAnError) {
  auto r = req(kAxpy);
  r.arch = "sm_1";
  const auto res = compile_in_process(r);
  EXPECT_FALSE(res.ok());
  EXPECT_FALSE(res.log.empty());
}

TEST(PtxasReport, RealNvrtcLog) {
  // ptxas -v output of NVRTC 13 for sm_90a (two kernels, one with a stack).
  const std::string log =
      "ptxas info    : 24 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k2' for 'sm_90a'\n"
      "ptxas info    : Function properties for k2\n"
      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 24 registers, used 0 barriers, 8 bytes cumulative stack size\n"
      "ptxas info    : Compile time = 17.269 ms\n"
      "ptxas info    : Compiling entry function 'k1' for 'sm_90a'\n"
      "ptxas info    : Function properties for k1\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 14 registers, used 1 barriers, 1024 bytes smem\n"
      "ptxas info    : Compile time = 16.022 ms\n";
  const auto k = parse_ptxas_report(log);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k.at("k2").registers, 24);
  EXPECT_EQ(k.at("k2").stack_bytes, 8);
  EXPECT_EQ(k.at("k2").spill_store_bytes, 4);
  EXPECT_EQ(k.at("k2").spill_load_bytes, 12);
  EXPECT_EQ(k.at("k2").shared_static_bytes, 0);
  EXPECT_EQ(k.at("k1").registers, 14);
  EXPECT_EQ(k.at("k1").shared_static_bytes, 1024);
  EXPECT_EQ(k.at("k1").stack_bytes, 0);
}

// ptxas's "Potential Performance Loss" advisories (this one is the text
// ptxas 13.0 printed for a wgmma kernel with a warp-dependent branch) land
// on the function they name, even though they come before its block, and
// survive the result's JSON round trip (the compile cache, the worker).
TEST(PtxasReport, PerformanceAdvisoriesAreKeptPerFunction) {
  const std::string log =
      "ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to "
      "program dependence on compiler-inserted WG.AR in divergent path in the function 'ua'\n"
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'other' for 'sm_90a'\n"
      "ptxas info    : Function properties for other\n"
      "ptxas info    : Used 20 registers\n"
      "ptxas info    : Compiling entry function 'ua' for 'sm_90a'\n"
      "ptxas info    : Function properties for ua\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 8 bytes cumulative stack size\n";
  const auto k = parse_ptxas_report(log);
  ASSERT_EQ(k.size(), 2u);
  ASSERT_EQ(k.at("ua").performance_advisories.size(), 1u);
  EXPECT_EQ(k.at("ua").performance_advisories[0],
            "(C7520) wgmma.mma_async instructions are serialized due to program dependence on "
            "compiler-inserted "
            "WG.AR in divergent path");
  EXPECT_EQ(k.at("ua").registers, 255);
  EXPECT_TRUE(k.at("other").performance_advisories.empty());
  result r;
  r.st = result::status::ok;
  r.kernels = k;
  const auto back = result::from_json(r.to_json());
  EXPECT_EQ(back.kernels.at("ua").performance_advisories, k.at("ua").performance_advisories);
  EXPECT_FALSE(r.to_json()["kernels"]["other"].contains("performance_advisories"));
}

TEST(PtxasReport, OlderFormatAndMangledNames) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z6kernelPfi' for 'sm_80'\n"
      "ptxas info    : Function properties for _Z6kernelPfi\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 32 registers, 4096 bytes smem, 368 bytes cmem[0]\n";
  const auto k = parse_ptxas_report(log);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k.at("_Z6kernelPfi").registers, 32);
  EXPECT_EQ(k.at("_Z6kernelPfi").shared_static_bytes, 4096);
  EXPECT_TRUE(parse_ptxas_report("").empty());
  EXPECT_TRUE(parse_ptxas_report("ptxas info    : Used 3 registers\n").empty());  // no function yet
}

TEST(PtxasReport, FromARealCompile) {
  const auto r = compile_in_process(req(R"(
extern "C" __global__ void one(float* y) { __shared__ float s[64]; s[threadIdx.x] = 1; __syncthreads(); y[threadIdx.x] = s[63 - threadIdx.x]; }
extern "C" __global__ void two(float* y) { y[threadIdx.x] *= 2; }
)"));
  ASSERT_TRUE(r.ok()) << r.log;
  const auto k = parse_ptxas_report(r.log);
  ASSERT_TRUE(k.count("one")) << r.log;
  ASSERT_TRUE(k.count("two")) << r.log;
  EXPECT_EQ(k.at("one").shared_static_bytes, 256);
  EXPECT_EQ(k.at("two").shared_static_bytes, 0);
  EXPECT_GT(k.at("two").registers, 0);
}

TEST(CacheKey, ChangesWithEverythingThatDeterminesTheBinary) {
  const request base = req(kAxpy);
  const std::string k = cache_key(base);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(cache_key(base), k);  // stable

  request r = base;
  r.source += "\n// a comment";
  EXPECT_NE(cache_key(r), k);
  r = base;
  r.defines["BLOCK"] = 128;
  const std::string k128 = cache_key(r);
  EXPECT_NE(k128, k);
  r.defines["BLOCK"] = 256;
  EXPECT_NE(cache_key(r), k128);
  r = base;
  r.options = {"--use_fast_math"};
  EXPECT_NE(cache_key(r), k);
  r = base;
  r.arch = "sm_80";
  EXPECT_NE(cache_key(r), k);
  // The time limit does not change the binary.
  r = base;
  r.timeout = 1234ms;
  EXPECT_EQ(cache_key(r), k);
}

TEST(EffectiveOptions, DefinesAndUserOptionsInOrder) {
  request r = req(kAxpy);
  r.defines = {{"VEC", 4}, {"BLOCK", 256}};
  r.options = {"-lineinfo"};
  const auto o = effective_options(r);
  EXPECT_EQ(o.front(), "--gpu-architecture=sm_90a");
  EXPECT_NE(std::find(o.begin(), o.end(), "-DBLOCK=256"), o.end());
  EXPECT_NE(std::find(o.begin(), o.end(), "-DVEC=4"), o.end());
  EXPECT_EQ(o.back(), "-lineinfo");
}

TEST(RequestResult, JsonRoundTrips) {
  request r = req(kAxpy);
  r.defines = {{"B", 64}};
  r.options = {"-lineinfo"};
  r.name = "cand.cu";
  r.timeout = 4321ms;
  const auto back = request::from_json(r.to_json());
  EXPECT_EQ(back.source, r.source);
  EXPECT_EQ(back.arch, r.arch);
  EXPECT_EQ(back.defines, r.defines);
  EXPECT_EQ(back.options, r.options);
  EXPECT_EQ(back.name, "cand.cu");
  EXPECT_EQ(back.timeout, 4321ms);

  const auto res = compile_in_process(req(kAxpy));
  ASSERT_TRUE(res.ok());
  const auto j = res.to_json();
  EXPECT_FALSE(j.contains("cubin"));  // metadata only
  EXPECT_EQ(j.at("cubin_bytes"), res.cubin.size());
  const auto rb = result::from_json(j);
  EXPECT_EQ(rb.st, result::status::ok);
  EXPECT_EQ(rb.cubin_hash, res.cubin_hash);
  EXPECT_EQ(rb.key, res.key);
  EXPECT_EQ(rb.kernels.at("axpy").registers, res.kernels.at("axpy").registers);
  EXPECT_TRUE(rb.cubin.empty());
  for (auto s : {result::status::ok, result::status::error, result::status::timeout, result::status::crashed}) {
    result x;
    x.st = s;
    EXPECT_EQ(result::from_json(x.to_json()).st, s) << status_name(s);
  }
}

TEST(Compiler, IsolatedCompileThenCacheHit) {
  kopt::test::scratch_dir dir;
  const compiler c(KOPT_WORKER_EXE, dir / "cache");
  const auto first = c.compile(req(kAxpy));
  ASSERT_TRUE(first.ok()) << first.log;
  EXPECT_FALSE(first.cached);
  EXPECT_EQ(first.cubin_hash, sha256_hex(first.cubin));
  EXPECT_EQ(first.key, cache_key(req(kAxpy)));
  EXPECT_TRUE(first.kernels.count("axpy"));
  EXPECT_TRUE(fs::exists(dir / "cache" / (first.key + ".cubin")));
  EXPECT_TRUE(fs::exists(dir / "cache" / (first.key + ".json")));

  const auto second = c.compile(req(kAxpy));
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.cubin_hash, first.cubin_hash);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.kernels.at("axpy").registers, first.kernels.at("axpy").registers);

  // The same cache from another compiler object (a restarted worker).
  const compiler again(KOPT_WORKER_EXE, dir / "cache");
  EXPECT_TRUE(again.compile(req(kAxpy)).cached);

  // Only ok results and the child's temporary files do not linger.
  for (const auto& e : fs::directory_iterator(dir / "cache")) {
    const auto name = e.path().filename().string();
    EXPECT_TRUE(name.size() > 5 && (name.ends_with(".cubin") || name.ends_with(".json"))) << name;
  }
}

TEST(Compiler, DamagedCacheEntryIsRecompiled) {
  kopt::test::scratch_dir dir;
  const compiler c(KOPT_WORKER_EXE, dir / "cache");
  const auto first = c.compile(req(kAxpy));
  ASSERT_TRUE(first.ok()) << first.log;
  kopt::test::write_text(dir / "cache" / (first.key + ".cubin"), "tampered");
  const auto second = c.compile(req(kAxpy));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second.cached);
  EXPECT_EQ(second.cubin_hash, first.cubin_hash);
  EXPECT_TRUE(c.compile(req(kAxpy)).cached);  // repaired
}

TEST(Compiler, UseCacheFalseCompilesAgainAndStores) {
  kopt::test::scratch_dir dir;
  const compiler c(KOPT_WORKER_EXE, dir / "cache");
  const auto first = c.compile(req(kAxpy));
  ASSERT_TRUE(first.ok()) << first.log;
  auto again = req(kAxpy);
  again.use_cache = false;
  EXPECT_EQ(cache_key(again), first.key);  // how, not what: same key
  const auto second = c.compile(again);
  ASSERT_TRUE(second.ok()) << second.log;
  EXPECT_FALSE(second.cached);
  EXPECT_EQ(second.cubin_hash, first.cubin_hash);
  EXPECT_TRUE(c.compile(req(kAxpy)).cached);
}

TEST(Compiler, ErrorsAreNotCached) {
  kopt::test::scratch_dir dir;
  const compiler c(KOPT_WORKER_EXE, dir / "cache");
  const auto bad = req("extern \"C\" __global__ void broken( { }\n");
  const auto r1 = c.compile(bad);
  EXPECT_EQ(r1.st, result::status::error);
  EXPECT_TRUE(contains(r1.log, "error")) << r1.log;
  const auto r2 = c.compile(bad);
  EXPECT_EQ(r2.st, result::status::error);
  EXPECT_FALSE(r2.cached);
}

TEST(Compiler, WithoutCache) {
  const compiler c(KOPT_WORKER_EXE, "");
  const auto r1 = c.compile(req(kAxpy));
  ASSERT_TRUE(r1.ok()) << r1.log;
  EXPECT_FALSE(r1.cached);
  EXPECT_FALSE(c.compile(req(kAxpy)).cached);
}

TEST(Compiler, RunawayCompilerIsKilledAtItsTimeLimit) {
  kopt::test::scratch_dir dir;
  const compiler c(KOPT_WORKER_EXE, dir / "cache");
  auto r = req(kTemplateBomb);
  r.timeout = 2s;
  const auto t0 = std::chrono::steady_clock::now();
  const auto res = c.compile(r);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(res.st, result::status::timeout) << status_name(res.st) << "\n" << res.log;
  EXPECT_STREQ(status_name(res.st), "timeout");
  EXPECT_TRUE(contains(res.log, "2000 ms")) << res.log;
  EXPECT_GE(took, 1.9);
  EXPECT_LT(took, 15.0);
  EXPECT_TRUE(res.cubin.empty());
  // Nothing cached, nothing left behind.
  EXPECT_TRUE(fs::is_empty(dir / "cache"));
}

TEST(Compiler, BrokenChildIsReportedAsCrashed) {
  kopt::test::scratch_dir dir;
  const auto r1 = compiler("/bin/false", dir / "cache").compile(req(kAxpy));
  EXPECT_EQ(r1.st, result::status::crashed);
  EXPECT_TRUE(contains(r1.log, "exited with code 1")) << r1.log;
  // A child that answers with something that is not the protocol.
  const auto r2 = compiler("/bin/echo", dir / "cache").compile(req(kAxpy));
  EXPECT_EQ(r2.st, result::status::crashed);
  EXPECT_TRUE(contains(r2.log, "unreadable")) << r2.log;
  // A child killed by a signal.
  const auto script = dir / "segv.sh";
  kopt::test::write_text(script, "#!/bin/sh\nkill -SEGV $$\n", true);
  const auto r3 = compiler(script.string(), dir / "cache").compile(req(kAxpy));
  EXPECT_EQ(r3.st, result::status::crashed);
  EXPECT_TRUE(contains(r3.log, "signal 11")) << r3.log;
}

TEST(Compiler, ChildDoesNotSeeCredentials) {
  // A fake compile child that reports whether it can see an API key.
  kopt::test::scratch_dir dir;
  ASSERT_EQ(setenv("OPENAI_API_KEY", "sk-test-compile", 1), 0);
  const auto script = dir / "envcheck.sh";
  kopt::test::write_text(script, "#!/bin/sh\nenv > " + (dir / "env.txt").string() + "\nexit 1\n", true);
  (void)compiler(script.string(), "").compile(req(kAxpy));
  unsetenv("OPENAI_API_KEY");
  const auto env = kopt::test::read_text(dir / "env.txt");
  EXPECT_FALSE(env.empty());
  EXPECT_FALSE(contains(env, "OPENAI_API_KEY")) << env;
  EXPECT_TRUE(contains(env, "PATH=")) << env;
}

// Every kernel of every example config, as the worker compiles it.
TEST(Examples, AllKernelsCompileCleanForSm90a) {
  const fs::path examples = fs::path(KOPT_SOURCE_DIR) / "configs" / "examples";
  int configs = 0, compiled = 0;
  for (const auto& e : fs::directory_iterator(examples)) {
    if (e.path().extension() != ".json") continue;
    ++configs;
    const auto loaded = config::load_operator_file(e.path());
    ASSERT_TRUE(loaded.ok()) << e.path();
    const auto& op = *loaded.op;
    std::vector<std::pair<std::string, const config::candidate*>> cands = {{"reference", &op.reference}};
    if (op.baseline) cands.emplace_back("baseline", &*op.baseline);
    if (op.seed) cands.emplace_back("seed", &*op.seed);
    for (const auto& [role, cand] : cands) {
      SCOPED_TRACE(op.name + " " + role);
      request r;
      r.source = cand->source;
      r.arch = "sm_90a";
      r.name = role + ".cu";
      r.options = cand->compile_options;
      for (const auto& [k, v] : harness::default_parameters(*cand)) r.defines[k] = v;
      const auto res = compile_in_process(r);
      ASSERT_TRUE(res.ok()) << res.log;
      EXPECT_TRUE(res.integrity_problems.empty()) << joined(res.integrity_problems);
      const auto facts = harness::inspect_cubin(res.cubin);
      for (const auto& l : cand->launches) {
        EXPECT_NE(std::find(facts.kernels.begin(), facts.kernels.end(), l.kernel), facts.kernels.end())
            << l.kernel << " is not in the cubin: " << joined(facts.kernels);
        EXPECT_TRUE(res.kernels.count(l.kernel)) << l.kernel << "\n" << res.log;
      }
      ++compiled;
    }
  }
  EXPECT_GE(configs, 2);
  EXPECT_GE(compiled, 4);
}
