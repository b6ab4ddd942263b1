// Storing what an evaluation produced: one candidate row per subject (unless
// the caller already has one), its compilation, and one evaluation row per
// workload with the status, errors, timing summary, device and fraction of
// speed of light. Everything the worker sent is kept (as JSON detail), so
// nothing measured is lost even where the schema has no column for it.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/operator.hpp"
#include "runner/evaluation.hpp"
#include "runner/worker_client.hpp"
#include "store/store.hpp"

namespace kopt::runner {

struct subject_spec {
  std::string role;                    // reference, baseline, seed, candidate, ...
  store::candidate_origin origin = store::candidate_origin::llm;
  nlohmann::json candidate;            // candidate format (source inlined)
  nlohmann::json parameters = nlohmann::json::object();  // values used
  std::optional<store::row_id> candidate_id;  // existing row, if any
  std::optional<store::row_id> parent_id;
  std::optional<std::string> note;
};

// The candidates row of a subject (source in its column, the rest of the
// candidate JSON as the launch plan).
store::candidate_record candidate_row(const subject_spec& s, store::row_id campaign_id,
                                      std::optional<store::row_id> iteration_id);

// Maps a worker outcome to the store's status: one for one (the store keeps
// every outcome), not_run and clock_lost as skipped.
store::eval_status to_eval_status(protocol::outcome o);

// Returns role -> candidate id. `summaries` (by role) supply SOL fractions
// and the final statuses (e.g. faster-than-SOL turned into an integrity
// rejection).
std::map<std::string, store::row_id> record_report(
    store::store& db, store::row_id campaign_id, std::optional<store::row_id> iteration_id,
    store::row_id operator_id, const std::vector<subject_spec>& subjects, const evaluation_report& rep,
    const std::map<std::string, evaluation_summary>& summaries, const std::string& stage);

}  // namespace kopt::runner
