// `kopt sbatch-worker [--sbatch-arg A]... [--advertise HOST] -- WORKER ARGS...`:
// a launch prefix for clusters where `srun` from the daemon's node is not
// possible. It runs on the daemon's node in place of srun: listens on a TCP
// port, submits the worker as a batch job (`sbatch`) whose script dials back
// (bash's /dev/tcp), checks the job's first line against a one-time token,
// then relays the JSON-lines protocol between its own stdin/stdout (the
// daemon's worker client, unchanged) and the socket. When the job ends
// under it (cancelled, preempted, out of time) it says so on stderr in the
// words runner::stopped_from_outside recognises and exits 143, so the
// request is run again without blaming a candidate; when the daemon closes
// its stdin or stops it, it closes the socket (the worker sees EOF and
// exits) and cancels the job. docs/daemon.md, "Run on Slurm".
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/subprocess.hpp"

namespace kopt::cli {

namespace {

namespace fs = std::filesystem;

struct sbatch_options {
  std::vector<std::string> sbatch_args;
  std::string advertise;  // host name or address the job dials; default: this host's name
  std::string bind = "0.0.0.0";
  std::vector<std::string> worker;  // the worker command line, after --
};

volatile sig_atomic_t g_stop = 0;
void on_signal(int) {
  g_stop = 1;
}

std::string random_token() {
  std::array<unsigned char, 16> b{};
  std::ifstream in("/dev/urandom", std::ios::binary);
  in.read(reinterpret_cast<char*>(b.data()), b.size());
  if (!in) throw kopt::error("cannot read /dev/urandom");
  std::string s;
  for (unsigned char c : b) s += fmt::format("{:02x}", c);
  return s;
}

// Single-quoted for bash.
std::string quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string slurm_env_run(const std::vector<std::string>& argv, int* code) {
  const auto r = run_capture(argv, scrubbed_environment(), "", std::chrono::seconds(60));
  *code = r.status.exited ? r.status.code : 128 + r.status.signal;
  std::string out = r.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (*code != 0) out += r.err;
  return out;
}

// The job's state from scontrol (no accounting needed): RUNNING, PENDING,
// CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, COMPLETED, FAILED; "" if gone.
std::string job_state(const std::string& job) {
  int code = 0;
  const std::string out = slurm_env_run({"scontrol", "-o", "show", "job", job}, &code);
  if (code != 0) return "";
  const auto p = out.find("JobState=");
  if (p == std::string::npos) return "";
  return out.substr(p + 9, out.find(' ', p) - p - 9);
}

bool external_end(const std::string& state) {
  return state == "CANCELLED" || state == "TIMEOUT" || state == "PREEMPTED" ||
         state == "NODE_FAIL" || state == "DEADLINE" || state == "BOOT_FAIL";
}

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

int relay(const sbatch_options& o) {
  if (o.worker.empty()) throw kopt::config_error("sbatch-worker: name the worker command after --");
  ::signal(SIGTERM, on_signal);
  ::signal(SIGINT, on_signal);
  ::signal(SIGHUP, on_signal);
  ::signal(SIGPIPE, SIG_IGN);

  const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0) throw kopt::error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, o.bind.c_str(), &a.sin_addr) != 1)
    throw kopt::config_error("sbatch-worker: --bind must be an IPv4 address, not " + o.bind);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, 4) != 0)
    throw kopt::error(std::string("sbatch-worker: cannot listen: ") + std::strerror(errno));
  socklen_t alen = sizeof a;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &alen);
  const int port = ntohs(a.sin_port);
  std::string host = o.advertise;
  if (host.empty()) {
    char h[256] = {};
    ::gethostname(h, sizeof h - 1);
    host = h;
  }
  const std::string token = random_token();

  // The job script: sbatch sends its text to the controller, so it need not
  // be on a shared file system. The token is the only secret, and it opens
  // nothing but this one relay.
  std::string cmd;
  for (const auto& w : o.worker) cmd += (cmd.empty() ? "" : " ") + quote(w);
  const std::string script = fmt::format(
      "#!/bin/bash\n"
      "# kopt worker, started by kopt sbatch-worker on {host}\n"
      "exec 3<>/dev/tcp/{host}/{port} || exit 1\n"
      "printf '%s\\n' {token} >&3\n"
      "exec {cmd} <&3 >&3 3>&-\n",
      fmt::arg("host", host), fmt::arg("port", port), fmt::arg("token", token),
      fmt::arg("cmd", cmd));
  char tmpl[] = "/tmp/kopt-sbatch-XXXXXX";
  const int sfd = ::mkstemp(tmpl);
  if (sfd < 0) throw kopt::error(std::string("mkstemp: ") + std::strerror(errno));
  write_all(sfd, script.data(), script.size());
  ::close(sfd);
  std::vector<std::string> argv = {"sbatch", "--parsable", "--job-name=kopt-worker",
                                   "--output=/dev/null"};
  argv.insert(argv.end(), o.sbatch_args.begin(), o.sbatch_args.end());
  argv.push_back(tmpl);
  int code = 0;
  std::string job = slurm_env_run(argv, &code);
  ::unlink(tmpl);
  if (code != 0) {
    std::cerr << "kopt sbatch-worker: sbatch failed: " << job << '\n';
    return 1;
  }
  job = job.substr(0, job.find(';'));  // "ID" or "ID;cluster"
  std::cerr << "kopt sbatch-worker: submitted job " << job << ", waiting on " << host << ":" << port
            << '\n';

  auto cancel = [&] {
    int c = 0;
    slurm_env_run({"scancel", job}, &c);
  };
  // Wait for the job to dial back with the token.
  int conn = -1;
  auto last_check = std::chrono::steady_clock::now();
  int unknown = 0;
  while (conn < 0) {
    if (g_stop) {
      cancel();
      return 143;
    }
    pollfd p{ls, POLLIN, 0};
    const int n = ::poll(&p, 1, 1000);
    if (n > 0) {
      const int c = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string line;
      char ch = 0;
      pollfd q{c, POLLIN, 0};
      while (line.size() < 128 && ::poll(&q, 1, 10000) > 0 && ::read(c, &ch, 1) == 1 && ch != '\n')
        line += ch;
      if (line == token) {
        conn = c;
      } else {
        ::close(c);  // not our job
      }
      continue;
    }
    if (std::chrono::steady_clock::now() - last_check > std::chrono::seconds(5)) {
      last_check = std::chrono::steady_clock::now();
      const std::string st = job_state(job);
      // scontrol may fail for a moment (a busy controller): give up only
      // after half a minute of not knowing.
      unknown = st.empty() ? unknown + 1 : 0;
      if ((st.empty() && unknown >= 6) ||
          (!st.empty() && st != "PENDING" && st != "RUNNING" && st != "CONFIGURING")) {
        std::cerr << fmt::format(
            "kopt sbatch-worker: job {} ended before its worker connected (state {}){}\n", job,
            st.empty() ? "unknown" : st, external_end(st) ? ": stopped from outside" : "");
        return external_end(st) ? 143 : 1;
      }
    }
  }
  ::close(ls);
  std::cerr << "kopt sbatch-worker: job " << job << " connected\n";

  // Relay: stdin -> socket, socket -> stdout.
  std::array<char, 65536> buf{};
  bool in_open = true;
  for (;;) {
    if (g_stop) {
      ::close(conn);
      cancel();
      return 143;
    }
    pollfd p[2] = {{in_open ? 0 : -1, POLLIN, 0}, {conn, POLLIN, 0}};
    const int n = ::poll(p, 2, 1000);
    if (n < 0 && errno == EINTR) continue;
    if (in_open && (p[0].revents & (POLLIN | POLLHUP)) != 0) {
      const ssize_t r = ::read(0, buf.data(), buf.size());
      if (r > 0) {
        if (!write_all(conn, buf.data(), static_cast<std::size_t>(r))) in_open = false;
      } else if (r == 0 || errno != EINTR) {
        // The daemon closed our stdin: the worker gets EOF and exits.
        in_open = false;
        ::shutdown(conn, SHUT_WR);
      }
    }
    if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t r = ::read(conn, buf.data(), buf.size());
      if (r > 0) {
        if (!write_all(1, buf.data(), static_cast<std::size_t>(r))) {
          cancel();
          return 1;
        }
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      ::close(conn);
      if (!in_open) return 0;  // we asked it to stop
      // The worker's end closed: its job ended (or the worker exited). Give
      // Slurm a moment to record why.
      std::string st;
      for (int i = 0; i < 10; ++i) {
        st = job_state(job);
        if (st != "RUNNING" && st != "COMPLETING") break;
        ::usleep(300000);
      }
      if (external_end(st)) {
        std::cerr << fmt::format("kopt sbatch-worker: job {} {}: stopped from outside\n", job, st);
        return 143;
      }
      std::cerr << fmt::format(
          "kopt sbatch-worker: the worker of job {} closed the connection (state {})\n", job,
          st.empty() ? "gone" : st);
      return 1;
    }
  }
}

}  // namespace

void register_sbatch_worker(CLI::App& app, context&, exit_status& status) {
  auto o = std::make_shared<sbatch_options>();
  auto* cmd = app.add_subcommand("sbatch-worker",
                                 "launch prefix: run a worker as a Slurm batch job that connects "
                                 "back over TCP (where srun is not possible)");
  cmd->add_option("--sbatch-arg", o->sbatch_args,
                  "an sbatch option, e.g. --sbatch-arg=--gres=gpu:1 (repeatable)");
  cmd->add_option("--advertise", o->advertise,
                  "host name or address the job connects to (default: this host)");
  cmd->add_option("--bind", o->bind, "IPv4 address to listen on")->capture_default_str();
  cmd->add_option("worker", o->worker, "the worker command line (after --)")->expected(-1);
  cmd->footer(
      "Used as the daemon's worker.launch_prefix: [\"kopt\", \"sbatch-worker\", "
      "\"--sbatch-arg=--gres=gpu:1\", "
      "\"--\"]. One batch job per GPU slot; see docs/daemon.md, \"Run on Slurm\". The job's output "
      "goes to /dev/null unless an --sbatch-arg=--error=FILE says otherwise.\n"
      "Exit codes: 0 the worker stopped when asked, 1 sbatch failed or the worker closed the "
      "connection, 143 the job was cancelled, preempted or timed out (or this relay was stopped).");
  cmd->callback([o, &status] { status.code = relay(*o); });
}

}  // namespace kopt::cli
