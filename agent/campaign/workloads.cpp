#include "campaign/workloads.hpp"

#include <algorithm>
#include <numeric>
#include <set>

namespace kopt::campaign {

using json = nlohmann::json;

json representative_set::to_json() const {
  json p = json::array();
  for (const auto& x : picks)
    p.push_back({{"workload", x.workload},
                 {"reason", x.reason},
                 {"weight", x.weight},
                 {"size", x.size},
                 {"weighted_share", x.weighted_share}});
  return {{"workloads", workloads}, {"picks", p}};
}

double size_proxy(const config::operator_config& op, const config::workload& w) {
  try {
    const auto b = config::roofline_bytes(op, w);
    if (b > 0) return static_cast<double>(b);
  } catch (const std::exception&) {
  }
  try {
    const auto f = config::roofline_flops(op, w);
    if (f > 0) return static_cast<double>(f);
  } catch (const std::exception&) {
  }
  return 1.0;
}

std::vector<std::string> workload_ids(const config::operator_config& op, bool private_ones) {
  std::vector<std::string> out;
  for (const auto& w : op.workloads)
    if (w.is_private == private_ones) out.push_back(w.id);
  return out;
}

representative_set representative_workloads(const config::operator_config& op,
                                            const std::map<std::string, double>& times_ns,
                                            double heavy_share) {
  representative_set out;
  // Private workloads (workloads[].private) are never screened on.
  std::vector<config::workload> wl;
  for (const auto& w : op.workloads)
    if (!w.is_private) wl.push_back(w);
  const std::size_t n = wl.size();
  if (n == 0) return out;
  std::vector<double> size(n), est(n);
  bool measured = true;
  for (const auto& w : wl)
    if (auto it = times_ns.find(w.id); it == times_ns.end() || !(it->second > 0)) measured = false;
  for (std::size_t i = 0; i < n; ++i) {
    size[i] = size_proxy(op, wl[i]);
    est[i] = measured ? times_ns.at(wl[i].id) : size[i];
  }
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) total += wl[i].weight * est[i];

  // Bands: terciles of the workloads ordered by size (ties by config order).
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return size[a] < size[b]; });
  std::set<std::size_t> chosen;
  std::map<std::size_t, std::string> reason;
  const char* names[3] = {"band:small", "band:medium", "band:large"};
  for (std::size_t b = 0; b < 3; ++b) {
    const std::size_t lo = b * n / 3, hi = (b + 1) * n / 3;
    if (lo >= hi) continue;
    std::size_t best = order[lo];
    for (std::size_t r = lo; r < hi; ++r) {
      const std::size_t i = order[r];
      if (wl[i].weight > wl[best].weight) best = i;
    }
    if (chosen.insert(best).second) reason[best] = names[b];
  }
  for (std::size_t i = 0; i < n; ++i) {
    const double share = total > 0 ? wl[i].weight * est[i] / total : 0;
    if (share > heavy_share && chosen.insert(i).second) reason[i] = "heavy";
  }
  for (std::size_t i : chosen) {
    const double share = total > 0 ? wl[i].weight * est[i] / total : 0;
    out.workloads.push_back(wl[i].id);
    out.picks.push_back({wl[i].id, reason[i], wl[i].weight, size[i], share});
  }
  return out;
}

}  // namespace kopt::campaign
