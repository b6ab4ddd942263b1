// Correct kernels pass on every dtype the worker generates and checks: the
// generators, the poison values, the host decoding and the comparison all
// have to agree for a correct copy to pass and a wrong one to fail.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/operator.hpp"
#include "gpu_test_support.hpp"

namespace {

using json = nlohmann::json;

struct dtype_case {
  std::string dtype;
  std::string ctype;  // an integer type of the same size, for a bitwise copy
  json generator;
};

json copy_operator(const dtype_case& c) {
  const std::string ref = fmt::format(
      "extern \"C\" __global__ void ref(const {0}* x, {0}* out, long long n) {{\n"
      "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
      "  if (i < n) out[i] = x[i];\n}}\n",
      c.ctype);
  return {{"name", "copy_" + c.dtype},
          {"op_type", "elementwise"},
          {"axes", {{"rows", {{"type", "var"}}}, {"cols", {{"type", "const"}, {"value", 1000}}}}},
          {"inputs", {{"x", {{"shape", {"rows", "cols"}}, {"dtype", c.dtype}, {"generator", c.generator}}}}},
          {"outputs", {{"out", {{"shape", {"rows", "cols"}}, {"dtype", c.dtype}}}}},
          {"tolerance", {{"atol", 0}, {"rtol", 0}}},
          {"roofline", {{"flops", "0"}, {"flop_unit", "fp32"}}},
          {"workloads", {{{"id", "r3"}, {"axes", {{"rows", 3}}}, {"weight", 1}},
                         {{"id", "r4099"}, {"axes", {{"rows", 4099}}}, {"weight", 2}}}},
          {"reference",
           {{"source", ref},
            {"launches", {{{"kernel", "ref"}, {"grid", {"ceil_div(rows * cols, 128)"}}, {"block", {128}},
                           {"args", {{{"tensor", "x"}}, {{"tensor", "out"}}, {{"int", "rows * cols"}, {"type", "int64"}}}}}}}}}};
}

json grid_stride_copy(const dtype_case& c, bool skip_last) {
  const std::string src = fmt::format(
      "extern \"C\" __global__ void copy(const {0}* __restrict__ x, {0}* __restrict__ out, long long n) {{\n"
      "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n{1}; i += (long long)gridDim.x * blockDim.x)\n"
      "    out[i] = x[i];\n}}\n",
      c.ctype, skip_last ? " - 1" : "");
  return {{"source", src},
          {"launches", {{{"kernel", "copy"}, {"grid", {"min(ceil_div(rows * cols, 256), 1024)"}}, {"block", {256}},
                         {"args", {{{"tensor", "x"}}, {{"tensor", "out"}}, {{"int", "rows * cols"}, {"type", "int64"}}}}}}}};
}

TEST(WorkerDtypes, CorrectKernelsPassAndWrongOnesFailOnEveryDtype) {
  auto worker = kopt::testing::start_worker_or_skip();
  const json normal = {{"kind", "normal"}, {"mean", 0}, {"stddev", 1}};
  const std::vector<dtype_case> cases = {
      {"float64", "unsigned long long", normal},
      {"float32", "unsigned int", normal},
      {"float16", "unsigned short", normal},
      {"bfloat16", "unsigned short", normal},
      {"float8_e4m3fn", "unsigned char", {{"kind", "normal"}, {"mean", 0}, {"stddev", 100}}},
      {"float8_e5m2", "unsigned char", {{"kind", "uniform"}, {"low", -1000}, {"high", 1000}}},
      {"int64", "long long", {{"kind", "int_range"}, {"low", "-5000000000"}, {"high", "5000000000"}}},
      {"int32", "int", {{"kind", "int_range"}, {"low", "-100000"}, {"high", "100000"}}},
      {"int16", "short", {{"kind", "int_range"}, {"low", "-30000"}, {"high", "30000"}}},
      {"int8", "signed char", {{"kind", "int_range"}, {"low", "-128"}, {"high", "128"}}},
      {"uint8", "unsigned char", {{"kind", "int_range"}, {"low", "0"}, {"high", "256"}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dtype);
    auto loaded = kopt::config::load_operator_text(copy_operator(c).dump(), "<" + c.dtype + ">", ".");
    ASSERT_TRUE(loaded.ok()) << (loaded.diagnostics.empty() ? "" : loaded.diagnostics.front().to_string());
    json req = {{"operator", loaded.op->snapshot()},
                {"subjects", json::array({{{"role", "good"}, {"candidate", grid_stride_copy(c, false)}},
                                          {{"role", "misses_last"}, {"candidate", grid_stride_copy(c, true)}}})},
                {"workloads", {"r3", "r4099"}},
                {"settings", {{"seeds", 3}, {"timing", {{"min_samples", 10}, {"min_time_s", 0.01}, {"max_time_s", 0.2}}}}}};
    const auto rep = worker->evaluate(req);
    for (const auto& w : {"r3", "r4099"}) {
      SCOPED_TRACE(w);
      const auto& res = rep.results.at(w);
      EXPECT_EQ(res.at("good").status, kopt::protocol::outcome::ok)
          << res.at("good").message << res.at("good").detail.dump();
      ASSERT_EQ(res.at("misses_last").status, kopt::protocol::outcome::incorrect)
          << res.at("misses_last").message;
      // The missed element is reported with its index.
      const auto& first = res.at("misses_last").detail.at("correctness").at(0).at("outputs").at("out").at("first_failures");
      ASSERT_FALSE(first.empty());
    }
  }
}

}  // namespace
