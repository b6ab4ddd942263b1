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
    case escalation::none: return "none";
    case escalation::higher_p: return "higher_p";
    case escalation::partial_restart: return "partial_restart";
    case escalation::restart_from_elite: return "restart_from_elite";
    case escalation::different_algorithm: return "different_algorithm";
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

std::vector<item_attribution> attribution(
    const std::map<std::int64_t, std::vector<store::dropout_decision>>& decisions,
    const std::map<std::int64_t, double>& gains) {
  std::map<std::string, item_attribution> by_id;
  std::map<std::string, double> sum_p, sum_a;
  for (const auto& [n, ds] : decisions) {
    const auto g = gains.find(n);
    const double gain = g == gains.end() ? 0.0 : g->second;
    for (const auto& d : ds) {
      auto& a = by_id[d.item_id];
      a.item_id = d.item_id;
      a.kind = d.item_kind;
      if (d.kept) {
        ++a.present;
        sum_p[d.item_id] += gain;
      } else {
        ++a.absent;
        sum_a[d.item_id] += gain;
      }
    }
  }
  std::vector<item_attribution> out;
  for (auto& [id, a] : by_id) {
    if (a.present) a.mean_gain_present = sum_p[id] / static_cast<double>(a.present);
    if (a.absent) a.mean_gain_absent = sum_a[id] / static_cast<double>(a.absent);
    out.push_back(a);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& x, const auto& y) { return x.effect() > y.effect(); });
  return out;
}

}  // namespace kopt::campaign
