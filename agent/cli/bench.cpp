// `kopt bench [--suite DIR] [--ops a,b]`: evaluates the reference and the
// baseline of every operator of a benchmark suite (a folder of operator
// configs, configs/bench by default) on all their workloads through the
// worker, and reports per operator and for the whole suite: the
// importance-weighted fraction of speed of light of reference and baseline,
// the speed-up of the baseline over the reference (weighted geometric mean),
// the launch-bound shapes and the worst shape. Without a GPU it compile-checks
// every selected operator and exits with code 5, like `kopt eval`.
//
// Launch-bound: a shape is launch-bound when the faster of its reference and
// baseline runs in less than --launch-bound-us (default 5 us, about twice the
// shortest kernel duration CUPTI reports for a trivial kernel on an H100 /
// H200): at that size the fixed cost of a launch, not the kernel's work,
// decides the time, so the shape's SOL fraction says little about the kernel.
//
// The suite total weights each operator by the sum of its workload weights
// (in configs/bench: the operator's share of production GPU time), so it is
// the weighted mean over all workloads of all operators.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>

#include "cli/commands.hpp"
#include "cli/eval_support.hpp"
#include "cli/exit_codes.hpp"
#include "common/data_paths.hpp"
#include "common/error.hpp"
#include "config/operator.hpp"


namespace kopt::cli {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct bench_op {
  std::string name;    // config file stem (what --ops selects)
  std::string config;  // path
  std::string op_name;
  double weight = 0;  // sum of the workload weights
  std::size_t workloads = 0;
  std::string status;  // ok, invalid_config, failed, needs_gpu
  std::string message;
  std::optional<runner::evaluation_summary> reference, baseline;
  std::optional<double> speedup;  // baseline over reference, weighted geomean
  std::vector<std::string> launch_bound;
  std::string worst_workload;  // lowest SOL fraction of the best kernel
  std::string worst_role;
  std::optional<double> worst_sol;
  std::vector<compile_check> compile_checks;
};

// The configs of a suite: every *.json directly in the folder, by name.
std::vector<fs::path> discover(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string default_suite() {
  if (fs::is_directory("configs/bench")) return "configs/bench";
  if (const auto d = data::find_dir(data::kind::bench); !d.empty()) return d.string();
  return "configs/bench";
}

json opt_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json summary_json(const std::optional<runner::evaluation_summary>& s) {
  if (!s) return nullptr;
  return {{"weighted_sol_fraction", s->weighted_sol_fraction},
          {"weighted_attainable_sol_fraction", s->weighted_attainable_sol_fraction},
          {"ok", s->ok},
          {"status", s->overall_status},
          {"workloads", s->to_json().at("rows")}};
}

// Fills the per-operator figures from the summaries of a GPU run.
void conclude(bench_op& b, const config::operator_config& op, double launch_bound_ns) {
  const runner::evaluation_summary* best = b.baseline ? &*b.baseline : b.reference ? &*b.reference : nullptr;
  if (b.baseline) b.speedup = b.baseline->weighted_speedup_vs_reference;
  // The faster kernel of the shape decides. Its row's flag is kopt's one
  // launch-bound rule (harness::is_launch_bound against the measured launch
  // floor); a --launch-bound-us threshold replaces it only when given.
  for (const auto& w : op.workloads) {
    const runner::workload_row* fastest = nullptr;
    for (const auto* s : {b.reference ? &*b.reference : nullptr, b.baseline ? &*b.baseline : nullptr}) {
      if (!s) continue;
      for (const auto& r : s->rows)
        if (r.workload == w.id && r.status == protocol::outcome::ok && r.median_ns > 0 &&
            (!fastest || r.median_ns < fastest->median_ns))
          fastest = &r;
    }
    if (!fastest) continue;
    const bool lb =
        launch_bound_ns > 0 ? fastest->median_ns < launch_bound_ns : fastest->launch_bound;
    if (lb) b.launch_bound.push_back(w.id);
  }
  if (best) {
    b.worst_role = best->role;
    for (const auto& r : best->rows) {
      const double f = r.status == protocol::outcome::ok && r.sol_fraction ? *r.sol_fraction : 0.0;
      if (!b.worst_sol || f < *b.worst_sol) {
        b.worst_sol = f;
        b.worst_workload = r.workload;
      }
    }
  }
  b.status = "ok";
  for (const auto* s : {b.reference ? &*b.reference : nullptr, b.baseline ? &*b.baseline : nullptr})
    if (s && s->overall_status != protocol::outcome::ok) {
      b.status = "failed";
      b.message += fmt::format("{}{}: {}", b.message.empty() ? "" : "; ", s->role,
                               protocol::to_string(s->overall_status));
    }
}

struct totals {
  double weight = 0;
  std::optional<double> reference_sol, baseline_sol, speedup;
  // The same with attainable SOL = max(T_roofline, launch floor) / T.
  std::optional<double> reference_att, baseline_att;
  std::size_t launch_bound = 0, workloads = 0;
};

totals suite_totals(const std::vector<bench_op>& ops) {
  totals t;
  double wr = 0, sr = 0, wb = 0, sb = 0, ws = 0, ls = 0, ar = 0, ab = 0;
  for (const auto& b : ops) {
    t.weight += b.weight;
    t.launch_bound += b.launch_bound.size();
    t.workloads += b.workloads;
    if (b.reference) {
      wr += b.weight;
      sr += b.weight * b.reference->weighted_sol_fraction;
      ar += b.weight * b.reference->weighted_attainable_sol_fraction;
    }
    if (b.baseline) {
      wb += b.weight;
      sb += b.weight * b.baseline->weighted_sol_fraction;
      ab += b.weight * b.baseline->weighted_attainable_sol_fraction;
    }
    if (b.speedup && *b.speedup > 0) { ws += b.weight; ls += b.weight * std::log(*b.speedup); }
  }
  if (wr > 0) t.reference_sol = sr / wr;
  if (wb > 0) t.baseline_sol = sb / wb;
  if (wr > 0) t.reference_att = ar / wr;
  if (wb > 0) t.baseline_att = ab / wb;
  if (ws > 0) t.speedup = std::exp(ls / ws);
  return t;
}

std::string pct(const std::optional<double>& v) { return v ? fmt::format("{:.1f} %", 100 * *v) : "-"; }

std::string render(const std::vector<bench_op>& ops, const totals& t, const std::string& device) {
  std::string out;
  if (!device.empty()) out += "GPU: " + device + "\n\n";
  out += fmt::format("{:<30} {:>9} {:>5} {:>9} {:>9} {:>8} {:>6}  {}\n", "operator", "weight", "wl", "ref SOL",
                     "base SOL", "speedup", "launch", "worst shape (SOL of best kernel)");
  for (const auto& b : ops) {
    const std::optional<double> rs =
        b.reference ? std::optional<double>(b.reference->weighted_sol_fraction) : std::nullopt;
    const std::optional<double> bs =
        b.baseline ? std::optional<double>(b.baseline->weighted_sol_fraction) : std::nullopt;
    out += fmt::format("{:<30} {:>9.5f} {:>5} {:>9} {:>9} {:>8} {:>6}  {}", b.name, b.weight, b.workloads,
                       pct(rs), pct(bs), b.speedup ? fmt::format("{:.2f}x", *b.speedup) : "-",
                       b.launch_bound.size(),
                       b.worst_sol ? fmt::format("{} ({:.1f} %, {})", b.worst_workload, 100 * *b.worst_sol,
                                                 b.worst_role)
                                   : "-");
    if (b.status != "ok") out += "  [" + b.status + (b.message.empty() ? "" : ": " + b.message) + "]";
    out += "\n";
  }
  out += fmt::format("{:<30} {:>9.5f} {:>5} {:>9} {:>9} {:>8} {:>6}\n", "suite total", t.weight, t.workloads,
                     pct(t.reference_sol), pct(t.baseline_sol),
                     t.speedup ? fmt::format("{:.2f}x", *t.speedup) : "-", t.launch_bound);
  out += fmt::format(
      "attainable SOL (max(T_roofline, measured launch floor) / T): reference {}, baseline {}\n",
      pct(t.reference_att), pct(t.baseline_att));
  out += "SOL: importance-weighted fraction of speed of light (failed shapes count 0); speedup: baseline over\n"
         "reference, weighted geometric mean; launch: shapes whose faster kernel runs under the launch-bound limit.\n";
  for (const auto& b : ops)
    if (!b.launch_bound.empty())
      out += fmt::format("launch-bound in {}: {}\n", b.name, fmt::join(b.launch_bound, " "));
  return out;
}

json bench_to_json(const std::vector<bench_op>& ops, const totals& t, bool gpu, const std::string& no_gpu,
             const json& device, double launch_bound_us) {
  json j = {{"gpu", gpu},
            {"launch_bound_rule",
             launch_bound_us > 0
                 ? fmt::format("median < {} us", launch_bound_us)
                 : std::string("median < 2 x measured launch floor (10 us without one)")}};
  if (launch_bound_us > 0) j["launch_bound_us"] = launch_bound_us;
  if (!gpu) j["needs_gpu"] = "correctness and timing need a GPU: " + no_gpu;
  if (gpu) j["device"] = device;
  json arr = json::array();
  for (const auto& b : ops) {
    json o = {{"name", b.name},
              {"config", b.config},
              {"operator", b.op_name},
              {"weight", b.weight},
              {"workloads", b.workloads},
              {"status", b.status},
              {"message", b.message}};
    if (gpu) {
      o["reference"] = summary_json(b.reference);
      o["baseline"] = summary_json(b.baseline);
      o["speedup_baseline_vs_reference"] = opt_json(b.speedup);
      o["launch_bound"] = b.launch_bound;
      o["worst"] = b.worst_sol ? json{{"workload", b.worst_workload}, {"role", b.worst_role},
                                      {"sol_fraction", *b.worst_sol}}
                               : json(nullptr);
    } else {
      json cc = json::array();
      for (const auto& c : b.compile_checks)
        cc.push_back({{"role", c.role}, {"status", c.status}, {"log", c.log.substr(0, 2000)}});
      o["compile_checks"] = cc;
    }
    arr.push_back(o);
  }
  j["operators"] = arr;
  j["total"] = {{"weight", t.weight},
                {"workloads", t.workloads},
                {"reference_sol_fraction", opt_json(t.reference_sol)},
                {"baseline_sol_fraction", opt_json(t.baseline_sol)},
                {"reference_attainable_sol_fraction", opt_json(t.reference_att)},
                {"baseline_attainable_sol_fraction", opt_json(t.baseline_att)},
                {"speedup_baseline_vs_reference", opt_json(t.speedup)},
                {"launch_bound", t.launch_bound}};
  return j;
}

}  // namespace

void register_bench(CLI::App& app, context& ctx, exit_status& status) {
  struct opts {
    std::string suite;
    std::vector<std::string> ops;
    bool json = false;
    bool no_store = false;
    bool list = false;
    double launch_bound_us = 0;  // 0: kopt's rule against the measured launch floor
    eval_options run;
  };
  auto o = std::make_shared<opts>();
  auto* cmd = app.add_subcommand(
      "bench", "evaluate reference and baseline of every operator of a benchmark suite");
  cmd->add_option("--suite", o->suite, "folder of operator configs (default: configs/bench)");
  cmd->add_option("--ops", o->ops, "only these operators (config file names without .json)")->delimiter(',');
  cmd->add_flag("--json", o->json, "print the result as JSON on stdout");
  cmd->add_flag("--list", o->list, "list the selected operators and their workloads; run nothing");
  cmd->add_flag("--no-store", o->no_store, "do not write the results to the database");
  cmd->add_option("--launch-bound-us", o->launch_bound_us,
                  "a shape whose faster kernel runs under this many microseconds is launch-bound "
                  "(default: under twice the worker's measured launch floor, or 10 us without one)")
      ->check(CLI::PositiveNumber);
  add_eval_options(*cmd, o->run);
  cmd->footer(R"(Reports per operator: importance-weighted fraction of speed of light of the reference
and of the baseline, speed-up of the baseline over the reference (weighted geometric
mean), launch-bound shapes and the worst shape; then the suite total, where each
operator counts with the sum of its workload weights.

Examples:
  kopt bench                                   # configs/bench, every operator
  kopt bench --ops rms_norm,silu_and_mul --json
  kopt bench --suite configs/bench --list
Needs a GPU for correctness and timing; without one it compile-checks every selected
operator and exits with code 5. Exit code 1 when a config is invalid or a kernel fails.)");
  cmd->callback([o, &ctx, &status] {
    const std::string suite = o->suite.empty() ? default_suite() : o->suite;
    if (!fs::is_directory(suite))
      throw kopt::config_error(fmt::format("--suite: \"{}\" is not a folder", suite));
    std::vector<fs::path> paths = discover(suite);
    if (paths.empty()) throw kopt::config_error(fmt::format("--suite: no *.json configs in \"{}\"", suite));
    if (!o->ops.empty()) {
      std::set<std::string> have;
      for (const auto& p : paths) have.insert(p.stem().string());
      for (const auto& n : o->ops)
        if (!have.count(n))
          throw kopt::config_error(fmt::format("--ops: no operator \"{}\" in {} (have: {})", n, suite,
                                               fmt::join(have, ", ")));
      const std::set<std::string> want(o->ops.begin(), o->ops.end());
      std::erase_if(paths, [&](const fs::path& p) { return !want.count(p.stem().string()); });
    }

    // Steps: every workload of every selected operator (an invalid config
    // counts none).
    std::size_t total_workloads = 0;
    if (!o->list && !o->json)
      for (const auto& p : paths)
        if (auto l = config::load_operator_file(p.string()); l.ok())
          total_workloads += l.op->workloads.size();
    progress_meter progress(!o->list && !o->json, total_workloads);
    std::size_t op_index = 0;
    std::vector<bench_op> results;
    bool gpu = true;
    std::string no_gpu_reason;
    json device;
    int code = exit_ok;
    for (const auto& p : paths) {
      bench_op b;
      b.name = p.stem().string();
      ++op_index;
      b.config = p.string();
      auto loaded = config::load_operator_file(p.string());
      for (const auto& d : loaded.diagnostics)
        if (d.level == config::diagnostic::severity::error) std::cerr << d.to_string() << '\n';
      if (!loaded.ok()) {
        b.status = "invalid_config";
        b.message = "the config does not validate (see kopt validate)";
        code = exit_invalid;
        results.push_back(std::move(b));
        continue;
      }
      const config::operator_config& op = *loaded.op;
      b.op_name = op.name;
      b.workloads = op.workloads.size();
      for (const auto& w : op.workloads) b.weight += w.weight;
      if (o->list) {
        b.status = "listed";
        std::cout << fmt::format("{:<30} {:>3} workloads, weight {:.6g}{}\n", b.name, b.workloads, b.weight,
                                 op.baseline ? ", baseline" : "");
        results.push_back(std::move(b));
        continue;
      }
      std::vector<runner::subject_spec> subjects;
      if (op.baseline)
        subjects.push_back(
            {"baseline", store::candidate_origin::baseline, op.baseline->to_json(), {}, {}, {}, {}});
      std::vector<std::string> wl;
      for (const auto& w : op.workloads) wl.push_back(w.id);
      eval_options run = o->run;
      run.time_reference = true;
      spdlog::info("bench: {} ({} workloads)", b.name, wl.size());
      progress.phase(
          fmt::format("[{}/{}] {} ({} workloads)", op_index, paths.size(), b.name, wl.size()));
      // The stage names how deep an evaluation went (the store allows
      // screen/full/verify/compare); a bench run is a full evaluation, and
      // that it came from `kopt bench` is the campaign's provider.
      eval_outcome out = run_evaluation(op, subjects, wl, run, o->no_store ? nullptr : &ctx,
                                        "full", std::nullopt, std::nullopt, &progress);
      if (!out.gpu) progress.note(fmt::format("compile checks done"));
      if (!out.gpu) {
        gpu = false;
        no_gpu_reason = out.no_gpu_reason;
        b.status = "needs_gpu";
        b.compile_checks = out.compile_checks;
        for (const auto& c : out.compile_checks)
          if (c.status != "ok") {
            b.status = "failed";
            b.message += fmt::format("{}{} does not compile: {}", b.message.empty() ? "" : "; ", c.role, c.status);
            code = exit_invalid;
          }
        results.push_back(std::move(b));
        continue;
      }
      device = out.report.device;
      if (auto it = out.summaries.find("reference"); it != out.summaries.end()) b.reference = it->second;
      if (auto it = out.summaries.find("baseline"); it != out.summaries.end()) b.baseline = it->second;
      conclude(b, op, o->launch_bound_us * 1e3);
      if (b.status != "ok") code = exit_invalid;
      results.push_back(std::move(b));
    }
    if (o->list) {
      status.code = code;
      return;
    }
    progress.finish();
    const totals t = suite_totals(results);
    if (o->json) {
      std::cout << bench_to_json(results, t, gpu, no_gpu_reason, device, o->launch_bound_us).dump(2) << '\n';
    } else if (gpu) {
      std::cout << render(results, t,
                          device.is_object() ? device.value("name", std::string()) : std::string());
    } else {
      std::cout << "Compile checks (" << o->run.arch << "):\n";
      for (const auto& b : results) {
        std::cout << fmt::format("  {:<30} {}", b.name, b.status == "needs_gpu" ? "ok" : b.status);
        for (const auto& c : b.compile_checks) std::cout << fmt::format("  {} {}", c.role, c.status);
        std::cout << '\n';
        if (!b.message.empty()) std::cout << "    " << b.message << '\n';
      }
      std::cout << "\nNot done: correctness checks and timing need a GPU.\n  " << no_gpu_reason << '\n';
    }
    // No GPU: exit 5 unless something is already known to be wrong.
    status.code = code != exit_ok ? code : gpu ? exit_ok : exit_no_gpu;
  });
}

}  // namespace kopt::cli
