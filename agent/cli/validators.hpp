// Option checks shared by the command groups. CLI11's PositiveNumber
// accepts any double and, on a non-number, says "not in range 0 to
// 1.79769e+308"; an id is a positive integer and the message says so.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>

namespace kopt::cli {

inline CLI::Validator positive_id(const std::string& what) {
  return CLI::Validator(
      [what](std::string& s) -> std::string {
        std::int64_t v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || p != s.data() + s.size() || v < 1)
          return what + " must be a positive integer (e.g. 42), got '" + s + "'";
        return {};
      },
      "ID");
}

}  // namespace kopt::cli
