#include "runner/llm_recorder.hpp"

#include <spdlog/spdlog.h>

namespace kopt::runner {

std::string store_status(llm::call_status s) {
  switch (s) {
    case llm::call_status::ok: return "ok";
    case llm::call_status::transient: return "http_error";
    case llm::call_status::permanent: return "http_error";
    case llm::call_status::invalid_request: return "http_error";
    case llm::call_status::timeout: return "timeout";
    case llm::call_status::bad_response: return "parse_error";
    case llm::call_status::budget_exceeded:
    case llm::call_status::disabled:
    case llm::call_status::no_llm: return "refused";
  }
  return "http_error";
}

std::optional<std::int64_t> store_call_recorder::do_record(const llm::call_record& r) {
  std::lock_guard lock(mu_);
  try {
    store::llm_call_record c;
    c.campaign_id = campaign_id_;
    c.iteration_id = r.iteration_id;
    c.provider = r.provider;
    c.model = r.model;
    c.request = {{"tag", r.tag}, {"prompt_sha256", r.prompt_sha256}, {"llm_status", llm::call_status_name(r.status)},
                 {"stop_reason", r.stop_reason}, {"usage_reported", r.tokens.reported},
                 {"cache_write_tokens", r.tokens.cache_write}};
    // What the caller showed in this call (model, hint, items: per-call
    // attribution), and every answer of an n > 1 call (`response` holds the first).
    if (r.meta.is_object() && !r.meta.empty()) c.request["meta"] = r.meta;
    if (r.texts.size() > 1) c.request["answers"] = r.texts;
    // Reasoning / thinking text the API returned apart from the answer (the
    // schema has no column for it yet).
    if (!r.reasoning.empty()) c.request["reasoning"] = r.reasoning;
    c.prompt = r.prompt;
    if (!r.response.empty() || r.status == llm::call_status::ok) c.response = r.response;
    c.status = store_status(r.status);
    if (r.http_status != 0) c.http_status = r.http_status;
    c.attempts = r.attempts;
    c.prompt_tokens = r.tokens.prompt;
    c.completion_tokens = r.tokens.completion;
    c.cached_tokens = r.tokens.cached;
    c.reasoning_tokens = r.tokens.reasoning;
    c.cost_usd = r.cost_usd;
    c.latency_ms = static_cast<double>(r.latency.count());
    if (!r.error.empty()) c.error = r.error;
    const auto id = db_.add_llm_call(c);
    if (r.status == llm::call_status::permanent) {
      store::event_record ev;
      ev.campaign_id = campaign_id_;
      ev.kind = "llm_disabled";
      ev.level = "error";
      ev.message = "LLM use stopped for this campaign: " + r.error;
      db_.add_event(ev);
    }
    return id;
  } catch (const std::exception& e) {
    // The call happened whatever the store says; losing its record must not
    // stop the campaign, but it must be visible.
    ++failures_;
    spdlog::error("could not record an LLM call in the store: {}", e.what());
  }
  return std::nullopt;
}

}  // namespace kopt::runner
