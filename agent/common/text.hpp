// UTF-8 checks for text that ends up in JSON. nlohmann::json cannot dump a
// string that is not valid UTF-8 (it throws type_error 316), and everything
// kopt stores, logs as JSON or prints with --json is JSON: a file name or a
// file's bytes from outside (a spool file named in Latin-1, a source file
// with a Latin-1 comment) must be checked or made printable before it gets
// there, or one bad name stops whatever loop handles it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kopt {

// Offset of the first byte that breaks UTF-8 (overlong forms, surrogates
// and code points above U+10FFFF included), or npos when the text is valid.
std::size_t invalid_utf8_at(std::string_view s) noexcept;

// The text with every byte that breaks UTF-8 written as \xNN: valid UTF-8
// that shows which bytes were there, for names in messages and JSON.
std::string printable_utf8(std::string_view s);

}  // namespace kopt
