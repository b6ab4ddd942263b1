// `kopt run CONFIG`: runs an optimization campaign in the foreground. It
// resumes the unfinished campaign of the same operator content (same
// snapshot hash) or submits a new one, then iterates with a progress line
// per iteration until the target or a budget stops it, re-verifies the
// winner and optionally exports it. Without a GPU it still validates,
// stores the campaign and compile-checks the seed and baseline, then exits
// with code 5 saying what needed the GPU.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "campaign/agent_source.hpp"
#include "campaign/export.hpp"
#include "campaign/session.hpp"
#include "campaign/worker_evaluator.hpp"
#include "cli/commands.hpp"
#include "cli/eval_support.hpp"
#include "cli/exit_codes.hpp"
#include "cli/shared.hpp"
#include "common/data_paths.hpp"
#include "common/error.hpp"
#include "config/operator.hpp"

namespace kopt::cli {

namespace {

using json = nlohmann::json;

template <typename T>
json opt_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

struct run_opts {
  std::string config;
  std::string provider;
  std::string llm_config;
  std::string export_dir;
  std::int64_t max_iterations = 0;
  bool json_out = false;
  eval_options run;
};

}  // namespace

// The daemon builds the same from its config (daemon::session_options_for).
campaign::session_options run_session_options(const std::string& provider,
                                              const std::string& llm_config,
                                              const eval_options& run,
                                              const std::string& counters) {
  campaign::session_options so;
  so.provider = provider;
  if (!llm_config.empty()) {
    std::ifstream in(llm_config);
    const json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded()) throw kopt::config_error(llm_config + ": not valid JSON");
    so.llm_section = j.contains("llm") ? j.at("llm") : j;
    so.llm_base_dir = std::filesystem::path(llm_config).parent_path();
  }
  so.peaks_file = data::peaks_file(run.peaks_file);
  so.counters = counters;
  so.base_seed = run.base_seed;
  return so;
}

void register_run(CLI::App& app, context& ctx, exit_status& status) {
  auto o = std::make_shared<run_opts>();
  auto* cmd = app.add_subcommand("run", "run (or resume) an optimization campaign in the foreground");
  cmd->add_option("config", o->config, "operator config (JSON)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--provider", o->provider,
                  "candidate source (default: the config's campaign.provider)")
      ->check(CLI::IsMember({"autotune", "openai", "anthropic", "command", "replay", "agent"}));
  cmd->add_option("--llm-config", o->llm_config,
                  "JSON file with an \"llm\" section (docs/providers.md) for LLM providers")
      ->check(CLI::ExistingFile);
  cmd->add_option("--export", o->export_dir, "write the winner (source, plan, parameters, flags, measurements) here");
  cmd->add_option("--max-iterations", o->max_iterations,
                  "stop after N iterations of this run; the campaign is paused, not finished")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json_out, "print the result as JSON on stdout (progress goes to stderr)");
  add_eval_options(*cmd, o->run);
  // Read by the callback (counters tier of the campaign's evaluator); it was
  // never registered, so every `kopt run` ended in "internal error:
  // --counters not found" (found by the fresh-clone main job, issue 24).
  cmd->add_option("--counters", o->run.counters,
                  "counters tier of the full sweep and the winner's verification: none, default, full "
                  "(docs/counters.md; default: default)")
      ->check(CLI::IsMember({"none", "default", "full"}));
  cmd->footer(R"(Examples:
  kopt run configs/examples/rmsnorm.json --export out/rmsnorm
  kopt run configs/examples/rmsnorm.json --provider openai --llm-config llm.json --max-iterations 5
Resumes the unfinished campaign of the same operator content if there is one.
Exit codes: 0 finished or paused, 1 invalid config, 5 no GPU (after compile checks), 6 provider stopped.)");
  cmd->callback([o, cmd, &ctx, &status] {
    auto loaded = config::load_operator_file(o->config);
    for (const auto& d : loaded.diagnostics) std::cerr << d.to_string() << '\n';
    if (!loaded.ok()) {
      status.code = exit_invalid;
      return;
    }
    const config::operator_config& op = *loaded.op;
    store::store db = ctx.open_writer();

    // The operator, and the campaign to resume or a new one.
    const auto put = store_operator(db, op);
    std::optional<store::campaign_record> camp;
    for (const auto& c : db.list_campaigns())
      if (c.operator_id == put.operator_id && !store::is_terminal(c.state) && c.provider != "eval" &&
          (o->provider.empty() || c.provider == o->provider)) {
        camp = c;
        break;
      }
    if (!camp) {
      store::campaign_record c;
      c.operator_id = put.operator_id;
      c.provider = o->provider.empty() ? op.campaign.provider : o->provider;
      c.model = op.campaign.model;
      const auto& cs = op.campaign;
      c.settings = {{"provider", c.provider},
                    {"model", cs.model},
                    {"budget",
                     {{"iterations", opt_json(cs.limits.iterations)},
                      {"wall_time_s", opt_json(cs.limits.wall_time_s)},
                      {"tokens", opt_json(cs.limits.tokens)},
                      {"cost_usd", opt_json(cs.limits.cost_usd)}}},
                    {"target_sol_fraction", cs.target_sol_fraction},
                    {"candidates_per_iteration", cs.candidates_per_iteration},
                    {"dropout_p", cs.dropout_p},
                    {"seed", cs.seed}};
      c.budget = {cs.limits.iterations, cs.limits.wall_time_s, cs.limits.tokens, cs.limits.cost_usd};
      const auto id = db.create_campaign(c);
      store::event_record ev;
      ev.campaign_id = id;
      ev.kind = "submitted";
      ev.message = "created by kopt run from " + o->config;
      db.add_event(ev);
      camp = db.find_campaign(id);
    } else {
      std::cerr << fmt::format("kopt: resuming campaign {} ({} iterations done)\n", camp->id,
                               camp->spent_iterations);
    }
    const store::row_id cid = camp->id;

    // The evaluator (a local worker) and the rest of the campaign, built by
    // the one campaign session. Without a GPU, do what can be done and say
    // what could not.
    campaign::worker_eval_options wo;
    wo.worker.worker_exe = o->run.worker.empty() ? runner::default_worker_exe() : o->run.worker;
    wo.worker.launch_prefix = split_words(o->run.launch_prefix);
    wo.worker.gpu = o->run.gpu;
    wo.seeds = o->run.seeds;
    wo.min_time_s = o->run.min_time_s;
    wo.max_time_s = o->run.max_time_s;
    wo.launch_timeout_ms = o->run.launch_timeout_ms;
    wo.peaks_file = data::peaks_file(o->run.peaks_file);
    const campaign::evaluator_factory local_worker = [&wo](const config::operator_config& cfg,
                                                           const campaign::evaluator_spec& spec) {
      auto w = wo;
      w.counters = spec.counters;
      auto ev = std::make_unique<campaign::worker_evaluator>(cfg, w);
      const json& dev = ev->start();
      spdlog::info("worker on {}", dev.value("name", "?"));
      return std::unique_ptr<campaign::evaluator>(std::move(ev));
    };
    const std::string counters = cmd->count("--counters") > 0 ? o->run.counters : "default";
    std::unique_ptr<campaign::session> session;
    try {
      session = std::make_unique<campaign::session>(
          db, cid, op, run_session_options(o->provider, o->llm_config, o->run, counters),
          local_worker);
    } catch (const campaign::evaluator_unavailable& e) {
      std::vector<runner::subject_spec> subjects;
      if (op.seed) subjects.push_back({"seed", store::candidate_origin::seed, op.seed->to_json(), {}, {}, {}, {}});
      if (op.baseline)
        subjects.push_back({"baseline", store::candidate_origin::baseline, op.baseline->to_json(), {}, {}, {}, {}});
      const auto checks = compile_check_all(op, subjects, o->run);
      json cj = json::array();
      for (const auto& c : checks) cj.push_back({{"role", c.role}, {"status", c.status}, {"log", c.log.substr(0, 2000)}});
      store::event_record evr;
      evr.campaign_id = cid;
      evr.kind = "needs_gpu";
      evr.level = "warning";
      evr.message = std::string("campaign not run: correctness checks and timing need a GPU: ") + e.what();
      evr.data = {{"compile_checks", cj}, {"arch", o->run.arch}};
      db.add_event(evr);
      if (o->json_out) {
        std::cout << json{{"campaign_id", cid}, {"gpu", false}, {"needs_gpu", evr.message}, {"compile_checks", cj}}.dump(2)
                  << '\n';
      } else {
        std::cout << fmt::format("campaign {} for {} stored ({}).\nCompile checks ({}):\n", cid, op.name, db.path(),
                                 o->run.arch);
        for (const auto& c : checks)
          std::cout << fmt::format("  {:<10} {}\n", c.role, c.status) << (c.status == "ok" ? "" : "    " + c.log.substr(0, 2000) + "\n");
        std::cout << "Not done: the campaign loop needs a GPU for correctness checks and timing.\n  " << e.what()
                  << "\nRun `kopt run` again on a machine with a GPU (or --launch-prefix) to continue this campaign.\n";
      }
      status.code = exit_no_gpu;
      return;
    }
    const std::string provider = session->provider();
    campaign::loop_hooks hooks;
    const bool tty = isatty(STDOUT_FILENO) == 1 && !o->json_out;
    std::ostream& prog = o->json_out ? std::cerr : std::cout;
    hooks.on_progress = [&prog, tty](const campaign::progress& p) {
      const std::string line =
          fmt::format("iteration {:>4}  best {:5.1f} % SOL{}  {} proposals  tokens {}  ${:.2f}  {:.0f} s{}", p.iteration,
                      100 * p.best_sol, p.promoted ? " (new best)" : "", p.proposals, p.tokens, p.cost_usd,
                      p.wall_time_s, p.level ? fmt::format("  escalation {}", p.level) : std::string());
      prog << (tty && p.promoted ? "\033[1m" + line + "\033[0m" : line) << '\n' << std::flush;
    };
    campaign::run_limits lim;
    if (o->max_iterations > 0) lim.max_iterations = o->max_iterations;
    const auto r = session->run(hooks, lim);
    session.reset();  // stops the worker
    json out = {{"campaign_id", cid},
                {"finished", r.finished},
                {"waiting", r.waiting},
                {"stop_reason", r.stop_reason},
                {"iterations_run", r.iterations_run},
                {"best_candidate_id", opt_json(r.best_id)},
                {"best_sol_fraction", r.best_sol},
                {"verified", r.verified},
                {"summary", r.summary}};
    if (!o->export_dir.empty() && r.best_id) {
      const auto ex = campaign::export_winner(db, cid, o->export_dir);
      out["export"] = {{"dir", ex.dir.string()}, {"files", ex.files}};
    }
    if (o->json_out) {
      std::cout << out.dump(2) << '\n';
    } else {
      std::cout << fmt::format(
          "campaign {} {}: {}; best candidate {} at {:.1f} % of speed of light{}\n", cid,
          r.finished ? "finished" : (r.waiting ? "is waiting" : "paused"), r.stop_reason,
          r.best_id ? std::to_string(*r.best_id) : "none", 100 * r.best_sol,
          r.finished ? (r.verified ? ", verified with fresh seeds" : ", NOT verified") : "");
      if (out.contains("export")) std::cout << "exported to " << o->export_dir << '\n';
    }
    if (r.finished && r.stopped_on_error && provider != "autotune") status.code = exit_provider;
  });
}

}  // namespace kopt::cli
