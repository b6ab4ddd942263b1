// Where every LLM call is recorded. The store implements call_recorder (one
// row per call); tests use memory_recorder; jsonl_recorder writes a
// transcript that the replay provider can play back. A record holds what was
// asked and answered, how it ended and what it cost, but never a key: the
// client redacts every text before it gets here.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llm/types.hpp"

namespace kopt::llm {

struct call_record {
  std::string provider;
  std::string model;
  std::string tag;                           // the request's tag (campaign, iteration)
  std::optional<std::int64_t> iteration_id;  // the request's iteration row
  std::string prompt;                        // prompt_json(request) serialised
  std::string prompt_sha256;
  std::string response;            // the answer text (the first when the call asked for n > 1)
  std::vector<std::string> texts;  // every answer of an n > 1 call; else empty
  nlohmann::json meta = nlohmann::json::object();  // the request's meta (what the caller showed)
  std::string reasoning;
  std::string stop_reason;
  call_status status = call_status::ok;
  int http_status = 0;
  int attempts = 0;
  usage tokens;
  double cost_usd = 0;
  std::chrono::milliseconds latency{0};
  std::string error;
  std::chrono::system_clock::time_point started;
};

// The prompt as recorded and replayed: {"system": ..., "messages": [...]}.
nlohmann::json prompt_json(const request& r);
nlohmann::json to_json(const call_record& r);

class call_recorder {
 public:
  virtual ~call_recorder() = default;
  // Must not throw for a full disk or a busy database: the call happened
  // either way; implementations log their own failures. Returns the id of
  // the row kept for the call when the recorder keeps rows (the store).
  std::optional<std::int64_t> record(const call_record& r) { return do_record(r); }

 protected:
  virtual std::optional<std::int64_t> do_record(const call_record& r) = 0;
};

class memory_recorder final : public call_recorder {
 public:
  std::vector<call_record> records() const;

 protected:
  std::optional<std::int64_t> do_record(const call_record& r) override;

 private:
  mutable std::mutex mu_;
  std::vector<call_record> records_;
};

// Appends one JSON object per call (to_json) to a file, for replay.
class jsonl_recorder final : public call_recorder {
 public:
  explicit jsonl_recorder(
      const std::filesystem::path& path);  // throws kopt::error if it cannot open

 protected:
  std::optional<std::int64_t> do_record(const call_record& r) override;

 private:
  std::mutex mu_;
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace kopt::llm
