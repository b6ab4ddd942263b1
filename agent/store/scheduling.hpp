// The daemon's queries, owned by the store: the scheduling columns of a
// campaign (its state, a pending pause/cancel request from the CLI, the
// backoff after failed steps), the runnable set, the spool's submissions
// and the read-only figures of the HTTP endpoint (dashboard rows, metrics
// totals). The daemon decides what to do; these functions only read and
// write rows, one statement each, inside the caller's transaction if it
// has one. Keeping every SQL statement in agent/store means a schema change
// is made and reviewed in one subsystem (docs/architecture.md, "Who owns
// SQL"). Rows of `kopt eval` (provider 'eval') are records of a one-off
// evaluation, not campaigns to run, so the scheduling and dashboard queries
// leave them out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/records.hpp"
#include "store/store.hpp"

namespace kopt::store {

// --- a campaign's scheduling columns ----------------------------------------

struct campaign_control {
  std::string state;                            // campaigns.state
  std::optional<std::string> requested_action;  // "pause" | "cancel" | none
  bool started = false;                         // started_at is set
  std::int64_t step_failures = 0;
};
// nullopt when there is no such campaign.
std::optional<campaign_control> find_campaign_control(store& db, row_id id);
// Sets (or clears) the pending request; updates updated_at.
void set_requested_action(store& db, row_id id, const std::optional<std::string>& action);
// Ids of the campaigns with a pending request, any state.
std::vector<row_id> campaigns_with_requests(store& db);
// A paused campaign made runnable again (`kopt resume`): state `to`, no stop
// reason, request, failures, backoff or last error.
void reopen_campaign(store& db, row_id id, campaign_state to);

// --- the runnable set and step backoff ---------------------------------------

struct runnable_row {
  row_id id = 0;
  std::string team;
  std::int64_t priority = 0;
  std::int64_t created_at = 0;
};
// queued or running, no pending request, past its backoff (not_before <=
// now_ms); oldest first.
std::vector<runnable_row> runnable_campaign_rows(store& db, std::int64_t now_ms);
// Clears failures, backoff and last error (a no-op write avoided when clear).
void clear_step_failures(store& db, row_id id);
// Records the count of failed steps in a row, the earliest next try and why.
void set_step_failures(store& db, row_id id, std::int64_t failures, std::int64_t not_before_ms,
                       const std::string& last_error);

// --- spool submissions -------------------------------------------------------

struct submission_record {
  row_id id = 0;
  std::string origin = "spool";  // spool | cli
  std::string key;               // unique: what makes a file "the same submission"
  std::string path;
  std::string team;
  std::string status;  // accepted | rejected
  std::optional<row_id> campaign_id;
  std::optional<std::string> error;
  std::int64_t created_at = 0;  // 0: now
};
std::optional<submission_record> find_submission(store& db, const std::string& key);
row_id add_submission(store& db, const submission_record& s);

// --- the HTTP endpoint's figures ---------------------------------------------

// One dashboard row: a campaign with its operator's name (not 'eval' rows).
struct campaign_overview {
  row_id id = 0;
  std::string operator_name, state, provider, model, team;
  std::int64_t priority = 0;
  std::int64_t spent_iterations = 0, spent_tokens = 0;
  double spent_cost_usd = 0, spent_wall_time_s = 0;
  std::optional<std::int64_t> budget_iterations, budget_tokens;
  std::optional<double> budget_cost_usd, budget_wall_time_s;
  std::optional<std::int64_t> best_candidate_id;
  std::optional<double> best_score, target_sol_fraction;
  std::int64_t created_at = 0, updated_at = 0;
  std::optional<std::int64_t> started_at, finished_at, not_before;
  std::optional<std::string> stop_reason, requested_action, last_error;
  std::int64_t step_failures = 0;
};
// Newest first; `only` restricts to one id; `limit`/`offset` page (the
// HTTP API's ?limit=&offset=).
std::vector<campaign_overview> campaign_overviews(store& db,
                                                  std::optional<row_id> only = std::nullopt,
                                                  std::optional<std::int64_t> limit = std::nullopt,
                                                  std::int64_t offset = 0);
// How many rows campaign_overviews returns without `only` and a limit.
std::int64_t count_campaign_overviews(store& db);

struct store_totals {
  std::map<std::string, std::int64_t> campaigns_by_state;     // every state, 'eval' rows left out
  std::map<std::string, std::int64_t> evaluations_by_status;  // every store status, zero when none
  std::map<std::string, std::int64_t> llm_calls_by_status;    // only statuses present
  std::int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, reasoning_tokens = 0;
  double llm_cost_usd = 0;
  std::int64_t llm_retries = 0;  // attempts beyond the first
  std::map<std::string, std::int64_t>
      submissions_by_status;  // accepted and rejected, zero when none
  std::int64_t step_failed_events = 0;
  std::int64_t candidates = 0;
};
// O(1) in the number of rows: read from store_counts (schema v5), which
// triggers keep in the transactions that insert or delete the rows.
store_totals totals(store& db);

}  // namespace kopt::store
