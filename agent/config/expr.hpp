// The expression language used for shapes, grids, shared-memory sizes,
// workspace sizes and roofline counts.
//
// Deliberately tiny and total: 64-bit signed integers; + - * / % with the
// usual precedence; '//' (floor division, as in Python); unary minus; parentheses; ceil_div(a, b),
// min(a, b, ...), max(a, b, ...); names (axes, tunable parameters, a few built-ins the caller
// binds). No floats, no side effects, no loops: a config or an LLM answer can
// never make evaluation slow or unsafe. Overflow, division or modulo by zero
// and unknown names are errors that say where, never UB or a wrapped value.
// '/' truncates toward zero like C++; ceil_div rounds up for non-negative
// operands and is an error for a negative divisor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace kopt::expr {

// A parse or evaluation error. `column` is 1-based within the expression text
// (0 when the error is not tied to a position, e.g. overflow at evaluation).
// what() is "<reason> at column N" (or just the reason when column is 0);
// reason() is the bare message, for callers that place the column themselves
// (the config validator turns it into a file line:column).
class expr_error : public kopt::error {
 public:
  expr_error(std::string message, std::size_t column)
      : kopt::error(column == 0 ? message : message + " at column " + std::to_string(column)),
        reason_(std::move(message)),
        column_(column) {}
  std::size_t column() const noexcept { return column_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;
  std::size_t column_;
};

// Limits that keep parsing cheap and the syntax tree shallow.
inline constexpr std::size_t max_expression_length = 1024;
inline constexpr std::size_t max_expression_depth = 64;

// The function names of the language; they cannot be used as names.
bool is_function_name(std::string_view name) noexcept;
// A valid name: [A-Za-z_][A-Za-z0-9_]*.
bool is_identifier(std::string_view name) noexcept;

// Name lookup at evaluation time; returns nullopt for an unknown name.
using resolver = std::function<std::optional<std::int64_t>(std::string_view)>;

// Convenience resolver over a map; it refers to the map, which must outlive it.
resolver map_resolver(const std::map<std::string, std::int64_t, std::less<>>& values);

struct node;  // parsed syntax tree, private to expr.cpp

class expression {
 public:
  // Throws expr_error (with column) on a syntax error. Limits: 1024 chars,
  // nesting depth 64 (parentheses, unary minus and function calls).
  static expression parse(std::string_view text);

  // Throws expr_error on unknown names, overflow and division by zero; the
  // column is that of the name or of the operator / function that failed.
  std::int64_t eval(const resolver& names) const;

  // Every name the expression refers to (not the function names), sorted and
  // unique, so validators can check them without evaluating.
  const std::vector<std::string>& names() const noexcept { return names_; }
  const std::string& text() const noexcept { return text_; }

  // A constant expression (no names) folds to its value; nullopt when the
  // expression has names. Throws expr_error when folding fails (e.g. 1/0).
  std::optional<std::int64_t> constant_value() const;

 private:
  std::string text_;
  std::shared_ptr<const node> root_;
  std::vector<std::string> names_;
};

// parse + eval in one step.
std::int64_t evaluate(std::string_view text, const resolver& names);

// A constraint over axes and scalars (a config's `constraints`, FlashInfer-
// Trace's and SOL-ExecBench's `constraints`): comparisons of two
// expressions, `a OP b` with OP one of == != < <= > >=, joined by `and`
// (e.g. "hidden % 128 == 0", "len_indptr == batch_size + 1"). A bare
// expression holds when it is non-zero. Columns in errors are those of the
// whole text.
class condition {
 public:
  static condition parse(std::string_view text);  // throws expr_error
  bool holds(const resolver& names) const;        // throws expr_error
  const std::vector<std::string>& names() const noexcept { return names_; }
  const std::string& text() const noexcept { return text_; }

 private:
  struct clause {
    expression lhs;
    std::string op;  // empty for a bare expression
    std::optional<expression> rhs;
    std::size_t lhs_offset = 0, rhs_offset = 0;
  };
  std::string text_;
  std::vector<clause> clauses_;
  std::vector<std::string> names_;
};

}  // namespace kopt::expr
