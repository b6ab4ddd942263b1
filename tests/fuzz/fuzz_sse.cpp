// libFuzzer target: the SSE parser. Besides "no crash, no leak, no UB", it
// checks a property: feeding the same bytes in two arbitrary chunks gives the
// same events as feeding them at once (curl splits streams anywhere).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "llm/sse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t split = data[0] % size;
  const std::string_view all(reinterpret_cast<const char*>(data + 1), size - 1);

  kopt::llm::sse_parser whole(4096);
  std::vector<kopt::llm::sse_event> a;
  whole.feed(all, a);

  kopt::llm::sse_parser parts(4096);
  std::vector<kopt::llm::sse_event> b;
  const std::size_t cut = split < all.size() ? split : all.size();
  parts.feed(all.substr(0, cut), b);
  parts.feed(all.substr(cut), b);

  if (whole.overflowed() != parts.overflowed()) return 0;  // the limit may trip at different points
  if (whole.overflowed()) return 0;
  if (a.size() != b.size() || whole.finish() != parts.finish()) std::abort();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].event != b[i].event || a[i].data != b[i].data || a[i].id != b[i].id) std::abort();
  }
  return 0;
}
