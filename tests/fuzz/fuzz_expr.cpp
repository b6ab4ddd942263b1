// libFuzzer target: the expression language (shapes, grids, shared memory,
// roofline counts). Parsing and evaluation must either succeed or throw
// expr_error; anything else (another exception, UB, a crash, a hang) is a
// finding. Evaluation runs with every name bound to a value taken from the
// input, so overflow and division paths are reached too. Property: an
// expression with no names folds to the value eval() gives.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "config/expr.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  std::int64_t bound = 0;
  std::memcpy(&bound, data, sizeof bound);
  const std::string_view text(reinterpret_cast<const char*>(data + 8), size - 8);
  try {
    const auto e = kopt::expr::expression::parse(text);
    const auto names = [bound](std::string_view n) -> std::optional<std::int64_t> {
      if (n.size() == 1 && n[0] == 'z') return std::nullopt;  // one unknown name
      return bound ^ static_cast<std::int64_t>(n.size());
    };
    std::optional<std::int64_t> folded;
    bool fold_failed = false;
    try {
      folded = e.constant_value();
    } catch (const kopt::expr::expr_error&) {
      fold_failed = true;
    }
    try {
      const std::int64_t v = e.eval(names);
      if (folded && *folded != v) std::abort();  // folding and evaluation disagree
      if (fold_failed && e.names().empty()) std::abort();
    } catch (const kopt::expr::expr_error&) {
      if (folded) std::abort();  // folded fine but evaluation failed
    }
  } catch (const kopt::expr::expr_error&) {
  }
  return 0;
}
