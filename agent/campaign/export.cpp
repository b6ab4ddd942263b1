#include "campaign/export.hpp"

#include <fmt/format.h>

#include <fstream>

#include "campaign/types.hpp"
#include "common/error.hpp"

namespace kopt::campaign {

using json = nlohmann::json;

namespace {

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  if (!f) throw kopt::error("cannot write " + p.string());
  f << text;
  f.close();
  if (!f) throw kopt::error("error writing " + p.string());
}

}  // namespace

export_result export_winner(store::store& db, store::row_id campaign_id, const std::filesystem::path& dir) {
  const auto c = db.find_campaign(campaign_id);
  if (!c) throw kopt::not_found_error(fmt::format("campaign {} does not exist", campaign_id));
  if (!c->best_candidate_id)
    throw kopt::not_found_error(fmt::format("campaign {} has no best candidate to export", campaign_id));
  const auto cand = db.find_candidate(*c->best_candidate_id);
  if (!cand) throw kopt::not_found_error(fmt::format("candidate {} does not exist", *c->best_candidate_id));
  const auto op = db.find_operator(c->operator_id);
  json summary = json::object();
  for (const auto& e : db.events_of(campaign_id))
    if (e.kind == "finished") summary = e.data;

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw kopt::error(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  export_result out{dir, {}};
  auto put = [&](const std::string& name, const std::string& text) {
    write_file(dir / name, text);
    out.files.push_back(name);
  };
  const json variant = candidate_json(*cand);
  const param_values point = default_point(variant);
  json plan = variant;
  plan.erase("source");
  plan.erase("parameters");
  plan.erase("compile_options");
  const json device = summary.value("device", json::object());
  std::vector<std::string> flags;
  for (const auto& [k, v] : point) flags.push_back(fmt::format("-D{}={}", k, v));
  for (const auto& o : variant.value("compile_options", json::array())) flags.push_back(o.get<std::string>());

  put("kernel.cu", cand->source);
  put("candidate.json", variant.dump(2) + "\n");
  put("launch_plan.json", plan.dump(2) + "\n");
  put("parameters.json", json(point).dump(2) + "\n");
  put("build.json", json{{"compiler", "nvrtc"},
                         {"arch", device.value("arch", "")},
                         {"flags", flags},
                         {"compile_options", variant.value("compile_options", json::array())},
                         {"nvrtc_version", device.value("nvrtc_version", "")},
                         {"driver_version", device.value("driver_version", "")},
                         {"cuda_runtime", device.value("cuda_runtime", json(nullptr))}}
                        .dump(2) + "\n");
  put("measurements.json",
      json{{"campaign_id", campaign_id},
           {"operator", op ? json{{"name", op->name}, {"content_hash", op->content_hash}} : json(nullptr)},
           {"candidate_id", cand->id},
           {"source_hash", cand->source_hash},
           {"state", std::string(store::to_string(c->state))},
           {"stop_reason", c->stop_reason ? json(*c->stop_reason) : json(nullptr)},
           {"best_sol_fraction", c->best_score ? json(*c->best_score) : json(nullptr)},
           {"spent",
            {{"iterations", c->spent_iterations},
             {"tokens", c->spent_tokens},
             {"cost_usd", c->spent_cost_usd},
             {"wall_time_s", c->spent_wall_time_s}}},
           {"device", device},
           {"final", summary}}
              .dump(2) + "\n");
  put("README.md",
      fmt::format("# {} — kopt campaign {}\n\nWinner: candidate {} (source sha256 {}).\n"
                  "Stopped: {}. Verified on every workload with fresh input seeds: {}.\n\n"
                  "- `kernel.cu`: device code; compile with NVRTC for {} with `{}`\n"
                  "- `candidate.json`: kopt candidate format (tuned values as parameter defaults); "
                  "`kopt eval CONFIG --candidate candidate.json` re-measures it\n"
                  "- `launch_plan.json`, `parameters.json`, `build.json`\n"
                  "- `measurements.json`: final verification per workload (median ns, fraction of "
                  "speed of light) and the interleaved comparison with the baseline\n",
                  op ? op->name : std::string("operator"), campaign_id, cand->id, cand->source_hash,
                  c->stop_reason.value_or("not finished"), summary.value("verified", false) ? "yes" : "no",
                  device.value("arch", "the worker's architecture"), fmt::join(flags, " ")));
  return out;
}

}  // namespace kopt::campaign
