#include "campaign/loop.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "campaign/workloads.hpp"
#include "common/error.hpp"

namespace kopt::campaign {

using json = nlohmann::json;

namespace {

template <typename T>
std::optional<T> opt_from(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<T>();
}

json item_json(const prompt_item& i) {
  return {{"id", i.id}, {"kind", i.kind}, {"text", i.text}, {"optional", i.optional}};
}

prompt_item item_from(const json& j) {
  return {j.value("id", ""), j.value("kind", ""), j.value("text", ""), j.value("optional", true)};
}

std::string cache_key(const std::string& stage, std::uint64_t seed,
                      const std::vector<std::string>& workloads, const std::string& who) {
  std::string k = stage + "|" + std::to_string(seed) + "|";
  for (const auto& w : workloads) k += w + ",";
  return k + "|" + who;
}

}  // namespace

// --- settings and state -------------------------------------------------------

std::vector<prompt_item> default_directives() {
  const std::pair<const char*, const char*> d[] = {
      {"vectorized-memory", "Use vectorized loads and stores (16 bytes per thread)."},
      {"coalescing", "Make global memory accesses coalesced across a warp."},
      {"warp-reduction", "Reduce within a warp with shuffles before shared memory."},
      {"shared-memory-tiling", "Stage reused data in shared memory tiles."},
      {"occupancy", "Tune block size and registers for occupancy."},
      {"launch-overhead", "For small shapes, minimize launches and per-launch work."},
      {"async-copy", "Overlap loads and compute with cp.async / TMA pipelines."},
  };
  std::vector<prompt_item> out;
  for (const auto& [id, text] : d) out.push_back({std::string("directive:") + id, "directive", text, true});
  return out;
}

loop_settings loop_settings::from_campaign(const store::campaign_record& c) {
  loop_settings s;
  const json& j = c.settings;
  s.candidates_per_iteration =
      static_cast<std::size_t>(std::max<std::int64_t>(1, j.value("candidates_per_iteration", 4)));
  s.dropout_p = j.value("dropout_p", 0.3);
  s.seed = j.value("seed", std::uint64_t{1});
  s.target_sol_fraction = j.value("target_sol_fraction", 0.8);
  s.budget = c.budget;
  s.directives = default_directives();
  const json l = j.value("loop", json::object());
  s.escalated_dropout_p = l.value("escalated_dropout_p", std::max(0.6, s.dropout_p));
  s.max_llm_errors = l.value("max_llm_errors", s.max_llm_errors);
  s.stagnation_window = l.value("stagnation_window", s.stagnation_window);
  s.stagnation_gain = l.value("stagnation_gain", s.stagnation_gain);
  s.elite_size = l.value("elite_size", s.elite_size);
  s.explore_p = l.value("explore_p", s.explore_p);
  s.screen_margin = l.value("screen_margin", s.screen_margin);
  s.promotion.min_gain = l.value("promotion_min_gain", s.promotion.min_gain);
  s.promotion.max_regression = l.value("promotion_max_regression", s.promotion.max_regression);
  s.base_seed = l.value("base_seed", s.base_seed);
  s.history_window = static_cast<std::size_t>(std::max<std::int64_t>(
      1, l.value("history_window", static_cast<std::int64_t>(s.history_window))));
  if (l.contains("directives")) {
    s.directives.clear();
    for (const auto& d : l.at("directives"))
      s.directives.push_back({"directive:" + d.value("id", ""), "directive", d.value("text", ""), true});
  }
  return s;
}

json loop_settings::to_json() const {
  json d = json::array();
  for (const auto& i : directives) d.push_back(item_json(i));
  return {{"candidates_per_iteration", candidates_per_iteration},
          {"dropout_p", dropout_p},
          {"escalated_dropout_p", escalated_dropout_p},
          {"seed", seed},
          {"target_sol_fraction", target_sol_fraction},
          {"max_llm_errors", max_llm_errors},
          {"stagnation_window", stagnation_window},
          {"stagnation_gain", stagnation_gain},
          {"elite_size", elite_size},
          {"explore_p", explore_p},
          {"screen_margin", screen_margin},
          {"promotion",
           {{"min_gain", promotion.min_gain},
            {"max_regression", promotion.max_regression},
            {"confidence", promotion.confidence}}},
          {"base_seed", base_seed},
          {"history_window", history_window},
          {"directives", d}};
}

json loop_state::to_json() const {
  json el = json::array();
  for (const auto& e : elites) el.push_back({{"id", e.id}, {"key", e.key}, {"time_score", e.time_score}});
  json h = json::array();
  for (const auto& i : history) h.push_back(item_json(i));
  return {{"completed", completed},
          {"best_id", best_id ? json(*best_id) : json(nullptr)},
          {"best_key", best_key},
          {"best_sol", best_sol},
          {"best_time", best_time},
          {"elites", el},
          {"stagnant", stagnant},
          {"level", level},
          {"history", h},
          {"masked", masked},
          {"llm_errors", llm_errors},
          {"fatal", fatal ? json(*fatal) : json(nullptr)},
          {"exhausted", exhausted},
          {"screen_workloads", screen_workloads}};
}

loop_state loop_state::from_json(const json& j) {
  loop_state s;
  s.completed = j.value("completed", std::int64_t{-1});
  s.best_id = opt_from<store::row_id>(j, "best_id");
  s.best_key = j.value("best_key", "");
  s.best_sol = j.value("best_sol", 0.0);
  s.best_time = j.value("best_time", 0.0);
  for (const auto& e : j.value("elites", json::array()))
    s.elites.push_back({e.value("id", store::row_id{0}), e.value("key", ""), e.value("time_score", 0.0)});
  s.stagnant = j.value("stagnant", 0);
  s.level = j.value("level", 0);
  for (const auto& i : j.value("history", json::array())) s.history.push_back(item_from(i));
  // Checkpoints from before the window held every note and a "gains" map;
  // iterate() trims the history at its next checkpoint, and the gains are
  // read from the "promoted" events (attribution()).
  s.masked = j.value("masked", std::set<std::string>{});
  s.llm_errors = j.value("llm_errors", std::int64_t{0});
  s.fatal = opt_from<std::string>(j, "fatal");
  s.exhausted = j.value("exhausted", false);
  s.screen_workloads = j.value("screen_workloads", std::vector<std::string>{});
  return s;
}

// --- the loop -------------------------------------------------------------------

campaign_loop::campaign_loop(store::store& db, store::row_id campaign_id,
                             const config::operator_config& op, candidate_source& source,
                             evaluator& ev, loop_settings settings, loop_hooks hooks)
    : db_(db),
      campaign_id_(campaign_id),
      op_(op),
      source_(source),
      ev_(ev),
      s_(std::move(settings)),
      hooks_(std::move(hooks)) {
  // Private workloads weigh nothing in screening, comparison and the
  // score; they are measured at verify only and reported separately.
  for (const auto& w : op_.workloads)
    if (!w.is_private) weights_[w.id] = w.weight;
}

void campaign_loop::hook(std::string_view point, std::int64_t n) {
  if (hooks_.at) hooks_.at(point, n);
}

store::row_id campaign_loop::event(const std::string& kind, const std::string& message, json data,
                                   const std::string& level) {
  store::event_record e;
  e.campaign_id = campaign_id_;
  e.kind = kind;
  e.level = level;
  e.message = message;
  e.data = std::move(data);
  return db_.add_event(e);
}

std::vector<std::string> campaign_loop::all_workloads() const {
  return workload_ids(op_, false);
}

std::string campaign_loop::smallest_workload() const {
  const config::workload* best = nullptr;
  for (const auto& w : op_.workloads)
    if (!w.is_private && (!best || size_proxy(op_, w) < size_proxy(op_, *best))) best = &w;
  return best ? best->id : std::string();
}

void campaign_loop::load() {
  const auto c = db_.find_campaign(campaign_id_);
  if (!c) throw kopt::not_found_error(fmt::format("campaign {} does not exist", campaign_id_));
  operator_id_ = c->operator_id;
  st_ = loop_state{};
  cache_.clear();
  proposals_.clear();
  finished_.reset();
  by_key_.clear();
  variants_.clear();
  // O(1) in the campaign's history (issue #26): the last checkpoint, the
  // last proposals and the "finished" event by index; evaluation results
  // and candidates by key when they are needed (evaluate_cached,
  // candidate_id_of), never the whole journal.
  if (const auto e = db_.latest_event(campaign_id_, "loop_state"))
    st_ = loop_state::from_json(e->data);
  // Only the iteration after the checkpoint can have stored proposals that
  // are not finished (proposals are stored in iteration order).
  if (const auto e = db_.latest_event(campaign_id_, "proposals")) {
    const auto n = e->data.value("iteration", std::int64_t{-1});
    if (n > st_.completed) proposals_[n] = e->data;
  }
  if (const auto e = db_.latest_event(campaign_id_, "finished")) finished_ = e->data;
  // Rows written before schema v5 have no content key: computed once, here.
  const auto unkeyed = db_.candidates_without_key(campaign_id_);
  if (!unkeyed.empty()) {
    store::transaction tx(db_.db());
    for (const auto& cand : unkeyed)
      db_.set_candidate_key(cand.id, content_key(candidate_json(cand)));
    tx.commit();
  }
}

std::optional<store::row_id> campaign_loop::candidate_id_of(const std::string& key) {
  if (auto it = by_key_.find(key); it != by_key_.end()) return it->second;
  const auto id = db_.find_candidate_by_key(campaign_id_, key);
  if (id) by_key_.emplace(key, *id);
  return id;
}

const json& campaign_loop::variant_of(store::row_id id) {
  auto it = variants_.find(id);
  if (it != variants_.end()) return it->second;
  const auto c = db_.find_candidate(id);
  if (!c) throw kopt::not_found_error(fmt::format("candidate {} does not exist", id));
  return variants_[id] = candidate_json(*c);
}

store::row_id campaign_loop::candidate_row(const json& variant, store::candidate_origin origin,
                                           std::optional<store::row_id> parent,
                                           std::optional<store::row_id> iteration,
                                           const std::string& note, const proposal* from) {
  const auto key = content_key(variant);
  if (auto found = candidate_id_of(key)) return *found;
  store::candidate_record c;
  c.content_key = key;
  c.campaign_id = campaign_id_;
  c.iteration_id = iteration;
  c.parent_id = parent;
  c.origin = origin;
  c.source = variant.value("source", "");
  json launch_plan = variant;
  launch_plan.erase("source");
  c.launch_plan = launch_plan;
  c.parameters = variant.value("parameters", json::object());
  c.provider = source_.name();
  if (from) {
    c.llm_call_id = from->llm_call_id;
    if (!from->model.empty()) c.model = from->model;
  }
  if (!note.empty()) c.note = note;
  const auto id = db_.add_candidate(c);
  // The maps run ahead of the commit; if the transaction rolls back the
  // exception ends this loop object, and the next one reloads from the store.
  by_key_[key] = id;
  variants_[id] = variant;
  return id;
}

std::map<std::string, subject_result> campaign_loop::evaluate_cached(
    const std::string& stage, const std::vector<subject_in>& subjects,
    const std::vector<std::string>& workloads, std::uint64_t base_seed,
    std::optional<store::row_id> iteration_id) {
  // Compare results only mean something as a pair: key them by both.
  std::string pair;
  if (stage == "compare")
    for (const auto& s : subjects) pair += content_key(variant_of(s.id)) + "/";
  std::map<std::string, subject_result> out;
  eval_request rq;
  rq.stage = stage;
  rq.workloads = workloads;
  rq.base_seed = base_seed;
  rq.campaign_id = campaign_id_;
  rq.operator_id = operator_id_;
  rq.iteration_id = iteration_id;
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const auto& s : subjects) {
    const json& v = variant_of(s.id);
    const std::string key = content_key(v);
    const std::string ck = cache_key(stage, base_seed, workloads, stage == "compare" ? pair + s.role : key);
    if (auto it = cache_.find(ck); it != cache_.end()) {
      ++cache_hits_;
      out[s.role] = it->second;
      continue;
    }
    if (auto stored = db_.journaled_result(campaign_id_, ck)) {
      ++cache_hits_;
      out[s.role] = cache_[ck] = subject_result::from_json(*stored);
      continue;
    }
    if (!seen.insert(ck).second) continue;
    rq.subjects.push_back({s.role, s.id, v, default_point(v), key});
    keys.push_back(ck);
  }
  if (rq.subjects.empty()) return out;
  const eval_batch b = ev_.evaluate(rq);
  store::transaction tx(db_.db());
  ev_.record(db_, rq, b);
  json subj = json::array();
  for (std::size_t i = 0; i < rq.subjects.size(); ++i) {
    auto it = b.by_role.find(rq.subjects[i].role);
    subject_result r = it == b.by_role.end() ? subject_result{"not_run", {}} : it->second;
    subj.push_back({{"role", rq.subjects[i].role},
                    {"candidate_id", rq.subjects[i].candidate_id},
                    {"key", rq.subjects[i].key},
                    {"cache_key", keys[i]},
                    {"result", r.to_json(stage == "compare")}});
  }
  const auto event_id = event("evaluated",
                              fmt::format("{} of {} subject(s) on {} workload(s)", stage,
                                          rq.subjects.size(), workloads.size()),
                              {{"stage", stage},
                               {"base_seed", base_seed},
                               {"workloads", workloads},
                               {"iteration_id", iteration_id ? json(*iteration_id) : json(nullptr)},
                               {"subjects", subj},
                               {"device", b.device},
                               {"events", b.events}},
                              "debug");
  for (std::size_t i = 0; i < keys.size(); ++i)
    db_.journal_result(campaign_id_, keys[i], event_id, static_cast<std::int64_t>(i));
  tx.commit();
  for (std::size_t i = 0; i < rq.subjects.size(); ++i) {
    auto it = b.by_role.find(rq.subjects[i].role);
    subject_result r = it == b.by_role.end() ? subject_result{"not_run", {}} : it->second;
    if (stage != "compare")
      for (auto& [w, wr] : r.workloads) wr.samples_ns.clear();  // as the journal keeps it
    cache_[keys[i]] = r;
    out[rq.subjects[i].role] = r;
  }
  // Duplicated subjects (same content twice in one request) share a result.
  for (const auto& s : subjects)
    if (!out.count(s.role)) {
      const std::string key = content_key(variant_of(s.id));
      out[s.role] = cache_.at(cache_key(stage, base_seed, workloads, stage == "compare" ? pair + s.role : key));
    }
  return out;
}

std::map<std::string, workload_result> campaign_loop::full_of(store::row_id id) {
  auto r = evaluate_cached("full", {{"x", id}}, all_workloads(), s_.base_seed, std::nullopt);
  return r.at("x").workloads;
}

void campaign_loop::add_elite(store::row_id id, double time_score) {
  if (!(time_score > 0)) return;
  for (const auto& e : st_.elites)
    if (e.id == id) return;
  st_.elites.push_back({id, content_key(variant_of(id)), time_score});
  std::stable_sort(st_.elites.begin(), st_.elites.end(),
                   [](const elite& a, const elite& b) { return a.time_score < b.time_score; });
  // Keep the pool small, but never drop the best.
  while (st_.elites.size() > std::max<std::size_t>(s_.elite_size, 1)) {
    auto victim = st_.elites.end() - 1;
    if (st_.best_id && victim->id == *st_.best_id) --victim;
    st_.elites.erase(victim);
  }
}

store::row_id campaign_loop::iteration_row(std::int64_t n, const plan& p) {
  if (const auto it = db_.find_iteration(campaign_id_, n)) return it->id;
  store::transaction tx(db_.db());
  store::iteration_record r;
  r.campaign_id = campaign_id_;
  r.number = n;
  if (p.parent_id) r.parent_candidate_id = p.parent_id;
  r.strategy = p.strategy;
  if (n > 0) r.dropout_p = p.p;
  json items = json::array();
  for (const auto& i : p.dropout.kept) items.push_back(i.id);
  r.prompt_info = {{"items", items},
                   {"masked_history", st_.masked},
                   {"different_algorithm", p.different_algorithm},
                   {"escalation", std::string(to_string(static_cast<escalation>(st_.level)))},
                   {"dropout_seed", derive_seed(s_.seed, "dropout", n)}};
  const auto id = db_.add_iteration(r);
  if (!p.dropout.decisions.empty()) db_.add_dropout_decisions(id, p.dropout.decisions);
  tx.commit();
  return id;
}

void campaign_loop::setup() {
  plan p;
  p.strategy = "setup";
  const auto it_id = iteration_row(0, p);
  hook("iteration_started", 0);
  std::vector<subject_in> subjects;
  std::optional<store::row_id> seed_id, baseline_id, ref_id;
  {
    store::transaction tx(db_.db());
    if (op_.seed)
      seed_id = candidate_row(op_.seed->to_json(), store::candidate_origin::seed, std::nullopt, it_id, "seed");
    if (op_.baseline)
      baseline_id = candidate_row(op_.baseline->to_json(), store::candidate_origin::baseline, std::nullopt, it_id,
                                  "baseline");
    if (!seed_id && !baseline_id)
      ref_id = candidate_row(op_.reference.to_json(), store::candidate_origin::reference, std::nullopt, it_id,
                             "reference as the starting point");
    tx.commit();
  }
  if (seed_id) subjects.push_back({"seed", *seed_id});
  if (baseline_id) subjects.push_back({"baseline", *baseline_id});
  if (ref_id) subjects.push_back({"reference", *ref_id});
  const auto res = evaluate_cached("full", subjects, all_workloads(), s_.base_seed, it_id);
  hook("after_full", 0);

  // The seed is where the search starts; the baseline is what the winner is
  // compared with at the end (and an elite for restarts).
  std::optional<store::row_id> start;
  std::string start_role;
  for (const auto& s : subjects)
    if (!start && res.at(s.role).all_ok(all_workloads())) {
      start = s.id;
      start_role = s.role;
    }
  store::transaction tx(db_.db());
  if (!start) {
    db_.finish_iteration(it_id, "failed", "no correct starting candidate");
    st_.fatal = "no correct starting candidate: the seed, baseline or reference failed on some workload";
    st_.completed = 0;
    event("loop_state", "set-up failed", st_.to_json(), "debug");
    tx.commit();
    return;
  }
  st_.best_id = start;
  st_.best_key = content_key(variant_of(*start));
  const auto& best_full = res.at(start_role).workloads;
  st_.best_time = weighted_geomean_time(best_full, weights_);
  st_.best_sol = weighted_sol(best_full, weights_);
  for (const auto& s : subjects)
    add_elite(s.id, weighted_geomean_time(res.at(s.role).workloads, weights_));
  std::map<std::string, double> times;
  for (const auto& [w, r] : best_full) times[w] = r.median_ns;
  const auto rep = representative_workloads(op_, times);
  st_.screen_workloads = rep.workloads;
  st_.history.push_back({"history:best", "history",
                         fmt::format("The current best runs at {:.1f} % of speed of light (weighted).",
                                     100 * st_.best_sol),
                         false});
  if (baseline_id && res.at("baseline").all_ok(all_workloads()))
    st_.history.push_back(
        {"history:baseline", "history",
         fmt::format("The baseline's weighted geomean time is {:.1f} us.",
                     weighted_geomean_time(res.at("baseline").workloads, weights_) / 1e3),
         false});
  st_.completed = 0;
  db_.set_best_candidate(campaign_id_, *start, st_.best_sol);
  event("representative_workloads", fmt::format("screening on {}", fmt::join(rep.workloads, ", ")),
        rep.to_json());
  event("loop_state", "set-up done", st_.to_json(), "debug");
  db_.finish_iteration(it_id, "done", "start: " + start_role);
  tx.commit();
  hook("after_setup", 0);
}

campaign_loop::plan campaign_loop::plan_iteration(std::int64_t n) {
  plan p;
  const auto level = static_cast<escalation>(st_.level);
  p.p = level >= escalation::higher_p ? std::max(s_.dropout_p, s_.escalated_dropout_p) : s_.dropout_p;
  std::vector<const elite*> others;
  for (const auto& e : st_.elites)
    if (!st_.best_id || e.id != *st_.best_id) others.push_back(&e);
  auto pick_other = [&] {
    const double u = unit_draw(derive_seed(s_.seed, "elite", n));
    const auto i = std::min(others.size() - 1, static_cast<std::size_t>(u * static_cast<double>(others.size())));
    return others[i]->id;
  };
  p.parent_id = st_.best_id.value_or(0);
  p.strategy = "improve";
  if (level == escalation::restart_from_elite && !others.empty()) {
    p.parent_id = pick_other();
    p.strategy = "restart_elite";
  } else if (!others.empty() && unit_draw(derive_seed(s_.seed, "explore", n)) < s_.explore_p) {
    p.parent_id = pick_other();
    p.strategy = "diverse";
  }
  if (level == escalation::different_algorithm) {
    p.different_algorithm = true;
    p.strategy = "new_algorithm";
  }
  p.items = s_.directives;
  for (const auto& h : st_.history)
    if (!st_.masked.count(h.id)) p.items.push_back(h);
  if (hooks_.snippets) {
    prompt_context probe;
    probe.op = &op_;
    probe.iteration = n;
    probe.parent_id = p.parent_id;
    probe.parent_results = full_of(p.parent_id);  // its diagnosis keys the retrieval
    for (auto& s : hooks_.snippets(probe)) {
      s.kind = "snippet";
      p.items.push_back(s);
    }
  }
  p.dropout = apply_dropout(p.items, p.p, derive_seed(s_.seed, "dropout", n));
  return p;
}

void campaign_loop::iterate(std::int64_t n) {
  const auto started = std::chrono::steady_clock::now();
  const plan p = plan_iteration(n);
  const auto it_id = iteration_row(n, p);
  hook("iteration_started", n);
  const json& parent = variant_of(p.parent_id);
  const std::string parent_key = content_key(parent);

  // Proposals: asked once, stored before anything is evaluated.
  std::vector<store::row_id> ids;
  json answer_info;
  if (auto it = proposals_.find(n); it != proposals_.end()) {
    answer_info = it->second;
    ids = answer_info.value("candidate_ids", std::vector<store::row_id>{});
  } else {
    prompt_context ctx;
    ctx.op = &op_;
    ctx.iteration = n;
    ctx.iteration_id = it_id;
    ctx.strategy = p.strategy;
    ctx.parent_id = p.parent_id;
    ctx.parent = parent;
    ctx.parent_point = default_point(parent);
    ctx.parent_results = full_of(p.parent_id);
    ctx.items = p.dropout.kept;
    ctx.different_algorithm = p.different_algorithm;
    ctx.k = s_.candidates_per_iteration;
    ctx.seed = derive_seed(s_.seed, "source", n);
    ctx.already_tried = [this](const std::string& key) { return candidate_id_of(key).has_value(); };
    const source_answer a = source_.propose(ctx);
    if (a.waiting && a.proposals.empty()) {
      // Nothing stored: the next run plans the same iteration (same seeds)
      // and asks again.
      waiting_ = *a.waiting;
      return;
    }
    store::transaction tx(db_.db());
    for (const auto& pr : a.proposals) {
      const auto id = candidate_row(pr.candidate, pr.origin, p.parent_id, it_id, pr.note, &pr);
      if (std::find(ids.begin(), ids.end(), id) == ids.end() && id != p.parent_id)
        ids.push_back(id);
    }
    answer_info = {{"iteration", n},
                   {"candidate_ids", ids},
                   {"tokens", a.tokens},
                   {"cost_usd", a.cost_usd},
                   {"llm_errors", a.llm_errors},
                   {"problems", a.problems},
                   {"fatal", a.fatal ? json(*a.fatal) : json(nullptr)}};
    event("proposals", fmt::format("iteration {}: {} candidate(s) from {}", n, ids.size(), source_.name()),
          answer_info, "debug");
    if (a.tokens || a.cost_usd > 0) db_.add_campaign_spend(campaign_id_, 0, a.tokens, a.cost_usd);
    tx.commit();
    proposals_[n] = answer_info;
  }
  hook("after_proposals", n);

  // Screen: the parent and the proposals on the representative workloads.
  std::vector<subject_in> screen = {{"parent", p.parent_id}};
  for (std::size_t i = 0; i < ids.size(); ++i) screen.push_back({fmt::format("c{}", i), ids[i]});
  std::map<std::string, double> sw;
  for (const auto& w : st_.screen_workloads) sw[w] = weights_.at(w);
  std::size_t screened = 0;
  std::vector<subject_in> survivors;
  if (!ids.empty()) {
    const auto sr = evaluate_cached("screen", screen, st_.screen_workloads, s_.base_seed, it_id);
    hook("after_screen", n);
    const auto& ps = sr.at("parent");
    const bool parent_ok = ps.all_ok(st_.screen_workloads);
    for (std::size_t i = 1; i < screen.size(); ++i) {
      const auto& r = sr.at(screen[i].role);
      if (!r.all_ok(st_.screen_workloads)) continue;
      ++screened;
      const double ratio = parent_ok ? weighted_geomean_ratio(ps.workloads, r.workloads, sw) : 0.0;
      if (!parent_ok || ratio < 1.0 - s_.screen_margin) survivors.push_back(screen[i]);
    }
  }
  // Full sweep for the survivors.
  std::optional<store::row_id> challenger;
  double challenger_time = 0;
  std::map<std::string, workload_result> challenger_full;
  if (!survivors.empty()) {
    const auto fr = evaluate_cached("full", survivors, all_workloads(), s_.base_seed, it_id);
    hook("after_full", n);
    for (const auto& s : survivors) {
      const auto& r = fr.at(s.role);
      if (!r.all_ok(all_workloads())) continue;
      const double t = weighted_geomean_time(r.workloads, weights_);
      add_elite(s.id, t);
      if (!challenger || t < challenger_time) {
        challenger = s.id;
        challenger_time = t;
        challenger_full = r.workloads;
      }
    }
  }
  // Head to head with the incumbent, fresh input seeds.
  std::optional<promotion_decision> decision;
  std::optional<json> sanitized;
  if (challenger && st_.best_id && challenger_time < st_.best_time) {
    const auto cr = evaluate_cached("compare", {{"incumbent", *st_.best_id}, {"challenger", *challenger}},
                                    all_workloads(), derive_seed(s_.seed, "compare", n), it_id);
    hook("after_compare", n);
    promotion_rule rule = s_.promotion;
    rule.seed = derive_seed(s_.seed, "bootstrap", n);
    decision = decide_promotion(cr.at("incumbent"), cr.at("challenger"), weights_, rule);
    if (decision->promoted()) {
      // A finalist runs under compute-sanitizer before it is promoted: a
      // race or an uninitialised read that happened to pass the checks is
      // rejected here (docs/integrity.md, class 4).
      eval_request sq;
      sq.stage = "sanitize";
      sq.workloads = {smallest_workload()};
      sq.base_seed = derive_seed(s_.seed, "sanitize", n);
      sq.campaign_id = campaign_id_;
      sq.operator_id = operator_id_;
      sq.iteration_id = it_id;
      const json& v = variant_of(*challenger);
      sq.subjects.push_back({"challenger", *challenger, v, default_point(v), content_key(v)});
      sanitized = ev_.sanitize(sq);
      (*sanitized)["workload"] = sq.workloads.front();
      if (sanitized->value("status", "") == "rejected_integrity") {
        decision->v = promotion_decision::verdict::incorrect;
        decision->gain = 0;
        decision->reason = "compute-sanitizer: " + sanitized->value("reason", std::string());
      }
    }
  }
  hook("before_finish", n);

  // Bookkeeping, all in the transaction that finishes the iteration.
  store::transaction tx(db_.db());
  const bool promoted = decision && decision->promoted();
  double gain = 0;
  if (decision)
    event(promoted ? "promoted" : "not_promoted",
          fmt::format("iteration {}: candidate {} {}: {}", n, *challenger,
                      promoted ? "is the new best" : "keeps the incumbent", decision->reason),
          {{"iteration", n},
           {"challenger", *challenger},
           {"incumbent", *st_.best_id},
           {"decision", decision->to_json()},
           {"sanitize", sanitized ? *sanitized : json(nullptr)}});
  if (promoted) {
    gain = decision->gain;
    const auto& full = challenger_full;
    st_.best_id = challenger;
    st_.best_key = content_key(variant_of(*challenger));
    st_.best_time = challenger_time;
    st_.best_sol = weighted_sol(full, weights_);
    db_.set_best_candidate(campaign_id_, *challenger, st_.best_sol);
    for (auto& h : st_.history)
      if (h.id == "history:best")
        h.text = fmt::format("The current best (candidate {}) runs at {:.1f} % of speed of light (weighted).",
                             *challenger, 100 * st_.best_sol);
  }
  const auto errors = answer_info.value("llm_errors", std::int64_t{0});
  st_.llm_errors += errors;
  if (!answer_info.value("fatal", json(nullptr)).is_null()) st_.fatal = answer_info.at("fatal").get<std::string>();
  // A parameter search with nothing left to try around the best is done.
  if (ids.empty() && !source_.calls_llm() && st_.best_id && p.parent_id == *st_.best_id) st_.exhausted = true;
  if (gain > s_.stagnation_gain) {
    if (st_.level > 0)
      event("escalation_reset", fmt::format("iteration {}: a gain of {:.1f} % ends the escalation", n, 100 * gain),
            {{"iteration", n}, {"from_level", st_.level}});
    st_.stagnant = 0;
    st_.level = 0;
    st_.masked.clear();
  } else if (++st_.stagnant >= s_.stagnation_window && st_.level < 4) {
    st_.stagnant = 0;
    ++st_.level;
    const auto step = static_cast<escalation>(st_.level);
    if (step == escalation::partial_restart) st_.masked = mask_history(st_.history, derive_seed(s_.seed, "mask", n));
    event("escalation",
          fmt::format("iteration {}: no gain above {:.1f} % for {} iterations: {}", n, 100 * s_.stagnation_gain,
                      s_.stagnation_window, to_string(step)),
          {{"iteration", n}, {"level", st_.level}, {"step", std::string(to_string(step))},
           {"masked_history", st_.masked}});
  }
  const std::string note =
      fmt::format("{} proposal(s), {} passed screen, {} to full{}", ids.size(), screened, survivors.size(),
                  decision ? fmt::format(", {}", to_string(decision->v)) : std::string());
  st_.history.push_back({fmt::format("history:iter{}", n), "history",
                         fmt::format("Iteration {} ({}): {}{}", n, p.strategy, note,
                                     promoted ? fmt::format(", gain {:.1f} %", 100 * gain) : std::string()),
                         true});
  trim_history();
  st_.completed = n;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  db_.add_campaign_spend(campaign_id_, 1, 0, 0.0, elapsed);
  event("loop_state", fmt::format("iteration {} done", n), st_.to_json(), "debug");
  db_.finish_iteration(it_id, "done", note);
  tx.commit();
  // Progress first: the iteration is stored, and a caller whose hook ends
  // the step here (the daemon yields at after_iteration) must still see it;
  // the model router learns from it (model_feedback).
  if (hooks_.on_progress) {
    const auto c = db_.find_campaign(campaign_id_);
    progress pr;
    pr.iteration = n;
    pr.best_sol = st_.best_sol;
    pr.best_id = st_.best_id;
    pr.tokens = c ? c->spent_tokens : 0;
    pr.cost_usd = c ? c->spent_cost_usd : 0;
    pr.wall_time_s = c ? c->spent_wall_time_s : 0;
    pr.level = st_.level;
    pr.strategy = p.strategy;
    pr.proposals = ids.size();
    pr.promoted = promoted;
    hooks_.on_progress(pr);
  }
  hook("after_iteration", n);
}

std::optional<std::string> campaign_loop::stop_reason() {
  if (st_.fatal) return "stopped: " + *st_.fatal;
  const auto c = db_.find_campaign(campaign_id_);
  if (!c) throw kopt::not_found_error(fmt::format("campaign {} does not exist", campaign_id_));
  if (st_.best_id && st_.best_sol >= s_.target_sol_fraction && s_.target_sol_fraction > 0)
    return fmt::format("target reached: {:.1f} % of speed of light", 100 * st_.best_sol);
  const auto& b = s_.budget;
  if (b.iterations && c->spent_iterations >= *b.iterations) return "budget: iterations";
  if (b.wall_time_s && c->spent_wall_time_s >= *b.wall_time_s) return "budget: wall time";
  if (b.tokens && c->spent_tokens >= *b.tokens) return "budget: tokens";
  if (b.cost_usd && c->spent_cost_usd >= *b.cost_usd) return "budget: cost";
  if (st_.llm_errors >= s_.max_llm_errors) return "budget: LLM errors";
  if (st_.exhausted) return "search space exhausted";
  return std::nullopt;
}

run_result campaign_loop::finalize(const std::string& reason) {
  run_result out;
  out.finished = true;
  out.stop_reason = reason;
  out.best_id = st_.best_id;
  out.best_sol = st_.best_sol;
  json summary = {{"stop_reason", reason}, {"best_id", st_.best_id ? json(*st_.best_id) : json(nullptr)},
                  {"best_sol", st_.best_sol}, {"iterations", st_.completed}};
  bool verified = false;
  if (st_.best_id) {
    const auto seed_v = derive_seed(s_.seed, "verify", 0);
    const auto vr = evaluate_cached("verify", {{"winner", *st_.best_id}}, all_workloads(), seed_v, std::nullopt);
    hook("after_verify", st_.completed);
    const auto& w = vr.at("winner");
    verified = w.all_ok(all_workloads());
    summary["verify"] = w.to_json(false);
    summary["verify_base_seed"] = seed_v;
    // Private workloads: measured here only, reported on their own (their
    // weighted SOL never enters the score the campaign optimised).
    if (const auto priv = workload_ids(op_, true); !priv.empty()) {
      const auto pr =
          evaluate_cached("verify", {{"winner", *st_.best_id}}, priv, seed_v, std::nullopt);
      const auto& pw = pr.at("winner");
      std::map<std::string, double> pweights;
      for (const auto& x : op_.workloads)
        if (x.is_private) pweights[x.id] = x.weight;
      const bool priv_ok = pw.all_ok(priv);
      summary["verify_private"] = {
          {"workloads", priv},
          {"chosen_by", op_.integ.private_fraction
                            ? json{{"private_fraction", *op_.integ.private_fraction},
                                   {"private_seed", op_.integ.private_seed}}
                            : json("workloads[].private")},
          {"result", pw.to_json(false)},
          {"all_ok", priv_ok},
          {"weighted_sol", weighted_sol(pw.workloads, pweights)},
          {"weighted_time_ns", weighted_geomean_time(pw.workloads, pweights)}};
      verified = verified && priv_ok;  // a winner wrong on a private shape is not verified
    }
    summary["verified"] = verified;
    if (const auto e = db_.latest_evaluated(campaign_id_, "verify"))
      summary["device"] = e->data.value("device", json::object());
    // The winner against the baseline, head to head, fresh seeds.
    std::optional<store::row_id> baseline_id;
    if (op_.baseline) baseline_id = candidate_id_of(content_key(op_.baseline->to_json()));
    if (baseline_id && *baseline_id != *st_.best_id) {
      const auto cr = evaluate_cached("compare", {{"baseline", *baseline_id}, {"winner", *st_.best_id}},
                                      all_workloads(), derive_seed(s_.seed, "final_compare", 0), std::nullopt);
      promotion_rule rule = s_.promotion;
      rule.seed = derive_seed(s_.seed, "bootstrap", -1);
      const auto d = decide_promotion(cr.at("baseline"), cr.at("winner"), weights_, rule);
      summary["vs_baseline"] = d.to_json();
      summary["speedup_vs_baseline"] = d.ratio > 0 ? 1.0 / d.ratio : 0.0;
    }
  }
  out.verified = verified;
  store::transaction tx(db_.db());
  const bool ok = st_.best_id && verified;
  const std::string why = ok ? reason
                             : (st_.best_id ? reason + "; the winner failed verification with fresh seeds" : reason);
  event("finished", "campaign finished: " + why, summary, ok ? "info" : "error");
  db_.set_campaign_state(campaign_id_, ok ? store::campaign_state::done : store::campaign_state::failed, why);
  tx.commit();
  out.stop_reason = why;
  out.summary = summary;
  finished_ = summary;
  return out;
}

run_result campaign_loop::run(const run_limits& limits) {
  load();
  const auto c = db_.find_campaign(campaign_id_);
  if (is_terminal(c->state)) {
    run_result r;
    r.finished = true;
    r.stop_reason = c->stop_reason.value_or("");
    r.best_id = c->best_candidate_id;
    r.best_sol = st_.best_sol;
    r.summary = finished_.value_or(json::object());
    r.verified = r.summary.value("verified", false);
    r.stopped_on_error = st_.fatal.has_value();
    return r;
  }
  if (c->state != store::campaign_state::running) db_.set_campaign_state(campaign_id_, store::campaign_state::running);
  // A fresh campaign is often already "running" (the daemon claims it
  // first): it is a resume only when an earlier run left something behind.
  if (st_.completed >= 0 ||
      (c->state != store::campaign_state::queued && db_.has_candidates(campaign_id_))) {
    store::transaction tx(db_.db());
    event("resumed",
          st_.completed >= 0 ? fmt::format("resuming after iteration {}", st_.completed)
                             : std::string("resuming: setup had not finished, starting it again"),
          {{"completed", st_.completed}, {"cached_evaluations", db_.journal_size(campaign_id_)}});
    tx.commit();
  }
  if (st_.completed < 0) setup();
  run_result out;
  std::int64_t ran = 0;
  for (;;) {
    if (auto reason = stop_reason()) {
      auto r = finalize(*reason);
      r.iterations_run = ran;
      r.stopped_on_error = st_.fatal.has_value();
      return r;
    }
    if (limits.max_iterations && ran >= *limits.max_iterations) {
      db_.set_campaign_state(campaign_id_, store::campaign_state::paused, "paused: --max-iterations");
      out.finished = false;
      out.stop_reason = "paused after the requested number of iterations";
      out.iterations_run = ran;
      out.best_id = st_.best_id;
      out.best_sol = st_.best_sol;
      return out;
    }
    waiting_.reset();
    iterate(st_.completed + 1);
    if (waiting_) {
      out.finished = false;
      out.waiting = true;
      out.stop_reason = "waiting: " + *waiting_;
      out.iterations_run = ran;
      out.best_id = st_.best_id;
      out.best_sol = st_.best_sol;
      return out;
    }
    ++ran;
  }
}

std::vector<item_attribution> campaign_loop::attribution() {
  store::transaction snapshot(db_.db(), store::transaction::kind::deferred);
  const auto iterations = db_.iterations_of(campaign_id_);
  std::map<store::row_id, std::vector<store::dropout_decision>> d;
  for (const auto& it : iterations)
    if (it.number > 0) d[it.id] = db_.dropout_decisions_of(it.id);
  auto out = campaign::attribution(iterations, d, db_.llm_calls_of(campaign_id_),
                                   db_.candidates_of(campaign_id_), db_.events_of(campaign_id_));
  snapshot.commit();
  return out;
}

void campaign_loop::trim_history() {
  // The notes are in iteration order after the protected entries: drop the
  // oldest beyond the window, and their masks with them.
  std::size_t notes = 0;
  for (const auto& h : st_.history)
    if (h.optional) ++notes;
  for (auto it = st_.history.begin(); notes > s_.history_window && it != st_.history.end();) {
    if (it->optional) {
      st_.masked.erase(it->id);
      it = st_.history.erase(it);
      --notes;
    } else {
      ++it;
    }
  }
}

}  // namespace kopt::campaign
