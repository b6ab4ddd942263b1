// Shared by the daemon tests: operator configs that validate (the campaign
// tests' vadd operator), a real `kopt daemon` process started from the
// build tree with its output in a log file, a NOTIFY_SOCKET the test
// listens on (what systemd would see), HTTP requests to the daemon, and
// read-only queries of its store. Every wait polls with a generous
// deadline, so the tests do not depend on the machine's speed.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../campaign/support.hpp"
#include "store/store.hpp"

namespace kopt::test {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

inline std::string kopt_exe() {
  return std::string(KOPT_BINARY_DIR) + "/bin/kopt";
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void spit(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

// Writes atomically (temporary dot-file, then rename), as teams are told to.
inline void spool_write(const fs::path& dir, const std::string& name, const std::string& text) {
  fs::create_directories(dir);
  const auto tmp = dir / ("." + name + ".tmp");
  spit(tmp, text);
  fs::rename(tmp, dir / name);
}

// An operator (vadd) whose autotune campaign runs `iterations` iterations
// over a 144-point space (neighbour search, never exhausted that fast).
inline nlohmann::json campaign_operator(const std::string& name, int iterations, int seed = 7) {
  auto op = operator_json(true, true);
  op["name"] = name;
  op["campaign"] = {{"provider", "autotune"},
                    {"seed", seed},
                    {"budget", {{"iterations", iterations}}},
                    {"target_sol_fraction", 0.99},
                    {"candidates_per_iteration", 3}};
  return op;
}

template <typename F>
bool eventually(F pred, std::chrono::milliseconds deadline = 60s,
                std::chrono::milliseconds step = 50ms) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(step);
  }
  return pred();
}

// A datagram socket standing in for systemd's notify socket.
class notify_listener {
 public:
  explicit notify_listener(const fs::path& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("cannot bind notify socket " + path.string());
  }
  ~notify_listener() {
    if (fd_ >= 0) close(fd_);
  }
  // Every message received so far, appended to the history.
  const std::vector<std::string>& poll() {
    char buf[4096];
    for (;;) {
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      msgs_.emplace_back(buf, static_cast<std::size_t>(n));
    }
    return msgs_;
  }
  bool seen(const std::string& needle) {
    for (const auto& m : poll())
      if (m.find(needle) != std::string::npos) return true;
    return false;
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  int fd_ = -1;
  std::vector<std::string> msgs_;
};

struct http_reply {
  int status = 0;
  std::string body;
  std::string content_type;
};

// One `kopt daemon` process.
class daemon_process {
 public:
  daemon_process(fs::path dir, nlohmann::json config)
      : dir_(std::move(dir)), config_(std::move(config)) {
    config_["state_dir"] = (dir_ / "state").string();
    if (!config_.contains("http")) config_["http"] = {{"port", 0}};
    if (!config_.contains("limits")) config_["limits"] = nlohmann::json::object();
    config_["limits"]["spool_poll_ms"] = config_["limits"].value("spool_poll_ms", 100);
    write_config();
  }
  ~daemon_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      waitpid(pid_, &st, 0);
    }
  }
  void write_config() { spit(dir_ / "daemon.json", config_.dump(2)); }
  nlohmann::json& config() { return config_; }
  fs::path state() const { return dir_ / "state"; }
  fs::path db_path() const { return state() / "kopt.db"; }
  fs::path spool() const { return state() / "spool"; }
  fs::path log_path() const { return dir_ / "daemon.log"; }
  std::string log() const { return slurp(log_path()); }
  pid_t pid() const { return pid_; }

  void spawn(const std::vector<std::string>& extra_env = {}) {
    ++starts_;
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string v(*e);
      if (v.rfind("NOTIFY_SOCKET=", 0) == 0 || v.rfind("WATCHDOG_", 0) == 0 ||
          v.rfind("KOPT_DB=", 0) == 0)
        continue;
      env.push_back(v);
    }
    for (const auto& e : extra_env) env.push_back(e);
    const std::string logp = log_path().string();
    const std::string cfg = (dir_ / "daemon.json").string();
    std::vector<std::string> argv{kopt_exe(), "daemon", "--config", cfg};
    // Built before fork: no allocation in the child (see run_kopt).
    std::vector<char*> a, e;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : env) e.push_back(s.data());
    e.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      const int fd = open(logp.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      execve(a[0], a.data(), e.data());
      _exit(127);
    }
    pid_ = pid;
  }

  // The HTTP port from <state>/daemon.json (written after binding).
  int port() {
    std::error_code ec;
    if (!fs::exists(state() / "daemon.json", ec)) return 0;
    try {
      const auto j = nlohmann::json::parse(slurp(state() / "daemon.json"));
      if (j.value("pid", 0) != pid_) return 0;  // a previous run's file
      return j.at("http").value("port", 0);
    } catch (const std::exception&) {
      return 0;
    }
  }

  http_reply get(const std::string& path) {
    http_reply r;
    const int p = port();
    if (p == 0) return r;
    httplib::Client c("127.0.0.1", p);
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(30, 0);
    if (auto res = c.Get(path.c_str())) {
      r.status = res->status;
      r.body = res->body;
      r.content_type = res->get_header_value("Content-Type");
    }
    return r;
  }

  void wait_ready(std::chrono::milliseconds deadline = 90s) {
    const bool ok = eventually([&] { return alive() && get("/health").status == 200; }, deadline);
    ASSERT_TRUE(ok) << "the daemon did not become ready; log:\n" << log();
  }

  bool alive() {
    if (pid_ <= 0) return false;
    int st = 0;
    const pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      last_status_ = st;
      pid_ = -1;
      return false;
    }
    return true;
  }

  void kill9() {
    ASSERT_GT(pid_, 0);
    ::kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }

  void signal(int sig) { ::kill(pid_, sig); }

  // Waits for the exit; returns the wait status or nullopt at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds deadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < end) {
      int st = 0;
      const pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return st;
      }
      std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
  }

  store::store reader() const {
    return store::store::open(db_path(), {.read_only = true,
                                          .busy_timeout = std::chrono::milliseconds(10000),
                                          .create_directories = false});
  }

  std::int64_t scalar(const std::string& sql) const {
    auto db = reader();
    auto st = db.db().prepare(sql);
    if (!st.step()) return -1;
    return st.get_int(0);
  }

  std::string campaign_state(store::row_id id) const {
    auto db = reader();
    auto c = db.find_campaign(id);
    return c ? std::string(store::to_string(c->state)) : "";
  }

 private:
  fs::path dir_;
  nlohmann::json config_;
  pid_t pid_ = -1;
  int last_status_ = 0;
  int starts_ = 0;
};

// Runs `kopt ARGS...` to completion; returns (exit code, stdout).
inline std::pair<int, std::string> run_kopt(const std::vector<std::string>& args,
                                            const fs::path& out_dir, const std::string& tag) {
  const std::string outp = (out_dir / (tag + ".out")).string();
  const std::string errp = (out_dir / (tag + ".err")).string();
  // Everything that allocates happens before fork: callers run this from
  // several threads, and a child that calls malloc after fork can deadlock on
  // a lock another thread held at the fork (seen as a 600 s hang under ASan).
  std::vector<std::string> a{kopt_exe()};
  a.insert(a.end(), args.begin(), args.end());
  std::vector<char*> av;
  for (auto& s : a) av.push_back(s.data());
  av.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(outp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(errp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    execv(av[0], av.data());
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), slurp(outp)};
}

}  // namespace kopt::test
