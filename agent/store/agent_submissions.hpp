// The store side of agent-driven campaigns (provider "agent"): candidates an
// external agent submitted for a campaign (MCP candidate_submit, `kopt
// propose`), kept in `agent_submissions` (schema v3) until an iteration of
// the campaign takes them, and the campaign's `waiting_for` mark that says
// it is blocked on the agent. Plain SQL over store::store; the campaign
// source that reads these rows is campaign::agent_source.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace kopt::store {

struct agent_submission {
  row_id id = 0;
  row_id campaign_id = 0;
  std::string agent;         // who submitted ("claude-code", "codex", a person)
  nlohmann::json candidate;  // candidate JSON as submitted (validated on entry)
  std::optional<std::string> note;
  std::optional<std::string> brief_hash;     // sha256 of the brief the agent answered, if it said
  std::string status = "pending";            // pending | taken | rejected
  std::optional<std::int64_t> iteration;     // the iteration that took it
  std::optional<std::string> candidate_key;  // content key of the candidate row it became
  std::optional<std::string> error;
  std::int64_t created_at = 0;
  std::optional<std::int64_t> taken_at;
  nlohmann::json to_json() const;
};

row_id add_agent_submission(store& db, const agent_submission& s);
// Oldest first; `status` empty: all of them.
std::vector<agent_submission> agent_submissions_of(store& db, row_id campaign_id,
                                                   const std::string& status = {});
std::optional<agent_submission> find_agent_submission(store& db, row_id id);
void mark_agent_submission_taken(store& db, row_id id, std::int64_t iteration,
                                 const std::string& candidate_key);
void mark_agent_submission_rejected(store& db, row_id id, const std::string& error);

// campaigns.waiting_for: "agent" while blocked on submissions, else NULL.
void set_campaign_waiting(store& db, row_id campaign_id, const std::optional<std::string>& what);
std::optional<std::string> campaign_waiting(store& db, row_id campaign_id);
// Every campaign that is marked waiting, with what it waits for.
std::map<row_id, std::string> waiting_campaigns(store& db);

}  // namespace kopt::store
