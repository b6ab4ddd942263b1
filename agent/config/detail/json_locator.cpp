#include "config/detail/json_locator.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

namespace kopt::config::detail {

std::string pointer_token(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

namespace {
constexpr std::size_t max_depth = 256;

struct syntax_failure {
  std::size_t offset;
  std::string message;
};
}  // namespace

// Strict RFC 8259 scanner (no comments, no trailing commas) that records
// positions; it builds no values.
class scanner {
 public:
  scanner(json_locator& loc, std::string_view text) : loc_(loc), text_(text) {}

  void run() {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // nlohmann skips a BOM too
    skip_space();
    if (at_end()) fail("empty document: expected a JSON object");
    std::string root;
    value(root, {}, 0);
    skip_space();
    if (!at_end()) fail("unexpected " + describe() + " after the end of the JSON document");
  }

 private:
  json_locator& loc_;
  std::string_view text_;
  std::size_t pos_ = 0;

  bool at_end() const noexcept { return pos_ >= text_.size(); }
  [[noreturn]] void fail(std::string message) { throw syntax_failure{pos_, std::move(message)}; }
  [[noreturn]] void fail_at(std::size_t off, std::string message) {
    throw syntax_failure{off, std::move(message)};
  }

  std::string describe() const {
    if (at_end()) return "end of file";
    const auto c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x21 && c <= 0x7e) return std::string("'") + static_cast<char>(c) + "'";
    if (c == '\n') return "end of line";
    const char* hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
  }

  void skip_space() {
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() &&
                 (text_[pos_ + 1] == '/' || text_[pos_ + 1] == '*')) {
        fail("comments are not allowed in JSON");
      } else {
        return;
      }
    }
  }

  void record(const std::string& ptr, std::size_t value_off, std::optional<std::size_t> key_off,
              bool plain) {
    located_value lv;
    lv.value = loc_.position_of(value_off);
    if (key_off) lv.key = loc_.position_of(*key_off);
    lv.plain_string = plain;
    loc_.positions_[ptr] = lv;
  }

  void value(const std::string& ptr, std::optional<std::size_t> key_off, std::size_t depth) {
    if (depth > max_depth) fail("JSON nested too deeply (limit " + std::to_string(max_depth) + ")");
    skip_space();
    if (at_end()) fail("unexpected end of file: expected a value");
    const std::size_t start = pos_;
    const char c = text_[pos_];
    bool plain = false;
    if (c == '{') {
      object(ptr, depth);
    } else if (c == '[') {
      array(ptr, depth);
    } else if (c == '"') {
      plain = string_token(nullptr);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      number();
    } else if (literal("true") || literal("false") || literal("null")) {
    } else if (c == '\'') {
      fail("strings must use double quotes");
    } else if (c == '}' || c == ']' || c == ',') {
      fail("unexpected " + describe() + ": expected a value");
    } else {
      fail("unexpected " + describe() + ": expected a value (object, array, string, number, "
           "true, false or null)");
    }
    record(ptr, start, key_off, plain);
  }

  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  void object(const std::string& ptr, std::size_t depth) {
    ++pos_;  // '{'
    std::set<std::string, std::less<>> seen;
    skip_space();
    if (!at_end() && text_[pos_] == '}') {
      ++pos_;
      return;
    }
    for (;;) {
      skip_space();
      if (at_end()) fail("unexpected end of file: unterminated object");
      if (text_[pos_] != '"') {
        if (text_[pos_] == '}') fail("trailing comma before '}'");
        fail("expected a member name in double quotes, found " + describe());
      }
      const std::size_t key_off = pos_;
      std::string key;
      string_token(&key);
      if (!seen.insert(key).second) {
        loc_.problems_.push_back({loc_.position_of(key_off), "duplicate key \"" + key + "\""});
      }
      skip_space();
      if (at_end() || text_[pos_] != ':')
        fail("expected ':' after member name \"" + key + "\", found " + describe());
      ++pos_;
      value(ptr + "/" + pointer_token(key), key_off, depth + 1);
      skip_space();
      if (at_end()) fail("unexpected end of file: expected ',' or '}'");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == '}') {
        ++pos_;
        return;
      }
      fail("expected ',' or '}' after member \"" + key + "\", found " + describe());
    }
  }

  void array(const std::string& ptr, std::size_t depth) {
    ++pos_;  // '['
    skip_space();
    if (!at_end() && text_[pos_] == ']') {
      ++pos_;
      return;
    }
    for (std::size_t i = 0;; ++i) {
      skip_space();
      if (!at_end() && text_[pos_] == ']') fail("trailing comma before ']'");
      value(ptr + "/" + std::to_string(i), std::nullopt, depth + 1);
      skip_space();
      if (at_end()) fail("unexpected end of file: expected ',' or ']'");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == ']') {
        ++pos_;
        return;
      }
      fail("expected ',' or ']' after array element, found " + describe());
    }
  }

  // Returns whether the string is "plain" (no escapes, ASCII only).
  bool string_token(std::string* out) {
    const std::size_t open = pos_;
    ++pos_;
    bool plain = true;
    for (;;) {
      if (at_end()) fail_at(open, "unterminated string");
      const auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return plain;
      }
      if (c == '\n') fail_at(open, "unterminated string (newline inside a string)");
      if (c < 0x20) fail("control character in string (use an escape such as \\n or \\t)");
      if (c == '\\') {
        plain = false;
        ++pos_;
        if (at_end()) fail_at(open, "unterminated string");
        const char e = text_[pos_];
        switch (e) {
          case '"': case '\\': case '/':
            if (out) *out += e;
            break;
          case 'b': case 'f': case 'n': case 'r': case 't':
            if (out) *out += '?';
            break;
          case 'u':
            for (int i = 0; i < 4; ++i) {
              ++pos_;
              if (at_end() || !std::isxdigit(static_cast<unsigned char>(text_[pos_])))
                fail("bad \\u escape: expected 4 hex digits");
            }
            if (out) *out += "\\u";
            break;
          default:
            fail("bad escape sequence '\\" + std::string(1, e) + "' in string");
        }
        ++pos_;
        continue;
      }
      if (c >= 0x80) plain = false;
      if (out) *out += static_cast<char>(c);
      ++pos_;
    }
  }

  void number() {
    auto digit = [&] { return !at_end() && text_[pos_] >= '0' && text_[pos_] <= '9'; };
    const std::size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    if (!digit()) fail("invalid number: expected a digit after '-'");
    if (text_[pos_] == '0') {
      ++pos_;
      if (digit()) fail("invalid number: leading zeros are not allowed");
    } else {
      while (digit()) ++pos_;
    }
    if (!at_end() && text_[pos_] == '.') {
      ++pos_;
      if (!digit()) fail("invalid number: expected a digit after '.'");
      while (digit()) ++pos_;
    }
    if (!at_end() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (!at_end() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digit()) fail("invalid number: expected a digit in the exponent");
      while (digit()) ++pos_;
    }
    if (!at_end()) {
      const char c = text_[pos_];
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.')
        fail("invalid number: unexpected " + describe());
    }
    // Valid JSON, but nlohmann cannot hold it (it throws "number overflow",
    // which is no parse_error): report it here, where the position is known.
    const std::string literal(text_.substr(start, pos_ - start));
    if (!std::isfinite(std::strtod(literal.c_str(), nullptr)))
      fail_at(start, "number " + (literal.size() > 40 ? literal.substr(0, 40) + "..." : literal) +
                         " is out of the range of a double (largest about 1.8e308)");
  }
};

json_locator::json_locator(std::string_view text) : text_(text) {
  line_starts_.push_back(0);
  for (std::size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') line_starts_.push_back(i + 1);
  scanner s(*this, text);
  try {
    s.run();
  } catch (const syntax_failure& f) {
    syntax_ok_ = false;
    problems_.push_back({position_of(f.offset), "JSON syntax error: " + f.message});
  }
}

const located_value* json_locator::find(const std::string& pointer) const {
  auto it = positions_.find(pointer);
  return it == positions_.end() ? nullptr : &it->second;
}

text_position json_locator::position_of(std::size_t byte_offset) const {
  byte_offset = std::min(byte_offset, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), byte_offset);
  const auto line_index = static_cast<std::size_t>(it - line_starts_.begin()) - 1;
  const std::size_t start = line_starts_[line_index];
  int column = 1;
  for (std::size_t i = start; i < byte_offset; ++i) {
    // Count code points: skip UTF-8 continuation bytes.
    if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++column;
  }
  return {static_cast<int>(line_index) + 1, column};
}

}  // namespace kopt::config::detail
