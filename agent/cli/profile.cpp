// `kopt profile CONFIG --candidate FILE [--full]`: evaluates like `kopt eval`
// (correctness first: counters of a wrong kernel are worthless) and then
// collects hardware counters in an untimed pass per workload, and prints the
// counters with the bottleneck diagnosis drawn from them.
#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/eval_support.hpp"
#include "cli/exit_codes.hpp"
#include "common/error.hpp"
#include "config/operator.hpp"

namespace kopt::cli {

namespace {

using json = nlohmann::json;

std::string human(double v) {
  const double a = std::abs(v);
  if (a >= 1e12) return fmt::format("{:.3f}T", v / 1e12);
  if (a >= 1e9) return fmt::format("{:.3f}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.3f}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.4g}", v);
}

std::string render_profile(const eval_outcome& out) {
  if (!out.gpu) return out.render();
  std::string s = fmt::format("GPU: {} (driver {}, {} SMs)\n", out.report.device.value("name", ""),
                              out.report.device.value("driver_version", ""),
                              out.report.device.value("sm_count", 0));
  for (const auto& [role, sum] : out.summaries) {
    s += "\n" + runner::render_table(sum);
    for (const auto& r : sum.rows) {
      s += fmt::format("\n{} / {}: ", role, r.workload);
      if (r.status != protocol::outcome::ok) {
        s += "not profiled (" + std::string(protocol::to_string(r.status)) + ")\n";
        continue;
      }
      const json& c = r.counters;
      if (c.is_null()) {
        s += "no counters\n";
      } else if (c.contains("error")) {
        s += "counters failed: " + c.value("error", "") + "\n";
      } else {
        s += fmt::format("{} pass(es), {}, {:.1f} ms, outputs after profiling {}\n",
                         c.value("passes", 0), c.value("mode", ""), c.value("wall_ms", 0.0),
                         c.value("outputs_verified", false) ? "verified" : "NOT verified");
        // Named, not a temporary: items() refers to the json it is called on,
        // and a temporary from value() dies before the loop runs (C++20 does
        // not extend it), which crashed `kopt profile` on large metric maps.
        const json metrics = c.value("metrics", json::object());
        for (const auto& [k, v] : metrics.items())
          if (v.is_number()) s += fmt::format("    {:<66} {:>14}\n", k, human(v.get<double>()));
      }
      const json& d = r.diagnosis;
      if (!d.is_null()) {
        s += fmt::format("  diagnosis: {}\n", d.value("primary", "unknown"));
        for (const auto& f : d.value("findings", json::array()))
          s += fmt::format("    - {} ({:.2f}): {}\n", f.value("class", ""),
                           f.value("severity", 0.0), f.value("summary", ""));
      }
    }
  }
  for (const auto& e : out.report.events) s += "event: " + e + "\n";
  if (out.campaign_id) s += fmt::format("\nstored as campaign {}\n", *out.campaign_id);
  return s;
}

}  // namespace

void register_profile(CLI::App& app, context& ctx, exit_status& status) {
  struct opts {
    std::string config, candidate;
    std::vector<std::string> workloads;
    bool full = false, json = false, no_store = false;
    std::string metrics;
    eval_options run;
  };
  auto o = std::make_shared<opts>();
  o->run.seeds = 1;
  o->run.min_time_s = 0.05;
  o->run.max_time_s = 0.5;
  auto* cmd = app.add_subcommand(
      "profile",
      "hardware counters (CUPTI Range Profiler) and bottleneck diagnosis of a candidate");
  cmd->add_option("config", o->config, "operator config (JSON)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option(
         "--candidate", o->candidate,
         "candidate file; default: the config's seed, else its baseline, else the reference")
      ->check(CLI::ExistingFile);
  cmd->add_option("--workloads", o->workloads, "only these workload ids (default: all)")
      ->delimiter(',');
  cmd->add_flag("--full", o->full,
                "the full speed-of-light metric set (about 12 replay passes on GH100) "
                "instead of the cheap default (2 passes)");
  cmd->add_option("--metrics", o->metrics,
                  "comma-separated CUPTI metric names instead of a tier "
                  "(checked against the chip; see `kopt-worker metrics --list`)");
  cmd->add_flag("--json", o->json, "print the result as JSON on stdout");
  cmd->add_flag("--no-store", o->no_store, "do not write the result to the database");
  add_eval_options(*cmd, o->run);
  cmd->footer(R"(Counters come from a separate pass after timing, never from a timed run.
Examples:
  kopt profile configs/examples/rmsnorm.json --workloads t2048_h4096
  kopt profile configs/examples/rmsnorm.json --candidate my_kernel.json --full --json
Needs a GPU; without one it compile-checks and exits with code 5.)");
  cmd->callback([o, &ctx, &status] {
    auto loaded = config::load_operator_file(o->config);
    for (const auto& d : loaded.diagnostics) std::cerr << d.to_string() << '\n';
    if (!loaded.ok()) {
      status.code = exit_invalid;
      return;
    }
    const config::operator_config& op = *loaded.op;
    std::vector<runner::subject_spec> subjects;
    if (!o->candidate.empty()) {
      auto subject = load_candidate_subject(o->candidate, op);
      if (!subject) {
        status.code = exit_invalid;
        return;
      }
      subjects.push_back(std::move(*subject));
    } else if (op.seed) {
      subjects.push_back(
          {"seed", store::candidate_origin::seed, op.seed->to_json(), {}, {}, {}, {}});
    } else if (op.baseline) {
      subjects.push_back(
          {"baseline", store::candidate_origin::baseline, op.baseline->to_json(), {}, {}, {}, {}});
    } else {
      o->run.time_reference = true;
    }
    const std::vector<std::string> wl = resolve_workloads(op, o->workloads, o->config);
    o->run.counters = o->full ? "full" : "default";
    if (!o->metrics.empty()) {
      std::stringstream ss(o->metrics);
      for (std::string m; std::getline(ss, m, ',');)
        if (!m.empty()) o->run.metrics.push_back(m);
    }
    eval_outcome out =
        run_evaluation(op, subjects, wl, o->run, o->no_store ? nullptr : &ctx, "full");
    std::cout << (o->json ? out.to_json().dump(2) + "\n" : render_profile(out));
    status.code = out.exit_code;
  });
}

}  // namespace kopt::cli
