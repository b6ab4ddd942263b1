// Retention: what a finished campaign no longer needs, and archive copies.
// A campaign that is done, failed or cancelled never runs again, so the
// data kept only for resuming it, or kept raw beside its summary, can go:
//  - the per-sample arrays (timing_json.samples_ns) of every candidate but
//    the winner: each row keeps median, min, mean, stdev, quartiles and the
//    sample count, which is what reports, diff and export read;
//  - old checkpoints: every "loop_state" event but the last loses its
//    elites, prompt history, masked items, gains and screen workloads and
//    keeps the incumbent (completed, best_id, best_key, best_sol,
//    best_time) and the counters, which is what the report's
//    incumbent-over-time series reads;
//  - the bulky part of the "evaluated" debug events (each subject's result
//    and the worker's event list): the loop reads them back only to resume,
//    the trace reads stage, seeds, device, subjects' ids and the time;
//  - the eval_journal rows (the loop's resume index).
// Every figure `kopt report` shows is unchanged (tests/store/retention_test
// compares the report data before and after). Each campaign is collected in
// its own short write transaction, so the daemon can collect while it runs.
// archive() writes a compact copy of the whole store with VACUUM INTO;
// checkpoint_wal() is the periodic WAL checkpoint that keeps the WAL file
// small while the daemon runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace kopt::store {

struct gc_options {
  // Only campaigns finished at least this long ago.
  std::int64_t min_age_ms = 0;
  std::optional<row_id> campaign;   // only this one (it must be finished)
  bool dry_run = false;             // count, change nothing
  std::int64_t max_campaigns = -1;  // at most this many per call (-1: all)
  bool again = false;               // also campaigns collected before
};

struct gc_campaign_report {
  row_id campaign_id = 0;
  std::int64_t sample_rows = 0;   // evaluation rows whose samples were dropped
  std::int64_t checkpoints = 0;   // old loop_state events cut to the incumbent
  std::int64_t debug_events = 0;  // "evaluated" events slimmed
  std::int64_t journal_rows = 0;  // eval_journal rows removed
  std::int64_t bytes = 0;         // bytes of JSON text freed (before VACUUM)
};

struct gc_report {
  bool dry_run = false;
  std::vector<gc_campaign_report> campaigns;
  gc_campaign_report total;     // campaign_id 0
  std::int64_t file_bytes = 0;  // database file size after collection
  std::int64_t free_bytes = 0;  // free pages (reused by later writes; VACUUM returns them)
  nlohmann::json to_json() const;
};

// Finished campaigns, oldest finish first, that qualify under `o`.
std::vector<row_id> gc_candidates(store& db, const gc_options& o);
// Collects them, one write transaction per campaign. Throws store_error, or
// not_found_error for a `campaign` that does not exist or is not finished.
gc_report collect_garbage(store& db, const gc_options& o);
// One periodic WAL checkpoint, as the daemon runs it: TRUNCATE (waits up to
// `wait` for readers to leave the WAL, then empties the file), or when
// readers stay, PASSIVE (copies what it can, never waits) and TRUNCATE again
// next time. journal_size_limit (open_options) caps the file after any
// reset. Returns "truncated", "passive" or "busy"; the connection's busy
// timeout is restored to `restore` afterwards.
std::string checkpoint_wal(store& db, std::chrono::milliseconds wait,
                           std::chrono::milliseconds restore);

// VACUUM INTO `file` (must not exist): a consistent, compact copy of the
// store, taken without blocking the writer for longer than a read.
void archive(store& db, const std::filesystem::path& file);

}  // namespace kopt::store
