#include "llm/clock.hpp"

#include <thread>

namespace kopt::llm {

void real_time::sleep_for(std::chrono::milliseconds d) {
  if (d.count() > 0) std::this_thread::sleep_for(d);
}

time_source& default_time() {
  static real_time t;
  return t;
}

std::chrono::steady_clock::time_point manual_clock::now() {
  std::lock_guard lock(mu_);
  return steady_;
}

std::chrono::system_clock::time_point manual_clock::wall_now() {
  std::lock_guard lock(mu_);
  return wall_;
}

void manual_clock::sleep_for(std::chrono::milliseconds d) {
  std::lock_guard lock(mu_);
  sleeps_.push_back(d);
  steady_ += d;
  wall_ += d;
}

void manual_clock::advance(std::chrono::milliseconds d) {
  std::lock_guard lock(mu_);
  steady_ += d;
  wall_ += d;
}

std::vector<std::chrono::milliseconds> manual_clock::sleeps() const {
  std::lock_guard lock(mu_);
  return sleeps_;
}

}  // namespace kopt::llm
