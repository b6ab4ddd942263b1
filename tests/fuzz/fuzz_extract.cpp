// libFuzzer target: the candidate extractor. A successful extraction must
// hold a source and a non-empty launch list; a failed one must explain itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "llm/extract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto x = kopt::llm::extract_candidate(in);
  if (x.ok()) {
    const auto& c = *x.candidate;
    if (!c.contains("source") || !c["source"].is_string()) std::abort();
    if (!c.contains("launches") || !c["launches"].is_array() || c["launches"].empty()) std::abort();
    (void)c.dump();
  } else if (x.problems.empty() || x.feedback().empty()) {
    std::abort();
  }
  return 0;
}
