// Progress of long commands (`kopt bench`, `kopt eval`) on stderr: on a
// terminal one line rewritten in place ("[2/14] rms_norm  workload 3/12
// t16_h4096  41 s elapsed, about 2m10s left"); when stderr is a pipe or a
// file, one plain line per step, so that logs keep every step with its
// time. Disabled (prints nothing) for --json, so that a script gets only
// the JSON on stdout and its usual messages.
//
// The estimate is the mean time of the steps done so far times the steps
// left: good enough for workloads of one operator, rough across operators.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace kopt::cli {

class progress_meter {
 public:
  // total: how many steps (workloads) the whole command has.
  progress_meter(bool enabled, std::size_t total);
  ~progress_meter();  // ends an in-place line
  progress_meter(const progress_meter&) = delete;
  progress_meter& operator=(const progress_meter&) = delete;

  bool enabled() const noexcept { return enabled_; }
  // A new phase (an operator of a suite): shown before its steps.
  void phase(const std::string& label);
  // A message that is not a step (starting the worker, compile checks).
  void note(const std::string& text);
  // One step finished (a workload evaluated).
  void step(const std::string& what);
  std::size_t done() const noexcept { return done_; }
  // Ends an in-place line before the command prints its result.
  void finish();

 private:
  void emit(const std::string& line, bool final_line);
  std::string timing() const;
  bool enabled_ = false;
  bool tty_ = false;
  bool open_line_ = false;  // a rewritable line is on the terminal
  std::size_t total_ = 0, done_ = 0;
  std::string label_;
  std::chrono::steady_clock::time_point start_;
};

// "4.2s", "3m05s", "1h02m".
std::string short_duration(double seconds);

}  // namespace kopt::cli
