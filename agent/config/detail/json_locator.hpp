// Source positions for JSON values. nlohmann::json 3.11 keeps no positions,
// so the validator scans the text once more with this small strict scanner:
// it maps every JSON pointer to the line and column of its value (and, for
// object members, of its key), reports syntax errors and duplicate keys with
// line:column, and then the DOM from nlohmann is checked against that map.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kopt::config::detail {

struct text_position {
  int line = 0;    // 1-based; 0 = unknown
  int column = 0;  // 1-based, in characters (UTF-8 code points)
};

struct located_value {
  text_position value;  // first character of the value
  text_position key;    // the key's opening quote (object members only)
  // A string value without escapes and non-ASCII characters: character k of
  // the decoded string sits at value.column + k, so an expression column can
  // be mapped exactly.
  bool plain_string = false;
};

struct json_syntax_problem {
  text_position where;
  std::string message;
};

class json_locator {
 public:
  // Scans the whole text. Syntax errors (the first one; scanning stops) and
  // duplicate keys (all of them) are listed in problems().
  explicit json_locator(std::string_view text);

  bool syntax_ok() const noexcept { return syntax_ok_; }
  const std::vector<json_syntax_problem>& problems() const noexcept { return problems_; }

  // Pointer in RFC 6901 form ("" = root, "/inputs/x/shape/1").
  const located_value* find(const std::string& pointer) const;
  // Line and column of a byte offset (for nlohmann's parse errors).
  text_position position_of(std::size_t byte_offset) const;

 private:
  std::unordered_map<std::string, located_value> positions_;
  std::vector<json_syntax_problem> problems_;
  std::vector<std::size_t> line_starts_;
  std::string_view text_;
  bool syntax_ok_ = true;

  friend class scanner;
};

// Escapes one reference token for a JSON pointer ("~" -> "~0", "/" -> "~1").
std::string pointer_token(std::string_view key);

}  // namespace kopt::config::detail
