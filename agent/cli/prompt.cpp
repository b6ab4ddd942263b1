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

#include "cli/commands.hpp"
#include "cli/render.hpp"
#include "common/data_paths.hpp"
#include "common/error.hpp"
#include "common/subprocess.hpp"
#include "config/operator.hpp"
#include "prompts/context.hpp"
#include "prompts/engine.hpp"


namespace kopt::cli {

namespace {

using nlohmann::json;

struct prompt_options {
  std::string config_file;
  std::string template_name = "first";
  std::vector<std::string> drop;
  bool json = false;
  std::string prompts_dir;
  std::string gpu = "H200";
  std::string peaks_file;
  std::string parent;  // seed, baseline, reference; default: seed, else reference
  std::int64_t candidate_id = 0;  // a stored candidate as the parent (wins over parent)
};

std::filesystem::path find_peak_table(const std::string& flag) {
  const std::string f = data::peaks_file(flag);
  if (f.empty()) {
    throw kopt::config_error("no GPU peak table found (hardware/gpus.json; looked in: " +
                             data::find(data::kind::hardware).looked_in() +
                             "); pass --peaks FILE or set KOPT_DATA_DIR (kopt doctor shows the lookup)");
  }
  return f;
}

json read_json_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw kopt::config_error("cannot read " + file.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw kopt::config_error(file.string() + ": not valid JSON: " + e.what());
  }
}

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

// What the prompt shows of one stored evaluation.
prompts::workload_measurement measurement_of(const std::string& workload, const store::evaluation_record& e) {
  prompts::workload_measurement m;
  m.workload = workload;
  m.status = std::string(store::to_string(e.status));
  if (e.timing.median_ns) m.median_us = *e.timing.median_ns / 1000.0;
  m.sol_fraction = e.sol_fraction;
  return m;
}

// The newest stored evaluations of `parent` for this operator's content, one
// per workload (stage "full" preferred), or nothing. A missing or unreadable
// database is not an error here: the prompt then says none are stored.
std::vector<prompts::workload_measurement> stored_measurements(const context& ctx,
                                                               const config::operator_config& op,
                                                               const config::candidate& parent) {
  std::vector<prompts::workload_measurement> out;
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
        if (cand.source == parent.source) keep_newest(best, db.evaluations_of(cand.id));
      if (best.empty()) continue;
      for (const auto& w : op.workloads) {
        const auto it = best.find(w.id);
        if (it == best.end()) continue;
        out.push_back(measurement_of(w.id, it->second));
      }
      return out;  // the newest campaign that measured this parent
    }
  } catch (const kopt::error& e) {
    spdlog::warn("could not read measurements from {}: {}", db_path.string(), e.what());
  }
  return out;
}

void run_render(const prompt_options& o, const context& ctx) {
  const config::load_result loaded = config::load_operator_file(o.config_file);
  if (!loaded.ok()) {
    for (const auto& d : loaded.diagnostics) std::cerr << d.to_string() << '\n';
    throw kopt::config_error(o.config_file + " is not a valid operator config");
  }
  const config::operator_config& op = *loaded.op;

  prompts::prompt_inputs in;
  in.op = &op;
  in.gpu = prompts::gpu_facts_from_table(read_json_file(find_peak_table(o.peaks_file)), o.gpu);

  std::string which = o.parent;
  if (which.empty()) which = op.seed ? "seed" : "reference";
  std::vector<prompts::finding> stored_findings;
  if (o.candidate_id > 0) {
    // A stored candidate: its source and plan from the store, its
    // measurements and diagnosis from its evaluations (the newest per
    // workload, the full stage first).
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
    in.parent = *loaded_cand.cand;
    which = fmt::format("candidate {}", o.candidate_id);
    std::map<std::string, store::evaluation_record> best;
    keep_newest(best, db.evaluations_of(rec->id));
    std::map<std::string, std::string> by_class;
    std::vector<std::string> order;
    for (const auto& w : op.workloads) {
      const auto it = best.find(w.id);
      if (it == best.end()) continue;
      in.measurements.push_back(measurement_of(w.id, it->second));
      const json diag = it->second.counters.is_object() ? it->second.counters.value("diagnosis", json::object())
                                                        : json::object();
      for (const auto& f : diag.value("findings", json::array())) {
        const std::string cls = f.value("class", "");
        if (cls.empty()) continue;
        if (!by_class.count(cls)) order.push_back(cls);
        by_class[cls] += (by_class[cls].empty() ? "" : "; ") + w.id + ": " + f.value("summary", "");
      }
    }
    for (const auto& c : order) stored_findings.push_back({c, by_class[c]});
  } else if (which == "seed") {
    if (!op.seed) throw kopt::config_error(op.name + " has no seed; use --parent reference");
    in.parent = *op.seed;
  } else if (which == "baseline") {
    if (!op.baseline) throw kopt::config_error(op.name + " has no baseline");
    in.parent = *op.baseline;
  } else {
    in.parent = op.reference;
  }
  in.parent_label = which;
  if (o.candidate_id <= 0) in.measurements = stored_measurements(ctx, op, *in.parent);
  in.diagnosis = stored_findings;
  if (in.measurements.empty()) {
    in.measurements_note = "none are stored for the " + which + " kernel yet.";
  }

  const json context_json = prompts::build_context(in);
  const prompts::template_set set =
      prompts::template_set::load_directory(prompts::default_template_dir(o.prompts_dir));
  const std::set<std::string> dropped(o.drop.begin(), o.drop.end());
  const prompts::rendered system = set.render("system", context_json, dropped);
  const prompts::rendered user = set.render(o.template_name, context_json, dropped);

  if (o.json) {
    json present = user.present_items, gone = user.dropped_items;
    for (const auto& id : system.present_items) present.push_back(id);
    for (const auto& id : system.dropped_items) gone.push_back(id);
    print_json(json{{"operator", op.name},
                    {"template", o.template_name},
                    {"parent", which},
                    {"measurements", !in.measurements.empty()},
                    {"system", system.text},
                    {"user", user.text},
                    {"present_items", present},
                    {"dropped_items", gone}});
    return;
  }
  std::cout << "===== system =====\n" << system.text;
  if (!system.text.empty() && system.text.back() != '\n') std::cout << '\n';
  std::cout << "===== user (" << o.template_name << ") =====\n" << user.text;
  if (!user.text.empty() && user.text.back() != '\n') std::cout << '\n';
  std::string present, gone;
  for (const auto& id : user.present_items) present += (present.empty() ? "" : " ") + id;
  for (const auto& id : user.dropped_items) gone += (gone.empty() ? "" : " ") + id;
  std::cerr << "optional items present: " << (present.empty() ? "(none)" : present)
            << "; dropped: " << (gone.empty() ? "(none)" : gone) << '\n';
}

}  // namespace

void register_prompt(CLI::App& app, context& ctx, exit_status& /*status*/) {
  CLI::App* group = app.add_subcommand("prompt", "Prompt templates");
  group->require_subcommand(1);
  auto opts = std::make_shared<prompt_options>();
  CLI::App* cmd = group->add_subcommand(
      "render", "Print the prompt a campaign would send for CONFIG, with its seed as the parent");
  cmd->add_option("config", opts->config_file, "operator config (JSON)")->required();
  cmd->add_option("--template", opts->template_name, "which user prompt to render")
      ->check(CLI::IsMember({"first", "revise", "fix_compile", "fix_wrong", "broaden"}))
      ->capture_default_str();
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
      "Measurements of the parent are read from the database when it holds some; otherwise\n"
      "the prompt says that none are stored. Optional items are listed on stderr.\n"
      "Example: kopt prompt render configs/examples/rmsnorm.json --template revise --drop "
      "measurements");
  cmd->callback([opts, &ctx] { run_render(*opts, ctx); });
}

}  // namespace kopt::cli
