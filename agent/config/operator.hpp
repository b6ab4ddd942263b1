// The operator config: what an operator computes, its tensors, production
// workloads with weights, and its reference / baseline / seed implementations
// in kopt's candidate format. One JSON file per operator; the format is
// documented in docs/operator-config.md with a JSON Schema in
// configs/schema/operator.schema.json.
//
// The tensor part follows the FlashInfer-Trace "definition" layout (name,
// description, axes const/var, inputs/outputs with shape and dtype) so that
// definitions can be imported and results exported; everything else is kopt's.
//
// This header is shared by the control plane and the worker: it has no GPU
// dependency. Loading never throws for a bad config: it returns every
// problem as a diagnostic (file, line, column, field path, message).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kopt::config {

// Element types, named as FlashInfer-Trace / PyTorch name them.
enum class dtype {
  float64,
  float32,
  float16,
  bfloat16,
  float8_e4m3fn,
  float8_e5m2,
  int64,
  int32,
  int16,
  int8,
  uint8,
  boolean,  // "bool"
};

std::string_view dtype_name(dtype t) noexcept;
std::optional<dtype> parse_dtype(std::string_view name) noexcept;
std::size_t dtype_size(dtype t) noexcept;
bool dtype_is_float(dtype t) noexcept;
// Integer types including bool (what int_range / permutation can fill).
bool dtype_is_integer(dtype t) noexcept;
// Every dtype name, for "did you mean" and the schema.
const std::vector<std::string_view>& dtype_names() noexcept;

struct axis {
  std::string name;
  bool is_const = false;   // "type": "const" (value fixed) or "var" (per workload)
  std::int64_t value = 0;  // for const axes
  std::string description;
  // "type": "expr" (SOL-ExecBench): the value is this expression over other
  // axes, evaluated per workload (e.g. "head_dim // 2"). Empty otherwise.
  std::string expression;
  bool is_expr() const noexcept { return !expression.empty(); }
  bool is_var() const noexcept { return !is_const && expression.empty(); }
};

// A scalar parameter of the operator (e.g. eps), passed to kernels by value.
struct scalar {
  std::string name;
  dtype type = dtype::float32;  // float32, float64, int32, int64
  double value = 0.0;
  std::string description;
};

// How the worker fills an input tensor. Integer bounds are expressions over
// the axes (e.g. "num_blocks"), evaluated per workload.
struct generator {
  enum class kind {
    normal,       // mean, stddev (floats), clamped to the dtype's range
    uniform,      // low, high (floats)
    int_range,    // uniform integers in [int_low, int_high) (expressions)
    permutation,  // each row along the last axis is a permutation of [0, n)
                  // where n = int_high (expression; default the last dim);
                  // disjoint_rows: one permutation across all rows
    constant,     // every element = value (allowed for e.g. unit scales)
    kernel,       // a generator kernel in device code (see docs)
  };
  kind k = kind::normal;
  double mean = 0.0, stddev = 1.0;
  double low = -1.0, high = 1.0;
  double value = 0.0;
  double scale = 1.0;         // multiplies normal/uniform draws (e.g. 0.02)
  std::string int_low = "0";  // expressions
  std::string int_high;
  bool disjoint_rows = false;  // permutation: no value twice in the whole tensor ("disjoint")
  std::string kernel_source;   // for kind::kernel: device code and entry point
  std::string kernel_name;
};

// How atol and rtol combine (docs/operator-config.md, "tolerance"):
//   max_of (default): |out - ref| <= max(atol, rtol * |ref|)
//   sum:              |out - ref| <= atol + rtol * |ref|  (torch.allclose)
enum class tolerance_form { max_of, sum };
const char* tolerance_form_name(tolerance_form f) noexcept;

struct tolerance {
  double atol = 1e-5;
  double rtol = 1e-5;
  double matched_ratio = 1.0;  // fraction of elements that must pass
  tolerance_form form = tolerance_form::max_of;
  // The element test itself: the one place the form is applied.
  bool accepts(double abs_diff, double abs_ref) const noexcept {
    return form == tolerance_form::sum ? abs_diff <= atol + rtol * abs_ref
                                       : !(abs_diff > atol && abs_diff > rtol * abs_ref);
  }
};

// Operator-chosen relaxations of the integrity rules (docs/integrity.md);
// each is recorded with every result measured under it.
struct integrity_settings {
  // Allow kernels that read %globaltimer / %clock / %clock64 (refused by
  // default: a kernel that reads a clock can tell timed calls from checked).
  bool allow_clock_reads = false;
  // Private workloads chosen by seed (docs/integrity.md, "Private
  // workloads"): this fraction of the workloads, picked deterministically
  // from private_seed and the workload ids, is private in addition to those
  // marked workloads[].private. The choice is made once, when the config is
  // loaded (select_private_workloads), and lands in workload::is_private,
  // the flag every consumer reads.
  std::optional<double> private_fraction;
  std::int64_t private_seed = 0;
};

struct tensor {
  std::string name;
  std::string description;
  std::vector<std::string> shape;  // axis names or expressions over axes
  dtype type = dtype::float32;
  std::optional<generator> gen;  // inputs only; default normal(0,1) for floats
  // inputs only: the operator writes this input (e.g. a KV cache or a
  // residual updated in place). Its final contents are compared with the
  // reference's and it is not hash-checked for mutation.
  bool in_place = false;
  std::optional<tolerance> tol;  // overrides the operator-wide tolerance
};

struct workload {
  std::string id;                                         // unique within the operator
  std::map<std::string, std::int64_t, std::less<>> axes;  // values of var axes
  std::map<std::string, double, std::less<>> scalars;     // overrides
  double weight = 1.0;                                    // importance, > 0
  std::string description;
  // Never shown in prompts, never used for screening; measured only at
  // verify and reported separately, so that a model cannot fit the shapes
  // it is scored on (docs/campaign.md, "Private workloads").
  bool is_private = false;
  // How it became private: false = workloads[].private, true = chosen by
  // integrity.private_fraction (the snapshot keeps the rule, not the flag).
  bool private_by_fraction = false;
  // Per-workload correctness bounds (SOL-ExecBench's `tolerance`): when set,
  // they replace the operator's and the tensors' for this workload.
  std::optional<tolerance> tol;
};

// One kernel launch of a candidate's launch plan.
struct launch_arg {
  enum class kind {
    tensor,     // pointer to an input or output tensor (by name)
    workspace,  // pointer to a workspace buffer (by name)
    integer,    // an integer expression passed as `type`
    scalar,     // an operator scalar (by name) passed as `type`
  };
  kind k = kind::tensor;
  std::string name;           // tensor / workspace / scalar name, or the expression
  dtype type = dtype::int32;  // integer: int32/int64; scalar: float32/float64/int32/int64
};

struct launch {
  std::string kernel;                // __global__ function name (extern "C")
  std::vector<std::string> grid;     // 1..3 expressions
  std::vector<std::string> block;    // 1..3 expressions
  std::vector<std::string> cluster;  // optional, 1..3 expressions
  std::string shared_bytes = "0";    // dynamic shared memory, expression
  std::vector<launch_arg> args;
};

struct workspace {
  std::string name;
  std::string bytes;  // expression over axes and parameters
  // Filled with unpredictable bytes before every call unless zero_init.
  bool zero_init = false;
};

// A tunable parameter: passed to device code as a compile-time constant
// (-DNAME=value) and usable in launch-plan expressions.
struct parameter {
  std::string name;
  std::vector<std::int64_t> values;  // candidate values, non-empty
  std::int64_t default_value = 0;    // must be one of values
};

// Reference, baseline, seed and every LLM answer share this format.
struct candidate {
  std::string source;            // CUDA C++ device code (inlined)
  std::string source_file;       // as written in the config, if any
  std::vector<launch> launches;  // at least one
  std::vector<parameter> parameters;
  std::vector<workspace> workspaces;
  std::vector<std::string> compile_options;  // allow-listed NVRTC options only
  nlohmann::json to_json() const;            // canonical form, source inlined

  const parameter* find_parameter(std::string_view name) const noexcept;
  // Every parameter at its default value (what validation evaluates with).
  std::map<std::string, std::int64_t, std::less<>> default_parameters() const;
};

struct roofline {
  std::string flops = "0";           // expression over axes
  std::string flop_unit = "fp32";    // key into the GPU peak table
  std::optional<std::string> bytes;  // default: inputs read + outputs written
};

struct budget {
  std::optional<std::int64_t> iterations;
  std::optional<double> wall_time_s;
  std::optional<std::int64_t> tokens;
  std::optional<double> cost_usd;
};

struct campaign_settings {
  std::string provider = "autotune";
  std::string model;
  budget limits;
  double target_sol_fraction = 0.8;
  int candidates_per_iteration = 4;
  double dropout_p = 0.3;
  std::uint64_t seed = 1;
};

struct operator_config {
  std::string name;
  std::string op_type;
  // The knowledge base's operator class (docs/knowledge-base.md), when the
  // op_type rules do not give the right one; empty: derived from op_type.
  std::string kb_class;
  std::string description;
  std::vector<std::string> tags;
  std::vector<axis> axes;
  std::vector<scalar> scalars;
  std::vector<tensor> inputs;
  std::vector<tensor> outputs;
  std::vector<workload> workloads;
  // Conditions every workload must meet, over axes and integer scalars
  // (expr::condition syntax, e.g. "hidden % 128 == 0"); checked at load.
  std::vector<std::string> constraints;
  tolerance tol;
  integrity_settings integ;
  roofline roof;
  candidate reference;
  std::optional<candidate> baseline;
  std::optional<candidate> seed;
  campaign_settings campaign;

  std::filesystem::path file;  // where it was loaded from (may be empty)

  // The config with every file reference inlined, as canonical JSON: what
  // the store keeps, so a campaign never depends on files that may change.
  nlohmann::json snapshot() const;
  // SHA-256 of snapshot().dump(): identifies the operator's content.
  std::string content_hash() const;

  const tensor* find_tensor(std::string_view name) const noexcept;
  const axis* find_axis(std::string_view name) const noexcept;
  const scalar* find_scalar(std::string_view name) const noexcept;
  const workload* find_workload(std::string_view id) const noexcept;
};

struct diagnostic {
  enum class severity { error, warning };
  severity level = severity::error;
  std::string file;
  int line = 0;      // 1-based; 0 when unknown
  int column = 0;    // 1-based; 0 when unknown
  std::string path;  // field path, e.g. inputs.x.shape[1]
  std::string message;
  // "file:line:col: error: path: message"
  std::string to_string() const;
};

bool has_errors(const std::vector<diagnostic>& diagnostics) noexcept;

struct load_result {
  std::optional<operator_config> op;  // set only when there are no errors
  std::vector<diagnostic> diagnostics;
  bool ok() const noexcept { return op.has_value(); }
};

// Which files a config's "source_file" fields may read. A config is data
// that ends up in the store (and in `kopt show --json`), so reading a file
// is publishing it: the spool confines a team's configs to its own spool
// directory, and no config may read a file kopt uses as an API key file.
struct file_policy {
  // Set: every source file must resolve, after symlinks, inside this
  // directory (the team's spool directory).
  std::filesystem::path confine_to;
  // Never read, also not through a symlink or a hard link (compared by
  // device and inode): the api_key_file of every provider kopt knows.
  std::vector<std::filesystem::path> key_files;
};

// Reads, parses and validates. Relative source files resolve against the
// config's directory.
load_result load_operator_file(const std::filesystem::path& file, const file_policy& policy = {});
load_result load_operator_text(std::string_view text, const std::string& file_label,
                               const std::filesystem::path& base_dir,
                               const file_policy& policy = {});
// A candidate on its own (an LLM answer, `kopt eval --candidate FILE`),
// validated against the operator it is for (tensor names, kernel args,
// expressions' names, parameter defaults).
struct candidate_result {
  std::optional<candidate> cand;
  std::vector<diagnostic> diagnostics;
  bool ok() const noexcept { return cand.has_value(); }
};
candidate_result load_candidate_file(const std::filesystem::path& file, const operator_config& op);
candidate_result load_candidate_text(std::string_view text, const std::string& file_label,
                                     const std::filesystem::path& base_dir,
                                     const operator_config& op);

// Resolve the names of one workload for expression evaluation: axes (const,
// var and expr, the last evaluated in order of their dependencies) plus,
// when given, parameter values. An expr axis that cannot be evaluated is
// left out (validation reports it).
std::map<std::string, std::int64_t, std::less<>> workload_names(
    const operator_config& op, const workload& w,
    const std::map<std::string, std::int64_t, std::less<>>& parameters = {});

// Allowed values of roofline.flop_unit and campaign.provider.
const std::vector<std::string_view>& flop_unit_names() noexcept;
const std::vector<std::string_view>& provider_names() noexcept;

// nullopt when the NVRTC option is on the allow-list, otherwise why not.
std::optional<std::string> check_compile_option(std::string_view option);

// Per-workload evaluation for the worker and the roofline. These throw
// config_error (with the field and workload in the message) when an
// expression fails; a config that loaded without errors never does for its
// own workloads with default parameters.
std::vector<std::int64_t> tensor_shape(const operator_config& op, const tensor& t,
                                       const workload& w);
std::int64_t tensor_bytes(const operator_config& op, const tensor& t, const workload& w);
std::int64_t roofline_flops(const operator_config& op, const workload& w);
// roofline.bytes when given; otherwise the default rule: every input read
// once, every output written once, an in-place input counted twice (read and
// written).
std::int64_t roofline_bytes(const operator_config& op, const workload& w);

// The workloads integrity.private_fraction makes private: the
// max(1, round(fraction x N)) ids with the smallest 64-bit hash of (seed,
// id), in the order given. Depends only on the ids and the seed (never on
// which are marked private by hand), so a snapshot reloads to the same set.
std::vector<std::string> private_fraction_choice(const std::vector<std::string>& ids,
                                                 double fraction, std::int64_t seed);

}  // namespace kopt::config
