// The campaign's handle on its LLM: one provider plus what every call must
// go through. Before a call: the stop latch (an earlier permanent error such
// as a revoked key or exhausted quota stops all further calls, with the
// reason kept), the budget (tokens and USD; see accounting.hpp for the
// at-most-one-call overrun rule) and the concurrency limit. After a call:
// cost from the price table, redaction of every text, and one record per
// call in the call_recorder (the store). Calls may be made from several
// threads; `submit` runs them in the background.
#pragma once

#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "llm/accounting.hpp"
#include "llm/provider.hpp"
#include "llm/recorder.hpp"

namespace kopt::llm {

struct client_options {
  budget* campaign_budget = nullptr;  // shared by the campaign's calls; may be null
  call_recorder* recorder = nullptr;  // may be null
  price_table prices;
  int max_concurrency = 4;
};

class llm_client {
 public:
  llm_client(std::unique_ptr<provider> p, client_options opts);
  ~llm_client();
  llm_client(const llm_client&) = delete;
  llm_client& operator=(const llm_client&) = delete;

  completion call(const request& r);
  // Runs call() on another thread; the client must outlive the future.
  std::future<completion> submit(request r);

  // Why LLM use stopped (a permanent error), or nullopt while it goes on.
  std::optional<std::string> stopped() const;
  const provider& backend() const noexcept { return *provider_; }

 private:
  std::optional<std::int64_t> record(const request& r, const completion& c,
                                     std::chrono::system_clock::time_point started);

  std::unique_ptr<provider> provider_;
  client_options opts_;
  std::optional<price> price_;
  redactor redact_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  std::optional<std::string> stopped_;
};

}  // namespace kopt::llm
