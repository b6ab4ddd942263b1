// Progress of `kopt eval` and `kopt bench` as a user sees it: the command
// runs on a pseudo-terminal (forkpty) against a stand-in worker
// (fake_worker.py: correct, made-up times, a pause per workload), and the
// test records when each piece of output arrives. Progress lines must come
// while the evaluation runs, not all at the end; on a terminal they are
// rewritten in place; through a pipe they are plain lines; --json adds
// nothing.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using clk = std::chrono::steady_clock;

struct chunk {
  double t;  // seconds since start
  std::string text;
};

struct pty_run {
  int code = -1;
  std::vector<chunk> chunks;
  double end = 0;
  std::string all() const {
    std::string s;
    for (const auto& c : chunks) s += c.text;
    return s;
  }
  // When `needle` first appeared (-1: never).
  double first(const std::string& needle) const {
    std::string s;
    for (const auto& c : chunks) {
      s += c.text;
      if (s.find(needle) != std::string::npos) return c.t;
    }
    return -1;
  }
};

pty_run run_on_pty(const std::string& cmd) {
  pty_run r;
  int master = -1;
  const auto t0 = clk::now();
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) return r;
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  char buf[4096];
  for (;;) {
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 30000) <= 0) break;
    const ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO once the child has exited
    r.chunks.push_back({std::chrono::duration<double>(clk::now() - t0).count(),
                        std::string(buf, static_cast<std::size_t>(n))});
  }
  r.end = std::chrono::duration<double>(clk::now() - t0).count();
  int st = 0;
  waitpid(pid, &st, 0);
  close(master);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string q(const std::string& s) {
  return "'" + s + "'";
}

class Progress : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kopt-progress-" + std::to_string(getpid()));
    fs::create_directories(dir_ / "suite");
    fs::copy_file(fs::path(KOPT_SOURCE_DIR) / "configs/examples/vector_add.json",
                  dir_ / "suite/a.json", fs::copy_options::overwrite_existing);
    fs::copy_file(fs::path(KOPT_SOURCE_DIR) / "configs/examples/vector_add.json",
                  dir_ / "suite/b.json", fs::copy_options::overwrite_existing);
    worker_ = fs::path(KOPT_SOURCE_DIR) / "tests/cli/fake_worker.py";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string kopt(const std::string& args) {
    const std::string real = (fs::path(KOPT_BIN).parent_path() / "kopt-worker").string();
    return "cd " + q(dir_.string()) + " && FAKE_WORKER_DELAY_S=0.4 FAKE_WORKER_REAL=" + q(real) + " " +
           q(KOPT_BIN) + " --db " +
           q((dir_ / "k.db").string()) + " " + args + " --worker " + q(worker_.string()) +
           " --no-store";
  }
  fs::path dir_, worker_;
};

TEST_F(Progress, EvalShowsEachWorkloadAsItFinishes) {
  const auto r = run_on_pty(kopt(q((dir_ / "suite/a.json").string()).insert(0, "eval ")));
  const std::string out = r.all();
  ASSERT_NE(r.first("workload n1000 1/4 done"), -1) << out;
  const double t1 = r.first("workload n1000 1/4 done"), t4 = r.first("workload n16m 4/4 done");
  ASSERT_GT(t4, 0) << out;
  // Arrived one by one (0.4 s apart), the first well before the end.
  EXPECT_GT(t4 - t1, 0.8) << out;
  EXPECT_GT(r.end - t1, 0.8);
  EXPECT_NE(out.find("elapsed"), std::string::npos);
  EXPECT_NE(out.find("left"), std::string::npos) << out;
  EXPECT_NE(out.find("\r\033[K"), std::string::npos);  // rewritten in place on a terminal
}

TEST_F(Progress, BenchShowsEachOperatorAndWorkload) {
  const auto r = run_on_pty(kopt("bench --suite " + q((dir_ / "suite").string())));
  const std::string out = r.all();
  const double a = r.first("[1/2] a (4 workloads)"), b = r.first("[2/2] b (4 workloads)");
  ASSERT_GE(a, 0) << out;
  ASSERT_GE(b, 0) << out;
  EXPECT_GT(b - a, 1.2) << out;  // the second operator starts after the first's 4 workloads
  EXPECT_NE(r.first("8/8 done"), -1) << out;
}

TEST_F(Progress, PlainLinesThroughAPipeAndNothingWithJson) {
  const std::string err = (dir_ / "err.txt").string();
  ASSERT_EQ(std::system((kopt(q((dir_ / "suite/a.json").string()).insert(0, "eval ")) +
                         " >/dev/null 2>" + q(err))
                            .c_str()) != -1,
            true);
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("kopt: vector_add"), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("workload n1m 3/4 done"), std::string::npos) << ss.str();
  EXPECT_EQ(ss.str().find('\r'), std::string::npos);
  const std::string err2 = (dir_ / "err2.txt").string();
  std::system((kopt(q((dir_ / "suite/a.json").string()).insert(0, "eval ")) +
               " --json >/dev/null 2>" + q(err2))
                  .c_str());
  std::ifstream in2(err2);
  std::stringstream ss2;
  ss2 << in2.rdbuf();
  EXPECT_EQ(ss2.str().find("done  ("), std::string::npos) << ss2.str();
}

// The launch-bound column of `kopt bench` follows kopt's one rule (the
// evaluation's, harness::is_launch_bound): every fake kernel takes 1000 ns,
// which is launch-bound against a 600 ns floor (< 2x), not against a 400 ns
// one, and launch-bound without a floor (< 10 us); --launch-bound-us
// replaces the rule.
TEST_F(Progress, BenchLaunchBoundFollowsTheMeasuredFloor) {
  // kopt gives the worker a clean environment, so the floor is baked into
  // a wrapper script rather than passed as a variable.
  auto launch_bound = [&](int floor_ns, const std::string& extra) {
    const fs::path wrapper = dir_ / ("worker_" + std::to_string(floor_ns) + ".sh");
    {
      std::ofstream w(wrapper);
      w << "#!/bin/sh\nFAKE_WORKER_LAUNCH_FLOOR_NS=" << floor_ns << " exec python3 "
        << q(worker_.string()) << " \"$@\"\n";
    }
    fs::permissions(wrapper, fs::perms::owner_all);
    const std::string out = (dir_ / "lb.json").string();
    std::string cmd = kopt("bench --json --ops a --suite " + q((dir_ / "suite").string()) + extra);
    cmd.replace(cmd.find(q(worker_.string())), q(worker_.string()).size(), q(wrapper.string()));
    cmd += " >" + q(out) + " 2>/dev/null";
    // Exit code 1: the fake 1000 ns beats the roofline on the two large
    // shapes, which the SOL rule rejects; n1000 and n65536 stay ok.
    EXPECT_NE(std::system(cmd.c_str()), -1) << cmd;
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << ss.str();
    if (j.is_discarded() || !j.contains("operators") || j["operators"].empty())
      return std::string("?");
    return j["operators"][0].value("launch_bound", nlohmann::json::array()).dump();
  };
  const std::string with_600 = launch_bound(600, ""), with_400 = launch_bound(400, "");
  const std::string no_floor = launch_bound(0, ""),
                    fixed = launch_bound(600, " --launch-bound-us 0.5");
  EXPECT_NE(with_600.find("n1000"), std::string::npos) << with_600;
  EXPECT_EQ(with_400.find("n1000"), std::string::npos) << with_400;
  EXPECT_NE(with_400.find("[]"), std::string::npos) << with_400;
  EXPECT_NE(no_floor.find("n1000"), std::string::npos) << no_floor;
  EXPECT_EQ(fixed.find("n1000"), std::string::npos) << fixed;
}

}  // namespace
