// Child processes without a shell: argv is passed as is (no interpolation),
// the environment is exactly what the caller gives (see scrubbed_environment),
// each child leads its own process group so a timeout kills everything it
// started, and output is bounded. Used for the GPU worker, the NVRTC compile
// children and the `command` LLM provider: all of them run untrusted or
// fallible code, so every wait has a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kopt {

// The environment a child that runs untrusted code may see: only an
// allow-list of variables (PATH, LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES,
// CUDA_*, TMPDIR, LANG/LC_*, HOME, KOPT_WORKER_*), so API keys, tokens and
// credentials of the daemon's environment never reach it.
std::vector<std::string> scrubbed_environment(const std::vector<std::string>& extra_allowed = {});

struct exit_status {
  bool exited = false;  // normal exit (code valid)
  int code = -1;
  int signal = 0;          // terminating signal, if any
  bool timed_out = false;  // we killed it at its deadline
  std::string describe() const;
};

class child_process {
 public:
  // Starts argv[0] (a path, or a name looked up in PATH) with the given
  // environment; stdin/stdout/stderr are pipes. Throws kopt::error when the
  // program cannot be started.
  child_process(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                bool merge_stderr = false);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const noexcept { return pid_; }

  // Writes everything (false if the child closed its stdin).
  bool write_all(std::string_view data);
  void close_stdin();

  // One line from stdout without the newline; nullopt on EOF or when the
  // deadline passes first (timed_out() tells which). Lines longer than
  // max_line are an error (the peer is not speaking the protocol).
  std::optional<std::string> read_line(std::chrono::steady_clock::time_point deadline,
                                       std::size_t max_line = std::size_t{64} << 20);
  bool timed_out() const noexcept { return timed_out_; }
  // Whether the line read_line() returned last ended with a newline (only
  // the very last line of the output may not).
  bool last_line_had_newline() const noexcept { return last_line_had_newline_; }

  // Everything the child wrote to stderr so far (bounded, drained on calls).
  std::string drain_stderr(std::size_t max_bytes = 1 << 20);

  // Waits until the deadline, then SIGKILLs the process group.
  exit_status wait(std::chrono::steady_clock::time_point deadline);
  void kill_group(int sig = 9);
  bool running();

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  void pump_stderr();
  std::string buf_;
  std::size_t head_ = 0;
  bool last_line_had_newline_ = true;
  std::string err_buf_;
  bool timed_out_ = false;
  bool reaped_ = false;
  exit_status status_;
};

struct run_result {
  exit_status status;
  std::string out, err;
  bool out_truncated = false;
};

// Runs to completion with the input on stdin, capturing at most max_output
// bytes of each stream; kills the process group at the timeout.
run_result run_capture(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       std::string_view input, std::chrono::milliseconds timeout,
                       std::size_t max_output = std::size_t{16} << 20);

// Absolute path of the running executable (/proc/self/exe).
std::string self_executable();

// For a child that must not outlive the process that started it (kopt-worker): a
// background thread checks every `period` whether this process has been reparented, i.e.
// its parent is gone, and then ends the process with std::_Exit(exit_code) after one line
// on stderr. Why: a worker runs in a process group of its own (so that kopt can kill
// what it started), so a `timeout` or kill of kopt alone used to leave the worker
// running its current request on the GPU for as long as that request took, and the
// next measurements on the GPU ran beside it. End of input alone is not the signal:
// a client may write its requests and close stdin before reading the answers.
// Returns false (nothing armed) when the parent is already init (pid 1), where a
// change of parent cannot be seen.
bool exit_when_parent_dies(int exit_code,
                           std::chrono::milliseconds period = std::chrono::milliseconds(250));

}  // namespace kopt
