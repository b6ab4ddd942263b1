// The candidate source of agent-driven campaigns (provider "agent"): instead
// of calling an LLM, an iteration takes the candidates that an external
// coding agent submitted for the campaign (MCP candidate_submit, `kopt
// propose CAMPAIGN FILE`), from the store's agent_submissions table. When
// none is pending it writes the brief the agent should answer (the same
// prompt an LLM would get for this iteration: event "agent_brief"), marks
// the campaign as waiting for the agent and answers `waiting`, so the loop
// (and a daemon step) ends without finishing the iteration; the next run
// plans the same iteration again and takes what has arrived. Submissions
// then go through exactly the stages of LLM candidates (screen, full,
// head-to-head, promotion, verification); each is recorded with the agent's
// name, its submission id and the hash of the brief it answered.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "campaign/sources.hpp"
#include "config/operator.hpp"
#include "store/agent_submissions.hpp"
#include "store/store.hpp"

namespace kopt::campaign {

class agent_source final : public candidate_source {
 public:
  // `setup`: how to render the brief from kopt's prompt templates; without
  // it a short built-in brief (placeholder_prompt) is written.
  agent_source(store::store& db, store::row_id campaign_id,
               std::optional<prompt_setup> setup = std::nullopt)
      : db_(db), campaign_id_(campaign_id), setup_(std::move(setup)) {}
  std::string name() const override { return "agent"; }
  // Not an LLM call, but like one the answers are not a parameter search:
  // an empty iteration does not mean the space is exhausted.
  bool calls_llm() const override { return true; }
  source_answer propose(const prompt_context& ctx) override;

 private:
  store::store& db_;
  store::row_id campaign_id_;
  std::optional<prompt_setup> setup_;
};

// The brief of an agent campaign's current iteration, as the source last
// wrote it (event "agent_brief"), or nothing yet.
struct agent_brief {
  std::int64_t iteration = 0;
  store::row_id parent_id = 0;
  std::string system, user, template_name, hash;
  nlohmann::json to_json() const;
};
std::optional<agent_brief> latest_agent_brief(store::store& db, store::row_id campaign_id);

// What submitting a candidate into an agent campaign gives: the pending
// submission's id, or why it was refused (with the validator's diagnostics).
struct agent_submit_result {
  std::optional<store::row_id> submission_id;
  std::string status;  // pending | invalid_input | not_found | rejected
  std::string message;
  std::vector<config::diagnostic> diagnostics;
  bool ok() const noexcept { return submission_id.has_value(); }
};

// Checks that the campaign exists, is an agent campaign and is not over,
// validates the candidate text (JSON in the candidate format) against the
// campaign's stored operator, and stores it as pending. Used by `kopt
// propose` and the MCP candidate_submit tool, so both accept exactly the
// same things.
agent_submit_result submit_agent_candidate(store::store& db, store::row_id campaign_id,
                                           std::string_view candidate_text,
                                           const std::string& label, const std::string& agent,
                                           const std::optional<std::string>& note,
                                           const std::optional<std::string>& brief_hash);

// The prompt templates and GPU facts for briefs, found the usual way
// ($KOPT_DATA_DIR, the source tree, beside the executable); nothing when
// the templates are missing (the short built-in brief is used then).
std::optional<prompt_setup> default_prompt_setup(const std::string& gpu = "H200");

}  // namespace kopt::campaign
