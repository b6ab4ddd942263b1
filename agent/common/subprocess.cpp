#include "common/subprocess.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.hpp"

extern char** environ;

namespace kopt {
namespace {

void set_cloexec_nonblock(int fd, bool nonblock) {
  int fl = fcntl(fd, F_GETFD);
  if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
    throw kopt::error(fmt::format("fcntl(FD_CLOEXEC): {}", std::strerror(errno)));
  if (nonblock) {
    int st = fcntl(fd, F_GETFL);
    if (st < 0 || fcntl(fd, F_SETFL, st | O_NONBLOCK) < 0)
      throw kopt::error(fmt::format("fcntl(O_NONBLOCK): {}", std::strerror(errno)));
  }
}

int ms_until(std::chrono::steady_clock::time_point deadline) {
  const auto now = std::chrono::steady_clock::now();
  if (deadline <= now) return 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms) + 1;
}

bool allowed_name(std::string_view name, const std::vector<std::string>& extra) {
  // KOPT_CACHE_DIR and XDG_CACHE_HOME are paths, not credentials: without
  // them a worker started by kopt put its cubins and CUPTI images under
  // ~/.cache/kopt whatever the user had set (found by the fidelity benchmark
  // on the H200).
  static constexpr std::array<std::string_view, 10> exact = {
      "PATH", "LD_LIBRARY_PATH",      "TMPDIR", "LANG",           "HOME",
      "TZ",   "CUDA_VISIBLE_DEVICES", "USER",   "KOPT_CACHE_DIR", "XDG_CACHE_HOME"};
  for (auto e : exact)
    if (name == e) return true;
  for (const auto& e : extra)
    if (name == e) return true;
  auto starts = [&](std::string_view p) { return name.substr(0, p.size()) == p; };
  if (starts("LC_") || starts("KOPT_WORKER_") || starts("ASAN_") || starts("UBSAN_")) return true;
  // CUDA_* configures the driver/JIT cache; none of it is a credential.
  if (starts("CUDA_")) return true;
  // SLURM_*: an `srun` launch prefix needs SLURM_CONF and, when the daemon
  // runs inside an allocation, its job's variables. SLURM_JWT is a token.
  if (starts("SLURM_") && name != "SLURM_JWT") return true;
  return false;
}

}  // namespace

std::vector<std::string> scrubbed_environment(const std::vector<std::string>& extra_allowed) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    if (allowed_name(kv.substr(0, eq), extra_allowed)) env.emplace_back(kv);
  }
  return env;
}

std::string exit_status::describe() const {
  if (timed_out) return "killed at its time limit";
  if (exited) return fmt::format("exited with code {}", code);
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
  return "unknown exit";
}

child_process::child_process(const std::vector<std::string>& argv,
                             const std::vector<std::string>& env, bool merge_stderr) {
  if (argv.empty()) throw kopt::error("child_process: empty argv");
  // O_CLOEXEC from the start: another thread may spawn a child between our
  // pipe() and spawn, and a child that inherits the write end of this
  // child's stdin keeps it from ever seeing EOF. dup2 onto 0/1/2 in the
  // spawned child clears the flag where it must.
  int pin[2], pout[2], perr[2];
  if (pipe2(pin, O_CLOEXEC) != 0 || pipe2(pout, O_CLOEXEC) != 0 || pipe2(perr, O_CLOEXEC) != 0)
    throw kopt::error(fmt::format("pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, pin[0], 0);
  posix_spawn_file_actions_adddup2(&fa, pout[1], 1);
  posix_spawn_file_actions_adddup2(&fa, merge_stderr ? pout[1] : perr[1], 2);
  for (int fd : {pin[0], pin[1], pout[0], pout[1], perr[0], perr[1]})
    posix_spawn_file_actions_addclose(&fa, fd);
  // Own process group: a timeout kills the child and anything it started.
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t def;
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &def);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const int rc = argv[0].find('/') != std::string::npos
                     ? posix_spawn(&pid_, argv[0].c_str(), &fa, &attr, cargv.data(), cenv.data())
                     : posix_spawnp(&pid_, argv[0].c_str(), &fa, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(pin[0]);
  close(pout[1]);
  close(perr[1]);
  if (rc != 0) {
    close(pin[1]);
    close(pout[0]);
    close(perr[0]);
    throw kopt::error(fmt::format("cannot start {}: {}", argv[0], std::strerror(rc)));
  }
  in_ = pin[1];
  out_ = pout[0];
  err_ = perr[0];
  set_cloexec_nonblock(in_, false);
  set_cloexec_nonblock(out_, true);
  set_cloexec_nonblock(err_, true);
}

child_process::~child_process() {
  if (!reaped_ && pid_ > 0) {
    kill_group(SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
  }
  for (int fd : {in_, out_, err_})
    if (fd >= 0) close(fd);
}

bool child_process::write_all(std::string_view data) {
  if (in_ < 0) return false;
  // SIGPIPE would kill us if the child died; ignore it for this write.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  bool ok = true;
  while (!data.empty()) {
    const ssize_t n = ::write(in_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      ok = false;
      break;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  if (!ok) {
    // Consume a pending SIGPIPE so it is not delivered when we unblock.
    timespec zero{0, 0};
    sigtimedwait(&block, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

void child_process::close_stdin() {
  if (in_ >= 0) {
    close(in_);
    in_ = -1;
  }
}

std::optional<std::string> child_process::read_line(std::chrono::steady_clock::time_point deadline,
                                                    std::size_t max_line) {
  timed_out_ = false;
  for (;;) {
    // head_ marks what was already returned, so a burst of short lines costs
    // one compaction per read, not one copy of the buffer per line.
    if (auto nl = buf_.find('\n', head_); nl != std::string::npos) {
      std::string line = buf_.substr(head_, nl - head_);
      head_ = nl + 1;
      last_line_had_newline_ = true;
      return line;
    }
    if (head_ > 0) {
      buf_.erase(0, head_);
      head_ = 0;
    }
    if (buf_.size() > max_line)
      throw kopt::error("child process wrote a line longer than the limit");
    if (out_ < 0) {
      if (!buf_.empty()) {  // last line without newline
        std::string line = std::move(buf_);
        buf_.clear();
        last_line_had_newline_ = false;
        return line;
      }
      return std::nullopt;
    }
    // stderr is drained while we wait for stdout: a child that logs a lot
    // must never block on a full stderr pipe while we wait for its answer.
    pollfd p[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
    const int rc = poll(p, err_ >= 0 ? 2 : 1, ms_until(deadline));
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw kopt::error(fmt::format("poll: {}", std::strerror(errno)));
    }
    if (rc == 0) {
      timed_out_ = true;
      return std::nullopt;
    }
    if (err_ >= 0 && (p[1].revents & (POLLIN | POLLHUP))) pump_stderr();
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char chunk[65536];
    const ssize_t n = ::read(out_, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw kopt::error(fmt::format("read from child: {}", std::strerror(errno)));
    }
    if (n == 0) {
      close(out_);
      out_ = -1;
      continue;
    }
    buf_.append(chunk, static_cast<std::size_t>(n));
  }
}

void child_process::pump_stderr() {
  if (err_ < 0) return;
  char chunk[8192];
  for (;;) {
    const ssize_t n = ::read(err_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      close(err_);
      err_ = -1;
      return;
    }
    if (n < 0) return;  // EAGAIN: nothing more now
    // Keep the most recent megabyte: the end of a log says why it failed.
    err_buf_.append(chunk, static_cast<std::size_t>(n));
    if (err_buf_.size() > (std::size_t{1} << 20))
      err_buf_.erase(0, err_buf_.size() - (std::size_t{1} << 20));
  }
}

std::string child_process::drain_stderr(std::size_t max_bytes) {
  pump_stderr();
  std::string s = std::move(err_buf_);
  err_buf_.clear();
  if (s.size() > max_bytes) s.erase(0, s.size() - max_bytes);
  return s;
}

void child_process::kill_group(int sig) {
  if (pid_ > 0 && !reaped_) {
    ::kill(-pid_, sig);
    ::kill(pid_, sig);
  }
}

bool child_process::running() {
  if (reaped_) return false;
  int st = 0;
  const pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_.exited = WIFEXITED(st);
    status_.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    status_.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    return false;
  }
  return true;
}

exit_status child_process::wait(std::chrono::steady_clock::time_point deadline) {
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill_group(SIGKILL);
      int st = 0;
      waitpid(pid_, &st, 0);
      reaped_ = true;
      status_ = {};
      status_.timed_out = true;
      status_.signal = SIGKILL;
      return status_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // The child is gone; anything it started in its group goes too.
  ::kill(-pid_, SIGKILL);
  return status_;
}

run_result run_capture(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       std::string_view input, std::chrono::milliseconds timeout,
                       std::size_t max_output) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  child_process c(argv, env);
  run_result r;
  std::thread writer([&] {
    c.write_all(input);
    c.close_stdin();
  });
  std::string err;
  for (;;) {
    auto line = c.read_line(deadline, std::size_t{1} << 40);
    if (!line) break;
    if (r.out.size() < max_output) {
      r.out.append(*line);
      if (c.last_line_had_newline()) r.out.push_back('\n');
      if (r.out.size() > max_output) {
        r.out.resize(max_output);
        r.out_truncated = true;
      }
    } else {
      r.out_truncated = true;
    }
  }
  r.status = c.wait(c.timed_out() ? std::chrono::steady_clock::now() : deadline);
  if (c.timed_out()) r.status.timed_out = true;
  writer.join();
  r.err += c.drain_stderr(max_output > r.err.size() ? max_output - r.err.size() : 0);
  return r;
}

bool exit_when_parent_dies(int exit_code, std::chrono::milliseconds period) {
  const pid_t parent = getppid();
  if (parent <= 1) return false;
  std::thread([parent, exit_code, period] {
    for (;;) {
      std::this_thread::sleep_for(period);
      if (getppid() == parent) continue;
      // Only async-signal-safe calls from here: other threads may hold any lock.
      char msg[128];
      const int n = std::snprintf(msg, sizeof msg, "kopt: parent process %d is gone; exiting\n",
                                  static_cast<int>(parent));
      if (n > 0 && ::write(2, msg, static_cast<std::size_t>(n)) < 0) {
        // nothing to do: the process ends either way
      }
      std::_Exit(exit_code);
    }
  }).detach();
  return true;
}

std::string self_executable() {
  std::array<char, 4096> buf{};
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw kopt::error(fmt::format("readlink(/proc/self/exe): {}", std::strerror(errno)));
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

}  // namespace kopt
