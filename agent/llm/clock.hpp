// Time for the LLM layer, behind an interface so that tests can check every
// retry delay and rate-limit wait without sleeping: a test passes a
// manual_clock that advances when slept on and remembers each sleep. Network
// timeouts inside curl use real time; only kopt's own waits go through here.
#pragma once

#include <chrono>
#include <mutex>
#include <vector>

namespace kopt::llm {

class time_source {
 public:
  virtual ~time_source() = default;
  virtual std::chrono::steady_clock::time_point now() = 0;
  // Wall clock, for HTTP dates in Retry-After.
  virtual std::chrono::system_clock::time_point wall_now() = 0;
  virtual void sleep_for(std::chrono::milliseconds d) = 0;
};

class real_time final : public time_source {
 public:
  std::chrono::steady_clock::time_point now() override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point wall_now() override {
    return std::chrono::system_clock::now();
  }
  void sleep_for(std::chrono::milliseconds d) override;
};

// The process-wide real clock.
time_source& default_time();

class manual_clock final : public time_source {
 public:
  explicit manual_clock(std::chrono::system_clock::time_point wall =
                            std::chrono::system_clock::time_point{
                                std::chrono::seconds{1'700'000'000}})
      : wall_(wall) {}
  std::chrono::steady_clock::time_point now() override;
  std::chrono::system_clock::time_point wall_now() override;
  void sleep_for(std::chrono::milliseconds d) override;
  void advance(std::chrono::milliseconds d);
  std::vector<std::chrono::milliseconds> sleeps() const;

 private:
  mutable std::mutex mu_;
  std::chrono::steady_clock::time_point steady_{std::chrono::hours{1}};
  std::chrono::system_clock::time_point wall_;
  std::vector<std::chrono::milliseconds> sleeps_;
};

}  // namespace kopt::llm
