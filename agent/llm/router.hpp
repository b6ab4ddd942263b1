// Several models per campaign. A router holds one llm_client per configured
// model (`llm.models`, docs/providers.md) and decides, for each of the K
// calls of an iteration, which model answers: `fixed` (the first model that
// the escalation level allows), `round_robin` (smooth weighted round robin
// over the weights) or `bandit` (UCB1 on gain per dollar, as ShinkaEvolve
// spreads proposals over models: an arm's value is the campaign gain its
// candidates brought divided by what its calls cost, normalised by the best
// arm's, plus an exploration bonus). Escalation moves the choice to stronger
// models (a higher `tier`) when the campaign stalls: after
// `after_stagnant_iterations` iterations without gain, or when the campaign
// loop itself escalates (restart from an elite, new algorithm). A gain
// resets it. The router only decides and keeps statistics; the caller
// (campaign::llm_source) makes the calls and reports what they cost and
// which candidate led to a gain. All methods are thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "llm/client.hpp"
#include "llm/provider.hpp"

namespace kopt::llm {

enum class selection_policy { fixed, round_robin, bandit };
const char* selection_policy_name(selection_policy p) noexcept;

struct model_entry {
  provider_config cfg;  // the llm section's fields, overridden by the entry's own
  std::string label;    // the entry's "name", else "provider/model"
  double weight = 1;    // round_robin: share of the calls
  // USD per call for the bandit when the price table prices this model at
  // nothing (a local server) or the call reported no usage.
  std::optional<double> cost_per_call_usd;
  int tier = 0;  // escalation: higher is stronger
};

struct escalation_rule {
  int after_stagnant_iterations = 0;  // 0: only the campaign loop's escalation moves up
  bool follow_campaign = true;        // the loop's restart_elite/new_algorithm also moves up
};

// How the K calls of one iteration differ (campaign::llm_source applies it).
struct diversity_options {
  bool hints = true;          // call i > 0 gets its own strategy hint at the end of the prompt
  double call_dropout_p = 0;  // call i > 0 also drops each optional item with this probability
};

struct router_config {
  std::vector<model_entry> models;  // at least one
  selection_policy policy = selection_policy::fixed;
  double exploration = 1.0;  // the bandit's UCB constant
  escalation_rule escalation;
  diversity_options diversity;
};

// Reads the llm section: `models` (each entry an object with provider,
// model and any llm field, plus name, weight, cost_per_call_usd, tier),
// `selection` ({"policy": "fixed|round_robin|bandit", "exploration": c}),
// `escalation` ({"after_stagnant_iterations": N, "follow_campaign": bool})
// and `diversity` ({"hints": bool, "call_dropout_p": p}). Without `models`
// the section itself is the one model. Throws kopt::config_error.
router_config parse_router_config(const nlohmann::json& llm_section,
                                  const std::filesystem::path& base_dir = {});

struct arm_stats {
  std::string label;
  std::string provider, model;
  int tier = 0;
  std::int64_t calls = 0, failed_calls = 0, proposals = 0, promotions = 0;
  std::int64_t tokens = 0;
  double cost_usd = 0;         // as billed (price table); 0 without a price
  double bandit_cost_usd = 0;  // what the bandit divides by (billed, else cost_per_call_usd)
  double gain = 0;             // sum of the gains credited to this arm
};

class router {
 public:
  struct arm {
    std::string label;
    llm_client* client = nullptr;  // not owned
    double weight = 1;
    std::optional<double> cost_per_call_usd;
    int tier = 0;
    int answers_per_call = 1;     // the model's `n` (OpenAI Chat Completions)
    std::int64_t max_tokens = 0;  // the model's output cap; 0: the caller's
  };

  router(std::vector<arm> arms, selection_policy policy = selection_policy::fixed,
         double exploration = 1.0, escalation_rule esc = {});
  // One client per model, all sharing `common`'s budget and recorder; the
  // router owns them. `transport`/`time` as for make_provider (tests).
  static std::unique_ptr<router> from_config(const router_config& cfg, const client_options& common,
                                             http_transport* transport = nullptr,
                                             time_source* time = nullptr);
  ~router();
  router(const router&) = delete;
  router& operator=(const router&) = delete;

  std::size_t size() const noexcept { return arms_.size(); }
  llm_client& client(std::size_t i) const { return *arms_.at(i).client; }
  const std::string& label(std::size_t i) const { return arms_.at(i).label; }
  int answers_per_call(std::size_t i) const { return arms_.at(i).answers_per_call; }
  std::int64_t max_tokens(std::size_t i) const { return arms_.at(i).max_tokens; }
  selection_policy policy() const noexcept { return policy_; }

  // The arms of the next k calls. `campaign_stalled`: the loop escalated
  // (see escalation_rule::follow_campaign).
  std::vector<std::size_t> choose(std::size_t k, bool campaign_stalled = false);
  // A call of arm i ended (its cost and tokens) with `proposals` usable candidates.
  void record_call(std::size_t i, const completion& c, std::int64_t proposals);
  // A candidate from arm i was promoted with this relative gain.
  void record_gain(std::size_t i, double gain);
  // An iteration ended; its gain (0 without promotion) drives escalation.
  // `log`: say when the level changes (not when replaying a stored campaign).
  void end_iteration(double gain, bool log = true);

  int escalation_level() const;
  std::vector<arm_stats> stats() const;
  nlohmann::json to_json() const;  // policy, level, per-arm statistics

 private:
  std::vector<std::size_t> allowed_locked(bool campaign_stalled) const;
  double bandit_cost(std::size_t i) const;

  std::vector<arm> arms_;
  std::vector<std::unique_ptr<llm_client>> owned_;
  selection_policy policy_;
  double exploration_;
  escalation_rule esc_;
  mutable std::mutex mu_;
  std::vector<arm_stats> stats_;
  std::vector<double> rr_current_;  // smooth weighted round robin state
  int level_ = 0;
  int stagnant_ = 0;
};

}  // namespace kopt::llm
