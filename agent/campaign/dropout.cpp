#include "campaign/dropout.hpp"

#include <algorithm>
#include <numeric>

namespace kopt::campaign {

namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

std::uint64_t derive_seed(std::uint64_t seed, std::string_view purpose, std::int64_t n) {
  return splitmix(splitmix(seed ^ fnv1a(purpose)) ^ static_cast<std::uint64_t>(n));
}

double unit_draw(std::uint64_t seed) {
  return static_cast<double>(splitmix(seed) >> 11) * 0x1.0p-53;
}

dropout_result apply_dropout(const std::vector<prompt_item>& items, double p, std::uint64_t seed) {
  dropout_result r;
  for (const auto& it : items) {
    if (!it.optional) {
      r.kept.push_back(it);
      continue;
    }
    const bool keep = unit_draw(derive_seed(seed, it.id)) >= p;
    store::dropout_decision d;
    d.item_id = it.id;
    d.item_kind = it.kind;
    d.kept = keep;
    d.p = p;
    r.decisions.push_back(d);
    if (keep) r.kept.push_back(it);
  }
  return r;
}

std::string_view to_string(escalation e) noexcept {
  switch (e) {
    case escalation::none:
      return "none";
    case escalation::higher_p:
      return "higher_p";
    case escalation::partial_restart:
      return "partial_restart";
    case escalation::restart_from_elite:
      return "restart_from_elite";
    case escalation::different_algorithm:
      return "different_algorithm";
  }
  return "unknown";
}

std::set<std::string> mask_history(const std::vector<prompt_item>& history, std::uint64_t seed) {
  std::vector<std::pair<double, std::string>> draws;
  for (const auto& h : history)
    if (h.optional) draws.emplace_back(unit_draw(derive_seed(seed, h.id)), h.id);
  std::sort(draws.begin(), draws.end());
  const std::size_t half = (draws.size() + 1) / 2;
  std::set<std::string> masked;
  for (std::size_t i = 0; i < half; ++i) masked.insert(draws[i].second);
  return masked;
}

std::vector<store::dropout_decision> call_decisions(
    const std::vector<store::dropout_decision>& iteration, const store::llm_call_record& call) {
  const nlohmann::json* meta = nullptr;
  if (call.request.is_object())
    if (const auto m = call.request.find("meta"); m != call.request.end() && m->is_object())
      meta = &*m;
  auto ids = [&](const char* key) -> std::optional<std::set<std::string>> {
    if (meta == nullptr) return std::nullopt;
    const auto a = meta->find(key);
    if (a == meta->end() || !a->is_array()) return std::nullopt;
    std::set<std::string> out;
    for (const auto& x : *a)
      if (x.is_string()) out.insert(x.get<std::string>());
    return out;
  };
  const auto dropped = ids("call_dropped");
  const auto shown = ids("items");
  std::vector<store::dropout_decision> out = iteration;
  for (auto& d : out) {
    if (!d.kept) continue;
    if ((dropped && dropped->count(d.item_id)) || (shown && !shown->count(d.item_id)))
      d.kept = false;
  }
  return out;
}

std::vector<attribution_draw> attribution_draws(const attribution_iteration& it) {
  if (it.decisions.empty()) return {};
  const double gain = it.promoted ? it.gain : 0.0;
  bool placed = !it.promoted;  // a promotion is placed when its call is one of these
  for (const auto* c : it.calls)
    if (it.promoted_call && c->id == *it.promoted_call) placed = true;
  if (it.calls.empty() || !placed) return {{std::nullopt, it.decisions, gain}};
  std::vector<attribution_draw> out;
  for (const auto* c : it.calls) {
    if (c->status != "ok") continue;
    const bool won = it.promoted && it.promoted_call && c->id == *it.promoted_call;
    out.push_back({c->id, call_decisions(it.decisions, *c), won ? gain : 0.0});
  }
  return out;
}

std::vector<item_attribution> attribution(const std::vector<attribution_draw>& draws) {
  std::map<std::string, item_attribution> by_id;
  std::map<std::string, double> sum_k, sum_d;
  for (const auto& draw : draws) {
    for (const auto& d : draw.decisions) {
      auto& a = by_id[d.item_id];
      a.item_id = d.item_id;
      a.kind = d.item_kind;
      if (d.kept) {
        ++a.kept;
        sum_k[d.item_id] += draw.gain;
      } else {
        ++a.dropped;
        sum_d[d.item_id] += draw.gain;
      }
    }
  }
  std::vector<item_attribution> out;
  for (auto& [id, a] : by_id) {
    if (a.kept) a.mean_gain_kept = sum_k[id] / static_cast<double>(a.kept);
    if (a.dropped) a.mean_gain_dropped = sum_d[id] / static_cast<double>(a.dropped);
    out.push_back(a);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& x, const auto& y) { return x.effect() > y.effect(); });
  return out;
}

std::vector<item_attribution> attribution(
    const std::vector<store::iteration_record>& iterations,
    const std::map<store::row_id, std::vector<store::dropout_decision>>& decisions,
    const std::vector<store::llm_call_record>& calls,
    const std::vector<store::candidate_record>& candidates,
    const std::vector<store::event_record>& events) {
  std::map<store::row_id, std::optional<store::row_id>> call_of_candidate;
  for (const auto& c : candidates) call_of_candidate[c.id] = c.llm_call_id;
  // By iteration number: the gain and the promoted candidate's call.
  std::map<std::int64_t, std::pair<double, std::optional<store::row_id>>> promotions;
  for (const auto& e : events) {
    if (e.kind != "promoted" || !e.data.is_object()) continue;
    const auto n = e.data.value("iteration", std::int64_t{-1});
    const auto decision = e.data.find("decision");
    const double gain =
        decision != e.data.end() && decision->is_object() ? decision->value("gain", 0.0) : 0.0;
    std::optional<store::row_id> call;
    if (const auto ch = e.data.find("challenger"); ch != e.data.end() && ch->is_number_integer())
      if (const auto f = call_of_candidate.find(ch->get<store::row_id>());
          f != call_of_candidate.end())
        call = f->second;
    promotions[n] = {gain, call};
  }
  std::map<store::row_id, std::vector<const store::llm_call_record*>> calls_of;
  for (const auto& c : calls)
    if (c.iteration_id) calls_of[*c.iteration_id].push_back(&c);
  std::vector<attribution_draw> draws;
  for (const auto& it : iterations) {
    if (it.number <= 0) continue;
    attribution_iteration in;
    if (const auto d = decisions.find(it.id); d != decisions.end()) in.decisions = d->second;
    if (const auto c = calls_of.find(it.id); c != calls_of.end()) in.calls = c->second;
    if (const auto p = promotions.find(it.number); p != promotions.end()) {
      in.promoted = true;
      in.gain = p->second.first;
      in.promoted_call = p->second.second;
    }
    for (auto& d : attribution_draws(in)) draws.push_back(std::move(d));
  }
  return attribution(draws);
}

}  // namespace kopt::campaign
