// The clock_lost restart path on a GPU (label gpu; skips with the worker's
// reason without one). When CUPTI stops delivering kernel records during
// timing the worker sends the fatal outcome clock_lost and exits; kopt
// starts a fresh worker and measures the unfinished workloads again with
// every subject, and the candidate is not blamed (docs/worker-protocol.md,
// "Fatal outcomes"). The loss is rare and its cause unknown, so it is forced
// with the worker's test hook KOPT_WORKER_TEST_DROP_ACTIVITY_RECORDS: only
// the first worker, the one that creates the marker file, drops its records.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "config/operator.hpp"
#include "gpu_test_support.hpp"
#include "protocol/protocol.hpp"
#include "runner/evaluation.hpp"

namespace {

using json = nlohmann::json;

json scale_add() {
  return {
      {"name", "scale_add"},
      {"axes", {{"n", {{"type", "var"}}}}},
      {"inputs",
       {{"x", {{"shape", {"n"}}, {"dtype", "float32"}}},
        {"y", {{"shape", {"n"}}, {"dtype", "float32"}}}}},
      {"outputs", {{"out", {{"shape", {"n"}}, {"dtype", "float32"}}}}},
      {"roofline", {{"flops", "2 * n"}, {"flop_unit", "fp32"}}},
      {"workloads",
       {{{"id", "w1"}, {"axes", {{"n", 4097}}}}, {{"id", "w2"}, {"axes", {{"n", 1 << 20}}}}}},
      {"reference",
       {{"source",
         "extern \"C\" __global__ void ref(const float* x, const float* y, float* out, int n) {\n"
         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = 2.0f * x[i] + "
         "y[i];\n}\n"},
        {"launches",
         {{{"kernel", "ref"},
           {"grid", {"ceil_div(n, 256)"}},
           {"block", {256}},
           {"args",
            {{{"tensor", "x"}},
             {{"tensor", "y"}},
             {{"tensor", "out"}},
             {{"int", "n"}, {"type", "int32"}}}}}}}}}};
}

json candidate() {
  return {{"source",
           "extern \"C\" __global__ void k(const float* x, const float* y, float* out, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = 2.0f * x[i] + "
           "y[i];\n}\n"},
          {"launches",
           {{{"kernel", "k"},
             {"grid", {"ceil_div(n, 256)"}},
             {"block", {256}},
             {"args",
              {{{"tensor", "x"}},
               {{"tensor", "y"}},
               {{"tensor", "out"}},
               {{"int", "n"}, {"type", "int32"}}}}}}}};
}

kopt::runner::evaluation_report run(kopt::runner::worker_client& w, const json& op) {
  json req = {{"operator", op},
              {"subjects", json::array({{{"role", "cand"}, {"candidate", candidate()}}})},
              {"workloads", {"w1", "w2"}},
              {"settings",
               {{"seeds", 2},
                {"base_seed", 5},
                {"launch_timeout_ms", 3000},
                {"timing", {{"min_samples", 5}, {"min_time_s", 0.01}, {"max_time_s", 0.2}}}}}};
  return w.evaluate(req);
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += e + "\n";
  return s;
}

}  // namespace

TEST(WorkerClockLost, TheWorkerIsRestartedAndTheWorkloadMeasuredAgain) {
  const auto marker =
      std::filesystem::temp_directory_path() / ("kopt_clock_lost_" + std::to_string(::getpid()));
  std::filesystem::remove(marker);
  // Inherited by the workers kopt starts (the KOPT_WORKER_ prefix passes the
  // scrubbed environment); the first one to time creates the marker.
  ASSERT_EQ(::setenv("KOPT_WORKER_TEST_DROP_ACTIVITY_RECORDS", marker.c_str(), 1), 0);
  auto worker = kopt::testing::start_worker_or_skip();
  auto r = kopt::config::load_operator_text(scale_add().dump(), "<test>", ".");
  ASSERT_TRUE(r.ok());
  const json op = r.op->snapshot();

  const auto t0 = std::chrono::steady_clock::now();
  const auto rep = run(*worker, op);
  const double s1 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "first request: " << s1 << " s, restarts " << rep.restarts << ", events:\n"
            << joined(rep.events);
  EXPECT_TRUE(std::filesystem::exists(marker)) << "no worker took the test hook";
  EXPECT_EQ(rep.restarts, 1);
  ASSERT_FALSE(rep.events.empty());
  EXPECT_NE(joined(rep.events).find("CUPTI clock lost kernel records"), std::string::npos)
      << joined(rep.events);
  for (const char* w : {"w1", "w2"}) {
    ASSERT_TRUE(rep.results.count(w)) << w;
    ASSERT_TRUE(rep.results.at(w).count("cand")) << w;
    const auto& c = rep.results.at(w).at("cand");
    // Measured again in the fresh worker, not blamed on the candidate.
    EXPECT_EQ(c.status, kopt::protocol::outcome::ok) << w << ": " << c.message;
    ASSERT_TRUE(c.detail.contains("timing")) << c.detail.dump();
    const double ns = c.detail.at("timing").at("median_ns").get<double>();
    std::cout << w << ": median " << ns << " ns after the restart\n";
    EXPECT_GT(ns, 0);
  }

  // The next request runs in the fresh worker without a restart.
  const auto rep2 = run(*worker, op);
  EXPECT_EQ(rep2.restarts, 0) << joined(rep2.events);
  for (const char* w : {"w1", "w2"})
    EXPECT_EQ(rep2.results.at(w).at("cand").status, kopt::protocol::outcome::ok) << w;
  std::filesystem::remove(marker);
}
