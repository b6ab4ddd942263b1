// `kopt prompt render CONFIG`: shows the prompt (system and user message)
// that a campaign would send for this operator with its seed (or reference)
// as the parent, so that template changes can be reviewed without calling a
// provider. Measurements of the parent come from the store when one holds
// them; otherwise the prompt says that none are stored.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "campaign/session.hpp"
#include "cli/commands.hpp"
#include "cli/render.hpp"
#include "cli/shared.hpp"
#include "common/data_paths.hpp"
#include "common/error.hpp"
#include "common/subprocess.hpp"
#include "config/operator.hpp"

namespace kopt::cli {

namespace {

using nlohmann::json;

// `kopt prompt render`'s options: what it renders, and how it prints.
struct prompt_options : prompt_request {
  bool json = false;
};

// One evaluation per workload into `best`: the full stage over others, then
// the newest.
void keep_newest(std::map<std::string, store::evaluation_record>& best, std::vector<store::evaluation_record> evals) {
  for (auto& e : evals) {
    auto it = best.find(e.workload_key);
    const bool better = it == best.end() || (e.stage == "full" && it->second.stage != "full") ||
                        (e.stage == it->second.stage && e.created_at >= it->second.created_at);
    if (better) best[e.workload_key] = std::move(e);
  }
}

// What the campaign loop knows of one stored evaluation: its status, median,
// fraction of speed of light and the diagnosis the counters gave.
campaign::workload_result result_of(const store::evaluation_record& e) {
  campaign::workload_result r;
  r.status = std::string(store::to_string(e.status));
  if (e.timing.median_ns) r.median_ns = *e.timing.median_ns;
  r.sol_fraction = e.sol_fraction;
  if (e.counters.is_object()) r.diagnosis = e.counters.value("diagnosis", json::object());
  return r;
}

// The newest stored evaluations of a kernel with `source` for this
// operator's content, one per workload (stage "full" preferred), from the
// newest campaign that measured it; or nothing. A missing or unreadable
// database is not an error here: the prompt then says none are stored.
std::map<std::string, campaign::workload_result> stored_results(const context& ctx,
                                                                const config::operator_config& op,
                                                                const std::string& source) {
  std::map<std::string, campaign::workload_result> out;
  std::filesystem::path db_path;
  try {
    db_path = ctx.database().path;
  } catch (const kopt::error& e) {
    spdlog::info("no database ({}); rendering without measurements", e.what());
    return out;
  }
  std::error_code ec;
  if (!std::filesystem::exists(db_path, ec)) {
    spdlog::info("no database at {}; rendering without measurements", db_path.string());
    return out;
  }
  try {
    store::store db = ctx.open_reader();
    const auto rec = db.find_operator_by_hash(op.content_hash());
    if (!rec) return out;
    for (const auto& c : db.list_campaigns()) {
      if (c.operator_id != rec->id) continue;
      std::map<std::string, store::evaluation_record> best;
      for (const auto& cand : db.candidates_of(c.id))
        if (cand.source == source) keep_newest(best, db.evaluations_of(cand.id));
      if (best.empty()) continue;
      for (const auto& [w, e] : best) out[w] = result_of(e);
      return out;  // the newest campaign that measured this parent
    }
  } catch (const kopt::error& e) {
    spdlog::warn("could not read measurements from {}: {}", db_path.string(), e.what());
  }
  return out;
}

}  // namespace

rendered_prompt render_prompt(const prompt_request& o, const context& ctx) {
  const config::load_result loaded =
      o.config_text.empty() ? config::load_operator_file(o.config_file)
                            : config::load_operator_text(
                                  o.config_text, o.config_file.empty() ? "config" : o.config_file,
                                  std::filesystem::current_path());
  if (!loaded.ok()) {
    std::string why;
    for (const auto& d : loaded.diagnostics) why += "\n" + d.to_string();
    throw kopt::config_error(o.config_file + " is not a valid operator config:" + why);
  }
  const config::operator_config& op = *loaded.op;

  // The parent and what the store knows of it, as the campaign loop would
  // hand them to its LLM source.
  campaign::prompt_context pc;
  pc.op = &op;
  std::string which = o.parent;
  if (which.empty()) which = op.seed ? "seed" : "reference";
  if (o.candidate_id > 0) {
    store::store db = ctx.open_reader();
    const auto rec = db.find_candidate(o.candidate_id);
    if (!rec) throw kopt::not_found_error(fmt::format("no candidate {} in {}", o.candidate_id, db.path()));
    json cj = rec->launch_plan;
    cj["source"] = rec->source;
    auto loaded_cand = config::load_candidate_text(cj.dump(), fmt::format("candidate {}", o.candidate_id),
                                                   op.file.parent_path(), op);
    if (!loaded_cand.ok()) {
      for (const auto& d : loaded_cand.diagnostics) std::cerr << d.to_string() << '\n';
      throw kopt::config_error(fmt::format("candidate {} does not fit {} (another operator's candidate?)",
                                           o.candidate_id, o.config_file));
    }
    pc.parent = loaded_cand.cand->to_json();
    pc.parent_id = rec->id;
    which = fmt::format("candidate {}", o.candidate_id);
    std::map<std::string, store::evaluation_record> best;
    keep_newest(best, db.evaluations_of(rec->id));
    for (const auto& [w, e] : best) pc.parent_results[w] = result_of(e);
  } else {
    const config::candidate* parent = nullptr;
    if (which == "seed") {
      if (!op.seed) throw kopt::config_error(op.name + " has no seed; use --parent reference");
      parent = &*op.seed;
    } else if (which == "baseline") {
      if (!op.baseline) throw kopt::config_error(op.name + " has no baseline");
      parent = &*op.baseline;
    } else {
      parent = &op.reference;
    }
    pc.parent = parent->to_json();
    pc.parent_results = stored_results(ctx, op, parent->source);
  }
  pc.parent_label = which;

  // The campaign session's prompt half, so that this is what a campaign sends.
  campaign::session_options so;
  so.prompts_dir = o.prompts_dir;
  so.peaks_file = data::peaks_file(o.peaks_file);
  if (so.peaks_file.empty())
    throw kopt::config_error("no GPU peak table found (hardware/gpus.json; looked in: " +
                             data::find(data::kind::hardware).looked_in() +
                             "); pass --peaks FILE or set KOPT_DATA_DIR (kopt doctor shows the lookup)");
  so.gpu_name = o.gpu;
  so.kb_directories = {o.kb_dirs.begin(), o.kb_dirs.end()};
  const campaign::prompt_builder prompts(op, so, json::object(), campaign::default_directives());
  if (!prompts.setup())
    throw kopt::config_error("no prompt template directory found; pass --prompts-dir DIR");
  std::set<std::string> dropped(o.drop.begin(), o.drop.end());
  if (!o.with_snippets)
    for (const auto& sn : prompts.snippets(pc)) dropped.insert(sn.id);
  const campaign::composed_prompt p = prompts.render(pc, dropped, o.template_name);

  rendered_prompt out;
  out.operator_name = op.name;
  out.template_name = p.template_name;
  out.parent = which;
  out.measurements = !pc.parent_results.empty();
  out.system = p.system;
  out.user = p.user;
  out.present_items = p.present_items;
  out.user_present = p.present_items;
  out.dropped_items.assign(dropped.begin(), dropped.end());
  out.user_dropped = out.dropped_items;
  return out;
}

nlohmann::json rendered_prompt::to_json() const {
  return json{{"operator", operator_name},
              {"template", template_name},
              {"parent", parent},
              {"measurements", measurements},
              {"system", system},
              {"user", user},
              {"present_items", present_items},
              {"dropped_items", dropped_items}};
}

namespace {

void run_render(const prompt_options& o, const context& ctx) {
  const rendered_prompt r = render_prompt(o, ctx);
  if (o.json) {
    print_json(r.to_json());
    return;
  }
  std::cout << "===== system =====\n" << r.system;
  if (!r.system.empty() && r.system.back() != '\n') std::cout << '\n';
  std::cout << "===== user (" << r.template_name << ") =====\n" << r.user;
  if (!r.user.empty() && r.user.back() != '\n') std::cout << '\n';
  std::string present, gone;
  for (const auto& id : r.user_present) present += (present.empty() ? "" : " ") + id;
  for (const auto& id : r.user_dropped) gone += (gone.empty() ? "" : " ") + id;
  std::cerr << "optional items present: " << (present.empty() ? "(none)" : present)
            << "; dropped: " << (gone.empty() ? "(none)" : gone) << '\n';
}

}  // namespace

void register_prompt(CLI::App& app, context& ctx, exit_status& /*status*/) {
  CLI::App* group = app.add_subcommand("prompt", "Prompt templates");
  group->require_subcommand(1);
  group->footer(
      "Examples:\n  kopt prompt render configs/examples/rmsnorm.json\n"
      "  kopt prompt render configs/examples/rmsnorm.json --template fix_compile\n"
      "Run 'kopt prompt render --help' for its options. See docs/prompts.md.");
  auto opts = std::make_shared<prompt_options>();
  CLI::App* cmd = group->add_subcommand(
      "render", "Print the prompt a campaign would send for CONFIG, with its seed as the parent");
  cmd->add_option("config", opts->config_file, "operator config (JSON)")->required();
  cmd->add_option(
         "--template", opts->template_name,
         "which user prompt to render (default: the one a campaign would send: first without "
         "measurements, revise with them)")
      ->check(CLI::IsMember({"first", "revise", "fix_compile", "fix_wrong", "broaden"}));
  cmd->add_option(
         "--kb-dir", opts->kb_dirs,
         "extra knowledge-base directory (repeatable), as the daemon's knowledge_base.directories")
      ->type_name("DIR");
  cmd->add_option("--drop", opts->drop,
                  "drop this optional item (repeatable), e.g. --drop measurements --drop "
                  "snippet:coalesced-access");
  cmd->add_flag("--json", opts->json,
                "print {system, user, present_items, dropped_items} as JSON on stdout");
  cmd->add_option("--prompts-dir", opts->prompts_dir,
                  "template directory (default: $KOPT_PROMPTS_DIR, then the built-in templates)")
      ->type_name("DIR");
  cmd->add_option("--gpu", opts->gpu, "GPU of the peak table (key or device name)")
      ->capture_default_str();
  cmd->add_option("--peaks", opts->peaks_file, "GPU peak table (default: configs/hardware/gpus.json)")
      ->type_name("FILE");
  cmd->add_option("--parent", opts->parent, "parent kernel (default: seed, else reference)")
      ->check(CLI::IsMember({"seed", "baseline", "reference"}));
  cmd->add_option("--candidate", opts->candidate_id,
                  "a stored candidate (id from `kopt log` / `kopt show`) as the parent, with its stored "
                  "measurements and diagnosis")
      ->check(CLI::PositiveNumber);
  cmd->footer(
      "The prompt is built by the same code as a campaign's (templates, directives, "
      "knowledge-base\n"
      "snippets retrieved for the parent's diagnosis), before dropout. Measurements of the parent\n"
      "are read from the database when it holds some; otherwise the prompt says that none are\n"
      "stored. Optional items are listed on stderr.\n"
      "Example: kopt prompt render configs/examples/rmsnorm.json --template revise --drop "
      "measurements");
  cmd->callback([opts, &ctx] { run_render(*opts, ctx); });
}

}  // namespace kopt::cli
