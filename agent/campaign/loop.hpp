// The campaign loop. One iteration: choose a parent (the best, or an elite
// for diversity, from a seeded draw), compose the context (directives,
// history, snippets, with optimization dropout), ask the candidate source
// for K candidates, screen them on representative workloads, run the full
// sweep for those that pass and beat the parent there, and promote the best
// of them only if it beats the incumbent beyond noise in a head-to-head
// comparison with fresh input seeds (promotion.hpp). Stagnation escalates
// step by step (dropout.hpp). The loop stops at the target fraction of speed
// of light or at any budget, re-verifies the winner with fresh seeds and
// compares it with the baseline.
//
// Everything lives in the store, so a killed process resumes exactly:
// every finished evaluation is journaled (event "evaluated") in the same
// transaction as its rows and is never run again; an iteration's proposals
// are stored (event "proposals") before any evaluation, so an LLM is not
// asked twice; the loop state (best, elites, stagnation, history, gains) is
// checkpointed (event "loop_state") in the transaction that finishes the
// iteration; and every random choice is drawn from a seed derived from
// (campaign seed, purpose, iteration), so a resumed iteration makes the same
// choices as the one that was killed.
//
// Resuming reads a bounded amount whatever the history (schema v5): the
// latest checkpoint and proposals by index, each journaled result by its
// cache key (eval_journal) and each candidate by its stored content key,
// only when the loop asks for them.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "campaign/dropout.hpp"
#include "campaign/promotion.hpp"
#include "campaign/types.hpp"
#include "config/operator.hpp"
#include "store/store.hpp"

namespace kopt::campaign {

struct loop_settings {
  std::size_t candidates_per_iteration = 4;
  double dropout_p = 0.3;
  double escalated_dropout_p = 0.6;  // escalation step 1
  std::uint64_t seed = 1;
  double target_sol_fraction = 0.8;
  store::budget_limits budget;
  std::int64_t max_llm_errors = 20;  // failed calls or unusable answers, campaign total
  int stagnation_window = 3;         // iterations without a gain above stagnation_gain
  double stagnation_gain = 0.01;
  std::size_t elite_size = 4;
  double explore_p = 0.2;     // chance of an elite (not the best) as parent
  double screen_margin = 0.0;  // a candidate must be this much faster than its parent on screen
  promotion_rule promotion;
  std::uint64_t base_seed = 20261130;  // inputs of screen and full stages
  std::vector<prompt_item> directives;  // technique directives (optional items)
  // Iteration notes kept in the loop state (and offered to the prompt), the
  // newest; older ones stay in the iterations table (note, strategy). The
  // prompt shows at most 12 history entries (prompts::limits::history), so
  // 24 leaves room for dropout and masking; bounding it keeps the
  // checkpoint and each iteration's dropout decisions the same size after
  // 10 or 10,000 iterations. "loop": {"history_window": N}.
  std::size_t history_window = 24;

  // Campaign settings JSON (as `kopt submit` stores them) plus overrides
  // under "loop" (e.g. {"loop": {"stagnation_window": 5}}).
  static loop_settings from_campaign(const store::campaign_record& c);
  nlohmann::json to_json() const;
};

std::vector<prompt_item> default_directives();

struct elite {
  store::row_id id = 0;
  std::string key;
  double time_score = 0;  // weighted geomean of full-stage medians
};

struct loop_state {
  std::int64_t completed = -1;  // last finished iteration (0 = set-up)
  std::optional<store::row_id> best_id;
  std::string best_key;
  double best_sol = 0;
  double best_time = 0;
  std::vector<elite> elites;
  int stagnant = 0;
  int level = 0;  // escalation reached (see dropout.hpp)
  // history:best, history:baseline and the last history_window iteration notes.
  std::vector<prompt_item> history;
  std::set<std::string> masked;  // ids in history
  std::int64_t llm_errors = 0;
  std::optional<std::string> fatal;
  bool exhausted = false;
  std::vector<std::string> screen_workloads;
  nlohmann::json to_json() const;
  static loop_state from_json(const nlohmann::json& j);
};

struct progress {
  std::int64_t iteration = 0;
  double best_sol = 0;
  std::optional<store::row_id> best_id;
  std::int64_t tokens = 0;
  double cost_usd = 0;
  double wall_time_s = 0;
  int level = 0;
  std::string strategy;
  std::size_t proposals = 0;
  bool promoted = false;
};

struct loop_hooks {
  // Called at named points (iteration_started, after_proposals,
  // after_screen, after_full, after_compare, before_finish, after_iteration,
  // after_setup, after_verify); tests throw simulated_kill from here.
  std::function<void(std::string_view point, std::int64_t iteration)> at;
  std::function<void(const progress&)> on_progress;
  // Reference snippets for a context (knowledge base); none by default.
  std::function<std::vector<prompt_item>(const prompt_context&)> snippets;
};

struct run_limits {
  std::optional<std::int64_t> max_iterations;  // this invocation only: the campaign pauses
};

struct run_result {
  bool finished = false;  // false: paused by run_limits, or waiting
  bool waiting = false;   // the source is waiting for candidates (an agent)
  std::string stop_reason;
  // The campaign stopped on an error, not on its budget or target: the
  // candidate source gave up (revoked key, quota) or no starting candidate
  // was correct. stop_reason says which, in words.
  bool stopped_on_error = false;
  std::int64_t iterations_run = 0;
  std::optional<store::row_id> best_id;
  double best_sol = 0;
  bool verified = false;
  nlohmann::json summary;  // the "finished" event's data
};

class campaign_loop {
 public:
  campaign_loop(store::store& db, store::row_id campaign_id, const config::operator_config& op,
                candidate_source& source, evaluator& ev, loop_settings settings,
                loop_hooks hooks = {});
  run_result run(const run_limits& limits = {});
  const loop_state& state() const noexcept { return st_; }
  std::size_t cache_hits() const noexcept { return cache_hits_; }
  // Per item: how many draws (LLM calls) showed it and the mean gain with
  // and without it, from the store (campaign::attribution, the one rule).
  std::vector<item_attribution> attribution();

 private:
  struct plan {
    store::row_id parent_id = 0;
    std::string strategy;
    double p = 0;
    bool different_algorithm = false;
    std::vector<prompt_item> items;
    dropout_result dropout;
  };
  struct subject_in {
    std::string role;
    store::row_id id = 0;
  };

  void load();
  void setup();
  void iterate(std::int64_t n);
  plan plan_iteration(std::int64_t n);
  std::optional<std::string> stop_reason();
  run_result finalize(const std::string& reason);
  std::map<std::string, subject_result> evaluate_cached(const std::string& stage,
                                                        const std::vector<subject_in>& subjects,
                                                        const std::vector<std::string>& workloads,
                                                        std::uint64_t base_seed,
                                                        std::optional<store::row_id> iteration_id);
  store::row_id candidate_row(const nlohmann::json& variant, store::candidate_origin origin,
                              std::optional<store::row_id> parent,
                              std::optional<store::row_id> iteration, const std::string& note,
                              const proposal* from = nullptr);
  store::row_id iteration_row(std::int64_t n, const plan& p);
  const nlohmann::json& variant_of(store::row_id id);
  std::map<std::string, workload_result> full_of(store::row_id id);
  void add_elite(store::row_id id, double time_score);
  void trim_history();  // to s_.history_window notes
  void hook(std::string_view point, std::int64_t n);
  store::row_id event(const std::string& kind, const std::string& message, nlohmann::json data,
                      const std::string& level = "info");
  // The campaign's candidate with this content key (memo, then the store).
  std::optional<store::row_id> candidate_id_of(const std::string& key);
  std::vector<std::string> all_workloads() const;  // the public ones (workloads[].private excluded)
  std::string smallest_workload() const;           // by size_proxy, for the compute-sanitizer run

  store::store& db_;
  store::row_id campaign_id_;
  store::row_id operator_id_ = 0;
  const config::operator_config& op_;
  candidate_source& source_;
  evaluator& ev_;
  loop_settings s_;
  loop_hooks hooks_;
  loop_state st_;
  std::map<std::string, double> weights_;
  // Memos of this run; the store (eval_journal, candidates.content_key) is
  // the truth, read one key at a time (load() reads no history).
  std::map<std::string, subject_result> cache_;         // cache key -> result
  std::map<std::int64_t, nlohmann::json> proposals_;    // iteration -> "proposals" event data
  std::map<std::string, store::row_id> by_key_;         // content key -> candidate row
  std::map<store::row_id, nlohmann::json> variants_;    // candidate row -> variant
  std::optional<nlohmann::json> finished_;
  std::optional<std::string> waiting_;  // set by iterate() when the source waits
  std::size_t cache_hits_ = 0;
};

}  // namespace kopt::campaign
