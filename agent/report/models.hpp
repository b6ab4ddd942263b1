// Results per model and per strategy hint: the breakdown a campaign with
// several models (`llm.models`, docs/providers.md) is judged by. Each LLM
// call is counted for the model that answered it (the router's label, which
// the call records in its `meta.model`; "provider/model" for calls recorded
// without one), and each candidate for the call it came from (its
// `llm_call_id`; else the provider and model stored with the candidate).
// A model's "wins" are the promotions of its candidates, with the gains the
// loop measured for them, so calls, tokens and dollars can be set against
// what they brought. Hints (the per-call strategy hint, `meta.hint`) are
// broken down the same way: per-call attribution (docs/campaign.md). Built
// from campaign_data, so `kopt report` text, JSON and HTML agree.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/data.hpp"

namespace kopt::report {

struct model_row {
  std::string label;            // model label, or hint id ("none": calls without a hint)
  std::string provider, model;  // as the calls recorded them (the first call's)
  std::int64_t calls = 0, failed_calls = 0;
  std::int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, reasoning_tokens = 0;
  double cost_usd = 0;
  std::optional<double> mean_latency_ms;
  std::int64_t candidates = 0;       // stored candidates that came from its answers
  std::int64_t compiled = 0;         // ... that compiled
  std::int64_t correct = 0;          // ... that passed the correctness check
  std::int64_t faster = 0;           // ... correct and faster than their parent
  std::int64_t wins = 0;             // ... promoted to the campaign's incumbent
  double gain = 0;                   // sum of the relative gains of its promotions
  double best_gain = 0;              // largest single gain
  std::optional<double> best_score;  // best weighted fraction of SOL of its candidates
  std::optional<row_id> best_candidate;
  bool has_best = false;  // the campaign's best candidate is one of its
  std::int64_t tokens() const noexcept { return prompt_tokens + completion_tokens; }
  // Gain per dollar as the bandit counts it; empty without a billed cost.
  std::optional<double> gain_per_usd() const {
    if (cost_usd <= 0) return std::nullopt;
    return gain / cost_usd;
  }
};

// The label a stored call is counted under: its meta.model, else provider/model.
std::string call_label(const store::llm_call_record& call);

// One row per model, in order of first call; empty when the campaign made
// no LLM call and has no candidate with a model.
std::vector<model_row> model_breakdown(const campaign_data& d);
// One row per strategy hint of the calls ("none" for call 1 of each iteration).
std::vector<model_row> hint_breakdown(const campaign_data& d);

nlohmann::json to_json(const model_row& r);
// {"campaign": id, "models": [...], "hints": [...], "items": [dropout attribution]}
nlohmann::json attribution_json(const campaign_data& d);

// The report's "Models" section (an HTML <section> with a table per model
// and one per hint); empty when there is nothing to break down.
std::string models_html_section(const campaign_data& d);

}  // namespace kopt::report
