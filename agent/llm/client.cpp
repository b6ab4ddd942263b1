#include "llm/client.hpp"

#include <spdlog/spdlog.h>

#include "common/hash.hpp"

namespace kopt::llm {

llm_client::llm_client(std::unique_ptr<provider> p, client_options opts)
    : provider_(std::move(p)), opts_(std::move(opts)) {
  opts_.max_concurrency = std::max(1, opts_.max_concurrency);
  for (const std::string& s : provider_->secrets()) redact_.add(s);
  price_ = opts_.prices.find(provider_->model());
  if (!price_ && provider_->caps().network && opts_.campaign_budget != nullptr &&
      opts_.campaign_budget->limits().cost_usd) {
    spdlog::warn(
        "llm: no price for model '{}' in the price table; calls count as $0 against the cost "
        "budget "
        "(token budgets still apply)",
        provider_->model());
  }
}

llm_client::~llm_client() = default;  // std::async futures join in their destructors

std::optional<std::string> llm_client::stopped() const {
  std::lock_guard lock(mu_);
  return stopped_;
}

completion llm_client::call(const request& r) {
  const auto started = std::chrono::system_clock::now();
  completion out;
  if (!provider_->caps().calls_llm) return provider_->complete(r);
  if (const auto why = stopped()) {
    out.status = call_status::disabled;
    out.error = "LLM use stopped earlier: " + *why;
    record(r, out, started);
    return out;
  }
  const std::int64_t worst_output = provider_->worst_case_output_tokens(r);
  const std::int64_t worst_tokens = worst_case_prompt_tokens(r) + worst_output;
  double worst_cost = 0;
  if (price_) {
    usage w;
    w.prompt = worst_case_prompt_tokens(r);
    w.completion = worst_output;
    worst_cost = cost_usd(w, *price_);
  }
  if (opts_.campaign_budget != nullptr) {
    if (const auto refusal = opts_.campaign_budget->try_begin(worst_tokens, worst_cost)) {
      out.status = call_status::budget_exceeded;
      out.error = *refusal;
      record(r, out, started);
      return out;
    }
  }
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ < opts_.max_concurrency; });
    ++in_flight_;
  }
  try {
    out = provider_->complete(r);
  } catch (const std::exception& e) {
    out.status = call_status::transient;
    out.error = std::string("provider failed: ") + e.what();
  }
  {
    std::lock_guard lock(mu_);
    --in_flight_;
  }
  cv_.notify_one();
  // The price table when there is one; else what the provider itself
  // reported (an agent CLI that prints its cost, command.cpp).
  if (price_) out.cost_usd = cost_usd(out.tokens, *price_);
  if (opts_.campaign_budget != nullptr) {
    opts_.campaign_budget->end(worst_tokens, worst_cost, out.tokens.total(), out.cost_usd);
  }
  out.error = redact_.apply(out.error);
  out.text = redact_.apply(out.text);
  for (std::string& t : out.texts) t = redact_.apply(t);
  out.reasoning = redact_.apply(out.reasoning);
  if (out.status == call_status::permanent) {
    std::lock_guard lock(mu_);
    if (!stopped_) {
      stopped_ = provider_->name() + " " + provider_->model() + ": " + out.error;
      spdlog::error("llm: stopping LLM use for this campaign: {}", *stopped_);
    }
  } else if (!out.ok()) {
    spdlog::warn("llm {}: call failed ({}): {}", provider_->name(), call_status_name(out.status),
                 out.error);
  }
  out.record_id = record(r, out, started);
  return out;
}

std::future<completion> llm_client::submit(request r) {
  return std::async(std::launch::async, [this, r = std::move(r)] { return call(r); });
}

std::optional<std::int64_t> llm_client::record(const request& r, const completion& c,
                                               std::chrono::system_clock::time_point started) {
  if (opts_.recorder == nullptr) return std::nullopt;
  call_record rec;
  rec.provider = provider_->name();
  rec.model = c.model.empty() ? provider_->model() : c.model;
  rec.tag = r.tag;
  rec.meta = r.meta;
  rec.iteration_id = r.iteration_id;
  rec.prompt =
      redact_.apply(prompt_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  rec.prompt_sha256 =
      sha256_hex(prompt_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  rec.response = c.text;
  rec.texts = c.texts;
  rec.reasoning = c.reasoning;
  rec.stop_reason = c.stop_reason;
  rec.status = c.status;
  rec.http_status = c.http_status;
  rec.attempts = c.attempts;
  rec.tokens = c.tokens;
  rec.cost_usd = c.cost_usd;
  rec.latency = c.latency;
  rec.error = c.error;
  rec.started = started;
  try {
    return opts_.recorder->record(rec);
  } catch (const std::exception& e) {
    spdlog::error("llm: recording a call failed: {}", e.what());
  }
  return std::nullopt;
}

}  // namespace kopt::llm
