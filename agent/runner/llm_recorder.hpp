// Where a campaign's LLM calls go: the llm_calls table of the store (never
// any credential: call_record has no field for one, and the store refuses a
// request that carries one). A call that ended the campaign's LLM use (a
// permanent error: bad key, quota, spend limit) also becomes an event, so
// the reason is visible in `kopt show campaign` and the logs.
#pragma once

#include <mutex>
#include <optional>

#include "llm/recorder.hpp"
#include "store/store.hpp"

namespace kopt::runner {

class store_call_recorder final : public llm::call_recorder {
 public:
  // Each call's row names the iteration its request carries
  // (llm::request::iteration_id), and its id goes back to the caller in
  // llm::completion::record_id, so that candidates can name their call.
  store_call_recorder(store::store& db, store::row_id campaign_id)
      : db_(db), campaign_id_(campaign_id) {}
  std::size_t failures() const noexcept { return failures_; }

 protected:
  std::optional<std::int64_t> do_record(const llm::call_record& r) override;

 private:
  std::mutex mu_;  // calls finish on several threads; one SQLite connection
  store::store& db_;
  store::row_id campaign_id_;
  std::size_t failures_ = 0;
};

// The store's status for a provider call outcome.
std::string store_status(llm::call_status s);

}  // namespace kopt::runner
