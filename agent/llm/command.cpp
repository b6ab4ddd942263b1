// The command provider: an agent CLI as a child process. No shell is
// involved (argv is executed as given), the prompt goes to stdin over a
// socket (so a child that exits early cannot kill kopt with SIGPIPE), and the
// child runs in its own process group so that a time or size limit kills
// everything it started.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "llm/provider.hpp"

extern char** environ;

namespace kopt::llm {
namespace {

std::string prompt_text(const request& r) {
  std::string out;
  if (!r.system.empty()) out += r.system + "\n\n";
  if (r.messages.size() == 1) return out + r.messages[0].content;
  for (const message& m : r.messages) out += "## " + m.role + "\n\n" + m.content + "\n\n";
  return out;
}

struct fd_closer {
  int fd = -1;
  ~fd_closer() {
    if (fd >= 0) ::close(fd);
  }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

}  // namespace

command_provider::command_provider(const provider_config& cfg)
    : provider("command", cfg.model), cfg_(cfg) {
  if (cfg_.command.empty() || cfg_.command[0].empty()) {
    throw config_error(
        "llm.command must be a non-empty list: the program and its arguments (no shell)");
  }
}

completion command_provider::complete(const request& r) {
  using clk = std::chrono::steady_clock;
  completion out;
  out.attempts = 1;
  out.model = model();
  const auto start = clk::now();
  const std::string input = prompt_text(r);

  int in_pair[2];
  int out_pipe[2];
  int err_pipe[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pair) != 0) {
    throw error(std::string("socketpair for the command provider failed: ") + std::strerror(errno));
  }
  fd_closer in_parent{in_pair[0]}, in_child{in_pair[1]};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw error(std::string("pipe2 failed: ") + std::strerror(errno));
  fd_closer out_parent{out_pipe[0]}, out_child{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw error(std::string("pipe2 failed: ") + std::strerror(errno));
  fd_closer err_parent{err_pipe[0]}, err_child{err_pipe[1]};

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  if (posix_spawn_file_actions_init(&fa) != 0 || posix_spawnattr_init(&attr) != 0) {
    throw error("posix_spawn initialisation failed");
  }
  posix_spawn_file_actions_adddup2(&fa, in_child.fd, 0);
  posix_spawn_file_actions_adddup2(&fa, out_child.fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_child.fd, 2);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigdefault(&attr, &all);

  std::vector<char*> argv;
  for (const std::string& a : cfg_.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  in_child.close();
  out_child.close();
  err_child.close();
  if (rc != 0) {
    out.status = call_status::permanent;
    out.error = "cannot run " + cfg_.command[0] + ": " + std::strerror(rc);
    return out;
  }

  ::fcntl(in_parent.fd, F_SETFL, O_NONBLOCK);
  std::size_t written = 0;
  std::string stdout_text;
  std::string stderr_text;
  std::string failure;
  call_status failure_status = call_status::ok;
  bool out_open = true;
  bool err_open = true;
  if (input.empty()) in_parent.close();
  while (out_open || err_open) {
    const auto elapsed = clk::now() - start;
    if (elapsed >= cfg_.command_timeout) {
      failure = "the command ran longer than its time limit (" +
                std::to_string(cfg_.command_timeout.count()) + " ms) and was killed";
      failure_status = call_status::timeout;
      break;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.command_timeout - elapsed);
    pollfd fds[3];
    nfds_t n = 0;
    int out_i = -1, err_i = -1, in_i = -1;
    if (out_open) {
      fds[n] = {out_parent.fd, POLLIN, 0};
      out_i = static_cast<int>(n++);
    }
    if (err_open) {
      fds[n] = {err_parent.fd, POLLIN, 0};
      err_i = static_cast<int>(n++);
    }
    if (in_parent.fd >= 0) {
      fds[n] = {in_parent.fd, POLLOUT, 0};
      in_i = static_cast<int>(n++);
    }
    const int pr = ::poll(fds, n, static_cast<int>(std::min<std::int64_t>(left.count() + 1, 1000)));
    if (pr < 0) {
      if (errno == EINTR) continue;
      failure = std::string("poll failed: ") + std::strerror(errno);
      failure_status = call_status::transient;
      break;
    }
    char buf[65536];
    auto drain = [&](int idx, int fd, std::string& dst, bool& open, std::size_t limit) {
      if (idx < 0 || (fds[idx].revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
      const ssize_t got = ::read(fd, buf, sizeof buf);
      if (got > 0) {
        if (dst.size() + static_cast<std::size_t>(got) > limit) {
          if (&dst == &stdout_text) {
            failure = "the command wrote more than " + std::to_string(limit) +
                      " bytes (max_output_bytes) and was killed";
            failure_status = call_status::bad_response;
          }
          dst.append(buf,
                     std::min(static_cast<std::size_t>(got), limit - std::min(limit, dst.size())));
        } else {
          dst.append(buf, static_cast<std::size_t>(got));
        }
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        open = false;
      }
    };
    drain(out_i, out_parent.fd, stdout_text, out_open, cfg_.max_output_bytes);
    drain(err_i, err_parent.fd, stderr_text, err_open, 64 * 1024);
    if (failure_status != call_status::ok) break;
    if (in_i >= 0 && (fds[in_i].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      const ssize_t w =
          ::send(in_parent.fd, input.data() + written, input.size() - written, MSG_NOSIGNAL);
      if (w > 0) written += static_cast<std::size_t>(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) in_parent.close();  // child stopped reading
      if (written == input.size()) in_parent.close();
    }
  }
  if (failure_status != call_status::ok) ::kill(-pid, SIGKILL);
  in_parent.close();
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  // Whatever the child left running in its group goes too.
  ::kill(-pid, SIGKILL);
  out.latency = std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - start);

  if (failure_status != call_status::ok) {
    out.status = failure_status;
    out.error = failure;
    return out;
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    out.status = call_status::transient;
    out.error = cfg_.command[0] +
                (WIFEXITED(wstatus) ? " exited with status " + std::to_string(WEXITSTATUS(wstatus))
                                    : " was killed by signal " + std::to_string(WTERMSIG(wstatus)));
    if (!stderr_text.empty())
      out.error +=
          ": " + stderr_text.substr(stderr_text.size() > 2000 ? stderr_text.size() - 2000 : 0);
    return out;
  }
  out.text = std::move(stdout_text);
  out.stop_reason = "exit";
  out.tokens.prompt = estimate_tokens(input.size());
  out.tokens.completion = estimate_tokens(out.text.size());
  out.tokens.reported = false;
  return out;
}

}  // namespace kopt::llm
