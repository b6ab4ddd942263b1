#include "report/views.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "common/error.hpp"

namespace kopt::report {

using nlohmann::json;

namespace {

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json llm_call_json(const store::llm_call_record& c) {
  return {{"id", c.id},
          {"iteration_id", opt(c.iteration_id)},
          {"provider", c.provider},
          {"model", c.model},
          {"status", c.status},
          {"attempts", c.attempts},
          {"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.completion_tokens},
          {"cached_tokens", c.cached_tokens},
          {"reasoning_tokens", c.reasoning_tokens},
          {"cost_usd", c.cost_usd},
          {"latency_ms", opt(c.latency_ms)},
          {"error", opt(c.error)},
          {"request", c.request},
          {"prompt", c.prompt},
          {"response", opt(c.response)},
          {"created_at", store::format_time(c.created_at)}};
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == '\n') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace

json log_json(const campaign_data& d) {
  json rows = json::array();
  for (const auto& iv : d.iterations) {
    const auto& it = iv.sum->iteration;
    json outcomes = json::object();
    for (auto o : loop_outcomes()) {
      auto f = iv.outcomes.find(o);
      outcomes[std::string(to_string(o))] = f == iv.outcomes.end() ? 0 : f->second;
    }
    rows.push_back({{"number", iv.number},
                    {"id", it.id},
                    {"status", it.status},
                    {"strategy", it.strategy},
                    {"parent_candidate_id", opt(it.parent_candidate_id)},
                    {"dropout_p", opt(it.dropout_p)},
                    {"candidates", iv.candidates},
                    {"outcomes", outcomes},
                    {"evaluation_outcomes", iv.sum->outcomes},
                    {"best_candidate_id", opt(iv.best_candidate)},
                    {"best_sol_fraction", opt(iv.best_score)},
                    {"incumbent_id", opt(iv.incumbent)},
                    {"incumbent_sol_fraction", opt(iv.incumbent_score)},
                    {"promoted", iv.promoted},
                    {"gain", iv.gain},
                    {"dropout", {{"kept", iv.dropout_kept}, {"dropped", iv.dropout_dropped}}},
                    {"escalations", iv.escalations},
                    {"llm_calls", iv.llm_calls},
                    {"tokens", iv.tokens},
                    {"cost_usd", iv.cost_usd},
                    {"started_at", store::format_time(it.started_at)},
                    {"finished_at",
                     it.finished_at ? json(store::format_time(*it.finished_at)) : json(nullptr)},
                    {"elapsed_s", opt(iv.elapsed_s)},
                    {"note", opt(it.note)}});
  }
  return rows;
}

json lineage_json(const campaign_data& d) {
  json nodes = json::array();
  for (const auto& c : d.candidates) {
    const auto& v = d.views.at(c.id);
    nodes.push_back({{"id", c.id},
                     {"parent_id", opt(c.parent_id)},
                     {"origin", store::to_string(c.origin)},
                     {"iteration", opt(v.iteration)},
                     {"outcome", to_string(v.result)},
                     {"furthest_stage", v.furthest_stage},
                     {"sol_fraction", opt(v.score)},
                     {"screen_sol_fraction", opt(v.screen_score)},
                     {"time_ratio_vs_parent", opt(v.time_ratio_vs_parent)},
                     {"on_best_path", v.on_best_path},
                     {"note", opt(c.note)}});
  }
  json path = json::array();
  for (auto id : d.best_path) {
    const auto& v = d.views.at(id);
    path.push_back({{"id", id},
                    {"origin", store::to_string(v.rec->origin)},
                    {"iteration", opt(v.iteration)},
                    {"sol_fraction", opt(v.score)},
                    {"time_ratio_vs_parent", opt(v.time_ratio_vs_parent)}});
  }
  return {{"campaign_id", d.campaign.id},
          {"best_candidate_id", opt(d.campaign.best_candidate_id)},
          {"best_path", path},
          {"nodes", nodes}};
}

json candidate_research_json(store::store& db, const store::candidate_record& c) {
  json j = json::object();
  std::optional<store::iteration_record> iter;
  if (c.iteration_id)
    for (auto& it : db.iterations_of(c.campaign_id))
      if (it.id == *c.iteration_id) iter = it;
  if (iter) {
    json decisions = json::array();
    for (const auto& dd : db.dropout_decisions_of(iter->id))
      decisions.push_back(
          {{"item_id", dd.item_id}, {"kind", dd.item_kind}, {"kept", dd.kept}, {"p", dd.p}});
    j["iteration"] = {{"id", iter->id},
                      {"number", iter->number},
                      {"strategy", iter->strategy},
                      {"parent_candidate_id", opt(iter->parent_candidate_id)},
                      {"dropout_p", opt(iter->dropout_p)},
                      {"prompt_info", iter->prompt_info},
                      {"dropout", decisions},
                      {"note", opt(iter->note)}};
  } else {
    j["iteration"] = nullptr;
  }
  // The LLM call that produced it; without a link, the calls of its
  // iteration (a source that asks K times cannot say which answer is whose).
  json calls = json::array();
  std::string link = "none";
  const auto all = db.llm_calls_of(c.campaign_id);
  if (c.llm_call_id) {
    for (const auto& call : all)
      if (call.id == *c.llm_call_id) calls.push_back(llm_call_json(call));
    link = "candidate";
  } else if (c.iteration_id) {
    for (const auto& call : all)
      if (call.iteration_id && *call.iteration_id == *c.iteration_id)
        calls.push_back(llm_call_json(call));
    if (!calls.empty()) link = "iteration";
  }
  j["llm_calls"] = calls;
  j["llm_call_link"] = link;
  return j;
}

std::vector<diff_line> line_diff(const std::string& a, const std::string& b,
                                 std::size_t max_cells) {
  const auto la = split_lines(a), lb = split_lines(b);
  // Common prefix and suffix first: most diffs of kernels are local.
  std::size_t pre = 0;
  while (pre < la.size() && pre < lb.size() && la[pre] == lb[pre]) ++pre;
  std::size_t suf = 0;
  while (suf < la.size() - pre && suf < lb.size() - pre &&
         la[la.size() - 1 - suf] == lb[lb.size() - 1 - suf])
    ++suf;
  std::vector<diff_line> out;
  for (std::size_t i = 0; i < pre; ++i) out.push_back({' ', la[i]});
  const std::size_t n = la.size() - pre - suf, m = lb.size() - pre - suf;
  if (n * m > max_cells) {
    for (std::size_t i = 0; i < n; ++i) out.push_back({'-', la[pre + i]});
    for (std::size_t i = 0; i < m; ++i) out.push_back({'+', lb[pre + i]});
  } else {
    // lcs[i][j]: LCS length of a[i..] and b[j..].
    std::vector<std::uint32_t> lcs((n + 1) * (m + 1), 0);
    auto at = [&](std::size_t i, std::size_t j) -> std::uint32_t& { return lcs[i * (m + 1) + j]; };
    for (std::size_t i = n; i-- > 0;)
      for (std::size_t j = m; j-- > 0;)
        at(i, j) = la[pre + i] == lb[pre + j] ? at(i + 1, j + 1) + 1
                                              : std::max(at(i + 1, j), at(i, j + 1));
    std::size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && la[pre + i] == lb[pre + j]) {
        out.push_back({' ', la[pre + i]});
        ++i;
        ++j;
      } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
        out.push_back({'-', la[pre + i]});  // deletions first, as diff(1) prints them
        ++i;
      } else {
        out.push_back({'+', lb[pre + j]});
        ++j;
      }
    }
  }
  for (std::size_t i = la.size() - suf; i < la.size(); ++i) out.push_back({' ', la[i]});
  return out;
}

std::string unified_diff(const std::string& a, const std::string& b, const std::string& name_a,
                         const std::string& name_b, int context) {
  const auto lines = line_diff(a, b);
  bool any = false;
  for (const auto& l : lines) any = any || l.op != ' ';
  if (!any) return "";
  std::ostringstream os;
  os << "--- " << name_a << "\n+++ " << name_b << "\n";
  const std::size_t ctx = static_cast<std::size_t>(std::max(context, 0));
  std::size_t i = 0;
  while (i < lines.size()) {
    // Find the next change, then grow a hunk until `2 * ctx` unchanged lines.
    std::size_t first = i;
    while (first < lines.size() && lines[first].op == ' ') ++first;
    if (first == lines.size()) break;
    std::size_t start = first > ctx ? first - ctx : 0;
    std::size_t end = first;
    std::size_t same = 0;
    for (std::size_t k = first; k < lines.size(); ++k) {
      if (lines[k].op == ' ') {
        if (++same > 2 * ctx) break;
      } else {
        same = 0;
        end = k;
      }
    }
    const std::size_t stop = std::min(lines.size(), end + 1 + ctx);
    // Line numbers at `start`.
    std::size_t a_line = 1, b_line = 1;
    for (std::size_t k = 0; k < start; ++k) {
      if (lines[k].op != '+') ++a_line;
      if (lines[k].op != '-') ++b_line;
    }
    std::size_t a_count = 0, b_count = 0;
    for (std::size_t k = start; k < stop; ++k) {
      if (lines[k].op != '+') ++a_count;
      if (lines[k].op != '-') ++b_count;
    }
    os << "@@ -" << (a_count ? a_line : a_line - 1) << "," << a_count << " +"
       << (b_count ? b_line : b_line - 1) << "," << b_count << " @@\n";
    for (std::size_t k = start; k < stop; ++k) os << lines[k].op << lines[k].text << "\n";
    i = stop;
  }
  return os.str();
}

json diff_json(store::store& db, row_id a_id, row_id b_id) {
  store::transaction snapshot(db.db(), store::transaction::kind::deferred);
  const auto a = db.find_candidate(a_id);
  if (!a) throw not_found_error("no candidate " + std::to_string(a_id) + " in " + db.path());
  const auto b = db.find_candidate(b_id);
  if (!b) throw not_found_error("no candidate " + std::to_string(b_id) + " in " + db.path());
  const auto ea = db.evaluations_of(a_id), eb = db.evaluations_of(b_id);
  std::map<std::string, double> weights;
  for (const auto* c : {&*a, &*b})
    if (auto camp = db.find_campaign(c->campaign_id))
      for (const auto& w : db.workloads_of(camp->operator_id)) weights.emplace(w.key, w.weight);
  snapshot.commit();

  // stage -> workload -> latest evaluation
  using table = std::map<std::string, std::map<std::string, const store::evaluation_record*>>;
  auto index = [](const std::vector<store::evaluation_record>& es) {
    table t;
    for (const auto& e : es) t[e.stage][e.workload_key] = &e;
    return t;
  };
  const table ta = index(ea), tb = index(eb);
  std::set<std::string> keys;
  for (const auto* t : {&ta, &tb})
    for (const auto& [s, m] : *t)
      for (const auto& [k, e] : m) keys.insert(k);
  auto pick = [](const table& t, const std::string& stage,
                 const std::string& k) -> const store::evaluation_record* {
    auto s = t.find(stage);
    if (s == t.end()) return nullptr;
    auto e = s->second.find(k);
    return e == s->second.end() ? nullptr : e->second;
  };
  auto side = [](const store::evaluation_record* e) -> json {
    if (!e) return nullptr;
    return {{"stage", e->stage},
            {"status", store::to_string(e->status)},
            {"median_ns", opt(e->timing.median_ns)},
            {"sol_fraction", opt(e->sol_fraction)},
            {"counters", e->counters}};
  };
  json rows = json::array();
  double lr = 0, wsum = 0;
  for (const auto& k : keys) {
    const store::evaluation_record *x = nullptr, *y = nullptr;
    bool same_stage = false;
    for (const char* stage : {"full", "verify", "screen", "compare"}) {
      auto p = pick(ta, stage, k), q = pick(tb, stage, k);
      if (p && q && p->status == store::eval_status::ok && q->status == store::eval_status::ok) {
        x = p;
        y = q;
        same_stage = true;
        break;
      }
    }
    if (!same_stage)
      for (const char* stage : {"verify", "full", "compare", "screen"}) {
        if (!x) x = pick(ta, stage, k);
        if (!y) y = pick(tb, stage, k);
      }
    json r = {{"workload", k},
              {"weight", weights.count(k) ? json(weights.at(k)) : json(nullptr)},
              {"a", side(x)},
              {"b", side(y)},
              {"same_stage", same_stage}};
    if (x && y && x->timing.median_ns && y->timing.median_ns && *x->timing.median_ns > 0 &&
        *y->timing.median_ns > 0 && x->status == store::eval_status::ok &&
        y->status == store::eval_status::ok) {
      const double ratio = *y->timing.median_ns / *x->timing.median_ns;
      r["time_ratio"] = ratio;  // b / a: < 1 means b is faster
      r["median_delta_ns"] = *y->timing.median_ns - *x->timing.median_ns;
      r["speedup"] = 1.0 / ratio;
      if (x->sol_fraction && y->sol_fraction) r["sol_delta"] = *y->sol_fraction - *x->sol_fraction;
      if (same_stage) {
        const double w = weights.count(k) ? weights.at(k) : 1.0;
        lr += w * std::log(ratio);
        wsum += w;
      }
    }
    rows.push_back(std::move(r));
  }
  json plan_a = a->launch_plan, plan_b = b->launch_plan;
  return {{"a",
           {{"id", a->id},
            {"campaign_id", a->campaign_id},
            {"origin", store::to_string(a->origin)},
            {"source_hash", a->source_hash}}},
          {"b",
           {{"id", b->id},
            {"campaign_id", b->campaign_id},
            {"origin", store::to_string(b->origin)},
            {"source_hash", b->source_hash}}},
          {"same_source", a->source_hash == b->source_hash},
          {"source_diff", unified_diff(a->source, b->source, "candidate " + std::to_string(a->id),
                                       "candidate " + std::to_string(b->id))},
          {"launch_plan_patch", json::diff(plan_a, plan_b)},
          {"parameters_patch", json::diff(a->parameters, b->parameters)},
          {"workloads", rows},
          {"weighted_geomean_time_ratio", wsum > 0 ? json(std::exp(lr / wsum)) : json(nullptr)}};
}

std::vector<std::pair<std::string, std::string>> flatten(const json& j, const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      auto sub = flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key());
      out.insert(out.end(), sub.begin(), sub.end());
    }
  } else if (j.is_array()) {
    // Arrays of scalars read better on one line.
    bool scalars = std::all_of(j.begin(), j.end(), [](const json& x) { return x.is_primitive(); });
    if (scalars && j.size() <= 16) {
      std::string s;
      for (const auto& x : j)
        s += (s.empty() ? "" : ", ") + (x.is_string() ? x.get<std::string>() : x.dump());
      out.emplace_back(prefix, s);
    } else {
      for (std::size_t i = 0; i < j.size(); ++i) {
        auto sub = flatten(j[i], prefix + "[" + std::to_string(i) + "]");
        out.insert(out.end(), sub.begin(), sub.end());
      }
    }
  } else if (j.is_string()) {
    out.emplace_back(prefix, j.get<std::string>());
  } else if (!j.is_null()) {
    out.emplace_back(prefix, j.dump());
  }
  return out;
}

}  // namespace kopt::report
