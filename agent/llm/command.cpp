// The command provider: an agent CLI as a child process. No shell is
// involved (argv is executed as given), the prompt goes to stdin over a
// socket (so a child that exits early cannot kill kopt with SIGPIPE), and the
// child runs in its own process group so that a time or size limit kills
// everything it started. Agent CLIs that report what a call used are read
// for it (parse_agent_cli_output): `claude -p --output-format json` prints
// one result object (answer, usage, total_cost_usd), `codex exec --json`
// prints JSON lines (agent_message items, turn.completed usage); so token
// and cost budgets bind them like HTTP providers. Any other output is the
// answer as it is, with estimated tokens.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "llm/command_output.hpp"
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

agent_cli_output parse_agent_cli_output(std::string_view text) {
  using nlohmann::json;
  agent_cli_output out;
  auto num = [](const json& o, const char* k) -> std::int64_t {
    const auto it = o.find(k);
    return it != o.end() && it->is_number() ? it->get<std::int64_t>() : 0;
  };
  // Claude Code: a single object {"type":"result", "result": "...", "usage":
  // {...}, "total_cost_usd": ...}; Anthropic's usage counts cache reads and
  // writes apart from input_tokens.
  const json whole = json::parse(text, nullptr, false);
  if (whole.is_object() && whole.value("type", json()) == "result" && whole.contains("result")) {
    out.format = "claude-json";
    out.text = whole["result"].is_string() ? whole["result"].get<std::string>() : std::string();
    if (whole.value("is_error", false))
      out.error = "the agent CLI reported an error (" +
                  whole.value("subtype", std::string("error")) + "): " + out.text.substr(0, 2000);
    if (const auto u = whole.find("usage"); u != whole.end() && u->is_object()) {
      out.tokens.cached = num(*u, "cache_read_input_tokens");
      out.tokens.cache_write = num(*u, "cache_creation_input_tokens");
      out.tokens.prompt = num(*u, "input_tokens") + out.tokens.cached + out.tokens.cache_write;
      out.tokens.completion = num(*u, "output_tokens");
      out.tokens.reported = true;
    }
    if (const auto c = whole.find("total_cost_usd"); c != whole.end() && c->is_number())
      out.cost_usd = c->get<double>();
    if (whole.contains("stop_reason") && whole["stop_reason"].is_string())
      out.stop_reason = whole["stop_reason"];
    return out;
  }
  // Codex: JSON lines, each an event with a "type"; the answer is the last
  // agent_message item, usage comes with every turn.completed (OpenAI's
  // input_tokens include the cached ones).
  std::istringstream lines{std::string(text)};
  bool events = false, any_line = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    any_line = true;
    const json e = json::parse(line, nullptr, false);
    if (!e.is_object() || !e.contains("type") || !e["type"].is_string()) return agent_cli_output{};
    const std::string type = e["type"];
    if (type == "thread.started" || type.rfind("turn.", 0) == 0 || type.rfind("item.", 0) == 0)
      events = true;
    if (type == "item.completed") {
      const json item = e.value("item", json::object());
      if (item.is_object() && item.value("type", json()) == "agent_message" &&
          item.contains("text") && item["text"].is_string())
        out.text = item["text"].get<std::string>();
    } else if (type == "turn.completed") {
      const json u = e.value("usage", json::object());
      if (u.is_object()) {
        out.tokens.prompt += num(u, "input_tokens");
        out.tokens.cached += num(u, "cached_input_tokens");
        out.tokens.completion += num(u, "output_tokens");
        out.tokens.reasoning += num(u, "reasoning_output_tokens");
        out.tokens.reported = true;
      }
    } else if (type == "turn.failed" || type == "error") {
      const json err = e.value("error", json::object());
      out.error = "the agent CLI reported an error: " +
                  (err.is_object() ? err.value("message", e.dump()) : e.value("message", e.dump()))
                      .substr(0, 2000);
    }
  }
  if (!any_line || !events) return agent_cli_output{};
  out.format = "codex-jsonl";
  return out;
}

namespace {}  // namespace

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
  if (auto agent = parse_agent_cli_output(stdout_text); !agent.format.empty()) {
    if (!agent.error.empty()) {
      out.status = call_status::transient;
      out.error = agent.error;
      out.tokens = agent.tokens;  // what the failed call used still counts
      out.cost_usd = agent.cost_usd;
      return out;
    }
    out.text = std::move(agent.text);
    out.stop_reason = agent.stop_reason.empty() ? "exit" : agent.stop_reason;
    out.tokens = agent.tokens;
    out.cost_usd = agent.cost_usd;
    if (!out.tokens.reported) {
      out.tokens.prompt = estimate_tokens(input.size());
      out.tokens.completion = estimate_tokens(out.text.size());
    }
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
