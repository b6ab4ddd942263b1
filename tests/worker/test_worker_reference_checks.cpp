// Issue 18 on a GPU (label gpu; skips with the worker's reason without
// one): the wrong kernel is never blamed. A reference that writes into its
// own read-only input is reported as the config's error (before, the
// correct candidate after it was "rejected_integrity: modified input"), and
// a candidate whose launch plan does not match its kernel's parameters is
// refused as launch_error before launch (before, it crashed the worker).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "protocol/protocol.hpp"
#include "config/operator.hpp"
#include "gpu_test_support.hpp"
#include "runner/evaluation.hpp"

namespace {

using json = nlohmann::json;

json scale_add(const std::string& ref_body) {
  return {
      {"name", "scale_add"},
      {"axes", {{"n", {{"type", "var"}}}}},
      {"inputs",
       {{"x", {{"shape", {"n"}}, {"dtype", "float32"}}},
        {"y", {{"shape", {"n"}}, {"dtype", "float32"}}}}},
      {"outputs", {{"out", {{"shape", {"n"}}, {"dtype", "float32"}}}}},
      {"roofline", {{"flops", "2 * n"}, {"flop_unit", "fp32"}}},
      {"workloads", {{{"id", "w"}, {"axes", {{"n", 4097}}}}}},
      {"reference",
       {{"source",
         "extern \"C\" __global__ void ref(const float* x, const float* y, float* out, int n) {\n"
         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n" +
             ref_body + "\n}\n"},
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

json good_candidate(json args = nullptr) {
  if (args.is_null())
    args = {{{"tensor", "x"}},
            {{"tensor", "y"}},
            {{"tensor", "out"}},
            {{"int", "n"}, {"type", "int32"}}};
  return {{"source",
           "extern \"C\" __global__ void k(const float* x, const float* y, float* out, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = 2.0f * x[i] + "
           "y[i];\n}\n"},
          {"launches",
           {{{"kernel", "k"}, {"grid", {"ceil_div(n, 256)"}}, {"block", {256}}, {"args", args}}}}};
}

json snapshot(const json& op) {
  auto r = kopt::config::load_operator_text(op.dump(), "<test>", ".");
  EXPECT_TRUE(r.ok());
  return r.ok() ? r.op->snapshot() : op;
}

kopt::runner::evaluation_report run(kopt::runner::worker_client& w, const json& op,
                                    const json& subjects) {
  json req = {{"operator", op},
              {"subjects", subjects},
              {"workloads", {"w"}},
              {"settings",
               {{"seeds", 2},
                {"base_seed", 5},
                {"launch_timeout_ms", 3000},
                {"timing", {{"min_samples", 5}, {"min_time_s", 0.01}, {"max_time_s", 0.2}}}}}};
  return w.evaluate(req);
}

}  // namespace

TEST(WorkerReferenceChecks, AReferenceWritingItsInputIsTheConfigsError) {
  auto worker = kopt::testing::start_worker_or_skip();
  const json op =
      snapshot(scale_add("  if (i < n) { out[i] = 2.0f * x[i] + y[i]; ((float*)x)[i] = 0.0f; }"));
  const auto rep =
      run(*worker, op, json::array({{{"role", "good"}, {"candidate", good_candidate()}}}));
  ASSERT_TRUE(rep.results.count("w"));
  ASSERT_TRUE(rep.results.at("w").count("good"));
  const auto& r = rep.results.at("w").at("good");
  EXPECT_EQ(r.status, kopt::protocol::outcome::reference_failed) << r.message;
  EXPECT_NE(r.message.find("the reference modified input 'x'"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("operator config is wrong"), std::string::npos) << r.message;
}

TEST(WorkerReferenceChecks, APlanThatDoesNotMatchTheKernelIsALaunchErrorNotACrash) {
  auto worker = kopt::testing::start_worker_or_skip();
  const json op = snapshot(scale_add("  if (i < n) out[i] = 2.0f * x[i] + y[i];"));
  // n first, as in the replay corpus's answer 19.
  const json swapped = {
      {{"int", "n"}, {"type", "int32"}}, {{"tensor", "x"}}, {{"tensor", "y"}}, {{"tensor", "out"}}};
  const auto rep = run(*worker, op,
                       json::array({{{"role", "swapped"}, {"candidate", good_candidate(swapped)}},
                                    {{"role", "good"}, {"candidate", good_candidate()}}}));
  ASSERT_TRUE(rep.results.count("w"));
  EXPECT_EQ(rep.results.at("w").at("swapped").status, kopt::protocol::outcome::launch_error)
      << rep.results.at("w").at("swapped").message;
  EXPECT_EQ(rep.results.at("w").at("good").status, kopt::protocol::outcome::ok) << rep.results.at("w").at("good").message;
  EXPECT_EQ(rep.restarts, 0);
}
