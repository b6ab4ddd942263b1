// Plain records for the rows of the kopt store, one struct per table, plus
// the enumerations the schema constrains with CHECK. They hold only standard
// types and nlohmann::json, so that the store does not depend on the config
// model or the worker protocol: callers translate. An `id` of 0 means "not
// stored yet"; inserts ignore it and return the new id. Timestamps are unix
// epoch milliseconds, UTC (see docs/schema.md).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kopt::store {

using row_id = std::int64_t;

// Milliseconds since the unix epoch, UTC.
std::int64_t now_ms();
// "2026-11-30T21:48:20.123Z"
std::string format_time(std::int64_t unix_ms);

enum class campaign_state { queued, running, paused, done, failed, cancelled };
std::string_view to_string(campaign_state s) noexcept;
std::optional<campaign_state> parse_campaign_state(std::string_view s) noexcept;
const std::vector<std::string_view>& campaign_state_names() noexcept;
// done, failed and cancelled: the campaign will not run again.
bool is_terminal(campaign_state s) noexcept;

enum class candidate_origin { reference, baseline, seed, llm, tuned };
std::string_view to_string(candidate_origin o) noexcept;
std::optional<candidate_origin> parse_candidate_origin(std::string_view s) noexcept;

// Outcome of one candidate on one workload (KTT-style: outcomes are data).
enum class eval_status {
  ok,
  compile_error,
  incorrect,
  crashed,
  timeout,
  rejected_integrity,
  launch_error,
  skipped,  // not evaluated (an earlier failure made it pointless)
  // Schema v3: the worker's outcomes kept as they are, no longer folded
  // into compile_error / skipped.
  compile_timeout,   // NVRTC ran past its time limit
  rejected_format,   // the candidate does not validate against the operator
  reference_failed,  // the reference failed on the workload: nothing to compare against
};
std::string_view to_string(eval_status s) noexcept;
std::optional<eval_status> parse_eval_status(std::string_view s) noexcept;
const std::vector<std::string_view>& eval_status_names() noexcept;

struct operator_record {
  row_id id = 0;
  std::string name;
  std::string op_type;
  nlohmann::json config;                   // the snapshot: every file reference inlined
  std::string content_hash;                // SHA-256 of config.dump(); unique
  std::optional<std::string> source_path;  // where it was first submitted from
  std::int64_t created_at = 0;
};

struct workload_record {
  row_id id = 0;
  row_id operator_id = 0;
  std::string key;   // the workload id from the config
  int position = 0;  // order in the config
  nlohmann::json axes = nlohmann::json::object();
  double weight = 1.0;
};

struct budget_limits {  // empty = unlimited
  std::optional<std::int64_t> iterations;
  std::optional<double> wall_time_s;
  std::optional<std::int64_t> tokens;
  std::optional<double> cost_usd;
};

struct campaign_record {
  row_id id = 0;
  row_id operator_id = 0;
  campaign_state state = campaign_state::queued;
  std::string provider;
  std::string model;
  nlohmann::json settings = nlohmann::json::object();
  budget_limits budget;
  std::int64_t spent_iterations = 0;
  std::int64_t spent_tokens = 0;
  double spent_cost_usd = 0.0;
  double spent_wall_time_s = 0.0;
  std::optional<row_id> best_candidate_id;
  std::optional<double> best_score;
  std::int64_t priority = 0;
  std::string team;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
  std::optional<std::int64_t> started_at;
  std::optional<std::int64_t> finished_at;
  std::optional<std::string> stop_reason;
  // Filled by reads (joined from operators), ignored by inserts.
  std::string operator_name;
};

struct iteration_record {
  row_id id = 0;
  row_id campaign_id = 0;
  std::int64_t number = 0;  // 0 = set-up (reference/baseline/seed); 1.. = loop
  std::optional<row_id> parent_candidate_id;
  std::string strategy;  // e.g. improve, restart, diverse, tune
  std::optional<double> dropout_p;
  nlohmann::json prompt_info;      // template, items, snippets, masked history ...
  std::string status = "running";  // running, done, failed, interrupted
  std::optional<std::string> note;
  std::int64_t started_at = 0;
  std::optional<std::int64_t> finished_at;
};

struct candidate_record {
  row_id id = 0;
  row_id campaign_id = 0;
  std::optional<row_id> iteration_id;
  std::optional<row_id> parent_id;
  candidate_origin origin = candidate_origin::llm;
  std::string source;
  std::string source_hash;  // SHA-256 of source; computed on insert when empty
  nlohmann::json launch_plan = nlohmann::json::object();  // launches, workspaces, options
  nlohmann::json parameters = nlohmann::json::object();   // tunable parameter space
  std::optional<std::string> provider;
  std::optional<std::string> model;
  std::optional<row_id> llm_call_id;
  std::optional<std::string> note;
  std::int64_t created_at = 0;
  // Schema v5: the campaign loop's content key (SHA-256 of the candidate
  // JSON), stored so that a resumed step looks candidates up by key instead
  // of re-serialising every source. Empty: not known (rows before v5, or a
  // caller that is not the loop).
  std::string content_key;
};

struct compilation_record {
  row_id id = 0;
  row_id candidate_id = 0;
  nlohmann::json parameter_values = nlohmann::json::object();
  std::string arch;  // e.g. sm_90a
  nlohmann::json options = nlohmann::json::array();
  std::string status = "ok";  // ok, error, timeout, crashed, rejected
  std::string log;
  std::optional<std::int64_t> registers;
  std::optional<std::int64_t> shared_bytes;
  std::optional<std::int64_t> spill_bytes;
  std::optional<double> duration_ms;
  std::optional<std::string> cubin_hash;
  std::optional<std::string> compiler_version;
  std::int64_t created_at = 0;
};

struct timing_summary {
  std::optional<double> median_ns, min_ns, mean_ns, stdev_ns, q1_ns, q3_ns;
  std::optional<std::int64_t> samples;
  std::optional<std::string> stop_reason;
  std::optional<std::int64_t> discarded;
  nlohmann::json detail;  // anything else (cuda-event cross-check, clocks per sample)
};

struct evaluation_record {
  row_id id = 0;
  row_id candidate_id = 0;
  std::optional<row_id> compilation_id;
  row_id workload_id = 0;
  std::string stage = "full";  // screen, full, verify, compare
  eval_status status = eval_status::ok;
  std::optional<double> max_abs_err, max_rel_err, matched_ratio;
  timing_summary timing;
  nlohmann::json correctness;  // failing indices, per-output errors
  nlohmann::json counters;
  std::optional<double> sol_fraction;
  nlohmann::json device;  // gpu name, uuid, clocks, driver, toolkit
  nlohmann::json seeds;
  std::optional<std::string> error;
  std::int64_t created_at = 0;
  // Filled by reads (joined from workloads), ignored by inserts.
  std::string workload_key;
};

// One request to a provider. There is deliberately no field for headers or
// credentials; add_llm_call refuses a request_json that carries one.
struct llm_call_record {
  row_id id = 0;
  row_id campaign_id = 0;
  std::optional<row_id> iteration_id;
  std::string provider;
  std::string model;
  nlohmann::json request;  // sampling parameters etc., never keys
  std::string prompt;
  std::optional<std::string> response;
  std::string status = "ok";  // ok, http_error, network_error, timeout, rate_limited, refused,
                              // parse_error, cancelled
  std::optional<std::int64_t> http_status;
  std::int64_t attempts = 1;
  std::int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, reasoning_tokens = 0;
  double cost_usd = 0.0;
  std::optional<double> latency_ms;
  std::optional<std::string> error;
  std::int64_t created_at = 0;
};

struct dropout_decision {
  row_id id = 0;
  row_id iteration_id = 0;
  std::string item_id;
  std::string item_kind;  // directive, history, snippet ...
  bool kept = true;
  double p = 0.0;
};

struct event_record {
  row_id id = 0;
  std::optional<row_id> campaign_id{};  // empty: daemon-wide
  std::string kind;
  std::string level = "info";  // debug, info, warning, error
  std::string message{};
  nlohmann::json data{};
  std::int64_t created_at = 0;
};

// One row of `kopt log`: an iteration with what came out of it.
struct iteration_summary {
  iteration_record iteration;
  std::int64_t candidates = 0;
  std::int64_t compile_errors = 0;  // candidates with a failed compilation
  std::int64_t evaluations = 0;
  std::map<std::string, std::int64_t> outcomes;  // eval status -> count
  std::int64_t llm_calls = 0;
  std::int64_t tokens = 0;
  double cost_usd = 0.0;
  // Best candidate of the iteration among those correct on every workload
  // they were evaluated on: weight-averaged sol_fraction.
  std::optional<row_id> best_candidate_id;
  std::optional<double> best_score;
};

}  // namespace kopt::store
