#include "campaign/submission.hpp"

#include <filesystem>
#include <optional>

namespace kopt::campaign {

namespace {

template <typename T>
nlohmann::json opt_json(const std::optional<T>& v) {
  if (v) return nlohmann::json(*v);
  return nullptr;
}

}  // namespace

store::store::put_operator_result store_operator(store::store& db, const config::operator_config& op) {
  store::operator_record rec;
  rec.name = op.name;
  rec.op_type = op.op_type;
  rec.config = op.snapshot();
  rec.content_hash = op.content_hash();
  if (!op.file.empty()) {
    std::error_code ec;
    const auto abs = std::filesystem::absolute(op.file, ec);
    rec.source_path = ec ? op.file.string() : abs.lexically_normal().string();
  }
  std::vector<store::workload_record> workloads;
  int position = 0;
  for (const auto& w : op.workloads) {
    store::workload_record wr;
    wr.key = w.id;
    wr.position = position++;
    wr.axes = nlohmann::json::object();
    for (const auto& [name, value] : w.axes) wr.axes[name] = value;
    wr.weight = w.weight;
    workloads.push_back(std::move(wr));
  }
  return db.put_operator(rec, workloads);
}

nlohmann::json campaign_settings_json(const config::campaign_settings& c) {
  return nlohmann::json{{"provider", c.provider},
                        {"model", c.model},
                        {"budget",
                         {{"iterations", opt_json(c.limits.iterations)},
                          {"wall_time_s", opt_json(c.limits.wall_time_s)},
                          {"tokens", opt_json(c.limits.tokens)},
                          {"cost_usd", opt_json(c.limits.cost_usd)}}},
                        {"target_sol_fraction", c.target_sol_fraction},
                        {"candidates_per_iteration", c.candidates_per_iteration},
                        {"dropout_p", c.dropout_p},
                        {"seed", c.seed}};
}

}  // namespace kopt::campaign
