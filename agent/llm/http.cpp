#include "llm/http.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

#include "common/error.hpp"

namespace kopt::llm {
namespace {

using clk = std::chrono::steady_clock;

struct transfer {
  const http_request* req = nullptr;
  const body_consumer* consumer = nullptr;
  CURL* curl = nullptr;
  http_response* resp = nullptr;
  clk::time_point start;
  clk::time_point last_byte;
  bool any_byte = false;
  std::size_t received = 0;
  transport_error abort_reason = transport_error::none;
  bool header_status_seen = false;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<transfer*>(user);
  const std::string_view line(data, size * n);
  t->last_byte = clk::now();
  t->any_byte = true;
  if (line.rfind("HTTP/", 0) == 0) {
    t->resp->headers.clear();  // a 100 Continue or proxy CONNECT precedes the real one
    return size * n;
  }
  const auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name = lower(std::string(line.substr(0, colon)));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
      value.remove_suffix(1);
    t->resp->headers[name] = std::string(value);
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<transfer*>(user);
  const size_t len = size * n;
  t->last_byte = clk::now();
  t->any_byte = true;
  t->received += len;
  if (t->received > t->req->max_response_bytes) {
    t->abort_reason = transport_error::too_large;
    return 0;  // makes curl fail with CURLE_WRITE_ERROR
  }
  long code = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
  if (code >= 200 && code < 300 && t->consumer != nullptr && *t->consumer) {
    if (!(*t->consumer)(std::string_view(data, len))) {
      t->abort_reason = transport_error::aborted;
      return 0;
    }
  } else {
    t->resp->body.append(data, len);
  }
  return len;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<transfer*>(user);
  const auto now = clk::now();
  const auto& to = t->req->timeouts;
  if (!t->any_byte) {
    if (now - t->start > to.first_byte) {
      t->abort_reason = transport_error::timeout_first_byte;
      return 1;
    }
  } else if (now - t->last_byte > to.stall) {
    t->abort_reason = transport_error::timeout_stall;
    return 1;
  }
  return 0;
}

struct curl_deleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct slist_deleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

void global_init() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (rc != CURLE_OK)
    throw error(std::string("curl_global_init failed: ") + curl_easy_strerror(rc));
}

template <typename T>
void set(CURL* c, CURLoption opt, T value, const char* what) {
  const CURLcode rc = curl_easy_setopt(c, opt, value);
  if (rc != CURLE_OK)
    throw error(std::string("curl_easy_setopt(") + what + ") failed: " + curl_easy_strerror(rc));
}

}  // namespace

const char* transport_error_name(transport_error e) noexcept {
  switch (e) {
    case transport_error::none:
      return "none";
    case transport_error::connect:
      return "connect";
    case transport_error::timeout_first_byte:
      return "timeout waiting for the first byte";
    case transport_error::timeout_stall:
      return "stalled";
    case transport_error::timeout_total:
      return "total time limit reached";
    case transport_error::connection:
      return "connection failed mid-transfer";
    case transport_error::too_large:
      return "response too large";
    case transport_error::tls:
      return "TLS";
    case transport_error::aborted:
      return "aborted";
    case transport_error::other:
      return "other";
  }
  return "unknown";
}

curl_transport::curl_transport() {
  global_init();
}

std::string curl_transport::version() {
  return curl_version();
}

http_response curl_transport::post(const http_request& req, const body_consumer& consumer) {
  http_response resp;
  std::unique_ptr<CURL, curl_deleter> curl(curl_easy_init());
  if (!curl) throw error("curl_easy_init failed");
  CURL* c = curl.get();

  transfer t;
  t.req = &req;
  t.consumer = &consumer;
  t.curl = c;
  t.resp = &resp;
  t.start = t.last_byte = clk::now();

  std::unique_ptr<curl_slist, slist_deleter> headers;
  for (const std::string& h : req.headers) {
    curl_slist* next = curl_slist_append(headers.get(), h.c_str());
    if (next == nullptr) throw error("curl_slist_append failed");
    (void)headers.release();
    headers.reset(next);
  }

  char errbuf[CURL_ERROR_SIZE] = {0};
  set(c, CURLOPT_URL, req.url.c_str(), "URL");
  set(c, CURLOPT_NOSIGNAL, 1L, "NOSIGNAL");
  set(c, CURLOPT_ERRORBUFFER, errbuf, "ERRORBUFFER");
  set(c, CURLOPT_POST, 1L, "POST");
  set(c, CURLOPT_POSTFIELDS, req.body.c_str(), "POSTFIELDS");
  set(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()), "POSTFIELDSIZE");
  set(c, CURLOPT_HTTPHEADER, headers.get(), "HTTPHEADER");
  set(c, CURLOPT_PROTOCOLS_STR, "http,https", "PROTOCOLS_STR");
  set(c, CURLOPT_FOLLOWLOCATION, 0L, "FOLLOWLOCATION");
  // Verification stays on; kopt has no switch to turn it off.
  set(c, CURLOPT_SSL_VERIFYPEER, 1L, "SSL_VERIFYPEER");
  set(c, CURLOPT_SSL_VERIFYHOST, 2L, "SSL_VERIFYHOST");
  if (!req.ca_bundle.empty()) set(c, CURLOPT_CAINFO, req.ca_bundle.c_str(), "CAINFO");
  set(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(req.timeouts.connect.count()),
      "CONNECTTIMEOUT_MS");
  set(c, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeouts.total.count()), "TIMEOUT_MS");
  set(c, CURLOPT_ACCEPT_ENCODING, "", "ACCEPT_ENCODING");
  set(c, CURLOPT_TCP_KEEPALIVE, 1L, "TCP_KEEPALIVE");
  set(c, CURLOPT_HEADERFUNCTION, on_header, "HEADERFUNCTION");
  set(c, CURLOPT_HEADERDATA, &t, "HEADERDATA");
  set(c, CURLOPT_WRITEFUNCTION, on_body, "WRITEFUNCTION");
  set(c, CURLOPT_WRITEDATA, &t, "WRITEDATA");
  set(c, CURLOPT_NOPROGRESS, 0L, "NOPROGRESS");
  set(c, CURLOPT_XFERINFOFUNCTION, on_progress, "XFERINFOFUNCTION");
  set(c, CURLOPT_XFERINFODATA, &t, "XFERINFODATA");

  const CURLcode rc = curl_easy_perform(c);
  long code = 0;
  if (curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK)
    resp.status = static_cast<int>(code);
  if (rc == CURLE_OK) return resp;

  resp.error_text =
      std::string(curl_easy_strerror(rc)) + (errbuf[0] != '\0' ? std::string(": ") + errbuf : "");
  if (t.abort_reason != transport_error::none) {
    resp.error = t.abort_reason;
    switch (t.abort_reason) {
      case transport_error::too_large:
        resp.error_text = "more than " + std::to_string(req.max_response_bytes) + " bytes";
        break;
      case transport_error::timeout_stall:
        resp.error_text = "no data for " + std::to_string(req.timeouts.stall.count()) + " ms";
        break;
      case transport_error::timeout_first_byte:
        resp.error_text =
            "no response within " + std::to_string(req.timeouts.first_byte.count()) + " ms";
        break;
      default:
        resp.error_text = "the response consumer stopped the transfer";
        break;
    }
    return resp;
  }
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
      resp.error = transport_error::connect;
      break;
    case CURLE_OPERATION_TIMEDOUT:
      resp.error = (resp.status == 0 && !t.any_byte && clk::now() - t.start < req.timeouts.total)
                       ? transport_error::connect
                       : transport_error::timeout_total;
      break;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
      resp.error = transport_error::tls;
      break;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      resp.error = transport_error::connection;
      break;
    default:
      resp.error = transport_error::other;
      break;
  }
  return resp;
}

}  // namespace kopt::llm
