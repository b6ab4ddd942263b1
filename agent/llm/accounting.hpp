// Money and tokens. A price table (from the config, per model, in USD per
// million tokens) turns a call's usage into a cost; a budget (tokens and
// USD per campaign) is checked before every call. Calls may run in parallel,
// so a call is admitted only if the spent amount plus the worst case of every
// call in flight plus its own worst case fits the budget, with one
// exception: when nothing is in flight and something is left, one call may
// go. Hence a campaign overruns its budget by at most one call. A rate
// limiter enforces a provider's requests and tokens per minute.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "llm/clock.hpp"
#include "llm/types.hpp"

namespace kopt::llm {

struct price {
  double input_per_mtok = 0;         // uncached input
  double output_per_mtok = 0;        // output, reasoning included
  double cached_input_per_mtok = 0;  // cache reads
  double cache_write_per_mtok = 0;   // cache writes (Anthropic)
};

class price_table {
 public:
  // {"gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25}, "claude-*": {...}}
  // Throws kopt::config_error on a malformed table.
  static price_table from_json(const nlohmann::json& j);
  void set(const std::string& model, const price& p) { prices_[model] = p; }
  // Exact name, else the longest "prefix*" pattern that matches.
  std::optional<price> find(const std::string& model) const;
  bool empty() const noexcept { return prices_.empty(); }

 private:
  std::map<std::string, price> prices_;
};

double cost_usd(const usage& u, const price& p) noexcept;

struct budget_limits {
  std::optional<std::int64_t> tokens;
  std::optional<double> cost_usd;
};

class budget {
 public:
  explicit budget(budget_limits limits = {}) : limits_(limits) {}

  // Admits a call whose worst case is (tokens, cost); returns the refusal
  // reason, or nullopt and counts the call as in flight.
  std::optional<std::string> try_begin(std::int64_t worst_tokens, double worst_cost);
  // The call ended: frees its reservation and adds what it really used.
  void end(std::int64_t worst_tokens, double worst_cost, std::int64_t used_tokens,
           double used_cost);

  std::int64_t spent_tokens() const;
  double spent_cost() const;
  const budget_limits& limits() const noexcept { return limits_; }

 private:
  mutable std::mutex mu_;
  budget_limits limits_;
  std::int64_t spent_tokens_ = 0;
  double spent_cost_ = 0;
  std::int64_t reserved_tokens_ = 0;
  double reserved_cost_ = 0;
  int in_flight_ = 0;
};

struct rate_limits {
  std::optional<std::int64_t> requests_per_minute;
  std::optional<std::int64_t> tokens_per_minute;
};

class rate_limiter {
 public:
  rate_limiter(rate_limits limits, time_source& time) : limits_(limits), time_(time) {}
  // Blocks (through the time source) until a request of `tokens` fits the
  // last minute's window, then counts it. A request larger than the whole
  // token limit goes once the window is empty, rather than never.
  void acquire(std::int64_t tokens);

 private:
  rate_limits limits_;
  time_source& time_;
  std::mutex mu_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::int64_t>> window_;
};

}  // namespace kopt::llm
