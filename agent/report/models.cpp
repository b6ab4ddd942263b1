#include "report/models.hpp"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <sstream>

#include "report/html.hpp"

namespace kopt::report {

using nlohmann::json;

namespace {

const json* meta_of(const store::llm_call_record& call) {
  if (!call.request.is_object()) return nullptr;
  const auto m = call.request.find("meta");
  return m != call.request.end() && m->is_object() ? &*m : nullptr;
}

bool is_correct(outcome o) {
  return o == outcome::slower || o == outcome::faster || o == outcome::correct;
}

// Rows keyed by `key_of_call` (empty: the call is not counted), in order of
// first call; candidates join their call's row, or, without a call link,
// the row `key_of_unlinked` names (empty: not counted).
std::vector<model_row> breakdown(
    const campaign_data& d,
    const std::function<std::string(const store::llm_call_record&)>& key_of_call,
    const std::function<std::string(const store::candidate_record&)>& key_of_unlinked) {
  std::vector<model_row> rows;
  std::map<std::string, std::size_t> index;
  auto row = [&](const std::string& key) -> model_row& {
    auto [it, added] = index.emplace(key, rows.size());
    if (added) {
      rows.emplace_back();
      rows.back().label = key;
    }
    return rows[it->second];
  };
  std::map<row_id, std::string> key_of_call_id;
  std::map<std::string, std::pair<double, std::int64_t>> latency;  // sum, count
  for (const auto& call : d.llm_calls) {
    const std::string key = key_of_call(call);
    if (key.empty()) continue;
    key_of_call_id[call.id] = key;
    model_row& r = row(key);
    if (r.calls == 0) {
      r.provider = call.provider;
      r.model = call.model;
    }
    ++r.calls;
    if (call.status != "ok") ++r.failed_calls;
    r.prompt_tokens += call.prompt_tokens;
    r.completion_tokens += call.completion_tokens;
    r.cached_tokens += call.cached_tokens;
    r.reasoning_tokens += call.reasoning_tokens;
    r.cost_usd += call.cost_usd;
    if (call.latency_ms) {
      latency[key].first += *call.latency_ms;
      latency[key].second += 1;
    }
  }
  for (auto& r : rows)
    if (const auto l = latency.find(r.label); l != latency.end() && l->second.second > 0)
      r.mean_latency_ms = l->second.first / static_cast<double>(l->second.second);

  std::map<row_id, std::string> key_of_candidate;
  for (const auto& c : d.candidates) {
    const candidate_view* v = d.view(c.id);
    if (v == nullptr || v->result == outcome::start) continue;
    std::string key;
    if (c.llm_call_id) {
      const auto k = key_of_call_id.find(*c.llm_call_id);
      if (k != key_of_call_id.end()) key = k->second;
    } else {
      key = key_of_unlinked(c);
    }
    if (key.empty()) continue;
    key_of_candidate[c.id] = key;
    model_row& r = row(key);
    if (r.provider.empty() && r.model.empty()) {
      r.provider = c.provider.value_or("");
      r.model = c.model.value_or("");
    }
    ++r.candidates;
    if (v->compiled) ++r.compiled;
    if (is_correct(v->result)) ++r.correct;
    if (v->result == outcome::faster) ++r.faster;
    if (v->score && (!r.best_score || *v->score > *r.best_score)) {
      r.best_score = v->score;
      r.best_candidate = c.id;
    }
    if (d.campaign.best_candidate_id == c.id) r.has_best = true;
  }
  for (const auto& e : d.events) {
    if (e.kind != "promoted" || !e.data.is_object()) continue;
    const auto ch = e.data.find("challenger");
    if (ch == e.data.end() || !ch->is_number_integer()) continue;
    const auto k = key_of_candidate.find(ch->get<row_id>());
    if (k == key_of_candidate.end()) continue;
    const json decision = e.data.value("decision", json::object());
    const double gain = decision.is_object() ? decision.value("gain", 0.0) : 0.0;
    model_row& r = row(k->second);
    ++r.wins;
    r.gain += gain;
    r.best_gain = std::max(r.best_gain, gain);
  }
  return rows;
}

std::string opt_num(const std::optional<double>& v, int digits) {
  return v ? fmt::format("{:.{}f}", *v, digits) : std::string("-");
}

}  // namespace

std::string call_label(const store::llm_call_record& call) {
  if (const json* m = meta_of(call)) {
    const auto l = m->find("model");
    if (l != m->end() && l->is_string() && !l->get<std::string>().empty())
      return l->get<std::string>();
  }
  return call.model.empty() ? call.provider : call.provider + "/" + call.model;
}

std::vector<model_row> model_breakdown(const campaign_data& d) {
  return breakdown(
      d, [](const store::llm_call_record& c) { return call_label(c); },
      [](const store::candidate_record& c) -> std::string {
        // Candidates of sources that do not record calls (autotune, agents,
        // scripted tests) have no model to credit unless one was stored.
        if (!c.model || c.model->empty()) return "";
        return c.provider ? *c.provider + "/" + *c.model : *c.model;
      });
}

std::vector<model_row> hint_breakdown(const campaign_data& d) {
  bool any_hint = false;
  for (const auto& call : d.llm_calls)
    if (const json* m = meta_of(call); m && m->contains("hint") && (*m)["hint"].is_string())
      any_hint = true;
  if (!any_hint) return {};
  auto rows = breakdown(
      d,
      [](const store::llm_call_record& c) -> std::string {
        const json* m = meta_of(c);
        if (m == nullptr) return "";
        const auto h = m->find("hint");
        return h != m->end() && h->is_string() ? h->get<std::string>() : std::string("none");
      },
      [](const store::candidate_record&) { return std::string(); });
  // A hint row spans models: provider and model say nothing about it.
  for (auto& r : rows) r.provider = r.model = "";
  return rows;
}

json to_json(const model_row& r) {
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  return {{"label", r.label},
          {"provider", r.provider},
          {"model", r.model},
          {"calls", r.calls},
          {"failed_calls", r.failed_calls},
          {"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"cached_tokens", r.cached_tokens},
          {"reasoning_tokens", r.reasoning_tokens},
          {"tokens", r.tokens()},
          {"cost_usd", r.cost_usd},
          {"mean_latency_ms", opt(r.mean_latency_ms)},
          {"candidates", r.candidates},
          {"compiled", r.compiled},
          {"correct", r.correct},
          {"faster", r.faster},
          {"wins", r.wins},
          {"gain", r.gain},
          {"best_gain", r.best_gain},
          {"gain_per_usd", opt(r.gain_per_usd())},
          {"best_sol_fraction", opt(r.best_score)},
          {"best_candidate", opt(r.best_candidate)},
          {"has_campaign_best", r.has_best}};
}

json attribution_json(const campaign_data& d) {
  json models = json::array();
  for (const auto& r : model_breakdown(d)) models.push_back(to_json(r));
  json hints = json::array();
  for (const auto& r : hint_breakdown(d)) {
    json j = to_json(r);
    j.erase("provider");
    j.erase("model");
    j.erase("has_campaign_best");
    hints.push_back(std::move(j));
  }
  json items = json::array();
  for (const auto& a : d.attribution)
    items.push_back({{"item_id", a.item_id},
                     {"kind", a.kind},
                     {"kept", a.kept},
                     {"dropped", a.dropped},
                     {"mean_gain_kept", a.mean_gain_kept},
                     {"mean_gain_dropped", a.mean_gain_dropped},
                     {"effect", a.effect()}});
  return {{"campaign", d.campaign.id}, {"models", models}, {"hints", hints}, {"items", items}};
}

std::string models_html_section(const campaign_data& d) {
  const auto models = model_breakdown(d);
  if (models.empty()) return "";
  const auto hints = hint_breakdown(d);
  auto table = [](const std::vector<model_row>& rows, bool with_model) {
    std::ostringstream o;
    o << "<div class=\"scroll\"><table class=\"data\"><thead><tr><th>"
      << (with_model ? "model" : "hint") << "</th>";
    if (with_model) o << "<th>provider / model</th>";
    o << "<th class=\"r\">calls</th><th class=\"r\">failed</th><th class=\"r\">tokens</th>"
         "<th class=\"r\">cached</th><th class=\"r\">reasoning</th><th class=\"r\">cost</th>"
         "<th class=\"r\">candidates</th><th class=\"r\">compiled</th><th class=\"r\">correct</th>"
         "<th class=\"r\">faster</th><th class=\"r\">wins</th><th class=\"r\">gain</th>"
         "<th class=\"r\">best gain</th><th class=\"r\">gain per $</th><th class=\"r\">best</th>"
         "</tr></thead><tbody>";
    for (const auto& r : rows) {
      o << "<tr><td>" << html_escape(r.label) << (r.has_best ? " ★" : "") << "</td>";
      if (with_model)
        o << "<td>" << html_escape(r.model.empty() ? r.provider : r.provider + " / " + r.model)
          << "</td>";
      o << "<td class=\"r\">" << r.calls << "</td><td class=\"r\">" << r.failed_calls
        << "</td><td class=\"r\">" << r.tokens() << "</td><td class=\"r\">" << r.cached_tokens
        << "</td><td class=\"r\">" << r.reasoning_tokens << "</td><td class=\"r\">$"
        << fmt::format("{:.3f}", r.cost_usd) << "</td><td class=\"r\">" << r.candidates
        << "</td><td class=\"r\">" << r.compiled << "</td><td class=\"r\">" << r.correct
        << "</td><td class=\"r\">" << r.faster << "</td><td class=\"r\">" << r.wins
        << "</td><td class=\"r\">" << fmt::format("{:.1f} %", 100 * r.gain)
        << "</td><td class=\"r\">" << fmt::format("{:.1f} %", 100 * r.best_gain)
        << "</td><td class=\"r\">" << opt_num(r.gain_per_usd(), 2) << "</td><td class=\"r\">"
        << pct(r.best_score) << "</td></tr>";
    }
    o << "</tbody></table></div>";
    return o.str();
  };
  std::ostringstream o;
  o << "<section id=\"models\"><h2>Models</h2><p class=\"lead\">Each LLM call counted for the "
       "model that answered it, each candidate for the call it came from; wins are "
       "promotions, gain their relative gains (the bandit's gain per dollar divides it by the "
       "cost). ★ marks the model of the campaign's best.</p>"
    << table(models, true);
  if (!hints.empty())
    o << "<h3>by strategy hint</h3><p class=\"lead\">Calls 2..K of an iteration carry a "
         "strategy hint; call 1 none.</p>"
      << table(hints, false);
  o << "</section>";
  return o.str();
}

}  // namespace kopt::report
