#include "common/text.hpp"

namespace kopt {

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
std::size_t sequence_at(std::string_view s, std::size_t i) noexcept {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t len = 0;
  unsigned min = 0;
  unsigned cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    len = 2, min = 0x80, cp = c & 0x1Fu;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, min = 0x800, cp = c & 0x0Fu;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, cp = c & 0x07u;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

std::size_t invalid_utf8_at(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_at(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string printable_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  static constexpr char hex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_at(s, i);
    if (n == 0) {
      const auto c = static_cast<unsigned char>(s[i]);
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace kopt
