// Hardware counters on a real GPU (label gpu), through the real worker:
// kernels whose counters are known exactly or within a small margin, the
// diagnosis each one must get, and a multi-kernel plan profiled with user
// replay without corrupting its outputs. Prints the figures it checks so the
// run on the H200 documents itself (docs/benchmarks.md).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/operator.hpp"
#include "gpu_test_support.hpp"
#include "runner/evaluation.hpp"

namespace {

using json = nlohmann::json;

json op_with(const std::string& name, const json& workloads, const std::string& flops = "0") {
  return {{"name", name},
          {"op_type", "test"},
          {"description", "counters test"},
          {"axes", {{"n", {{"type", "var"}}}}},
          {"inputs", {{"x", {{"shape", {"n"}}, {"dtype", "float32"}, {"generator", {{"kind", "uniform"}, {"low", -1}, {"high", 1}}}}}}},
          {"outputs", {{"out", {{"shape", {"n"}}, {"dtype", "float32"}}}}},
          {"tolerance", {{"atol", 1e-3}, {"rtol", 1e-3}}},
          {"roofline", {{"flops", flops}, {"flop_unit", "fp32"}}},
          {"workloads", workloads},
          {"reference",
           {{"source", "extern \"C\" __global__ void ref(const float* x, float* out, long long n) {\n"
                       "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
                       "  if (i < n) out[i] = x[i];\n}\n"},
            {"launches",
             {{{"kernel", "ref"}, {"grid", {"ceil_div(n, 256)"}}, {"block", {256}},
               {"args", {{{"tensor", "x"}}, {{"tensor", "out"}}, {{"int", "n"}, {"type", "int64"}}}}}}}}}};
}

json snapshot(const json& op) {
  auto r = kopt::config::load_operator_text(op.dump(), "<test>", ".");
  if (!r.ok()) {
    std::string msg;
    for (const auto& d : r.diagnostics) msg += d.to_string() + "\n";
    ADD_FAILURE() << msg;
    return op;
  }
  return r.op->snapshot();
}

class WorkerCounters : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    worker_ = kopt::testing::start_worker_or_skip().release();
    profiler_ = new kopt::runner::worker_client(kopt::runner::profiler_options(kopt::testing::worker_opts()));
  }
  static void TearDownTestSuite() {
    delete profiler_;
    delete worker_;
  }
  static kopt::runner::worker_client* worker_;
  // Counters come from a second, --profile-only worker, as in kopt itself.
  static kopt::runner::worker_client* profiler_;

  static kopt::runner::evaluation_report run(const json& op, const json& subjects, const std::string& tier = "default") {
    json req = {{"operator", op},
                {"subjects", subjects},
                {"workloads", json::array({op.at("workloads").at(0).at("id")})},
                {"settings",
                 {{"seeds", 1}, {"base_seed", 11}, {"launch_timeout_ms", 10000}, {"counters", tier},
                  {"timing", {{"min_samples", 10}, {"min_time_s", 0.02}, {"max_time_s", 0.3}}}}}};
    return kopt::runner::evaluate_with_counters(*worker_, profiler_, req);
  }
  static kopt::harness::gpu_peaks peaks() {
    kopt::harness::gpu_peaks p;  // H200 datasheet (configs/hardware/gpus.json)
    p.name = "H200";
    p.dram_bytes_per_s = 4.8e12;
    p.flops_per_s["fp32"] = 6.7e13;
    return p;
  }
  static kopt::runner::workload_row row(const json& op, const kopt::runner::evaluation_report& rep) {
    auto cfg = kopt::config::load_operator_text(op.dump(), "<t>", ".");
    EXPECT_TRUE(cfg.ok());
    const auto s = kopt::runner::summarize(*cfg.op, rep, "candidate", peaks());
    EXPECT_EQ(s.rows.size(), 1u);
    return s.rows.at(0);
  }
};
kopt::runner::worker_client* WorkerCounters::worker_ = nullptr;
kopt::runner::worker_client* WorkerCounters::profiler_ = nullptr;

bool has_finding(const json& diag, const std::string& cls) {
  for (const auto& f : diag.value("findings", json::array()))
    if (f.value("class", "") == cls) return true;
  return false;
}

json single(const std::string& src, const json& grid, const json& block, const json& args) {
  return {{"source", src}, {"launches", {{{"kernel", "k"}, {"grid", grid}, {"block", block}, {"args", args}}}}};
}

TEST_F(WorkerCounters, CopyKernelDramBytesMatchWhatItMoves) {
  const std::int64_t n = std::int64_t{256} << 20;  // 1 GiB in, 1 GiB out
  const json op = snapshot(op_with("copy", json::array({{{"id", "g1"}, {"axes", {{"n", n}}}, {"weight", 1}}})));
  const json cand = single(
      "extern \"C\" __global__ void k(const float4* x, float4* out, long long n4) {\n"
      "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x)\n"
      "    out[i] = x[i];\n}\n",
      {"132 * 16"}, {256}, {{{"tensor", "x"}}, {{"tensor", "out"}}, {{"int", "n / 4"}, {"type", "int64"}}});
  const auto rep = run(op, json::array({{{"role", "candidate"}, {"candidate", cand}}}));
  const auto& r = rep.results.at("g1").at("candidate");
  ASSERT_EQ(r.status, kopt::protocol::outcome::ok) << r.message;
  const json c = r.detail.at("counters");
  ASSERT_FALSE(c.contains("error")) << c.dump(2);
  EXPECT_EQ(c.value("mode", ""), "kernel_replay");
  EXPECT_TRUE(c.value("outputs_verified", false));
  const double moved = 2.0 * static_cast<double>(n) * 4;
  const double rd = c.at("metrics").at("dram__bytes_read.sum").get<double>();
  const double wr = c.at("metrics").at("dram__bytes_write.sum").get<double>();
  std::cout << fmt::format("copy: moved {:.0f} B; DRAM read {:.0f} ({:+.3f}%), write {:.0f} ({:+.3f}%), total {:+.3f}%; "
                           "passes {}; counters pass {:.1f} ms\n",
                           moved, rd, 100 * (rd / (moved / 2) - 1), wr, 100 * (wr / (moved / 2) - 1),
                           100 * ((rd + wr) / moved - 1), c.value("passes", 0), c.value("wall_ms", 0.0));
  EXPECT_NEAR(rd + wr, moved, 0.02 * moved);
  EXPECT_NEAR(rd, moved / 2, 0.02 * moved / 2);
  const auto w = row(op, rep);
  std::cout << "copy diagnosis: " << w.diagnosis.dump() << '\n';
  EXPECT_TRUE(has_finding(w.diagnosis, "memory-bound-near-peak") || has_finding(w.diagnosis, "memory-bound-far-from-peak"))
      << w.diagnosis.dump(2);
  EXPECT_FALSE(has_finding(w.diagnosis, "compute-bound"));
}

TEST_F(WorkerCounters, FmaLoopInstructionCountIsExactAndComputeBound) {
  const std::int64_t n = 132 * 8 * 256;
  const int iters = 4096;
  // Four independent chains, unrolled 8 times: the FMA pipe, not latency or
  // loop overhead (7 instructions for 4 FFMA without unrolling: measured
  // 50 % FMA pipe on the H200), limits it.
  const json op = snapshot(op_with("fma", json::array({{{"id", "f1"}, {"axes", {{"n", n}}}, {"weight", 1}}}),
                                   fmt::format("8 * {} * n", iters)));
  const json cand = single(
      "extern \"C\" __global__ void k(const float* x, float* out, long long n, int iters) {\n"
      "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
      "  if (i >= n) return;\n"
      "  float a = x[i], b = a + 1.f, c = a + 2.f, d = a + 3.f;\n"
      "  #pragma unroll 8\n"
      "  for (int j = 0; j < iters; ++j) {\n"
      "    a = fmaf(a, 0.999f, 1e-3f); b = fmaf(b, 0.999f, 1e-3f); c = fmaf(c, 0.999f, 1e-3f); d = fmaf(d, 0.999f, 1e-3f);\n"
      "  }\n"
      "  out[i] = x[i] + 1e-30f * (a + b + c + d);\n}\n",
      {"ceil_div(n, 256)"}, {256},
      {{{"tensor", "x"}}, {{"tensor", "out"}}, {{"int", "n"}, {"type", "int64"}}, {{"int", std::to_string(iters)}, {"type", "int32"}}});
  const auto rep = run(op, json::array({{{"role", "candidate"}, {"candidate", cand}}}));
  const auto& r = rep.results.at("f1").at("candidate");
  ASSERT_EQ(r.status, kopt::protocol::outcome::ok) << r.message;
  const json c = r.detail.at("counters");
  ASSERT_FALSE(c.contains("error")) << c.dump(2);
  const double ffma = c.at("metrics").at("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum").get<double>();
  const double expected = 4.0 * iters * static_cast<double>(n);
  std::cout << fmt::format("fma: FFMA thread instructions {:.0f}, expected {:.0f} (+ the epilogue's {}); fma pipe {:.1f}%\n",
                           ffma, expected, n,
                           c.at("metrics").value("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", -1.0));
  // The loop's FMAs exactly; the epilogue may fuse 1e-30f*(...)+x into one more FFMA per thread.
  EXPECT_TRUE(ffma == expected || ffma == expected + static_cast<double>(n)) << ffma;
  const auto w = row(op, rep);
  std::cout << "fma diagnosis: " << w.diagnosis.dump() << '\n';
  EXPECT_TRUE(has_finding(w.diagnosis, "compute-bound")) << w.diagnosis.dump(2);
}

TEST_F(WorkerCounters, OneBlockKernelIsLatencyOrOccupancyLimited) {
  const std::int64_t n = 1 << 16;
  const json op = snapshot(op_with("oneblock", json::array({{{"id", "o1"}, {"axes", {{"n", n}}}, {"weight", 1}}})));
  // One warp walks the whole array: correct, but one SM of 132 works.
  const json cand = single(
      "extern \"C\" __global__ void k(const float* x, float* out, long long n) {\n"
      "  for (long long i = threadIdx.x; i < n; i += blockDim.x) out[i] = x[i];\n}\n",
      {1}, {32}, {{{"tensor", "x"}}, {{"tensor", "out"}}, {{"int", "n"}, {"type", "int64"}}});
  const auto rep = run(op, json::array({{{"role", "candidate"}, {"candidate", cand}}}));
  const auto& r = rep.results.at("o1").at("candidate");
  ASSERT_EQ(r.status, kopt::protocol::outcome::ok) << r.message;
  const auto w = row(op, rep);
  std::cout << fmt::format("one block: {:.1f} us; diagnosis: {}\n", w.median_ns / 1e3, w.diagnosis.dump());
  EXPECT_TRUE(has_finding(w.diagnosis, "latency-bound") || has_finding(w.diagnosis, "occupancy-limited"))
      << w.diagnosis.dump(2);
}

TEST_F(WorkerCounters, MultiKernelPlanIsProfiledWithUserReplayWithoutCorruptingOutputs) {
  const std::int64_t n = std::int64_t{16} << 20;
  json op = op_with("twostep", json::array({{{"id", "t1"}, {"axes", {{"n", n}}}, {"weight", 1}}}));
  // out = 0.5 * (2 * x) through a workspace: two kernels, the second reads
  // what the first wrote, so a replay without restored state would show.
  json cand = {{"source",
                "extern \"C\" __global__ void k1(const float* x, float* tmp, long long n) {\n"
                "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) tmp[i] = 2.f * x[i];\n}\n"
                "extern \"C\" __global__ void k2(const float* tmp, float* out, long long n) {\n"
                "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) out[i] = 0.5f * tmp[i];\n}\n"},
               {"workspaces", {{"tmp", {{"bytes", "4 * n"}}}}},
               {"launches",
                {{{"kernel", "k1"}, {"grid", {"ceil_div(n, 256)"}}, {"block", {256}},
                  {"args", {{{"tensor", "x"}}, {{"workspace", "tmp"}}, {{"int", "n"}, {"type", "int64"}}}}},
                 {{"kernel", "k2"}, {"grid", {"ceil_div(n, 256)"}}, {"block", {256}},
                  {"args", {{{"workspace", "tmp"}}, {{"tensor", "out"}}, {{"int", "n"}, {"type", "int64"}}}}}}}};
  const json sop = snapshot(op);
  const auto rep = run(sop, json::array({{{"role", "candidate"}, {"candidate", cand}}}));
  const auto& r = rep.results.at("t1").at("candidate");
  ASSERT_EQ(r.status, kopt::protocol::outcome::ok) << r.message;
  const json c = r.detail.at("counters");
  ASSERT_FALSE(c.contains("error")) << c.dump(2);
  EXPECT_EQ(c.value("mode", ""), "user_replay");
  EXPECT_GE(c.value("passes", 0), 1);
  EXPECT_EQ(c.value("runs", 0), c.value("passes", -1));
  EXPECT_TRUE(c.value("outputs_verified", false)) << "profiling replays corrupted the plan's outputs";
  const double rd = c.at("metrics").at("dram__bytes_read.sum").get<double>();
  std::cout << fmt::format("two-kernel plan: {} passes, DRAM read {:.3g} B (x, tmp and out: about {:.3g}), {:.1f} ms\n",
                           c.value("passes", 0), rd, 12.0 * n, c.value("wall_ms", 0.0));
  EXPECT_GT(rd, 0.0);
}

TEST_F(WorkerCounters, UnknownMetricIsARequestErrorNamingIt) {
  const json op = snapshot(op_with("copy", json::array({{{"id", "g1"}, {"axes", {{"n", 1024}}}, {"weight", 1}}})));
  const json cand = single(
      "extern \"C\" __global__ void k(const float* x, float* out, long long n) {\n"
      "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) out[i] = x[i];\n}\n",
      {"ceil_div(n, 256)"}, {256}, {{{"tensor", "x"}}, {{"tensor", "out"}}, {{"int", "n"}, {"type", "int64"}}});
  json req = {{"operator", op}, {"subjects", json::array({{{"role", "candidate"}, {"candidate", cand}}})},
              {"workloads", {"g1"}},
              {"settings", {{"seeds", 1}, {"metrics", {"dram__bytes_red.sum"}},
                            {"timing", {{"min_samples", 10}, {"min_time_s", 0.01}, {"max_time_s", 0.1}}}}}};
  try {
    kopt::runner::evaluate_with_counters(*worker_, profiler_, req);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("dram__bytes_red.sum"), std::string::npos) << e.what();
  }
}

}  // namespace
