#include "llm/sse.hpp"

namespace kopt::llm {

bool sse_parser::feed(std::string_view bytes, std::vector<sse_event>& out) {
  if (overflow_) return false;
  std::size_t i = 0;
  if (last_was_cr_ && !bytes.empty() && bytes[0] == '\n') i = 1;
  last_was_cr_ = false;
  std::size_t start = i;
  for (; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c != '\n' && c != '\r') continue;
    std::string_view piece = bytes.substr(start, i - start);
    if (partial_.empty()) {
      line(piece, out);
    } else {
      partial_.append(piece);
      line(partial_, out);
      partial_.clear();
    }
    if (overflow_) return false;
    if (c == '\r') {
      if (i + 1 < bytes.size()) {
        if (bytes[i + 1] == '\n') ++i;
      } else {
        last_was_cr_ = true;
      }
    }
    start = i + 1;
  }
  if (start < bytes.size()) {
    partial_.append(bytes.substr(start));
    if (partial_.size() > max_event_bytes_) {
      overflow_ = true;
      partial_.clear();
      return false;
    }
  }
  return true;
}

void sse_parser::line(std::string_view l, std::vector<sse_event>& out) {
  if (l.empty()) {
    // Blank line: dispatch. Per the spec an event with no data is dropped.
    if (data_seen_) {
      if (current_.event.empty()) current_.event = "message";
      out.push_back(std::move(current_));
    }
    current_ = sse_event{};
    data_seen_ = false;
    has_fields_ = false;
    return;
  }
  if (l.front() == ':') return;  // comment (keep-alive)
  std::string_view field = l;
  std::string_view value;
  if (const auto colon = l.find(':'); colon != std::string_view::npos) {
    field = l.substr(0, colon);
    value = l.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  has_fields_ = true;
  if (field == "data") {
    if (data_seen_) current_.data.push_back('\n');
    current_.data.append(value);
    data_seen_ = true;
  } else if (field == "event") {
    current_.event.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) current_.id.assign(value);
  }
  // "retry" and unknown fields are ignored: we reconnect on our own terms.
  if (current_.data.size() + current_.event.size() + current_.id.size() > max_event_bytes_) {
    overflow_ = true;
    current_ = sse_event{};
  }
}

bool sse_parser::finish() const noexcept {
  return !overflow_ && partial_.empty() && !has_fields_;
}

}  // namespace kopt::llm
