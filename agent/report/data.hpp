// A campaign as researchers look at it: everything the store holds about one
// campaign, loaded in one read snapshot, plus what follows from it and is not
// stored as such: the outcome class of every candidate (compile error,
// incorrect, integrity rejection, slower or faster than its parent), the
// score of every candidate (weight-averaged fraction of speed of light over
// all workloads of the full sweep), the incumbent after every iteration, the
// path from the start to the best candidate, spend over time and the
// attribution of gains to the prompt items that each LLM call's dropout
// draw kept or dropped.
// Every view (`kopt log/lineage/diff/export/report/trace`) is built from this
// model, so they agree with each other. The model reads only; it never
// writes to the store.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "campaign/dropout.hpp"
#include "store/store.hpp"

namespace kopt::report {

using store::row_id;

// How a candidate ended, from the researcher's point of view. `start` is a
// set-up candidate (reference, baseline, seed); `not_run` was never
// evaluated (a duplicate, or the campaign stopped first); `correct` passed
// but has no measurement comparable with its parent's.
enum class outcome { start, compile_error, incorrect, integrity, slower, faster, correct, not_run };
std::string_view to_string(outcome o) noexcept;
// The order used by tables and stacked bars.
const std::vector<outcome>& loop_outcomes() noexcept;

// The latest evaluation of one candidate on one workload in one stage.
struct measure {
  std::string stage;
  store::eval_status status = store::eval_status::ok;
  std::optional<double> median_ns;
  std::optional<double> sol;
  // max(T_SOL, launch floor) / T when the timing carries the worker's
  // measured launch floor (launch_floor_ns), else empty.
  std::optional<double> attainable;
  std::optional<double> launch_floor_ns;
  std::optional<double> max_abs_err, max_rel_err;
  std::optional<std::string> error;
  row_id evaluation_id = 0;
};

struct candidate_view {
  const store::candidate_record* rec = nullptr;
  std::optional<std::int64_t> iteration;  // iteration number, not id
  outcome result = outcome::not_run;
  std::string furthest_stage;  // screen, full, compare, verify, or "" when never evaluated
  // stage -> workload key -> measurement
  std::map<std::string, std::map<std::string, measure>> by_stage;
  // Weight-averaged fraction of speed of light over every workload of the
  // full sweep (verify when there is no full), all correct; else empty.
  std::optional<double> score;
  // The same with attainable SOL per workload (the physical fraction where
  // a workload has no floor); empty when no workload has a floor.
  std::optional<double> attainable_score;
  // The same over the workloads it was screened on (screen stage).
  std::optional<double> screen_score;
  // Weighted geometric mean of median(candidate) / median(parent) over the
  // workloads both were measured on in the same stage (< 1: faster).
  std::optional<double> time_ratio_vs_parent;
  bool on_best_path = false;
  bool compiled = false;       // at least one compilation ok
  std::string compile_status;  // of the latest compilation, "" when none

  // Best available measurement per workload: verify, full, compare, screen.
  std::map<std::string, measure> best_measures() const;
};

struct iteration_view {
  const store::iteration_summary* sum = nullptr;
  std::int64_t number = 0;
  std::vector<row_id> candidates;
  std::map<outcome, std::int64_t> outcomes;
  std::optional<row_id> best_candidate;  // best score among this iteration's candidates
  std::optional<double> best_score;
  std::optional<row_id> incumbent;  // the campaign's best after this iteration
  std::optional<double> incumbent_score;
  std::int64_t dropout_kept = 0, dropout_dropped = 0;
  std::vector<std::string> escalations;  // escalation steps fired at the end of it
  bool promoted = false;
  double gain = 0;  // relative gain of the promotion (0 when none)
  std::int64_t llm_calls = 0;
  std::int64_t tokens = 0;
  double cost_usd = 0;
  std::optional<double> elapsed_s;  // from the campaign's first iteration to this one's end
};

// Per optional prompt item: the draws (LLM calls) that showed it or not and
// their mean gains; the rule is campaign::attribution (docs/campaign.md).
using attribution_row = campaign::item_attribution;

struct spend_point {
  std::int64_t at_ms = 0;
  std::int64_t tokens = 0;  // cumulative
  double cost_usd = 0;      // cumulative
};

// Views point into the vectors below: moved, never copied.
struct campaign_data {
  campaign_data() = default;
  campaign_data(const campaign_data&) = delete;
  campaign_data& operator=(const campaign_data&) = delete;
  campaign_data(campaign_data&&) = default;
  campaign_data& operator=(campaign_data&&) = default;

  store::campaign_record campaign;
  std::optional<store::operator_record> op;
  std::vector<store::workload_record> workloads;
  std::vector<store::iteration_summary> summaries;
  std::vector<store::candidate_record> candidates;
  std::map<row_id, std::vector<store::compilation_record>> compilations;  // by candidate
  std::map<row_id, std::vector<store::evaluation_record>> evaluations;    // by candidate
  std::map<row_id, std::vector<store::dropout_decision>> dropout;         // by iteration id
  std::vector<store::llm_call_record> llm_calls;
  std::vector<store::event_record> events;

  // Derived.
  std::map<std::string, double> weights;     // workload key -> weight
  std::map<row_id, candidate_view> views;    // by candidate id
  std::vector<iteration_view> iterations;    // by number, set-up first
  std::vector<row_id> best_path;             // start ... best
  std::vector<attribution_row> attribution;  // strongest effect first
  std::vector<spend_point> spend;            // cumulative, time order
  std::optional<std::int64_t> started_ms;    // first iteration start
  std::optional<std::int64_t> ended_ms;      // last activity
  nlohmann::json finished;                   // data of the "finished" event, or null

  const candidate_view* view(row_id id) const;
  const candidate_view* by_origin(store::candidate_origin o) const;  // first of that origin
  const iteration_view* iteration(std::int64_t number) const;
  const store::workload_record* workload(const std::string& key) const;
};

// Loads a campaign (throws kopt::not_found_error for an unknown id).
campaign_data load_campaign(store::store& db, row_id campaign_id);

// Fraction of speed of light as a percentage string ("61.2 %", "-").
std::string pct(const std::optional<double>& v, int digits = 1);

}  // namespace kopt::report
