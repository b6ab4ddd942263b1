// Read commands: `kopt list`, `kopt status`, `kopt show campaign|candidate`,
// `kopt log`. They open the store read-only (WAL: they never block the
// daemon and see only committed data) and print a table, or JSON with --json.
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/render.hpp"
#include "cli/shared.hpp"
#include "cli/validators.hpp"
#include "common/error.hpp"
#include "report/data.hpp"
#include "report/views.hpp"
#include "store/agent_submissions.hpp"

namespace kopt::cli {

namespace {

using nlohmann::json;

std::string budget_pair(std::int64_t spent, const std::optional<std::int64_t>& limit) {
  return std::to_string(spent) + (limit ? "/" + std::to_string(*limit) : "");
}

std::string cost_pair(double spent, const std::optional<double>& limit) {
  return "$" + fmt_double(spent, 2) + (limit ? "/$" + fmt_double(*limit, 2) : "");
}

// `waiting`: campaigns blocked on someone outside kopt (an agent), shown in
// the STATE column.
void print_campaign_table(const std::vector<store::campaign_record>& cs,
                          const std::map<store::row_id, std::string>& waiting = {}) {
  // BEST is the score (weighted fraction of speed of light) of the best
  // candidate, CAND its id.
  text_table t({"ID", "STATE", "PRI", "OPERATOR", "TEAM", "PROVIDER", "ITERS", "TOKENS", "COST",
                "BEST", "CAND", "CREATED"});
  for (const auto& c : cs) {
    const auto w = waiting.find(c.id);
    const std::string state =
        std::string(store::to_string(c.state)) + (w != waiting.end() && !store::is_terminal(c.state)
                                                      ? " (waiting for " + w->second + ")"
                                                      : "");
    t.add({std::to_string(c.id), state, std::to_string(c.priority), c.operator_name,
           c.team.empty() ? "-" : c.team, c.provider + (c.model.empty() ? "" : ":" + c.model),
           budget_pair(c.spent_iterations, c.budget.iterations), std::to_string(c.spent_tokens),
           cost_pair(c.spent_cost_usd, c.budget.cost_usd), fmt_opt(c.best_score, 3),
           fmt_opt(c.best_candidate_id), fmt_time(c.created_at)});
  }
  t.print(std::cout);
}

store::campaign_record need_campaign(store::store& s, store::row_id id) {
  auto c = s.find_campaign(id);
  if (!c) throw not_found_error("no campaign " + std::to_string(id) + " in " + s.path());
  return *c;
}

json campaign_status_json(store::store& s, const store::campaign_record& c) {
  json j = to_json(c);
  j["iterations"] = s.iterations_of(c.id).size();
  if (c.best_candidate_id) {
    if (auto best = s.find_candidate(*c.best_candidate_id))
      j["best_candidate"] = to_json(*best, false);
  }
  auto last = s.events_of(c.id, 1);
  j["last_event"] = last.empty() ? json(nullptr) : to_json(last.back());
  const auto waiting = store::campaign_waiting(s, c.id);
  j["waiting_for"] = waiting ? json(*waiting) : json(nullptr);
  if (c.provider == "agent") {
    json subs = json::array();
    for (const auto& a : store::agent_submissions_of(s, c.id)) subs.push_back(a.to_json());
    j["agent_submissions"] = subs;
  }
  return j;
}

void print_campaign_status(store::store& s, const store::campaign_record& c) {
  std::cout << "campaign " << c.id << ": " << c.operator_name << " [" << store::to_string(c.state)
            << "]";
  if (c.stop_reason) std::cout << " (" << *c.stop_reason << ")";
  std::cout << '\n';
  std::cout << "  provider     " << c.provider << (c.model.empty() ? "" : " / " + c.model) << '\n';
  std::cout << "  priority     " << c.priority << (c.team.empty() ? "" : ", team " + c.team)
            << '\n';
  std::cout << "  iterations   " << budget_pair(c.spent_iterations, c.budget.iterations) << '\n';
  std::cout << "  tokens       " << budget_pair(c.spent_tokens, c.budget.tokens) << '\n';
  std::cout << "  cost         " << cost_pair(c.spent_cost_usd, c.budget.cost_usd) << '\n';
  std::cout << "  wall time    " << fmt_double(c.spent_wall_time_s, 0) << "s"
            << (c.budget.wall_time_s ? "/" + fmt_double(*c.budget.wall_time_s, 0) + "s" : "")
            << '\n';
  std::cout << "  best         ";
  if (c.best_candidate_id) {
    std::cout << "candidate " << *c.best_candidate_id;
    if (c.best_score) std::cout << " (score " << fmt_double(*c.best_score, 4) << ")";
  } else {
    std::cout << "-";
  }
  std::cout << '\n';
  std::cout << "  created      " << fmt_time(c.created_at) << '\n';
  std::cout << "  started      " << fmt_time(c.started_at) << '\n';
  std::cout << "  finished     " << fmt_time(c.finished_at) << '\n';
  auto last = s.events_of(c.id, 1);
  if (!last.empty()) {
    std::cout << "  last event   " << fmt_time(last.back().created_at) << " " << last.back().kind
              << ": " << last.back().message << '\n';
  }
}

struct list_options {
  std::string state;
  std::string team;
  // Paging (issue #26): a week of campaigns is hundreds of rows. 0: all.
  std::int64_t limit = 50;
  std::int64_t offset = 0;
  bool json = false;
};

void register_list(CLI::App& app, context& ctx) {
  auto opts = std::make_shared<list_options>();
  CLI::App* cmd = app.add_subcommand("list", "List campaigns, newest first");
  std::vector<std::string> states;
  for (auto s : store::campaign_state_names()) states.emplace_back(s);
  cmd->add_option("--state", opts->state, "only campaigns in this state")
      ->check(CLI::IsMember(states));
  cmd->add_option("--team", opts->team, "only this team's campaigns");
  cmd->add_option("--limit", opts->limit, "at most N campaigns (default 50; 0: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--offset", opts->offset, "skip the N newest matching campaigns (paging)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", opts->json, "print JSON on stdout (an array, as without paging)");
  cmd->footer(
      "Newest first, 50 at a time: when more match, stderr says how to see the next page.\n"
      "Examples:\n  kopt list --state running --json\n  kopt list --limit 50 --offset 50\n"
      "  kopt list --limit 0   (every campaign)");
  cmd->callback([opts, &ctx] {
    std::vector<store::campaign_record> cs;
    std::map<store::row_id, std::string> waiting;
    std::int64_t total = 0;
    try {
      store::store s = ctx.open_reader();
      store::transaction snapshot(s.db(), store::transaction::kind::deferred);
      waiting = store::waiting_campaigns(s);
      const auto state =
          opts->state.empty() ? std::nullopt : store::parse_campaign_state(opts->state);
      const auto team =
          opts->team.empty() ? std::nullopt : std::optional<std::string>(opts->team);
      cs = s.list_campaigns(state, team,
                            opts->limit > 0 ? std::optional<std::int64_t>(opts->limit)
                                            : std::nullopt,
                            opts->offset);
      total = s.count_campaigns(state, team);
      snapshot.commit();
    } catch (const not_found_error& e) {
      // No database yet: nothing was ever submitted, which is an empty list.
      std::cerr << "kopt: " << e.what() << '\n';
    }
    if (opts->json) {
      json arr = json::array();
      for (const auto& c : cs) {
        json j = to_json(c);
        const auto w = waiting.find(c.id);
        j["waiting_for"] =
            w != waiting.end() && !store::is_terminal(c.state) ? json(w->second) : json(nullptr);
        arr.push_back(std::move(j));
      }
      print_json(arr);
    } else if (cs.empty()) {
      std::cerr << "kopt: no campaigns" << (opts->offset > 0 ? " at this offset" : "") << '\n';
    } else {
      print_campaign_table(cs, waiting);
    }
    const std::int64_t shown_to = opts->offset + static_cast<std::int64_t>(cs.size());
    // On stderr also with --json, so that stdout stays the plain array.
    if (shown_to < total)
      std::cerr << "kopt: " << cs.size() << " of " << total << " campaign(s) shown; next page: "
                << "--offset " << shown_to << " (or --limit 0 for all)\n";
  });
}

struct status_options {
  std::int64_t campaign = 0;
  bool json = false;
  // Paging of the active campaigns (issue #26), as `kopt list`. 0: all.
  std::int64_t limit = 50;
  std::int64_t offset = 0;
};

// The active campaigns, running then paused then queued (each newest
// first), from `offset` on, at most `limit` (nullopt: all); each state's
// count places the page, so only the page's rows are read.
std::vector<store::campaign_record> active_page(store::store& s,
                                                const std::map<std::string, std::int64_t>& counts,
                                                std::int64_t offset,
                                                std::optional<std::int64_t> limit) {
  std::vector<store::campaign_record> out;
  for (auto st : {store::campaign_state::running, store::campaign_state::paused,
                  store::campaign_state::queued}) {
    if (limit && static_cast<std::int64_t>(out.size()) >= *limit) break;
    const std::int64_t n = counts.at(std::string(store::to_string(st)));
    if (offset >= n) {
      offset -= n;
      continue;
    }
    std::optional<std::int64_t> take;
    if (limit) take = *limit - static_cast<std::int64_t>(out.size());
    for (auto& c : s.list_campaigns(st, std::nullopt, take, offset)) out.push_back(std::move(c));
    offset = 0;
  }
  return out;
}

void register_status(CLI::App& app, context& ctx) {
  auto opts = std::make_shared<status_options>();
  CLI::App* cmd = app.add_subcommand(
      "status", "Summary of the queue, or of one campaign (budgets, spend, best candidate)");
  auto* id_opt =
      cmd->add_option("campaign", opts->campaign, "campaign id")->check(CLI::PositiveNumber);
  cmd->add_flag("--json", opts->json, "print JSON on stdout");
  cmd->add_option("--limit", opts->limit,
                  "without an id: at most N active campaigns (default 50; 0: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--offset", opts->offset, "without an id: skip the first N active campaigns")
      ->check(CLI::NonNegativeNumber);
  cmd->footer(
      "Without an id: the counts by state and the active campaigns (running, paused, queued), "
      "50 at a time; when more are active, stderr says how to see the next page.\n"
      "Examples:\n  kopt status\n  kopt status --offset 50\n  kopt status 3 --json");
  cmd->callback([opts, &ctx, id_opt] {
    store::store s = ctx.open_reader();
    store::transaction snapshot(s.db(), store::transaction::kind::deferred);
    if (id_opt->count() > 0) {
      const auto c = need_campaign(s, opts->campaign);
      if (opts->json) {
        print_json(campaign_status_json(s, c));
      } else {
        print_campaign_status(s, c);
      }
      snapshot.commit();
      return;
    }
    const auto counts = s.campaign_counts();
    const std::int64_t total = counts.at("running") + counts.at("paused") + counts.at("queued");
    const auto active =
        active_page(s, counts, opts->offset,
                    opts->limit > 0 ? std::optional<std::int64_t>(opts->limit) : std::nullopt);
    const std::int64_t shown_to = opts->offset + static_cast<std::int64_t>(active.size());
    if (shown_to < total)
      std::cerr << "kopt: " << active.size() << " of " << total
                << " active campaign(s) shown; next page: --offset " << shown_to
                << " (or --limit 0 for all)\n";
    if (opts->json) {
      json arr = json::array();
      for (const auto& c : active) arr.push_back(to_json(c));
      print_json({{"database", s.path()},
                  {"schema_version", s.file_schema_version()},
                  {"campaigns", counts},
                  {"active", arr},
                  {"active_total", total},
                  {"active_offset", opts->offset}});
    } else {
      std::cout << "database  " << s.path() << '\n';
      std::cout << "campaigns ";
      bool first = true;
      for (auto name : store::campaign_state_names()) {
        std::cout << (first ? "" : ", ") << name << " " << counts.at(std::string(name));
        first = false;
      }
      std::cout << "\n";
      if (!active.empty()) {
        std::cout << '\n';
        print_campaign_table(active);
      }
    }
    snapshot.commit();
  });
}

struct show_options {
  std::int64_t id = 0;
  bool json = false;
  std::int64_t events = 20;
};

void show_campaign(store::store& s, const show_options& o) {
  const auto c = need_campaign(s, o.id);
  const auto op = s.find_operator(c.operator_id);
  const auto workloads = s.workloads_of(c.operator_id);
  const auto candidates = s.candidates_of(c.id);
  const auto events = s.events_of(c.id, o.events);
  std::map<std::string, std::int64_t> by_origin;
  for (const auto& cand : candidates) by_origin[std::string(store::to_string(cand.origin))] += 1;
  if (o.json) {
    json j = campaign_status_json(s, c);
    if (op) j["operator_record"] = to_json(*op, /*with_config=*/true);
    j["workloads"] = json::array();
    for (const auto& w : workloads) j["workloads"].push_back(to_json(w));
    j["candidates"] = json::array();
    for (const auto& cand : candidates) j["candidates"].push_back(to_json(cand, false));
    j["candidates_by_origin"] = by_origin;
    j["events"] = json::array();
    for (const auto& e : events) j["events"].push_back(to_json(e));
    print_json(j);
    return;
  }
  print_campaign_status(s, c);
  if (op) {
    std::cout << "  operator     " << op->name << " (" << op->op_type << "), hash "
              << op->content_hash.substr(0, 12) << ", from " << op->source_path.value_or("-")
              << '\n';
  }
  std::cout << "  candidates   " << candidates.size();
  for (const auto& [origin, n] : by_origin) std::cout << ", " << origin << " " << n;
  std::cout << "\n\nworkloads\n";
  text_table wt({"ID", "KEY", "WEIGHT", "AXES"});
  for (const auto& w : workloads) {
    wt.add({std::to_string(w.id), w.key, fmt_sig(w.weight, 4), w.axes.dump()});
  }
  wt.print(std::cout);
  if (!events.empty()) {
    std::cout << "\nevents (last " << events.size() << ")\n";
    text_table et({"TIME", "LEVEL", "KIND", "MESSAGE"});
    for (const auto& e : events) et.add({fmt_time(e.created_at), e.level, e.kind, e.message});
    et.print(std::cout);
  }
}

// The researcher's part of `show candidate` (kopt::report): its outcome
// and score in the campaign, its iteration and dropout, the LLM call(s).
json candidate_research(store::store& s, const store::candidate_record& c) {
  json j = report::candidate_research_json(s, c);
  const auto d = report::load_campaign(s, c.campaign_id);
  if (const auto* v = d.view(c.id)) {
    j["outcome"] = report::to_string(v->result);
    j["furthest_stage"] = v->furthest_stage;
    j["sol_fraction"] = v->score ? json(*v->score) : json(nullptr);
    j["screen_sol_fraction"] = v->screen_score ? json(*v->screen_score) : json(nullptr);
    j["time_ratio_vs_parent"] = v->time_ratio_vs_parent ? json(*v->time_ratio_vs_parent) : json(nullptr);
    j["on_best_path"] = v->on_best_path;
    j["is_best"] = d.campaign.best_candidate_id == c.id;
  }
  return j;
}

void print_candidate_research(const json& r, const std::vector<store::compilation_record>& compilations,
                              const std::vector<store::evaluation_record>& evaluations) {
  if (r.contains("outcome")) {
    std::cout << "\noutcome        " << r["outcome"].get<std::string>();
    if (r["sol_fraction"].is_number())
      std::cout << ", " << fmt_double(r["sol_fraction"].get<double>() * 100, 1) << " % of speed of light (full sweep)";
    if (r["time_ratio_vs_parent"].is_number())
      std::cout << ", " << fmt_double(1.0 / r["time_ratio_vs_parent"].get<double>(), 2) << "x vs parent";
    if (r.value("is_best", false)) std::cout << ", the campaign's best";
    std::cout << '\n';
  }
  if (r["iteration"].is_object()) {
    const auto& it = r["iteration"];
    std::cout << "iteration      " << it["number"] << " (" << it.value("strategy", "") << ")";
    if (it["dropout_p"].is_number()) std::cout << ", dropout p " << fmt_double(it["dropout_p"].get<double>(), 2);
    std::cout << '\n';
    // What its own LLM call showed when it is linked to one (the call's
    // dropout draw on top of the iteration's); "(call)" marks the items
    // only the call dropped.
    std::set<std::string> iteration_dropped;
    for (const auto& dd : it["dropout"])
      if (!dd.value("kept", false)) iteration_dropped.insert(dd.value("item_id", std::string()));
    const bool per_call = r.contains("call_dropout") && r["call_dropout"].is_array();
    std::string kept, dropped;
    for (const auto& dd : per_call ? r["call_dropout"] : it["dropout"]) {
      const std::string id = dd.value("item_id", std::string());
      std::string& list = dd.value("kept", false) ? kept : dropped;
      list += (list.empty() ? "" : ", ") + id;
      if (!dd.value("kept", false) && !iteration_dropped.count(id)) list += " (call)";
    }
    if (!kept.empty()) std::cout << "  kept         " << kept << '\n';
    if (!dropped.empty()) std::cout << "  dropped      " << dropped << '\n';
  }
  for (const auto& k : compilations) {
    if (k.log.empty()) continue;
    std::cout << "\ncompile log (compilation " << k.id << ", " << k.status << ")\n"
              << k.log << (k.log.ends_with('\n') ? "" : "\n");
  }
  bool header = false;
  for (const auto& e : evaluations) {
    if (e.counters.is_null() || e.counters.empty()) continue;
    if (!header) {
      std::cout << "\ncounters and diagnosis\n";
      header = true;
    }
    std::cout << "  " << e.workload_key << " (" << e.stage << ")\n";
    for (const auto& [k, v] : report::flatten(e.counters)) std::cout << "    " << k << " = " << v << '\n';
  }
}

void print_llm_calls(const json& r) {
  const auto& calls = r["llm_calls"];
  if (calls.empty()) return;
  const std::string link = r.value("llm_call_link", "");
  for (const auto& c : calls) {
    std::cout << "\nLLM call " << c["id"] << " (" << c.value("provider", "") << " / " << c.value("model", "") << ", "
              << c.value("status", "") << ", " << c["prompt_tokens"] << "+" << c["completion_tokens"] << " tokens, $"
              << fmt_double(c.value("cost_usd", 0.0), 4) << ")"
              << (link == "iteration"
                      ? ": a call of this candidate's iteration (not linked to one candidate)"
                      : "")
              << '\n';
    // The prompt is stored as {"system": ..., "messages": [...]}: print
    // each part as the model saw it; anything else as stored.
    const json pj = json::parse(c.value("prompt", ""), nullptr, false);
    if (pj.is_object() && pj.contains("messages")) {
      if (!pj.value("system", "").empty())
        std::cout << "--- system\n" << pj.value("system", "") << '\n';
      for (const auto& m : pj.at("messages"))
        std::cout << "--- " << m.value("role", "user") << '\n' << m.value("content", "") << '\n';
    } else {
      std::cout << "--- prompt\n" << c.value("prompt", "") << '\n';
    }
    std::cout << "--- answer\n"
              << (c["response"].is_string() ? c["response"].get<std::string>()
                                            : std::string("(none)"))
              << '\n';
  }
}

void show_candidate(store::store& s, const show_options& o) {
  auto cand = s.find_candidate(o.id);
  if (!cand) throw not_found_error("no candidate " + std::to_string(o.id) + " in " + s.path());
  const auto compilations = s.compilations_of(cand->id);
  const auto evaluations = s.evaluations_of(cand->id);
  if (o.json) {
    print_json(candidate_show_json(s, o.id));
    return;
  }
  const json research = candidate_research(s, *cand);
  std::cout << "candidate " << cand->id << " [" << store::to_string(cand->origin)
            << "] of campaign " << cand->campaign_id << '\n';
  // The iteration's number in its campaign (as in `kopt log`), not its row id.
  if (research["iteration"].is_object() && research["iteration"]["number"].is_number())
    std::cout << "  iteration    " << research["iteration"]["number"].get<std::int64_t>() << '\n';
  else
    std::cout << "  iteration    -" << (cand->iteration_id ? "" : " (setup)") << '\n';
  std::cout << "  parent       " << fmt_opt(cand->parent_id) << '\n';
  if (cand->provider) {
    std::cout << "  provider     " << *cand->provider << (cand->model ? " / " + *cand->model : "")
              << '\n';
  }
  std::cout << "  source hash  " << cand->source_hash << '\n';
  std::cout << "  created      " << fmt_time(cand->created_at) << '\n';
  if (cand->note) std::cout << "  note         " << *cand->note << '\n';
  if (!compilations.empty()) {
    std::cout << "\ncompilations\n";
    text_table t({"ID", "STATUS", "ARCH", "PARAMS", "REGS", "SMEM", "SPILL", "MS"});
    for (const auto& k : compilations) {
      t.add({std::to_string(k.id), k.status, k.arch, k.parameter_values.dump(),
             fmt_opt(k.registers), fmt_opt(k.shared_bytes), fmt_opt(k.spill_bytes),
             fmt_opt(k.duration_ms, 0)});
    }
    t.print(std::cout);
  }
  if (!evaluations.empty()) {
    std::cout << "\nevaluations\n";
    text_table t({"WORKLOAD", "STAGE", "STATUS", "MEDIAN", "SOL%", "MAX_ABS", "MAX_REL", "SAMPLES",
                  "ERROR"});
    for (const auto& e : evaluations) {
      t.add({e.workload_key, e.stage, std::string(store::to_string(e.status)),
             fmt_ns(e.timing.median_ns),
             e.sol_fraction ? fmt_double(*e.sol_fraction * 100.0, 1) : "-",
             fmt_opt(e.max_abs_err, 6), fmt_opt(e.max_rel_err, 6), fmt_opt(e.timing.samples),
             e.error.value_or("")});
    }
    t.print(std::cout);
  }
  print_candidate_research(research, compilations, evaluations);
  std::cout << "\nlaunch plan\n" << cand->launch_plan.dump(2) << '\n';
  if (!cand->parameters.empty()) std::cout << "\nparameters\n" << cand->parameters.dump(2) << '\n';
  std::cout << "\nsource\n" << cand->source << (cand->source.ends_with('\n') ? "" : "\n");
  print_llm_calls(research);
}

void register_show(CLI::App& app, context& ctx) {
  CLI::App* show = app.add_subcommand("show", "Show one campaign or candidate in full");
  show->require_subcommand(1);
  show->footer("Examples:\n  kopt show campaign 3\n  kopt show candidate 42 --json");

  auto co = std::make_shared<show_options>();
  CLI::App* campaign = show->add_subcommand(
      "campaign", "A campaign: state, budgets, operator, workloads, candidates, recent events");
  campaign->add_option("id", co->id, "campaign id")->required()->check(positive_id("campaign id"));
  campaign->add_option("--events", co->events, "how many recent events to show")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  campaign->add_flag("--json", co->json, "print JSON on stdout");
  campaign->callback([co, &ctx] {
    store::store s = ctx.open_reader();
    store::transaction snapshot(s.db(), store::transaction::kind::deferred);
    show_campaign(s, *co);
    snapshot.commit();
  });

  auto ko = std::make_shared<show_options>();
  CLI::App* candidate = show->add_subcommand(
      "candidate", "A candidate: source, launch plan, compilations, per-workload evaluations");
  candidate->add_option("id", ko->id, "candidate id")
      ->required()
      ->check(positive_id("candidate id"));
  candidate->add_flag("--json", ko->json, "print JSON on stdout (source included)");
  candidate->callback([ko, &ctx] {
    store::store s = ctx.open_reader();
    store::transaction snapshot(s.db(), store::transaction::kind::deferred);
    show_candidate(s, *ko);
    snapshot.commit();
  });
}

struct log_options {
  std::int64_t campaign = 0;
  bool json = false;
};

// `kopt log --json`: the store's iteration summaries with the researcher's
// columns (kopt::report) merged in.
json log_json_of(const store::campaign_record& c, const std::vector<store::iteration_summary>& rows,
                 const std::map<std::int64_t, const json*>& by_number) {
  json arr = json::array();
  for (const auto& r : rows) {
    json j = to_json(r);
    if (auto f = by_number.find(r.iteration.number); f != by_number.end()) {
      const json& e = *f->second;
      j["candidate_ids"] = e["candidates"];
      j["outcome_classes"] = e["outcomes"];
      j["best_full_candidate_id"] = e["best_candidate_id"];
      j["best_sol_fraction"] = e["best_sol_fraction"];
      for (const char* k : {"incumbent_id", "incumbent_sol_fraction", "promoted", "gain", "dropout",
                            "escalations", "elapsed_s", "tokens", "cost_usd", "models"})
        j[k] = e[k];
    }
    arr.push_back(std::move(j));
  }
  return {{"campaign_id", c.id}, {"state", store::to_string(c.state)}, {"iterations", arr}};
}

void register_log(CLI::App& app, context& ctx) {
  auto opts = std::make_shared<log_options>();
  CLI::App* cmd = app.add_subcommand(
      "log", "Iteration table of a campaign: outcomes, spend, best per iteration");
  cmd->add_option("campaign", opts->campaign, "campaign id")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", opts->json, "print JSON on stdout");
  cmd->footer(
      "SCORE is the weight-averaged fraction of speed of light of the iteration's best candidate\n"
      "among those correct on every workload they were evaluated on; SO FAR is the campaign's best\n"
      "after the iteration. OUTCOMES: C compile error, X incorrect or crashed, I integrity\n"
      "rejection, S slower / F faster than the parent, K correct without comparison, N not\n"
      "evaluated. KEPT/DROP: optional prompt items kept and dropped by dropout.\n"
      "Example: kopt log 3 --json");
  cmd->callback([opts, &ctx] {
    store::store s = ctx.open_reader();
    const auto c = need_campaign(s, opts->campaign);
    const auto rows = s.iteration_summaries(c.id);
    // The researcher's columns (kopt::report): outcome classes, the best so
    // far, dropout, escalations, promotions, spend reported by the source.
    const auto data = report::load_campaign(s, c.id);
    const json extra = report::log_json(data);
    std::map<std::int64_t, const json*> by_number;
    for (const auto& e : extra) by_number[e["number"].get<std::int64_t>()] = &e;
    if (opts->json) {
      print_json(log_json_of(c, rows, by_number));
      return;
    }
    if (rows.empty()) {
      std::cerr << "kopt: campaign " << c.id << " (" << store::to_string(c.state)
                << ") has no iterations yet\n";
      return;
    }
    text_table t({"ITER", "STATUS", "STRATEGY", "PARENT", "CANDS", "CERR", "OK", "FAILED", "BEST",
                  "SCORE", "SO FAR", "OUTCOMES", "KEPT/DROP", "LLM", "TOKENS", "COST", "TIME", "EVENTS"});
    for (const auto& r : rows) {
      const auto& it = r.iteration;
      const std::int64_t ok = r.outcomes.contains("ok") ? r.outcomes.at("ok") : 0;
      const std::int64_t skipped = r.outcomes.contains("skipped") ? r.outcomes.at("skipped") : 0;
      std::string so_far = "-", outcomes, dropout = "-", events;
      std::int64_t tokens = r.tokens;
      double cost = r.cost_usd;
      if (auto f = by_number.find(it.number); f != by_number.end()) {
        const json& e = *f->second;
        if (e["incumbent_sol_fraction"].is_number())
          so_far = fmt_double(e["incumbent_sol_fraction"].get<double>(), 3);
        // Short codes: C compile error, X incorrect, I integrity, S slower,
        // F faster, K correct (no comparison), N not evaluated.
        static const std::pair<const char*, const char*> codes[] = {
            {"compile_error", "C"}, {"incorrect", "X"}, {"integrity_rejection", "I"}, {"slower", "S"},
            {"faster", "F"},        {"correct", "K"},   {"not_run", "N"}};
        for (const auto& [k, code] : codes)
          if (e["outcomes"].value(k, 0) > 0)
            outcomes += (outcomes.empty() ? "" : " ") + std::to_string(e["outcomes"].value(k, 0)) + code;
        if (e["dropout"]["kept"].get<std::int64_t>() + e["dropout"]["dropped"].get<std::int64_t>() > 0)
          dropout = std::to_string(e["dropout"]["kept"].get<std::int64_t>()) + "/" +
                    std::to_string(e["dropout"]["dropped"].get<std::int64_t>());
        if (e.value("promoted", false))
          events = "promoted +" + fmt_double(e.value("gain", 0.0) * 100, 1) + "%";
        for (const auto& x : e["escalations"])
          events += (events.empty() ? "" : ", ") + std::string("escalate: ") + x.get<std::string>();
        tokens = e.value("tokens", tokens);
        cost = e.value("cost_usd", cost);
      }
      t.add({std::to_string(it.number), it.status, it.strategy.empty() ? "-" : it.strategy,
             fmt_opt(it.parent_candidate_id), std::to_string(r.candidates),
             std::to_string(r.compile_errors), std::to_string(ok),
             std::to_string(r.evaluations - ok - skipped), fmt_opt(r.best_candidate_id),
             fmt_opt(r.best_score, 3), so_far, outcomes.empty() ? "-" : outcomes, dropout,
             std::to_string(r.llm_calls), std::to_string(tokens), "$" + fmt_double(cost, 3),
             it.finished_at ? fmt_duration_ms(*it.finished_at - it.started_at) : "...",
             events.empty() ? "-" : events});
    }
    t.print(std::cout);
  });
}

}  // namespace

void register_inspect(CLI::App& app, context& ctx, exit_status& /*status*/) {
  register_list(app, ctx);
  register_status(app, ctx);
  register_show(app, ctx);
  register_log(app, ctx);
}

json campaign_status_json(store::store& s, store::row_id campaign_id) {
  return campaign_status_json(s, need_campaign(s, campaign_id));
}

json campaign_log_json(store::store& s, store::row_id campaign_id) {
  const auto c = need_campaign(s, campaign_id);
  const auto rows = s.iteration_summaries(c.id);
  const json extra = report::log_json(report::load_campaign(s, c.id));
  std::map<std::int64_t, const json*> by_number;
  for (const auto& e : extra) by_number[e["number"].get<std::int64_t>()] = &e;
  return log_json_of(c, rows, by_number);
}

json candidate_show_json(store::store& s, store::row_id candidate_id) {
  auto cand = s.find_candidate(candidate_id);
  if (!cand)
    throw not_found_error("no candidate " + std::to_string(candidate_id) + " in " + s.path());
  json j = to_json(*cand, /*with_source=*/true);
  j["compilations"] = json::array();
  for (const auto& k : s.compilations_of(cand->id)) j["compilations"].push_back(to_json(k));
  j["evaluations"] = json::array();
  for (const auto& e : s.evaluations_of(cand->id)) j["evaluations"].push_back(to_json(e));
  j["research"] = candidate_research(s, *cand);
  return j;
}

}  // namespace kopt::cli
