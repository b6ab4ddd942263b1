// The interleaved comparison's noise against back-to-back timing of the same
// pair (issue 24, item 3), on a GPU. Two byte-identical kernels (the true time
// ratio is 1) are compared R times in each mode through the real worker:
//   interleaved   one request, settings.interleave = true (A B B A sample by sample);
//   back_to_back  one request, interleave = false (A's whole timing loop, then B's).
// Per mode it prints the spread of median(B)/median(A) and how often the
// campaign's promotion rule (bootstrap 95 % interval of the median ratio, the
// one agent/campaign/promotion uses) would call the identical pair different.
// A benchmark, not a test: it prints figures and asserts nothing.
//
//   bench_compare_noise [--worker PATH] [--reps 12] [--n 2097152,33554432] [--json]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/operator.hpp"
#include "core/stats.hpp"
#include "runner/worker_client.hpp"

namespace {
using json = nlohmann::json;

json scale_add_operator(const std::vector<long long>& sizes) {
  json workloads = json::array();
  for (const auto n : sizes)
    workloads.push_back({{"id", fmt::format("n{}", n)}, {"axes", {{"n", n}}}, {"weight", 1}});
  return {
      {"name", "scale_add"},
      {"op_type", "elementwise"},
      {"description", "out = 2 x + y"},
      {"axes", {{"n", {{"type", "var"}}}}},
      {"inputs",
       {{"x",
         {{"shape", {"n"}},
          {"dtype", "float32"},
          {"generator", {{"kind", "uniform"}, {"low", -1}, {"high", 1}}}}},
        {"y",
         {{"shape", {"n"}},
          {"dtype", "float32"},
          {"generator", {{"kind", "uniform"}, {"low", -1}, {"high", 1}}}}}}},
      {"outputs", {{"out", {{"shape", {"n"}}, {"dtype", "float32"}}}}},
      {"tolerance", {{"atol", 1e-5}, {"rtol", 1e-5}}},
      {"roofline", {{"flops", "2 * n"}, {"flop_unit", "fp32"}}},
      {"workloads", workloads},
      {"reference",
       {{"source",
         "extern \"C\" __global__ void ref(const float* x, const float* y, float* out, int n) {\n"
         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) out[i] = 2.0f * x[i] + y[i];\n}\n"},
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

// The same kernel; `tag` only changes a comment, so the two subjects are
// compiled separately (no cache sharing) but run identical machine code.
json kernel(const std::string& tag) {
  return {
      {"source",
       "// " + tag +
           "\nextern \"C\" __global__ void k(const float* x, const float* y, float* out, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < n) out[i] = 2.0f * x[i] + y[i];\n}\n"},
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

struct mode_stats {
  std::vector<double> ratios;  // median(B) / median(A)
  int called_different = 0;
  std::vector<double> ci_width;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Noise of the interleaved comparison against back-to-back timing, on identical kernels"};
  std::string worker = std::getenv("KOPT_WORKER") ? std::getenv("KOPT_WORKER") : "kopt-worker";
  int reps = 12;
  std::vector<long long> sizes = {2097152, 33554432};
  bool as_json = false;
  app.add_option("--worker", worker, "kopt-worker executable (default $KOPT_WORKER)");
  app.add_option("--reps", reps, "comparisons per mode and size")->check(CLI::Range(2, 1000));
  app.add_option("--n", sizes, "element counts, one workload each")->delimiter(',');
  app.add_flag("--json", as_json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  auto loaded =
      kopt::config::load_operator_text(scale_add_operator(sizes).dump(), "<compare_noise>", ".");
  if (!loaded.ok()) {
    for (const auto& d : loaded.diagnostics) std::cerr << d.to_string() << '\n';
    return 2;
  }
  const json op = loaded.op->snapshot();
  kopt::runner::worker_options wo;
  wo.worker_exe = worker;
  wo.silence_timeout = std::chrono::seconds(120);
  kopt::runner::worker_client w(wo);
  try {
    w.start();
  } catch (const std::exception& e) {
    std::cerr << "bench_compare_noise: the worker cannot run: " << e.what() << '\n';
    return 1;
  }
  std::vector<std::string> wl;
  for (const auto n : sizes) wl.push_back(fmt::format("n{}", n));
  // Alternate the modes rep by rep, so slow drifts of the machine hit both.
  std::map<std::string, std::map<std::string, mode_stats>> st;  // mode -> workload -> stats
  for (int r = 0; r < reps; ++r) {
    for (const bool inter : {true, false}) {
      const std::string mode = inter ? "interleaved" : "back_to_back";
      json subjects = json::array(
          {{{"role", "incumbent"}, {"candidate", kernel(fmt::format("A {} {}", mode, r))}},
           {{"role", "challenger"}, {"candidate", kernel(fmt::format("B {} {}", mode, r))}}});
      json req = {{"operator", op},
                  {"subjects", subjects},
                  {"workloads", wl},
                  {"settings",
                   {{"seeds", 1},
                    {"base_seed", 1000 + r},
                    {"launch_timeout_ms", 3000},
                    {"interleave", inter},
                    {"timing", {{"min_samples", 30}, {"min_time_s", 0.05}, {"max_time_s", 0.5}}}}}};
      kopt::runner::evaluation_report rep;
      try {
        rep = w.evaluate(req);
      } catch (const std::exception& e) {
        std::cerr << "bench_compare_noise: " << mode << " rep " << r << ": " << e.what() << '\n';
        return 1;
      }
      for (const auto& id : wl) {
        const auto& a = rep.results.at(id).at("incumbent");
        const auto& b = rep.results.at(id).at("challenger");
        if (a.status != kopt::protocol::outcome::ok || b.status != kopt::protocol::outcome::ok) {
          std::cerr << "bench_compare_noise: " << id << " not ok: " << a.message << " / "
                    << b.message << '\n';
          return 1;
        }
        const auto sa = a.detail.at("timing").at("samples_ns").get<std::vector<double>>();
        const auto sb = b.detail.at("timing").at("samples_ns").get<std::vector<double>>();
        const auto ci = kopt::harness::bootstrap_median_ratio(sa, sb);
        auto& s = st[mode][id];
        s.ratios.push_back(median_of(sb) / median_of(sa));
        s.ci_width.push_back(ci.high - ci.low);
        if (ci.b_faster() || ci.b_slower()) ++s.called_different;
      }
    }
  }
  json out = {
      {"reps", reps}, {"device", w.start().device.value("name", "?")}, {"modes", json::object()}};
  for (const auto& [mode, per] : st)
    for (const auto& [id, s] : per) {
      double sum = 0, sq = 0, worst = 0;
      for (const double x : s.ratios) {
        const double l = std::log(x);
        sum += l;
        sq += l * l;
        worst = std::max(worst, std::abs(x - 1.0));
      }
      const double n = static_cast<double>(s.ratios.size());
      const double mean = sum / n, sd = std::sqrt(std::max(0.0, sq / n - mean * mean));
      out["modes"][mode][id] = {{"geomean_ratio", std::exp(mean)},
                                {"sd_log_ratio", sd},
                                {"worst_abs_deviation", worst},
                                {"called_different", s.called_different},
                                {"median_ci_width", median_of(s.ci_width)},
                                {"ratios", s.ratios}};
      if (!as_json)
        std::cout << fmt::format(
            "{:<13} {:<10} geomean ratio {:.4f}  sd(log) {:.4f}  worst |r-1| {:.4f}  "
            "called different {}/{}  median 95% CI width {:.4f}\n",
            mode, id, std::exp(mean), sd, worst, s.called_different, s.ratios.size(),
            median_of(s.ci_width));
    }
  if (as_json) std::cout << out.dump(1) << '\n';
  return 0;
}
