// `kopt eval CONFIG [--candidate FILE]`: evaluates one candidate (or, without
// --candidate, the config's baseline and seed) against the reference on the
// operator's workloads through a kopt-worker, prints a table per workload
// with importance-weighted totals, and stores everything. Without a GPU it
// still does what it can (validate, compile-check for the target
// architecture) and says plainly what needed a GPU (exit code 5).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/eval_support.hpp"
#include "cli/exit_codes.hpp"
#include "common/error.hpp"
#include "config/operator.hpp"

namespace kopt::cli {

void register_eval(CLI::App& app, context& ctx, exit_status& status) {
  struct opts {
    std::string config;
    std::string candidate;
    std::vector<std::string> workloads;
    bool json = false;
    bool no_store = false;
    eval_options run;
  };
  auto o = std::make_shared<opts>();
  auto* cmd =
      app.add_subcommand("eval", "evaluate a candidate against the reference on every workload");
  cmd->add_option("config", o->config, "operator config (JSON)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option(
         "--candidate", o->candidate,
         "candidate file (JSON in the candidate format); default: the config's baseline and seed")
      ->check(CLI::ExistingFile);
  cmd->add_option("--workloads", o->workloads, "only these workload ids (default: all)")
      ->delimiter(',');
  cmd->add_flag("--json", o->json, "print the result as JSON on stdout");
  cmd->add_flag("--no-store", o->no_store, "do not write the result to the database");
  add_eval_options(*cmd, o->run);
  cmd->add_option("--repeat", o->run.repeat,
                 "evaluate N times over one worker and report each run's wall time from request to "
                 "stored result (every run is stored); for throughput benchmarks")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--recompile", o->run.recompile,
                "compile the candidate on every run even when its binary is cached (with --repeat: "
                "what a new candidate costs in a running campaign)");
  cmd->footer(R"(Examples:
  kopt eval configs/examples/rmsnorm.json
  kopt eval configs/examples/rmsnorm.json --candidate my_kernel.json --workloads t16_h4096 --json
Needs a GPU for correctness and timing; without one it compile-checks and exits with code 5.)");
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
    } else {
      subjects = config_subjects(op);
      if (subjects.empty()) {
        // Nothing but the reference: time the reference itself.
        o->run.time_reference = true;
      }
    }
    const std::vector<std::string> wl = resolve_workloads(op, o->workloads, o->config);

    progress_meter progress(!o->json,
                            wl.size() * static_cast<std::size_t>(std::max(1, o->run.repeat)));
    progress.phase(op.name + ": " + std::to_string(wl.size()) + " workloads");
    eval_outcome out = run_evaluation(op, subjects, wl, o->run, o->no_store ? nullptr : &ctx,
                                      "full", std::nullopt, std::nullopt, &progress);
    progress.finish();
    if (o->json) {
      std::cout << out.to_json().dump(2) << '\n';
    } else {
      std::cout << out.render();
    }
    status.code = out.exit_code;
  });
}

}  // namespace kopt::cli
