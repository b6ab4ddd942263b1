// The expression language used for shapes, grids, shared-memory sizes,
// workspace sizes and roofline counts.
//
// Deliberately tiny and total: 64-bit signed integers; + - * / % with the
// usual precedence; unary minus; parentheses; ceil_div(a, b), min(a, b, ...),
// max(a, b, ...); names (axes, tunable parameters, a few built-ins the caller
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
class expr_error : public kopt::error {
 public:
  expr_error(std::string message, std::size_t column)
      : kopt::error(std::move(message)), column_(column) {}
  std::size_t column() const noexcept { return column_; }

 private:
  std::size_t column_;
};

// Name lookup at evaluation time; returns nullopt for an unknown name.
using resolver = std::function<std::optional<std::int64_t>(std::string_view)>;

// Convenience resolver over a map.
resolver map_resolver(const std::map<std::string, std::int64_t, std::less<>>& values);

struct node;  // parsed syntax tree, private to expr.cpp

class expression {
 public:
  // Throws expr_error (with column) on a syntax error. Limits: 1024 chars,
  // nesting depth 64.
  static expression parse(std::string_view text);

  // Throws expr_error on unknown names, overflow and division by zero.
  std::int64_t eval(const resolver& names) const;

  // Every name the expression refers to (not the function names), sorted and
  // unique, so validators can check them without evaluating.
  const std::vector<std::string>& names() const noexcept { return names_; }
  const std::string& text() const noexcept { return text_; }

  // A constant expression (no names) folds to its value.
  std::optional<std::int64_t> constant_value() const;

 private:
  std::string text_;
  std::shared_ptr<const node> root_;
  std::vector<std::string> names_;
};

// parse + eval in one step.
std::int64_t evaluate(std::string_view text, const resolver& names);

}  // namespace kopt::expr
