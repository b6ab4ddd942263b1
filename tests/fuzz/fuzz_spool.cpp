// libFuzzer target: the spool's verdict on one file (daemon/spool_file.hpp):
// its name (arbitrary bytes, as a file system allows), its kind and size,
// and its content. examine_spool_file must never throw, must reject with a
// reason whenever it does not accept, and what it accepts must serialise
// to JSON (the store keeps it; a name or byte JSON cannot hold is exactly
// what once stopped the spool). Input layout: 1 byte name length, the
// name, 1 byte kind, then the content.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "daemon/spool_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t name_len = data[0] % 48;
  if (size < 2 + name_len) return 0;
  std::string rel(reinterpret_cast<const char*>(data + 1), name_len);
  rel += ".json";
  const auto kind = static_cast<kopt::daemon::spool_entry_kind>(data[1 + name_len] % 3);
  const std::string_view content(reinterpret_cast<const char*>(data + 2 + name_len),
                                 size - 2 - name_len);
  kopt::daemon::spool_verdict v;
  try {
    v = kopt::daemon::examine_spool_file(rel, kind, static_cast<std::int64_t>(content.size()),
                                         1 << 16, content, "/nonexistent/kopt-fuzz", {});
  } catch (...) {
    std::abort();  // documented never to throw
  }
  if (v.op.has_value() == !v.error.empty()) std::abort();  // accepted xor a reason
  if (v.op) {
    (void)v.op->snapshot().dump();
  } else {
    // The reason goes into the store and the .error.txt: it must be JSON-safe.
    (void)nlohmann::json(v.error).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  }
  (void)kopt::daemon::spool_name_problem(rel);
  return 0;
}
