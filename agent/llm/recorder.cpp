#include "llm/recorder.hpp"

#include <spdlog/spdlog.h>

#include "common/error.hpp"

namespace kopt::llm {

nlohmann::json prompt_json(const request& r) {
  nlohmann::json msgs = nlohmann::json::array();
  for (const message& m : r.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  return {{"system", r.system}, {"messages", msgs}};
}

nlohmann::json to_json(const call_record& r) {
  nlohmann::json j = {{"provider", r.provider},
                      {"model", r.model},
                      {"tag", r.tag},
                      {"prompt", r.prompt},
                      {"prompt_sha256", r.prompt_sha256},
                      {"response", r.response},
                      {"reasoning", r.reasoning},
                      {"stop_reason", r.stop_reason},
                      {"status", call_status_name(r.status)},
                      {"http_status", r.http_status},
                      {"attempts", r.attempts},
                      {"usage",
                       {{"prompt", r.tokens.prompt},
                        {"completion", r.tokens.completion},
                        {"cached", r.tokens.cached},
                        {"cache_write", r.tokens.cache_write},
                        {"reasoning", r.tokens.reasoning},
                        {"reported", r.tokens.reported}}},
                      {"cost_usd", r.cost_usd},
                      {"latency_ms", r.latency.count()},
                      {"error", r.error}};
  if (!r.texts.empty()) j["texts"] = r.texts;
  if (r.meta.is_object() && !r.meta.empty()) j["meta"] = r.meta;
  return j;
}

std::vector<call_record> memory_recorder::records() const {
  std::lock_guard lock(mu_);
  return records_;
}

std::optional<std::int64_t> memory_recorder::do_record(const call_record& r) {
  std::lock_guard lock(mu_);
  records_.push_back(r);
  return static_cast<std::int64_t>(records_.size());  // 1-based, as row ids are
}

jsonl_recorder::jsonl_recorder(const std::filesystem::path& path)
    : path_(path), out_(path, std::ios::app) {
  if (!out_) throw error("cannot open transcript " + path.string() + " for appending");
}

std::optional<std::int64_t> jsonl_recorder::do_record(const call_record& r) {
  std::lock_guard lock(mu_);
  out_ << to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  out_.flush();
  if (!out_)
    spdlog::error("llm: writing transcript {} failed; later calls may be missing from it",
                  path_.string());
  return std::nullopt;  // a transcript keeps no rows to link to
}

}  // namespace kopt::llm
