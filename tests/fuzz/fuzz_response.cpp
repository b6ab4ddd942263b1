// libFuzzer target: the JSON response parsers of the three APIs (whole
// bodies, error bodies) and their stream accumulators fed with SSE parsed
// from the same bytes. Untrusted network input must never crash or throw.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "llm/sse.hpp"
#include "llm/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto o = kopt::llm::parse_openai_response(in);
  const auto a = kopt::llm::parse_anthropic_response(in);
  const auto r = kopt::llm::parse_responses_response(in);
  if (r.ok && !r.problem.empty()) std::abort();
  if (o.ok && !o.problem.empty()) std::abort();
  if (a.ok && !a.problem.empty()) std::abort();
  (void)kopt::llm::parse_api_error(in);

  kopt::llm::sse_parser p(1u << 16);
  std::vector<kopt::llm::sse_event> events;
  p.feed(in, events);
  kopt::llm::openai_stream_accumulator os;
  kopt::llm::anthropic_stream_accumulator as;
  kopt::llm::responses_stream_accumulator rs;
  for (const auto& e : events) {
    os.on_event(e);
    as.on_event(e);
    rs.on_event(e);
  }
  if (rs.answer().tokens.prompt < 0) std::abort();
  if (os.answer().tokens.prompt < 0 || as.answer().tokens.completion < 0) std::abort();
  return 0;
}
