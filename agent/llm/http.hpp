// One HTTP POST over libcurl with the limits an unattended client needs:
// a connect timeout, a first-byte timeout, a stall timeout (no byte for that
// long, checked between stream events too), a total cap, and a cap on the
// response size. TLS verification is always on (an optional CA bundle may be
// named, never "insecure"); redirects are not followed (they would carry the
// key elsewhere); proxies come from the standard environment variables
// (https_proxy, no_proxy...), which libcurl reads itself. Failures are
// returned as data: the provider decides what to retry.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "llm/retry.hpp"

namespace kopt::llm {

struct http_timeouts {
  std::chrono::milliseconds connect{10'000};
  // Until the first response byte: a non-streamed answer arrives in one piece
  // after the model has finished, so this is long for those.
  std::chrono::milliseconds first_byte{300'000};
  std::chrono::milliseconds stall{60'000};  // between two received bytes
  std::chrono::milliseconds total{600'000};
};

struct http_request {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"; may hold the key: never log them
  std::string body;
  http_timeouts timeouts;
  std::size_t max_response_bytes = 8u << 20;
  std::string ca_bundle;  // empty: the system's
};

enum class transport_error {
  none,
  connect,  // DNS, refused, connect timeout
  timeout_first_byte,
  timeout_stall,
  timeout_total,
  connection,  // reset, closed early, partial body
  too_large,
  tls,      // certificate or handshake: not retried, a config problem
  aborted,  // the body consumer asked to stop
  other,
};

const char* transport_error_name(transport_error e) noexcept;

struct http_response {
  int status = 0;
  header_map headers;  // lower-case names
  std::string body;    // whole body, unless streamed to the consumer with a 2xx status
  transport_error error = transport_error::none;
  std::string error_text;
};

// Receives the body of a 2xx response as it arrives; returns false to abort.
using body_consumer = std::function<bool(std::string_view)>;

class http_transport {
 public:
  virtual ~http_transport() = default;
  virtual http_response post(const http_request& req, const body_consumer& on_body) = 0;
};

// libcurl, one easy handle per call (calls may run on several threads).
class curl_transport final : public http_transport {
 public:
  curl_transport();
  http_response post(const http_request& req, const body_consumer& on_body) override;
  static std::string version();
};

}  // namespace kopt::llm
