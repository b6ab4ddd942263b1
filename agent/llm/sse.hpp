// Incremental parser for Server-Sent Events (the WHATWG event-stream
// format), as OpenAI and Anthropic use it for streamed answers. Bytes arrive
// in arbitrary chunks from curl, so the parser keeps partial lines between
// calls and accepts \n, \r\n and a lone \r as line ends even when a \r\n pair
// is split across chunks. An event whose blank-line terminator never arrived
// (the connection was cut) is not dispatched: the caller learns the stream
// ended early from `finish()` and from the missing terminal event.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kopt::llm {

struct sse_event {
  std::string event;  // "message" when the stream named none
  std::string data;   // data lines joined with \n
  std::string id;
};

class sse_parser {
 public:
  // A single line or event above this size makes the stream invalid: a
  // server that never sends a line end must not grow our memory without bound.
  explicit sse_parser(std::size_t max_event_bytes = 16u << 20)
      : max_event_bytes_(max_event_bytes) {}

  // Consumes bytes; complete events are appended to `out`. Returns false once
  // the stream exceeded the size limit (later calls do nothing).
  bool feed(std::string_view bytes, std::vector<sse_event>& out);
  // End of stream. Returns true if nothing was left half-received (no partial
  // line and no event awaiting its blank line).
  bool finish() const noexcept;
  bool overflowed() const noexcept { return overflow_; }

 private:
  void line(std::string_view l, std::vector<sse_event>& out);

  std::size_t max_event_bytes_;
  std::string partial_;       // bytes of the current, unterminated line
  bool last_was_cr_ = false;  // previous chunk ended in \r: a leading \n is its pair
  bool overflow_ = false;
  bool has_fields_ = false;  // the current event has received a field
  sse_event current_;
  bool data_seen_ = false;
};

}  // namespace kopt::llm
