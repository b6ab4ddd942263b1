#include "report/views.hpp"

#include "report/models.hpp"

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
  // The models each iteration's calls went to (report/models.hpp labels).
  std::map<row_id, json> models_of;
  for (const auto& call : d.llm_calls) {
    if (!call.iteration_id) continue;
    json& m = models_of[*call.iteration_id];
    if (!m.is_object()) m = json::object();
    m[call_label(call)] = m.value(call_label(call), 0) + 1;
  }
  json rows = json::array();
  for (const auto& iv : d.iterations) {
    const auto& it = iv.sum->iteration;
    const auto mo = models_of.find(it.id);
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
                    {"models", mo != models_of.end() ? mo->second : json::object()},
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
                     {"attainable_sol_fraction", opt(v.attainable_score)},
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
  std::vector<store::dropout_decision> iteration_decisions;
  auto decisions_json = [](const std::vector<store::dropout_decision>& ds) {
    json out = json::array();
    for (const auto& dd : ds)
      out.push_back(
          {{"item_id", dd.item_id}, {"kind", dd.item_kind}, {"kept", dd.kept}, {"p", dd.p}});
    return out;
  };
  if (iter) {
    iteration_decisions = db.dropout_decisions_of(iter->id);
    const json decisions = decisions_json(iteration_decisions);
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
  // What its own call showed (the call's dropout draw on top of the
  // iteration's); null without a linked call.
  json call_dropout = nullptr;
  if (c.llm_call_id) {
    for (const auto& call : all)
      if (call.id == *c.llm_call_id) {
        calls.push_back(llm_call_json(call));
        if (!iteration_decisions.empty())
          call_dropout = decisions_json(campaign::call_decisions(iteration_decisions, call));
      }
    link = "candidate";
  } else if (c.iteration_id) {
    for (const auto& call : all)
      if (call.iteration_id && *call.iteration_id == *c.iteration_id)
        calls.push_back(llm_call_json(call));
    if (!calls.empty()) link = "iteration";
  }
  j["llm_calls"] = calls;
  j["llm_call_link"] = link;
  j["call_dropout"] = call_dropout;
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
  const auto n = static_cast<std::ptrdiff_t>(la.size() - pre - suf),
             m = static_cast<std::ptrdiff_t>(lb.size() - pre - suf);
  auto A = [&](std::ptrdiff_t i) -> const std::string& {
    return la[pre + static_cast<std::size_t>(i)];
  };
  auto B = [&](std::ptrdiff_t j) -> const std::string& {
    return lb[pre + static_cast<std::size_t>(j)];
  };
  // Myers: v[k] = furthest x on diagonal k = x - y after d edits; trace[d]
  // keeps v over k in [-d, d] for the walk back.
  std::vector<std::vector<std::ptrdiff_t>> trace;
  bool found = n == 0 && m == 0;
  std::size_t cells = 0;
  {
    std::vector<std::ptrdiff_t> v(1, 0);  // d = 0 slice, k in [0, 0]
    std::ptrdiff_t x0 = 0;
    while (x0 < n && x0 < m && A(x0) == B(x0)) ++x0;
    v[0] = x0;
    trace.push_back(v);
    found = found || (x0 >= n && x0 >= m);
    for (std::ptrdiff_t d = 1; !found && d <= n + m; ++d) {
      cells += static_cast<std::size_t>(2 * d + 1);
      if (cells > max_cells) break;
      const auto& prev = trace.back();  // k in [-(d-1), d-1] at index k + d - 1
      std::vector<std::ptrdiff_t> cur(static_cast<std::size_t>(2 * d + 1));
      auto pv = [&](std::ptrdiff_t k) { return prev[static_cast<std::size_t>(k + d - 1)]; };
      for (std::ptrdiff_t k = -d; k <= d; k += 2) {
        std::ptrdiff_t x = (k == -d || (k != d && pv(k - 1) < pv(k + 1)))
                               ? pv(k + 1)       // insertion
                               : pv(k - 1) + 1;  // deletion
        std::ptrdiff_t y = x - k;
        while (x < n && y < m && A(x) == B(y)) ++x, ++y;
        cur[static_cast<std::size_t>(k + d)] = x;
        if (x >= n && y >= m) found = true;
      }
      trace.push_back(std::move(cur));
    }
  }
  if (!found) {
    for (std::ptrdiff_t i = 0; i < n; ++i) out.push_back({'-', A(i)});
    for (std::ptrdiff_t j = 0; j < m; ++j) out.push_back({'+', B(j)});
  } else {
    // Walk back from (n, m), collecting the edit script in reverse.
    std::vector<diff_line> rev;
    std::ptrdiff_t x = n, y = m;
    for (auto d = static_cast<std::ptrdiff_t>(trace.size()) - 1; d > 0; --d) {
      const auto& prev = trace[static_cast<std::size_t>(d - 1)];
      auto pv = [&](std::ptrdiff_t k) { return prev[static_cast<std::size_t>(k + d - 1)]; };
      const std::ptrdiff_t k = x - y;
      const bool down = k == -d || (k != d && pv(k - 1) < pv(k + 1));
      const std::ptrdiff_t pk = down ? k + 1 : k - 1;
      const std::ptrdiff_t px = pv(pk), py = px - pk;
      const std::ptrdiff_t sx = down ? px : px + 1;  // where the snake began
      while (x > sx) rev.push_back({' ', A(--x)}), --y;
      if (down)
        rev.push_back({'+', B(--y)});
      else
        rev.push_back({'-', A(--x)});
      x = px;
      y = py;
    }
    while (x > 0) rev.push_back({' ', A(--x)}), --y;
    // Forward order; in each changed block deletions first.
    std::size_t i = rev.size();
    while (i > 0) {
      if (rev[i - 1].op == ' ') {
        out.push_back(std::move(rev[--i]));
        continue;
      }
      std::vector<diff_line> del, ins;
      while (i > 0 && rev[i - 1].op != ' ') {
        auto& l = rev[--i];
        (l.op == '-' ? del : ins).push_back(std::move(l));
      }
      for (auto& l : del) out.push_back(std::move(l));
      for (auto& l : ins) out.push_back(std::move(l));
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
