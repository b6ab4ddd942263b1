// The daemon's queue, kept entirely in the store so that the CLI, the spool
// and the daemon agree without talking to each other:
//  - submissions: `kopt submit` (agent/cli/submit.cpp) and the spool
//    directory both end as a queued campaign; the spool is scanned here.
//  - control: pause / resume / cancel. A campaign that no daemon step is
//    running changes state at once; one that is running gets a request
//    (campaigns.requested_action) that the daemon applies at its next
//    checkpoint, so the CLI never races the loop's own state writes.
//  - scheduling: which runnable campaign gets the next step slot (fair
//    between teams, by priority within a team).
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/operator.hpp"
#include "store/store.hpp"

namespace kopt::daemon {

// --- submitting ------------------------------------------------------------

struct submit_result {
  store::row_id campaign_id = 0;
  store::row_id operator_id = 0;
  bool new_operator = false;
};
// Stores the operator (deduplicated by content) and queues a campaign, with
// a "submitted" event; runs inside the caller's transaction if there is one.
submit_result submit_campaign(store::store& db, const config::operator_config& op,
                              std::int64_t priority, const std::string& team,
                              const std::string& origin);

struct spool_report {
  int accepted = 0;
  int rejected = 0;
  int already_done = 0;  // files a previous (killed) run recorded but did not move
  int skipped = 0;       // not ready: temporary names, unreadable
};
// One pass over the spool: spool/*.json (team "") and spool/<team>/*.json.
// A valid file becomes a queued campaign and moves to accepted/ (renamed
// <campaign id>-<name>); an invalid one moves to rejected/ with
// <name>.error.txt beside it listing every problem with file:line:col.
// Each file is recorded in `submissions` under a key of (relative path,
// content, mtime) in the campaign's transaction, so a file is never
// submitted twice even if the daemon dies before moving it.
// A file that cannot be handled for any reason (a name that is not UTF-8,
// a number no double holds, a symlink, anything that throws) is rejected on
// its own and the pass goes on; only a failing store leaves a file for the
// next pass. Source files a spooled config names must resolve inside its
// team's spool directory and be none of `key_files` (the providers' API
// key files): see spool_file.hpp.
spool_report scan_spool(store::store& db, const std::filesystem::path& spool_dir,
                        std::int64_t max_bytes,
                        const std::vector<std::filesystem::path>& key_files);
spool_report scan_spool(store::store& db, const std::filesystem::path& spool_dir,
                        std::int64_t max_bytes);

// --- control -----------------------------------------------------------------

struct control_result {
  store::row_id campaign_id = 0;
  std::string before;     // state before
  std::string after;      // state now (unchanged when deferred)
  bool deferred = false;  // a running campaign: the daemon applies it at its next checkpoint
  bool changed = false;   // false: nothing to do (already in that state)
  std::string message;
  nlohmann::json to_json() const;
};
// Throw not_found_error for an unknown id and kopt::error for a request
// that makes no sense (resume a finished campaign).
control_result pause_campaign(store::store& db, store::row_id id);
control_result resume_campaign(store::store& db, store::row_id id);
control_result cancel_campaign(store::store& db, store::row_id id);

// Applies a pending request to a campaign no step is running (the daemon
// calls it at step ends and for idle campaigns). Returns the action applied.
std::optional<std::string> apply_request(store::store& db, store::row_id id);

// --- scheduling --------------------------------------------------------------

struct runnable {
  store::row_id id = 0;
  std::string team;
  std::int64_t priority = 0;
  std::int64_t created_at = 0;
  std::int64_t last_step = 0;  // daemon-local: when its last step started (0: never)
};

// queued / running campaigns without a pending request and past their
// backoff (campaigns.not_before), oldest first.
std::vector<runnable> runnable_campaigns(store::store& db, std::int64_t now_ms);

// The next campaign for a free step slot among `cands` minus `active`: the
// team with the least GPU time so far (`team_gpu_s`), then within it the
// highest priority, then the one that ran least recently, then the oldest.
std::optional<store::row_id> pick_next(const std::vector<runnable>& cands,
                                       const std::set<store::row_id>& active,
                                       const std::map<std::string, double>& team_gpu_s);

// Step bookkeeping on campaigns (schema v2 columns).
void record_step_success(store::store& db, store::row_id id);
// Returns true when the campaign was paused for too many failures.
bool record_step_failure(store::store& db, store::row_id id, const std::string& reason,
                         int max_failures, double backoff_initial_s, double backoff_max_s);

}  // namespace kopt::daemon
