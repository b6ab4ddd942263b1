// Candidate sources: who proposes the next candidates of an iteration.
// autotune_source searches the tunable parameters of the parent (no LLM):
// every untried point when the space is small (<= exhaustive_limit points),
// else a seeded local search over the parent's neighbours (one parameter
// moved to an adjacent value), topped up with random points. llm_source asks
// an LLM K times in parallel through kopt::llm (budget, recording and
// redaction are the client's) and turns answers into validated candidates.
// scripted_source answers from a function, for tests, and keeps every
// context it was given so that a test can see what the loop asked.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "campaign/types.hpp"
#include "llm/client.hpp"
#include "llm/router.hpp"
#include "prompts/context.hpp"

namespace kopt::campaign {

class autotune_source final : public candidate_source {
 public:
  explicit autotune_source(std::uint64_t exhaustive_limit = 64)
      : exhaustive_limit_(exhaustive_limit) {}
  std::string name() const override { return "autotune"; }
  bool calls_llm() const override { return false; }
  source_answer propose(const prompt_context& ctx) override;

 private:
  std::uint64_t exhaustive_limit_;
};

// The prompt for one LLM call. A placeholder until the prompt templates
// (prompts/) are wired in: operator, parent source and plan, measurements,
// the kept context items, and the different-algorithm request.
std::string placeholder_prompt(const prompt_context& ctx);

// What the LLM source needs to render kopt's prompt templates: the GPU
// facts (peak table entry) and where the templates are. Without it (tests,
// or no template directory found) a short built-in prompt is used.
struct prompt_setup {
  prompts::gpu_facts gpu;
  std::filesystem::path template_dir;
};

// The user and system messages for one request, from the templates:
// "first" before the parent is measured, "revise" after, "broaden" when the
// campaign asks for a different algorithm. Items (directives, history,
// snippets) are what survived dropout; the parent's diagnosis goes in as
// findings. Exposed for tests.
struct composed_prompt {
  std::string system, user, template_name;
  std::vector<std::string> present_items;
  std::vector<std::size_t> cache_breaks;  // in `user`: where stable prefixes end
};
// `dropped` removes the templates' own optional blocks (e.g. "measurements").
composed_prompt compose_prompt(const prompt_context& ctx, const prompt_setup& setup,
                               const std::set<std::string>& dropped = {},
                               const std::string& template_name = {});

// The K calls of an iteration are planned by plan_calls (call_plan.hpp):
// model per call (the router), strategy hint and optional per-call dropout,
// all recorded with each call and in each proposal's note.
class llm_source final : public candidate_source {
 public:
  // One model; the K calls differ by their strategy hints.
  explicit llm_source(llm::llm_client& client, std::int64_t max_tokens = 8192,
                      std::optional<prompt_setup> setup = std::nullopt,
                      llm::diversity_options diversity = {});
  // Several models (llm.models): the router picks each call's model. The
  // router must outlive the source.
  llm_source(llm::router& models, std::int64_t max_tokens, std::optional<prompt_setup> setup,
             llm::diversity_options diversity = {});
  ~llm_source() override;
  std::string name() const override;
  bool calls_llm() const override { return true; }
  source_answer propose(const prompt_context& ctx) override;

  // What the bandit and the model escalation learn from: the iteration
  // ended, with `gain` (0 without promotion) and, when a candidate was
  // promoted, its kernel source (matched against what each model proposed).
  void observe(std::int64_t iteration, const std::optional<std::string>& promoted_source,
               double gain);
  // What the router learnt in earlier sessions of this campaign, from the
  // store: each recorded call (by its meta.model label) with its cost and
  // candidates, each promotion credited to the model whose call proposed
  // the winner, and the escalation replayed over the finished iterations.
  // The daemon builds a new session for every step of a campaign and `kopt
  // run` one per invocation; without this the bandit would explore afresh
  // (calling every model again) and forget a stall at each of them.
  void restore(store::store& db, store::row_id campaign_id);
  llm::router& models() noexcept { return *router_; }

 private:
  std::unique_ptr<llm::router> own_router_;
  llm::router* router_ = nullptr;
  std::int64_t max_tokens_;
  std::optional<prompt_setup> setup_;
  llm::diversity_options diversity_;
  std::mutex mu_;
  std::map<std::string, std::size_t> arm_of_source_;  // sha256 of a proposed kernel -> arm
  std::set<std::int64_t> observed_;                   // iterations already fed back
};

// A loop_hooks::on_progress that feeds each iteration's outcome back to the
// source (bandit statistics, escalation): the promoted candidate's source
// and gain come from the store's "promoted" event of that iteration. Chain
// it with the caller's own progress printer.
struct progress;
std::function<void(const progress&)> model_feedback(store::store& db, store::row_id campaign_id,
                                                    llm_source& src);

class scripted_source final : public candidate_source {
 public:
  using script = std::function<source_answer(const prompt_context&)>;
  explicit scripted_source(script s, bool llm = true) : script_(std::move(s)), llm_(llm) {}
  std::string name() const override { return "scripted"; }
  bool calls_llm() const override { return llm_; }
  source_answer propose(const prompt_context& ctx) override;
  // Copies of the contexts given so far (without the callback).
  std::vector<prompt_context> contexts() const;

 private:
  script script_;
  bool llm_;
  mutable std::mutex mu_;
  std::vector<prompt_context> seen_;
};

}  // namespace kopt::campaign
