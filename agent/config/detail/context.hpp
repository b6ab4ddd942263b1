// Shared machinery of the operator and candidate validators: field paths
// (JSON pointer for lookup, dotted form for messages), diagnostics placed at
// the line:column of the offending key or value, typed field readers that
// report wrong types, and unknown-field checks with "did you mean".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/detail/json_locator.hpp"
#include "config/expr.hpp"
#include "config/operator.hpp"

namespace kopt::config::detail {

using json = nlohmann::json;

struct jpath {
  std::string ptr;      // "/inputs/x/shape/1"
  std::string display;  // "inputs.x.shape[1]"
  jpath operator/(std::string_view key) const;
  jpath operator[](std::size_t index) const;
};

// Optimal-string-alignment distance (a transposition costs 1).
std::size_t edit_distance(std::string_view a, std::string_view b);
// "; did you mean \"x\"?" for the closest candidate, or "" when none is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);
std::string quote(std::string_view s);
std::string json_type_name(const json& j);

class context {
 public:
  context(std::string file_label, const json_locator* locator, const file_policy* policy = nullptr)
      : file_(std::move(file_label)), loc_(locator), policy_(policy) {}

  void error(const jpath& p, std::string message, bool at_key = false);
  void warning(const jpath& p, std::string message, bool at_key = false);
  // An expression error inside the string value at p: the column points at
  // the character of the expression when it can be mapped exactly.
  // `prefix` goes before the message (e.g. "workload \"w1\": ").
  void expr_problem(const jpath& p, const expr::expr_error& e, const std::string& text,
                    const std::string& prefix = {});
  void add(diagnostic d) { diags_.push_back(std::move(d)); }

  bool failed() const noexcept { return errors_ > 0; }

  // Names declared in the config whose declaration has an error: references
  // to them are not reported again as unknown names.
  void mark_broken(const std::string& name) { broken_.insert(name); }
  bool is_broken(std::string_view name) const { return broken_.find(name) != broken_.end(); }
  std::vector<diagnostic> take();
  const std::string& file() const noexcept { return file_; }
  // The rules for source_file reads; never null.
  const file_policy& policy() const noexcept {
    static const file_policy open_policy;
    return policy_ ? *policy_ : open_policy;
  }

 private:
  void place(diagnostic& d, const jpath& p, bool at_key) const;
  std::string file_;
  const json_locator* loc_;
  const file_policy* policy_;
  std::vector<diagnostic> diags_;
  std::set<std::string, std::less<>> broken_;
  std::size_t errors_ = 0;
};

// Reads the members of one JSON object. Construction reports a non-object
// value (then every getter returns nothing) and every member not in
// `allowed`.
class object_reader {
 public:
  object_reader(context& ctx, const json& j, jpath p, std::vector<std::string> allowed);
  object_reader(context& ctx, const json& j, jpath p, std::initializer_list<const char*> allowed);

  bool valid() const noexcept { return obj_ != nullptr; }
  const jpath& path() const noexcept { return path_; }
  jpath path(std::string_view key) const { return path_ / key; }
  bool has(std::string_view key) const;
  const json* get(std::string_view key) const;
  // Reports a missing field at the object itself.
  const json* require(std::string_view key) const;

  std::optional<std::string> string(std::string_view key, bool required = false) const;
  std::optional<double> number(std::string_view key, bool required = false) const;
  std::optional<std::int64_t> integer(std::string_view key, bool required = false) const;
  std::optional<bool> boolean(std::string_view key, bool required = false) const;

 private:
  void init(std::vector<std::string> allowed);
  context& ctx_;
  const json* obj_ = nullptr;
  jpath path_;
};

// Value checks that report the type problem and return nothing on mismatch.
std::optional<std::string> as_string(context& ctx, const json& j, const jpath& p);
std::optional<double> as_number(context& ctx, const json& j, const jpath& p);
std::optional<std::int64_t> as_integer(context& ctx, const json& j, const jpath& p);
// An expression given as a string or a JSON integer; parsed to check syntax.
std::optional<std::string> as_expression(context& ctx, const json& j, const jpath& p);
// Checks that every name of the (already syntax-checked) expression is in
// `known`; `what` names the kind of name in the message ("axis", "name").
// Returns false (after reporting) when some name is unknown.
bool check_expression_names(context& ctx, const jpath& p, const std::string& text,
                            const std::vector<std::string>& known, const std::string& what);

// Reads the file a "source_file" field at p names (`written`, as in the
// config; relative to base_dir), under ctx.policy(). Reports every refusal
// at p and returns nothing then; returns the bytes otherwise.
std::optional<std::string> read_source_file(context& ctx, const jpath& p,
                                            const std::string& written,
                                            const std::filesystem::path& base_dir);

// The candidate validator, shared by the operator loader (reference,
// baseline, seed) and load_candidate_*. `op` must already hold axes,
// scalars, tensors and workloads.
std::optional<candidate> parse_candidate(context& ctx, const json& j, const jpath& p,
                                         const operator_config& op,
                                         const std::filesystem::path& base_dir);
// Per-workload evaluation of a candidate's launch plan with default
// parameter values. Shared memory above 227 KiB (no GPU allows more) is an
// error for a config's own kernels; for a standalone candidate (an LLM
// answer) a warning, because the compile check and the worker refuse it as
// launch_error with the target's own limit, which is the outcome recorded.
void check_candidate_workloads(context& ctx, const candidate& c, const jpath& p,
                               const operator_config& op, bool oversized_shared_is_error = true);

}  // namespace kopt::config::detail
