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

#include "campaign/export.hpp"
#include "campaign/loop.hpp"
#include "campaign/sources.hpp"
#include "campaign/worker_evaluator.hpp"
#include "cli/commands.hpp"
#include "cli/eval_support.hpp"
#include "cli/exit_codes.hpp"
#include "common/data_paths.hpp"
#include "common/error.hpp"
#include "config/operator.hpp"
#include "kb/index.hpp"
#include "kb/library.hpp"
#include "llm/client.hpp"
#include "prompts/engine.hpp"
#include "runner/llm_recorder.hpp"

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

// How many in-order answers of a replay transcript this campaign has
// already used: the calls of every iteration whose proposals are stored (a
// resumed campaign never asks for those again). A new process starts the
// transcript at its first line, so without skipping these a resumed
// campaign would be served the answers it already had and would not reach
// the result of an uninterrupted run. Calls of an iteration that was killed
// before its proposals were stored are not counted: that iteration asks
// again and gets the same lines. Each iteration makes at most `k` calls; a
// killed and replayed iteration has its calls recorded twice, hence the cap.
// Refused calls never reached the provider, and the replay provider answers
// `parse_error` (bad_response) only when it had no line left to serve.
std::int64_t replay_lines_used(store::store& db, store::row_id cid, std::int64_t k) {
  std::set<std::int64_t> proposed;
  for (const auto& e : db.events_of(cid))
    if (e.kind == "proposals") proposed.insert(e.data.value("iteration", std::int64_t{-1}));
  std::map<std::int64_t, std::int64_t> calls;
  for (const auto& c : db.llm_calls_of(cid)) {
    if (c.status == "refused" || c.status == "parse_error") continue;
    const std::string tag = c.request.value("tag", "");
    if (tag.rfind("iteration ", 0) != 0) continue;
    try {
      const std::int64_t n = std::stoll(tag.substr(10));
      if (proposed.count(n)) ++calls[n];
    } catch (const std::exception&) {
    }
  }
  std::int64_t used = 0;
  for (const auto& [n, count] : calls) used += std::min(count, std::max<std::int64_t>(k, 1));
  return used;
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

namespace {

// The knowledge base's operator class for a config's op_type.
std::string kb_operator_class(const config::operator_config& op) {
  const std::string t = op.op_type;
  if (kb::is_operator_class(t)) return t;
  auto has = [&](const char* s) { return t.find(s) != std::string::npos; };
  if (has("norm")) return "normalization";
  if (has("softmax") && has("moe")) return "moe";
  if (has("softmax")) return "softmax";
  if (has("attention") || has("attn")) return "attention";
  if (has("quant")) return "quantization";
  if (has("moe") || has("expert")) return "moe";
  if (has("topk") || has("top_k")) return "topk";
  if (has("cache")) return "kv-cache";
  if (has("gemv")) return "gemv";
  if (has("gemm") || has("matmul") || has("_mm") || t == "mm") return "gemm";
  if (has("sort") || has("scan") || has("align")) return "sort-scan";
  if (has("conv")) return "convolution";
  if (has("rule") || has("recurr") || has("ssm")) return "recurrent";
  if (has("reduc")) return "reduction";
  return "";  // any
}

// Snippets for the parent's diagnosis: the classes of its heaviest
// workloads' findings, most severe first; before any measurement, a query by
// operator class alone.
std::vector<campaign::prompt_item> kb_snippets(const kb::index& idx, const std::string& op_class,
                                               const campaign::prompt_context& ctx) {
  std::vector<std::pair<double, std::string>> classes;
  std::vector<const config::workload*> wls;
  if (ctx.op)
    for (const auto& w : ctx.op->workloads) wls.push_back(&w);
  std::stable_sort(wls.begin(), wls.end(), [](auto* a, auto* b) { return a->weight > b->weight; });
  for (const auto* w : wls) {
    auto it = ctx.parent_results.find(w->id);
    if (it == ctx.parent_results.end()) continue;
    for (const auto& f : it->second.diagnosis.value("findings", json::array()))
      classes.emplace_back(w->weight * f.value("severity", 0.0), f.value("class", ""));
  }
  std::stable_sort(classes.begin(), classes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  kb::query q;
  for (const auto& [score, c] : classes)
    if (!c.empty() && kb::is_bottleneck_class(c) &&
        std::find(q.bottlenecks.begin(), q.bottlenecks.end(), c) == q.bottlenecks.end())
      q.bottlenecks.push_back(c);
  q.operator_class = op_class;
  q.arch = "sm_90a";
  std::vector<campaign::prompt_item> out;
  try {
    for (const auto& s : idx.retrieve(q).snippets)
      out.push_back({"snippet:" + s.id, "snippet", s.title + "\n" + s.text, true});
  } catch (const kopt::error& e) {
    spdlog::warn("knowledge retrieval: {}", e.what());
  }
  return out;
}

std::optional<campaign::prompt_setup> prompt_setup_for(const json& device, const eval_options& o) {
  campaign::prompt_setup p;
  try {
    const auto pf = data::peaks_file(o.peaks_file);
    std::ifstream in(pf);
    const json table = json::parse(in);
    p.gpu = prompts::gpu_facts_from_table(table, device.value("name", "H200"));
  } catch (const std::exception& e) {
    spdlog::warn("prompt GPU facts: {}", e.what());
    p.gpu.name = device.value("name", "");
  }
  p.gpu.arch = device.value("arch", p.gpu.arch);
  p.gpu.sm_count = device.value("sm_count", p.gpu.sm_count);
  p.gpu.l2_bytes = device.value("l2_bytes", p.gpu.l2_bytes);
  try {
    p.template_dir = prompts::default_template_dir();
  } catch (const kopt::error& e) {
    spdlog::warn("prompt templates not found ({}): the LLM gets a short built-in prompt", e.what());
    return std::nullopt;
  }
  return p;
}

}  // namespace

void register_run(CLI::App& app, context& ctx, exit_status& status) {
  auto o = std::make_shared<run_opts>();
  auto* cmd = app.add_subcommand("run", "run (or resume) an optimization campaign in the foreground");
  cmd->add_option("config", o->config, "operator config (JSON)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--provider", o->provider, "candidate source (default: the config's campaign.provider)")
      ->check(CLI::IsMember({"autotune", "openai", "anthropic", "command", "replay"}));
  cmd->add_option("--llm-config", o->llm_config,
                  "JSON file with an \"llm\" section (docs/providers.md) for LLM providers")
      ->check(CLI::ExistingFile);
  cmd->add_option("--export", o->export_dir, "write the winner (source, plan, parameters, flags, measurements) here");
  cmd->add_option("--max-iterations", o->max_iterations,
                  "stop after N iterations of this run; the campaign is paused, not finished")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json_out, "print the result as JSON on stdout (progress goes to stderr)");
  add_eval_options(*cmd, o->run);
  cmd->footer(R"(Examples:
  kopt run configs/examples/rmsnorm.json --export out/rmsnorm
  kopt run configs/examples/rmsnorm.json --provider openai --llm-config llm.json --max-iterations 5
Resumes the unfinished campaign of the same operator content if there is one.
Exit codes: 0 finished or paused, 1 invalid config, 5 no GPU (after compile checks), 6 provider stopped.)");
  cmd->callback([o, &ctx, &status] {
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

    // The GPU: without one, do what can be done and say what could not.
    campaign::worker_eval_options wo;
    wo.worker.worker_exe = o->run.worker.empty() ? runner::default_worker_exe() : o->run.worker;
    wo.worker.launch_prefix = split_words(o->run.launch_prefix);
    wo.worker.gpu = o->run.gpu;
    wo.seeds = o->run.seeds;
    wo.min_time_s = o->run.min_time_s;
    wo.max_time_s = o->run.max_time_s;
    wo.launch_timeout_ms = o->run.launch_timeout_ms;
    wo.peaks_file = data::peaks_file(o->run.peaks_file);
    campaign::worker_evaluator ev(op, wo);
    try {
      const json& dev = ev.start();
      spdlog::info("worker on {}", dev.value("name", "?"));
    } catch (const kopt::error& e) {
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

    // The candidate source.
    const std::string provider = o->provider.empty() ? camp->provider : o->provider;
    std::unique_ptr<campaign::candidate_source> source;
    std::unique_ptr<llm::budget> budget;
    std::unique_ptr<runner::store_call_recorder> recorder;
    std::unique_ptr<llm::llm_client> client;
    if (provider == "autotune") {
      source = std::make_unique<campaign::autotune_source>();
    } else {
      llm::provider_config pc;
      if (!o->llm_config.empty()) {
        std::ifstream in(o->llm_config);
        const json j = json::parse(in, nullptr, false);
        if (j.is_discarded()) throw kopt::config_error(o->llm_config + ": not valid JSON");
        pc = llm::parse_provider_config(j.contains("llm") ? j.at("llm") : j,
                                        std::filesystem::path(o->llm_config).parent_path());
      }
      pc.kind = provider;
      if (pc.model.empty()) pc.model = camp->model;
      budget = std::make_unique<llm::budget>(llm::budget_limits{camp->budget.tokens, camp->budget.cost_usd});
      recorder = std::make_unique<runner::store_call_recorder>(db, cid);
      auto backend = llm::make_provider(pc);
      if (provider == "replay") {
        const std::int64_t used =
            replay_lines_used(db, cid, camp->settings.value("candidates_per_iteration", std::int64_t{4}));
        if (used > 0) {
          // Served in order to a prompt no line is keyed to: moves past them.
          llm::request skip;
          skip.messages.push_back({"user", "kopt: skipping a transcript line already used by this campaign"});
          for (std::int64_t i = 0; i < used; ++i) (void)backend->complete(skip);
          std::cerr << fmt::format("kopt: replay transcript: skipped the {} answer(s) this campaign already used\n",
                                   used);
        }
      }
      client = std::make_unique<llm::llm_client>(
          std::move(backend), llm::client_options{budget.get(), recorder.get(), pc.prices, pc.max_concurrency});
      source = std::make_unique<campaign::llm_source>(*client, pc.max_tokens, prompt_setup_for(ev.start(), o->run));
    }

    auto settings = campaign::loop_settings::from_campaign(*camp);
    settings.base_seed = o->run.base_seed;
    campaign::loop_hooks hooks;
    // Knowledge retrieval keyed on the parent's diagnosis (only LLM sources
    // read snippets). A broken knowledge base is reported, not fatal: the
    // campaign then runs without snippets.
    std::shared_ptr<kb::index> kb_index;
    if (provider != "autotune") {
      auto lr = kb::load_directories(kb::directories({}, true));
      for (const auto& d : lr.diagnostics)
        if (d.level == kb::diagnostic::severity::error) spdlog::warn("knowledge base: {}", d.to_string());
      if (!lr.documents.empty()) kb_index = std::make_shared<kb::index>(std::move(lr.documents));
    }
    if (kb_index) {
      const std::string op_class = kb_operator_class(op);
      hooks.snippets = [kb_index, op_class](const campaign::prompt_context& pc) {
        return kb_snippets(*kb_index, op_class, pc);
      };
    }
    const bool tty = isatty(STDOUT_FILENO) == 1 && !o->json_out;
    std::ostream& prog = o->json_out ? std::cerr : std::cout;
    hooks.on_progress = [&prog, tty](const campaign::progress& p) {
      const std::string line =
          fmt::format("iteration {:>4}  best {:5.1f} % SOL{}  {} proposals  tokens {}  ${:.2f}  {:.0f} s{}", p.iteration,
                      100 * p.best_sol, p.promoted ? " (new best)" : "", p.proposals, p.tokens, p.cost_usd,
                      p.wall_time_s, p.level ? fmt::format("  escalation {}", p.level) : std::string());
      prog << (tty && p.promoted ? "\033[1m" + line + "\033[0m" : line) << '\n' << std::flush;
    };
    campaign::campaign_loop loop(db, cid, op, *source, ev, settings, hooks);
    campaign::run_limits lim;
    if (o->max_iterations > 0) lim.max_iterations = o->max_iterations;
    const auto r = loop.run(lim);
    ev.stop();
    json out = {{"campaign_id", cid},
                {"finished", r.finished},
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
      std::cout << fmt::format("campaign {} {}: {}; best candidate {} at {:.1f} % of speed of light{}\n", cid,
                               r.finished ? "finished" : "paused", r.stop_reason,
                               r.best_id ? std::to_string(*r.best_id) : "none", 100 * r.best_sol,
                               r.finished ? (r.verified ? ", verified with fresh seeds" : ", NOT verified") : "");
      if (out.contains("export")) std::cout << "exported to " << o->export_dir << '\n';
    }
    if (r.finished && r.stop_reason.rfind("stopped:", 0) == 0 && provider != "autotune") status.code = exit_provider;
  });
}

}  // namespace kopt::cli
