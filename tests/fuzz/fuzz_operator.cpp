// libFuzzer target: the operator config loader (JSON scanner with
// positions, validator, expressions, source-file reads). Loading never
// throws for any bytes: every problem is a diagnostic. A config that loads
// must also serialise (snapshot, content hash: what the store keeps) and
// its per-workload sizes either evaluate or throw config_error, as
// operator.hpp promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/error.hpp"
#include "config/operator.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kopt::config::file_policy policy;
  // A spool-like policy with a directory that does not exist: source_file
  // reads are refused, so the fuzzer cannot wander the file system.
  policy.confine_to = "/nonexistent/kopt-fuzz";
  const auto r =
      kopt::config::load_operator_text(text, "fuzz.json", "/nonexistent/kopt-fuzz", policy);
  for (const auto& d : r.diagnostics) (void)d.to_string();
  if (!r.ok()) return 0;
  const auto& op = *r.op;
  (void)op.snapshot().dump();
  (void)op.content_hash();
  for (const auto& w : op.workloads) {
    try {
      for (const auto& t : op.inputs) (void)kopt::config::tensor_bytes(op, t, w);
      for (const auto& t : op.outputs) (void)kopt::config::tensor_bytes(op, t, w);
      (void)kopt::config::roofline_flops(op, w);
      (void)kopt::config::roofline_bytes(op, w);
    } catch (const kopt::config_error&) {
    }
  }
  return 0;
}
