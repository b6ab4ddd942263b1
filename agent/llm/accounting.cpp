#include "llm/accounting.hpp"

#include <cmath>
#include <sstream>

#include "common/error.hpp"

namespace kopt::llm {
namespace {

double price_field(const nlohmann::json& entry, const std::string& model, const char* key,
                   double fallback) {
  const auto it = entry.find(key);
  if (it == entry.end()) return fallback;
  if (!it->is_number() || it->get<double>() < 0 || !std::isfinite(it->get<double>())) {
    throw config_error("prices." + model + "." + key +
                       " must be a non-negative number (USD per million tokens)");
  }
  return it->get<double>();
}

std::string money(double v) {
  std::ostringstream s;
  s.precision(4);
  s << std::fixed << v;
  return s.str();
}

}  // namespace

price_table price_table::from_json(const nlohmann::json& j) {
  price_table t;
  if (j.is_null()) return t;
  if (!j.is_object()) throw config_error("prices must be an object mapping model names to prices");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const nlohmann::json& e = it.value();
    if (!e.is_object())
      throw config_error("prices." + it.key() +
                         " must be an object such as {\"input\": 2.5, \"output\": 10}");
    for (auto f = e.begin(); f != e.end(); ++f) {
      if (f.key() != "input" && f.key() != "output" && f.key() != "cached_input" &&
          f.key() != "cache_write") {
        throw config_error("prices." + it.key() + "." + f.key() +
                           " is not a price field (input, output, cached_input, cache_write)");
      }
    }
    if (!e.contains("input") || !e.contains("output")) {
      throw config_error("prices." + it.key() +
                         " needs both \"input\" and \"output\" (USD per million tokens)");
    }
    price p;
    p.input_per_mtok = price_field(e, it.key(), "input", 0);
    p.output_per_mtok = price_field(e, it.key(), "output", 0);
    p.cached_input_per_mtok = price_field(e, it.key(), "cached_input", p.input_per_mtok);
    p.cache_write_per_mtok = price_field(e, it.key(), "cache_write", p.input_per_mtok);
    t.prices_[it.key()] = p;
  }
  return t;
}

std::optional<price> price_table::find(const std::string& model) const {
  if (const auto it = prices_.find(model); it != prices_.end()) return it->second;
  std::optional<price> best;
  std::size_t best_len = 0;
  for (const auto& [pattern, p] : prices_) {
    if (pattern.empty() || pattern.back() != '*') continue;
    const std::string_view prefix(pattern.data(), pattern.size() - 1);
    if (model.compare(0, prefix.size(), prefix) == 0 && (!best || prefix.size() >= best_len)) {
      best = p;
      best_len = prefix.size();
    }
  }
  return best;
}

double cost_usd(const usage& u, const price& p) noexcept {
  const auto uncached = std::max<std::int64_t>(0, u.prompt - u.cached - u.cache_write);
  return (static_cast<double>(uncached) * p.input_per_mtok +
          static_cast<double>(u.cached) * p.cached_input_per_mtok +
          static_cast<double>(u.cache_write) * p.cache_write_per_mtok +
          static_cast<double>(u.completion) * p.output_per_mtok) /
         1e6;
}

std::optional<std::string> budget::try_begin(std::int64_t worst_tokens, double worst_cost) {
  std::lock_guard lock(mu_);
  if (limits_.tokens && spent_tokens_ >= *limits_.tokens) {
    return "token budget spent: " + std::to_string(spent_tokens_) + " of " +
           std::to_string(*limits_.tokens);
  }
  if (limits_.cost_usd && spent_cost_ >= *limits_.cost_usd) {
    return "cost budget spent: $" + money(spent_cost_) + " of $" + money(*limits_.cost_usd);
  }
  const bool fits_tokens =
      !limits_.tokens || spent_tokens_ + reserved_tokens_ + worst_tokens <= *limits_.tokens;
  const bool fits_cost =
      !limits_.cost_usd || spent_cost_ + reserved_cost_ + worst_cost <= *limits_.cost_usd;
  if (!(fits_tokens && fits_cost) && in_flight_ > 0) {
    return "budget left does not cover this call while " + std::to_string(in_flight_) +
           " other call(s) run";
  }
  ++in_flight_;
  reserved_tokens_ += worst_tokens;
  reserved_cost_ += worst_cost;
  return std::nullopt;
}

void budget::end(std::int64_t worst_tokens, double worst_cost, std::int64_t used_tokens,
                 double used_cost) {
  std::lock_guard lock(mu_);
  --in_flight_;
  reserved_tokens_ -= worst_tokens;
  reserved_cost_ -= worst_cost;
  spent_tokens_ += used_tokens;
  spent_cost_ += used_cost;
}

std::int64_t budget::spent_tokens() const {
  std::lock_guard lock(mu_);
  return spent_tokens_;
}

double budget::spent_cost() const {
  std::lock_guard lock(mu_);
  return spent_cost_;
}

void rate_limiter::acquire(std::int64_t tokens) {
  using namespace std::chrono;
  if (!limits_.requests_per_minute && !limits_.tokens_per_minute) return;
  std::unique_lock lock(mu_);
  for (;;) {
    const auto now = time_.now();
    while (!window_.empty() && window_.front().first + minutes{1} <= now) window_.pop_front();
    std::int64_t sum = 0;
    for (const auto& e : window_) sum += e.second;
    const bool requests_ok =
        !limits_.requests_per_minute ||
        static_cast<std::int64_t>(window_.size()) < *limits_.requests_per_minute;
    const bool tokens_ok =
        !limits_.tokens_per_minute || window_.empty() || sum + tokens <= *limits_.tokens_per_minute;
    if (requests_ok && tokens_ok) {
      window_.emplace_back(now, tokens);
      return;
    }
    // Wait until the oldest entry leaves the window, then look again.
    const auto wait = duration_cast<milliseconds>(window_.front().first + minutes{1} - now);
    lock.unlock();
    time_.sleep_for(std::max(wait, milliseconds{1}));
    lock.lock();
  }
}

}  // namespace kopt::llm
