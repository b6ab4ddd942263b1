// The vocabulary of the campaign loop and the two seams that make it
// testable without a GPU or an LLM: a candidate_source (who proposes the
// next kernels: parameter search, an LLM, a script) and an evaluator (who
// compiles, checks and times them: the GPU worker, or a fake with scripted
// results and noise). A candidate is always a complete candidate JSON whose
// tunable parameters' defaults are the point to evaluate (a "variant"), so
// that its content hash identifies exactly what was measured: that hash is
// the key of the evaluation cache and of candidate rows in the store.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/operator.hpp"
#include "store/records.hpp"

namespace kopt::store {
class store;
}

namespace kopt::campaign {

using param_values = std::map<std::string, std::int64_t>;

// --- evaluation ------------------------------------------------------------

struct eval_subject {
  std::string role;  // unique within a request
  store::row_id candidate_id = 0;
  nlohmann::json candidate;  // variant: parameter defaults = `parameters`
  param_values parameters;
  std::string key;  // content_key(candidate)
};

struct eval_request {
  std::string stage;  // screen | full | verify | compare
  std::vector<eval_subject> subjects;
  std::vector<std::string> workloads;
  std::uint64_t base_seed = 0;
  store::row_id campaign_id = 0;
  store::row_id operator_id = 0;
  std::optional<store::row_id> iteration_id;
};

struct workload_result {
  std::string status = "not_run";  // store eval_status names, or not_run
  std::string message;
  double median_ns = 0;
  std::vector<double> samples_ns;
  std::optional<double> sol_fraction;
  // harness::diagnose() of this measurement (null when not ok); the prompt
  // quotes it and knowledge retrieval keys on its classes.
  nlohmann::json diagnosis;
  bool ok() const noexcept { return status == "ok"; }
  nlohmann::json to_json(bool with_samples) const;
  static workload_result from_json(const nlohmann::json& j);
};

// The findings of a diagnosis; none when there is no diagnosis (null: the
// measurement failed, or an evaluator that diagnoses nothing).
inline nlohmann::json findings_of(const nlohmann::json& diagnosis) {
  if (!diagnosis.is_object()) return nlohmann::json::array();
  const auto it = diagnosis.find("findings");
  return it != diagnosis.end() && it->is_array() ? *it : nlohmann::json::array();
}

struct subject_result {
  std::string compile_status = "ok";
  std::map<std::string, workload_result> workloads;
  // Every listed workload ran and passed.
  bool all_ok(const std::vector<std::string>& wl) const;
  nlohmann::json to_json(bool with_samples) const;
  static subject_result from_json(const nlohmann::json& j);
};

struct eval_batch {
  std::map<std::string, subject_result> by_role;
  nlohmann::json device = nlohmann::json::object();
  std::vector<std::string> events;  // worker restarts etc., in words
  // Evaluator-private data for record() (the worker's full report).
  std::shared_ptr<void> detail;
};

// Compiles, checks and times subjects. evaluate() does the work and writes
// nothing; record() writes the compilation and evaluation rows and is called
// by the loop inside the transaction that also journals the result, so a
// kill either keeps a finished evaluation completely or not at all.
class evaluator {
 public:
  virtual ~evaluator() = default;
  virtual eval_batch evaluate(const eval_request& rq) = 0;
  virtual void record(store::store& db, const eval_request& rq, const eval_batch& b) = 0;
  // The GPU it measures on as the worker describes it (name, arch,
  // sm_count, l2_bytes), for the prompts' GPU facts; {} when unknown. May
  // start a worker, and then throws kopt::error when none can start.
  virtual nlohmann::json device() { return nlohmann::json::object(); }
};

// Writes one compilation row (the parameter values) and one evaluation row
// per workload for every subject from the batch's own figures. Used by
// evaluators that have nothing richer to store (the fake one).
void record_basic(store::store& db, const eval_request& rq, const eval_batch& b);

// --- candidates --------------------------------------------------------------

// SHA-256 of the canonical dump (object keys sorted): same content, same key.
std::string content_key(const nlohmann::json& candidate);
// Every tunable parameter at its default.
param_values default_point(const nlohmann::json& candidate);
// The candidate with each listed parameter's default set to the point.
nlohmann::json with_point(nlohmann::json candidate, const param_values& point);
// Number of points of the tunable space (1 without parameters; saturates).
std::uint64_t space_size(const nlohmann::json& candidate);
// Candidate JSON of a stored row (launch plan + source).
nlohmann::json candidate_json(const store::candidate_record& c);

// --- proposing ----------------------------------------------------------------

// One optional (or protected) piece of prompt context.
struct prompt_item {
  std::string id;    // stable: "directive:vectorize", "history:iter3", "snippet:..."
  std::string kind;  // directive | history | snippet
  std::string text;
  bool optional = true;  // false: never dropped nor masked (baseline, best)
};

struct prompt_context {
  const config::operator_config* op = nullptr;
  std::int64_t iteration = 0;
  std::optional<store::row_id> iteration_id;  // its store row: LLM calls are recorded against it
  std::string strategy;                       // improve, diverse, restart_elite, new_algorithm
  store::row_id parent_id = 0;
  std::string parent_label;  // how the prompt names the parent; empty: "candidate N" or "seed"
  nlohmann::json parent;     // variant
  param_values parent_point;
  std::map<std::string, workload_result> parent_results;  // full stage
  std::vector<prompt_item> items;                         // after dropout and masking
  bool different_algorithm = false;
  std::size_t k = 4;
  std::uint64_t seed = 0;  // for the source's own random choices
  // True when a variant with this content key was already proposed.
  std::function<bool(const std::string& key)> already_tried;
};

struct proposal {
  nlohmann::json candidate;  // variant (defaults = the point to evaluate)
  store::candidate_origin origin = store::candidate_origin::llm;
  std::string note;
  std::optional<store::row_id> llm_call_id;  // the recorded call whose answer this is
  std::string model;                         // the model that answered, when one did
};

struct source_answer {
  std::vector<proposal> proposals;
  std::int64_t tokens = 0;
  double cost_usd = 0;
  int llm_errors = 0;                 // calls that failed or gave no usable candidate
  std::vector<std::string> problems;  // why answers were unusable
  std::optional<std::string> fatal;   // the source cannot go on (revoked key, quota)
};

class candidate_source {
 public:
  virtual ~candidate_source() = default;
  virtual std::string name() const = 0;
  virtual bool calls_llm() const = 0;
  virtual source_answer propose(const prompt_context& ctx) = 0;
};

}  // namespace kopt::campaign
