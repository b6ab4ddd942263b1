// The read views behind `kopt log`, `kopt lineage`, `kopt diff` and the
// research part of `kopt show candidate`, as JSON (the `--json` output; the
// CLI renders the text form from the same JSON so both say the same thing),
// plus a line diff for sources and a flattening of arbitrary JSON (counters,
// diagnosis) into name/value lines for tables.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "report/data.hpp"

namespace kopt::report {

// One object per iteration: parent, strategy, candidates, outcome classes,
// best score of the iteration and the incumbent after it, dropout kept and
// dropped, escalations, promotion, LLM calls (and per model label, how
// many), tokens, cost, duration.
nlohmann::json log_json(const campaign_data& d);

// Every candidate as a node (id, parent, origin, iteration, outcome, score,
// on_best_path) plus the best path from the start to the best.
nlohmann::json lineage_json(const campaign_data& d);

// What `kopt show candidate` adds for researchers: the iteration (strategy,
// prompt info, dropout decisions), the LLM call(s) with prompt and response,
// the decisions as its own call saw them (`call_dropout`, null without a
// linked call), and the derived outcome and score when the campaign loads.
nlohmann::json candidate_research_json(store::store& db, const store::candidate_record& c);

struct diff_line {
  char op = ' ';  // ' ' same, '-' only in a, '+' only in b
  std::string text;
};
// A shortest line diff (Myers' O((N+M)·D) algorithm, D = lines changed:
// linear in practice for two versions of a kernel, whatever their size).
// Within each changed block deletions come before insertions, as diff(1)
// prints them. Only when D² exceeds max_cells (the saved search state) is
// the changed middle shown as a whole block (all '-' then all '+').
std::vector<diff_line> line_diff(const std::string& a, const std::string& b,
                                 std::size_t max_cells = 40'000'000);
// Unified diff text (---/+++ headers, @@ hunks with `context` lines); empty
// when the texts are equal.
std::string unified_diff(const std::string& a, const std::string& b, const std::string& name_a,
                         const std::string& name_b, int context = 3);

// Two candidates (of any campaigns): source diff, launch plan and parameter
// changes (JSON Patch from a to b), and per-workload measurements with the
// change in median time and fraction of speed of light, taken from the same
// stage for both where possible. Throws not_found_error for an unknown id.
nlohmann::json diff_json(store::store& db, row_id a, row_id b);

// {"metrics": {"x": 1}} -> {("metrics.x", "1")}; arrays index as [i];
// strings unquoted. For rendering counters and diagnoses generically.
std::vector<std::pair<std::string, std::string>> flatten(const nlohmann::json& j,
                                                         const std::string& prefix = "");

}  // namespace kopt::report
