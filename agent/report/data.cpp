#include "report/data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "common/error.hpp"
#include "core/roofline.hpp"

namespace kopt::report {

using nlohmann::json;

std::string_view to_string(outcome o) noexcept {
  switch (o) {
    case outcome::start:
      return "start";
    case outcome::compile_error:
      return "compile_error";
    case outcome::incorrect:
      return "incorrect";
    case outcome::integrity:
      return "integrity_rejection";
    case outcome::slower:
      return "slower";
    case outcome::faster:
      return "faster";
    case outcome::correct:
      return "correct";
    case outcome::not_run:
      return "not_run";
  }
  return "?";
}

const std::vector<outcome>& loop_outcomes() noexcept {
  static const std::vector<outcome> v{
      outcome::compile_error, outcome::incorrect, outcome::integrity, outcome::slower,
      outcome::faster,        outcome::correct,   outcome::not_run};
  return v;
}

std::string pct(const std::optional<double>& v, int digits) {
  if (!v) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f %%", digits, *v * 100.0);
  return buf;
}

std::map<std::string, measure> candidate_view::best_measures() const {
  std::map<std::string, measure> out;
  for (const char* stage : {"screen", "compare", "full", "verify"}) {
    auto it = by_stage.find(stage);
    if (it == by_stage.end()) continue;
    for (const auto& [w, m] : it->second) out[w] = m;  // later stages win
  }
  return out;
}

const candidate_view* campaign_data::view(row_id id) const {
  auto it = views.find(id);
  return it == views.end() ? nullptr : &it->second;
}

const candidate_view* campaign_data::by_origin(store::candidate_origin o) const {
  for (const auto& c : candidates)
    if (c.origin == o) return view(c.id);
  return nullptr;
}

const iteration_view* campaign_data::iteration(std::int64_t number) const {
  for (const auto& it : iterations)
    if (it.number == number) return &it;
  return nullptr;
}

const store::workload_record* campaign_data::workload(const std::string& key) const {
  for (const auto& w : workloads)
    if (w.key == key) return &w;
  return nullptr;
}

namespace {

bool is_failure(store::eval_status s) {
  using store::eval_status;
  return s == eval_status::incorrect || s == eval_status::crashed || s == eval_status::timeout ||
         s == eval_status::launch_error;
}

// Weighted fraction of speed of light over `keys`, all present and correct.
std::optional<double> weighted_sol(const std::map<std::string, measure>& m,
                                   const std::vector<std::string>& keys,
                                   const std::map<std::string, double>& weights) {
  if (keys.empty()) return std::nullopt;
  double num = 0, den = 0;
  for (const auto& k : keys) {
    auto it = m.find(k);
    if (it == m.end() || it->second.status != store::eval_status::ok || !it->second.sol)
      return std::nullopt;
    const double w = weights.count(k) ? weights.at(k) : 1.0;
    num += w * *it->second.sol;
    den += w;
  }
  if (!(den > 0)) return std::nullopt;
  return num / den;
}

// The same with attainable SOL (physical where a workload has no floor);
// empty when no workload of `keys` has a floor.
std::optional<double> weighted_attainable(const std::map<std::string, measure>& m,
                                          const std::vector<std::string>& keys,
                                          const std::map<std::string, double>& weights) {
  if (!weighted_sol(m, keys, weights)) return std::nullopt;
  double num = 0, den = 0;
  bool any = false;
  for (const auto& k : keys) {
    const measure& x = m.at(k);
    const double w = weights.count(k) ? weights.at(k) : 1.0;
    any = any || x.attainable.has_value();
    num += w * (x.attainable ? *x.attainable : *x.sol);
    den += w;
  }
  if (!any) return std::nullopt;
  return num / den;
}

std::optional<double> time_ratio(const std::map<std::string, measure>& cand,
                                 const std::map<std::string, measure>& parent,
                                 const std::map<std::string, double>& weights) {
  double lr = 0, den = 0;
  for (const auto& [k, m] : cand) {
    auto p = parent.find(k);
    if (p == parent.end()) continue;
    if (m.status != store::eval_status::ok || p->second.status != store::eval_status::ok) continue;
    if (!m.median_ns || !p->second.median_ns || !(*m.median_ns > 0) || !(*p->second.median_ns > 0))
      continue;
    const double w = weights.count(k) ? weights.at(k) : 1.0;
    lr += w * std::log(*m.median_ns / *p->second.median_ns);
    den += w;
  }
  if (!(den > 0)) return std::nullopt;
  return std::exp(lr / den);
}

void classify(campaign_data& d, candidate_view& v) {
  const auto& rec = *v.rec;
  const bool setup = (v.iteration && *v.iteration == 0) ||
                     (!v.iteration && rec.origin != store::candidate_origin::llm &&
                      rec.origin != store::candidate_origin::tuned);
  const auto& evals = d.evaluations[rec.id];
  const auto& comps = d.compilations[rec.id];
  bool any_compile_error = !comps.empty() && !v.compiled;
  bool integrity = false, failure = false, any_run = false;
  for (const auto& e : evals) {
    if (e.status == store::eval_status::compile_error ||
        e.status == store::eval_status::compile_timeout ||
        e.status == store::eval_status::rejected_format)
      any_compile_error = true;
    if (e.status == store::eval_status::rejected_integrity) integrity = true;
    if (is_failure(e.status)) failure = true;
    if (e.status != store::eval_status::skipped && e.status != store::eval_status::reference_failed)
      any_run = true;
  }
  if (setup) {
    v.result = outcome::start;
  } else if (any_compile_error) {
    v.result = outcome::compile_error;
  } else if (integrity) {
    v.result = outcome::integrity;
  } else if (failure) {
    v.result = outcome::incorrect;
  } else if (!any_run) {
    v.result = outcome::not_run;
  } else if (v.time_ratio_vs_parent) {
    v.result = *v.time_ratio_vs_parent < 1.0 ? outcome::faster : outcome::slower;
  } else {
    v.result = outcome::correct;
  }
}

}  // namespace

campaign_data load_campaign(store::store& db, row_id campaign_id) {
  campaign_data d;
  store::transaction snapshot(db.db(), store::transaction::kind::deferred);
  auto c = db.find_campaign(campaign_id);
  if (!c) throw not_found_error("no campaign " + std::to_string(campaign_id) + " in " + db.path());
  d.campaign = *c;
  d.op = db.find_operator(c->operator_id);
  d.workloads = db.workloads_of(c->operator_id);
  d.summaries = db.iteration_summaries(campaign_id);
  d.candidates = db.candidates_of(campaign_id);
  for (const auto& cand : d.candidates) {
    d.compilations[cand.id] = db.compilations_of(cand.id);
    d.evaluations[cand.id] = db.evaluations_of(cand.id);
  }
  for (const auto& s : d.summaries)
    d.dropout[s.iteration.id] = db.dropout_decisions_of(s.iteration.id);
  d.llm_calls = db.llm_calls_of(campaign_id);
  d.events = db.events_of(campaign_id);
  snapshot.commit();

  std::vector<std::string> keys;
  for (const auto& w : d.workloads) {
    d.weights[w.key] = w.weight;
    keys.push_back(w.key);
  }
  std::map<row_id, std::int64_t> iteration_number;
  for (const auto& s : d.summaries) iteration_number[s.iteration.id] = s.iteration.number;

  // Candidates: measurements by stage, scores, compile state.
  for (const auto& cand : d.candidates) {
    candidate_view v;
    v.rec = &cand;
    if (cand.iteration_id) {
      auto it = iteration_number.find(*cand.iteration_id);
      if (it != iteration_number.end()) v.iteration = it->second;
    }
    for (const auto& k : d.compilations[cand.id]) {
      if (k.status == "ok") v.compiled = true;
      v.compile_status = k.status;
    }
    static const std::map<std::string, int> rank{
        {"screen", 1}, {"full", 2}, {"compare", 3}, {"verify", 4}};
    for (const auto& e : d.evaluations[cand.id]) {
      measure m;
      m.stage = e.stage;
      m.status = e.status;
      m.median_ns = e.timing.median_ns;
      m.sol = e.sol_fraction;
      if (e.timing.detail.is_object() && e.timing.detail.contains("launch_floor_ns") &&
          e.timing.detail.at("launch_floor_ns").is_number()) {
        const double lf = e.timing.detail.at("launch_floor_ns").get<double>();
        if (lf > 0) {
          m.launch_floor_ns = lf;
          if (m.sol && m.median_ns && *m.median_ns > 0)
            m.attainable =
                harness::attainable_sol_fraction(*m.sol * *m.median_ns, lf, *m.median_ns);
        }
      }
      m.max_abs_err = e.max_abs_err;
      m.max_rel_err = e.max_rel_err;
      m.error = e.error;
      m.evaluation_id = e.id;
      v.by_stage[e.stage][e.workload_key] = m;  // evaluations come in id order: latest wins
      auto r = rank.find(e.stage);
      auto cur = rank.find(v.furthest_stage);
      if (r != rank.end() && (cur == rank.end() || r->second > cur->second))
        v.furthest_stage = e.stage;
    }
    if (auto f = v.by_stage.find("full"); f != v.by_stage.end()) {
      v.score = weighted_sol(f->second, keys, d.weights);
      if (v.score) v.attainable_score = weighted_attainable(f->second, keys, d.weights);
    }
    if (!v.score)
      if (auto f = v.by_stage.find("verify"); f != v.by_stage.end()) {
        v.score = weighted_sol(f->second, keys, d.weights);
        if (v.score) v.attainable_score = weighted_attainable(f->second, keys, d.weights);
      }
    if (auto s = v.by_stage.find("screen"); s != v.by_stage.end()) {
      std::vector<std::string> sk;
      for (const auto& [k, m] : s->second) sk.push_back(k);
      v.screen_score = weighted_sol(s->second, sk, d.weights);
    }
    d.views.emplace(cand.id, std::move(v));
  }
  // Comparison with the parent: the screen stage (what the loop compared), else full.
  for (auto& [id, v] : d.views) {
    if (!v.rec->parent_id) continue;
    auto p = d.views.find(*v.rec->parent_id);
    if (p == d.views.end()) continue;
    for (const char* stage : {"screen", "full"}) {
      auto a = v.by_stage.find(stage);
      auto b = p->second.by_stage.find(stage);
      if (a == v.by_stage.end() || b == p->second.by_stage.end()) continue;
      if (auto r = time_ratio(a->second, b->second, d.weights)) {
        v.time_ratio_vs_parent = r;
        break;
      }
    }
  }
  for (auto& [id, v] : d.views) classify(d, v);

  // Path from the start to the best candidate.
  if (d.campaign.best_candidate_id) {
    std::set<row_id> seen;
    std::optional<row_id> cur = d.campaign.best_candidate_id;
    while (cur && seen.insert(*cur).second) {
      auto it = d.views.find(*cur);
      if (it == d.views.end()) break;
      it->second.on_best_path = true;
      d.best_path.push_back(*cur);
      cur = it->second.rec->parent_id;
    }
    std::reverse(d.best_path.begin(), d.best_path.end());
  }

  // Events: incumbent after each iteration, promotions, escalations, spend.
  std::map<std::int64_t, std::pair<std::optional<row_id>, double>> incumbent;
  std::map<std::int64_t, double> gains;
  std::map<std::int64_t, std::optional<row_id>> promoted_id;
  std::map<std::int64_t, std::vector<std::string>> escalations;
  std::map<std::int64_t, std::pair<std::int64_t, double>> proposal_spend;
  std::vector<spend_point> proposal_points;
  d.finished = nullptr;
  for (const auto& e : d.events) {
    const json& j = e.data;
    if (!j.is_object()) continue;
    if (e.kind == "loop_state") {
      const auto n = j.value("completed", std::int64_t{-1});
      std::optional<row_id> best;
      if (j.contains("best_id") && j["best_id"].is_number_integer())
        best = j["best_id"].get<row_id>();
      if (n >= 0) incumbent[n] = {best, j.value("best_sol", 0.0)};
    } else if (e.kind == "promoted") {
      const auto n = j.value("iteration", std::int64_t{-1});
      gains[n] = j.contains("decision") ? j["decision"].value("gain", 0.0) : 0.0;
      if (j.contains("challenger") && j["challenger"].is_number_integer())
        promoted_id[n] = j["challenger"].get<row_id>();
    } else if (e.kind == "escalation") {
      escalations[j.value("iteration", std::int64_t{-1})].push_back(
          j.value("step", std::string("?")));
    } else if (e.kind == "proposals") {
      const auto n = j.value("iteration", std::int64_t{-1});
      const auto tok = j.value("tokens", std::int64_t{0});
      const auto cost = j.value("cost_usd", 0.0);
      proposal_spend[n] = {tok, cost};
      if (tok || cost > 0) proposal_points.push_back({e.created_at, tok, cost});
    } else if (e.kind == "finished") {
      d.finished = j;
    }
  }

  for (const auto& s : d.summaries) {
    const auto& it = s.iteration;
    if (!d.started_ms || it.started_at < *d.started_ms) d.started_ms = it.started_at;
    if (it.finished_at && (!d.ended_ms || *it.finished_at > *d.ended_ms))
      d.ended_ms = it.finished_at;
  }
  for (const auto& e : d.events)
    if (!d.ended_ms || e.created_at > *d.ended_ms) d.ended_ms = e.created_at;

  std::optional<row_id> inc;
  std::optional<double> inc_score;
  for (const auto& s : d.summaries) {
    iteration_view iv;
    iv.sum = &s;
    iv.number = s.iteration.number;
    for (const auto& cand : d.candidates)
      if (cand.iteration_id && *cand.iteration_id == s.iteration.id)
        iv.candidates.push_back(cand.id);
    for (auto id : iv.candidates) {
      const auto& v = d.views.at(id);
      if (v.result != outcome::start) ++iv.outcomes[v.result];
      if (v.score && (!iv.best_score || *v.score > *iv.best_score)) {
        iv.best_score = v.score;
        iv.best_candidate = id;
      }
    }
    if (auto f = incumbent.find(iv.number); f != incumbent.end()) {
      inc = f->second.first;
      inc_score = f->second.second;
    } else if (iv.best_score && (!inc_score || *iv.best_score > *inc_score) && incumbent.empty()) {
      // No loop checkpoints (rows written by something else): the best so far.
      inc = iv.best_candidate;
      inc_score = iv.best_score;
    }
    iv.incumbent = inc;
    iv.incumbent_score = inc_score;
    for (const auto& dd : d.dropout[s.iteration.id])
      (dd.kept ? iv.dropout_kept : iv.dropout_dropped) += 1;
    if (auto e = escalations.find(iv.number); e != escalations.end()) iv.escalations = e->second;
    if (auto g = gains.find(iv.number); g != gains.end()) {
      iv.promoted = true;
      iv.gain = g->second;
    }
    iv.llm_calls = s.llm_calls;
    iv.tokens = s.tokens;
    iv.cost_usd = s.cost_usd;
    if (s.llm_calls == 0)
      if (auto p = proposal_spend.find(iv.number); p != proposal_spend.end()) {
        iv.tokens = p->second.first;
        iv.cost_usd = p->second.second;
      }
    if (s.iteration.finished_at && d.started_ms)
      iv.elapsed_s = static_cast<double>(*s.iteration.finished_at - *d.started_ms) / 1000.0;
    d.iterations.push_back(std::move(iv));
  }

  // Attribution per draw (one per LLM call of an iteration; the rule and
  // its fallbacks for older stores live in campaign::attribution).
  {
    std::vector<store::iteration_record> its;
    for (const auto& s : d.summaries) its.push_back(s.iteration);
    d.attribution = campaign::attribution(its, d.dropout, d.llm_calls, d.candidates, d.events);
  }

  // Spend over time: the recorded LLM calls, else what sources reported per
  // iteration (sources that do not go through the recorded client).
  std::vector<spend_point> pts;
  if (!d.llm_calls.empty()) {
    for (const auto& call : d.llm_calls)
      pts.push_back({call.created_at, call.prompt_tokens + call.completion_tokens, call.cost_usd});
  } else {
    pts = proposal_points;
  }
  std::stable_sort(pts.begin(), pts.end(),
                   [](const auto& a, const auto& b) { return a.at_ms < b.at_ms; });
  std::int64_t tok = 0;
  double cost = 0;
  for (auto& p : pts) {
    tok += p.tokens;
    cost += p.cost_usd;
    d.spend.push_back({p.at_ms, tok, cost});
  }
  return d;
}

}  // namespace kopt::report
