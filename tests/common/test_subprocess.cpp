// Child processes: exact capture of stdin -> stdout, exit codes and signals,
// timeouts that kill the child and everything it started (process group),
// bounded output, a scrubbed environment without credentials, line reads
// with a deadline, and no deadlock when a child floods stderr or ignores
// its stdin.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/subprocess.hpp"

using namespace kopt;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

std::vector<std::string> sh(const std::string& script) {
  return {"/bin/sh", "-c", script};
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

bool env_has(const std::vector<std::string>& env, const std::string& name) {
  for (const auto& e : env)
    if (e.rfind(name + "=", 0) == 0) return true;
  return false;
}

// True once the process is gone or a zombie (killed, waiting for init).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close_paren = line.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < line.size() &&
         line[close_paren + 2] == 'Z';
}

bool wait_gone(pid_t pid, std::chrono::milliseconds within) {
  const auto end = clock_type::now() + within;
  while (clock_type::now() < end) {
    if (process_gone(pid)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return process_gone(pid);
}

}  // namespace

TEST(RunCapture, CatEchoesInputExactly) {
  const std::string input = "hello\nworld\n\nwith an empty line and trailing newline\n";
  const auto r = run_capture({"/bin/cat"}, scrubbed_environment(), input, 10s);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 0);
  EXPECT_FALSE(r.status.timed_out);
  EXPECT_EQ(r.out, input);
  EXPECT_TRUE(r.err.empty());
  EXPECT_FALSE(r.out_truncated);
  EXPECT_EQ(r.status.describe(), "exited with code 0");
}

TEST(RunCapture, OutputWithoutTrailingNewlineIsNotAltered) {
  // A capture is the bytes the child wrote: no newline is added.
  const auto r = run_capture({"/bin/cat"}, scrubbed_environment(), "no newline at the end", 10s);
  EXPECT_EQ(r.out, "no newline at the end");
  const auto p = run_capture({"/usr/bin/printf", "a\\nb"}, scrubbed_environment(), "", 10s);
  EXPECT_EQ(p.out, "a\nb");
}

TEST(RunCapture, LargeInputRoundTrips) {
  // 4 MB through cat: stdin is written while stdout is read, no deadlock.
  std::string input;
  input.reserve(4 << 20);
  for (int i = 0; input.size() < (4u << 20); ++i) input += "line " + std::to_string(i) + "\n";
  const auto r = run_capture({"/bin/cat"}, scrubbed_environment(), input, 120s);
  EXPECT_TRUE(r.status.exited);
  EXPECT_FALSE(r.status.timed_out);
  EXPECT_EQ(r.out.size(), input.size());
  EXPECT_TRUE(r.out == input);
}

TEST(RunCapture, ManyShortLinesRoundTrip) {
  // Half a million 8-byte lines cross many 64 KB reads, each holding
  // thousands of lines: exercises the read offset that avoids re-copying the
  // buffer per line. (Its speed is a benchmark matter, not a unit test's.)
  std::string input;
  for (int i = 0; input.size() < (4u << 20); ++i)
    input += std::to_string(1000000 + i % 9000000).substr(0, 7) + "\n";
  const auto r = run_capture({"/bin/cat"}, scrubbed_environment(), input, 300s);
  EXPECT_TRUE(r.status.exited && r.status.code == 0);
  EXPECT_TRUE(r.out == input);
}

TEST(RunCapture, ExitCodes) {
  auto r = run_capture(sh("exit 7"), scrubbed_environment(), "", 10s);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 7);
  EXPECT_EQ(r.status.signal, 0);
  EXPECT_FALSE(r.status.timed_out);
  EXPECT_EQ(r.status.describe(), "exited with code 7");
  r = run_capture(sh("echo out; echo err >&2; exit 3"), scrubbed_environment(), "", 10s);
  EXPECT_EQ(r.status.code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST(RunCapture, Signals) {
  auto r = run_capture(sh("kill -TERM $$"), scrubbed_environment(), "", 10s);
  EXPECT_FALSE(r.status.exited);
  EXPECT_EQ(r.status.signal, SIGTERM);
  EXPECT_FALSE(r.status.timed_out);
  EXPECT_NE(r.status.describe().find("signal 15"), std::string::npos) << r.status.describe();
  r = run_capture(sh("kill -SEGV $$"), scrubbed_environment(), "", 10s);
  EXPECT_EQ(r.status.signal, SIGSEGV);
}

TEST(RunCapture, TimeoutKillsTheChildInTime) {
  const auto t0 = clock_type::now();
  const auto r = run_capture({"sleep", "30"}, scrubbed_environment(), "", 500ms);
  const double took = seconds_since(t0);
  EXPECT_TRUE(r.status.timed_out);
  EXPECT_FALSE(r.status.exited);
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(r.status.describe(), "killed at its time limit");
}

TEST(RunCapture, TimeoutKillsGrandchildrenToo) {
  // The shell starts sleep in the background, prints its pid and waits.
  const auto t0 = clock_type::now();
  const auto r = run_capture(sh("sleep 30 & echo $!; wait"), scrubbed_environment(), "", 700ms);
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_TRUE(r.status.timed_out);
  const pid_t grandchild = static_cast<pid_t>(std::atol(r.out.c_str()));
  ASSERT_GT(grandchild, 1) << r.out;
  EXPECT_TRUE(wait_gone(grandchild, 3000ms))
      << "the background sleep " << grandchild << " survived";
  if (!process_gone(grandchild)) ::kill(grandchild, SIGKILL);
}

TEST(RunCapture, ChildIgnoringSigtermIsStillKilled) {
  const auto t0 = clock_type::now();
  const auto r = run_capture(sh("trap '' TERM INT HUP; while :; do sleep 1; done"),
                             scrubbed_environment(), "", 500ms);
  EXPECT_TRUE(r.status.timed_out);
  EXPECT_LT(seconds_since(t0), 5.0);
}

TEST(RunCapture, OutputIsTruncatedAtTheLimit) {
  // 1000 lines of 11 bytes.
  const std::string script = "i=0; while [ $i -lt 1000 ]; do echo 0123456789; i=$((i+1)); done";
  const auto r = run_capture(sh(script), scrubbed_environment(), "", 30s, 100);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 0);
  EXPECT_EQ(r.out.size(), 100u);
  EXPECT_TRUE(r.out_truncated);
  EXPECT_EQ(r.out.substr(0, 22), "0123456789\n0123456789\n");
  const auto full = run_capture(sh(script), scrubbed_environment(), "", 30s, 11000);
  EXPECT_EQ(full.out.size(), 11000u);
  EXPECT_FALSE(full.out_truncated);
  // stderr is bounded by the same limit.
  const auto e =
      run_capture(sh("head -c 5000 /dev/zero >&2"), scrubbed_environment(), "", 30s, 100);
  EXPECT_LE(e.err.size(), 100u);
}

TEST(RunCapture, ManyStderrBytesDoNotDeadlock) {
  // Far more than a pipe buffer on stderr before anything on stdout.
  const auto t0 = clock_type::now();
  const auto r = run_capture(sh("head -c 4000000 /dev/zero | tr '\\0' e >&2; echo done"),
                             scrubbed_environment(), "", 30s);
  EXPECT_LT(seconds_since(t0), 20.0);
  EXPECT_FALSE(r.status.timed_out);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.out, "done\n");
  EXPECT_FALSE(r.err.empty());
  EXPECT_LE(r.err.size(), std::size_t{1} << 20);  // the most recent megabyte is kept
  EXPECT_EQ(r.err.find_first_not_of('e'), std::string::npos);
}

TEST(RunCapture, ChildThatIgnoresItsInput) {
  // 4 MB of input to a child that exits at once: no SIGPIPE death for us.
  const std::string input(4 << 20, 'x');
  const auto r = run_capture(sh("exit 0"), scrubbed_environment(), input, 10s);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 0);
}

TEST(RunCapture, MissingProgramThrows) {
  EXPECT_THROW(run_capture({"/nonexistent/kopt-no-such-program"}, scrubbed_environment(), "", 5s),
               kopt::error);
  EXPECT_THROW(run_capture({"kopt-no-such-program-in-path"}, scrubbed_environment(), "", 5s),
               kopt::error);
  EXPECT_THROW(child_process({}, scrubbed_environment()), kopt::error);
}

TEST(RunCapture, ProgramIsFoundInPath) {
  const auto r = run_capture({"echo", "from", "path"}, scrubbed_environment(), "", 10s);
  EXPECT_EQ(r.out, "from path\n");
}

TEST(ScrubbedEnvironment, DropsCredentialsKeepsAllowList) {
  ASSERT_EQ(setenv("OPENAI_API_KEY", "sk-test-openai", 1), 0);
  ASSERT_EQ(setenv("ANTHROPIC_API_KEY", "sk-ant-test", 1), 0);
  ASSERT_EQ(setenv("AWS_SECRET_ACCESS_KEY", "aws-secret", 1), 0);
  ASSERT_EQ(setenv("GITHUB_TOKEN", "ghp_test", 1), 0);
  ASSERT_EQ(setenv("KOPT_SECRET_THING", "nope", 1), 0);
  ASSERT_EQ(setenv("KOPT_TEST_RANDOM_VAR", "nope", 1), 0);
  ASSERT_EQ(setenv("KOPT_WORKER_FLAG", "yes", 1), 0);
  ASSERT_EQ(setenv("CUDA_VISIBLE_DEVICES", "1", 1), 0);
  ASSERT_EQ(setenv("LC_ALL", "C", 1), 0);
  const char* old_cache = std::getenv("KOPT_CACHE_DIR");
  const std::string saved_cache = old_cache ? old_cache : "";
  ASSERT_EQ(setenv("KOPT_CACHE_DIR", "/tmp/kopt-test-cache", 1), 0);
  ASSERT_NE(std::getenv("PATH"), nullptr);

  const auto env = scrubbed_environment();
  EXPECT_FALSE(env_has(env, "OPENAI_API_KEY"));
  EXPECT_FALSE(env_has(env, "ANTHROPIC_API_KEY"));
  EXPECT_FALSE(env_has(env, "AWS_SECRET_ACCESS_KEY"));
  EXPECT_FALSE(env_has(env, "GITHUB_TOKEN"));
  EXPECT_FALSE(env_has(env, "KOPT_SECRET_THING"));
  EXPECT_FALSE(env_has(env, "KOPT_TEST_RANDOM_VAR"));
  EXPECT_TRUE(env_has(env, "PATH"));
  EXPECT_TRUE(env_has(env, "KOPT_WORKER_FLAG"));
  EXPECT_TRUE(env_has(env, "CUDA_VISIBLE_DEVICES"));
  EXPECT_TRUE(env_has(env, "LC_ALL"));
  EXPECT_TRUE(env_has(env, "KOPT_CACHE_DIR"));  // the worker's cubin and CUPTI caches
  for (const auto& e : env) EXPECT_EQ(e.find("sk-"), std::string::npos) << e;

  // Explicitly allowed extras pass.
  const auto extra = scrubbed_environment({"KOPT_TEST_RANDOM_VAR"});
  EXPECT_TRUE(env_has(extra, "KOPT_TEST_RANDOM_VAR"));
  EXPECT_FALSE(env_has(extra, "OPENAI_API_KEY"));

  // What the child actually sees.
  const auto r = run_capture({"/usr/bin/env"}, env, "", 10s);
  EXPECT_EQ(r.out.find("OPENAI_API_KEY"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ANTHROPIC_API_KEY"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PATH="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KOPT_WORKER_FLAG=yes"), std::string::npos) << r.out;

  for (const char* n :
       {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN",
        "KOPT_SECRET_THING", "KOPT_TEST_RANDOM_VAR", "KOPT_WORKER_FLAG"})
    unsetenv(n);
  if (old_cache)
    setenv("KOPT_CACHE_DIR", saved_cache.c_str(), 1);
  else
    unsetenv("KOPT_CACHE_DIR");
}

TEST(ScrubbedEnvironment, ChildGetsExactlyTheGivenEnvironment) {
  const auto r = run_capture({"/usr/bin/env"}, {"ONLY_THIS=1"}, "", 10s);
  EXPECT_EQ(r.out, "ONLY_THIS=1\n");
}

TEST(ChildProcess, ReadLineWithDeadline) {
  child_process c(sh("echo first; sleep 30"), scrubbed_environment());
  auto line = c.read_line(clock_type::now() + 10s);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line, "first");
  EXPECT_FALSE(c.timed_out());
  const auto t0 = clock_type::now();
  line = c.read_line(clock_type::now() + 300ms);
  const double took = seconds_since(t0);
  EXPECT_FALSE(line.has_value());
  EXPECT_TRUE(c.timed_out());
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 3.0);
  EXPECT_TRUE(c.running());
  const auto st = c.wait(clock_type::now());  // deadline already passed: killed
  EXPECT_TRUE(st.timed_out);
  EXPECT_FALSE(c.running());
}

TEST(ChildProcess, ReadLineEofAndLastLineWithoutNewline) {
  child_process c(sh("printf 'a\\nb'"), scrubbed_environment());
  EXPECT_EQ(c.read_line(clock_type::now() + 10s).value_or("<none>"), "a");
  EXPECT_EQ(c.read_line(clock_type::now() + 10s).value_or("<none>"), "b");
  EXPECT_FALSE(c.read_line(clock_type::now() + 10s).has_value());
  EXPECT_FALSE(c.timed_out());
  const auto st = c.wait(clock_type::now() + 10s);
  EXPECT_TRUE(st.exited);
  EXPECT_EQ(st.code, 0);
}

TEST(ChildProcess, InteractiveWithCat) {
  child_process c({"/bin/cat"}, scrubbed_environment());
  for (int i = 0; i < 5; ++i) {
    const std::string msg = "{\"n\": " + std::to_string(i) + "}";
    ASSERT_TRUE(c.write_all(msg + "\n"));
    EXPECT_EQ(c.read_line(clock_type::now() + 10s).value_or("<none>"), msg);
  }
  c.close_stdin();
  EXPECT_FALSE(c.read_line(clock_type::now() + 10s).has_value());
  EXPECT_FALSE(c.write_all("after close\n"));
  const auto st = c.wait(clock_type::now() + 10s);
  EXPECT_TRUE(st.exited);
}

TEST(ChildProcess, WriteToDeadChildReturnsFalse) {
  child_process c(sh("exit 0"), scrubbed_environment());
  const auto st = c.wait(clock_type::now() + 10s);
  EXPECT_TRUE(st.exited);
  // The pipe's reader is gone: false, and no SIGPIPE kills the test.
  bool ok = true;
  for (int i = 0; i < 4 && ok; ++i) ok = c.write_all(std::string(1 << 16, 'x'));
  EXPECT_FALSE(ok);
}

TEST(ChildProcess, LineLongerThanTheLimitIsAnError) {
  child_process c(sh("head -c 100000 /dev/zero | tr '\\0' a; echo"), scrubbed_environment());
  EXPECT_THROW((void)c.read_line(clock_type::now() + 10s, 1000), kopt::error);
}

TEST(ChildProcess, StderrFloodWhileWaitingForALine) {
  child_process c(sh("head -c 3000000 /dev/zero >&2; echo ready; sleep 30"),
                  scrubbed_environment());
  const auto t0 = clock_type::now();
  const auto line = c.read_line(clock_type::now() + 20s);
  EXPECT_LT(seconds_since(t0), 15.0);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line, "ready");
  const std::string err = c.drain_stderr(1000);
  EXPECT_EQ(err.size(), 1000u);  // the most recent bytes, bounded by the caller
  c.kill_group(SIGKILL);
  const auto st = c.wait(clock_type::now() + 10s);
  EXPECT_EQ(st.signal, SIGKILL);
}

TEST(ChildProcess, MergedStderr) {
  child_process c(sh("echo to-err >&2"), scrubbed_environment(), true);
  EXPECT_EQ(c.read_line(clock_type::now() + 10s).value_or("<none>"), "to-err");
}

TEST(ChildProcess, DestructorKillsTheGroup) {
  pid_t child = -1, grandchild = -1;
  {
    child_process c(sh("sleep 30 & echo $!; wait"), scrubbed_environment());
    child = c.pid();
    const auto line = c.read_line(clock_type::now() + 10s);
    ASSERT_TRUE(line.has_value());
    grandchild = static_cast<pid_t>(std::atol(line->c_str()));
    EXPECT_TRUE(c.running());
  }
  EXPECT_TRUE(wait_gone(child, 3000ms));
  ASSERT_GT(grandchild, 1);
  EXPECT_TRUE(wait_gone(grandchild, 3000ms));
  if (!process_gone(grandchild)) ::kill(grandchild, SIGKILL);
}

TEST(ChildProcess, OwnProcessGroup) {
  child_process c({"sleep", "30"}, scrubbed_environment());
  EXPECT_EQ(getpgid(c.pid()), c.pid());
  EXPECT_NE(getpgid(c.pid()), getpgid(0));
  c.kill_group(SIGTERM);
  const auto st = c.wait(clock_type::now() + 10s);
  EXPECT_EQ(st.signal, SIGTERM);
  EXPECT_FALSE(st.timed_out);
}

TEST(SelfExecutable, IsThisTest) {
  const auto self = self_executable();
  EXPECT_EQ(self.front(), '/');
  EXPECT_NE(self.find("common_test_subprocess"), std::string::npos) << self;
}

// exit_when_parent_dies: a process whose parent exits ends itself, with the exit code asked
// for, well before it would have finished its own work (a 30 s sleep). The test process is a
// subreaper, so the orphan is reparented to it and its exit status can be collected.
TEST(ParentWatch, ExitsSoonAfterItsParentIsGone) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t middle = fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    const pid_t worker = fork();
    if (worker == 0) {
      if (!kopt::exit_when_parent_dies(42, 20ms)) _exit(3);
      const char ok = 'y';
      if (write(fds[1], &ok, 1) != 1) _exit(4);
      std::this_thread::sleep_for(30s);
      _exit(0);
    }
    char ok = 0;
    if (worker < 0 || read(fds[0], &ok, 1) != 1) _exit(5);
    if (write(fds[1], &worker, sizeof worker) != static_cast<ssize_t>(sizeof worker)) _exit(6);
    _exit(0);  // the worker's parent is gone from here on
  }
  int st = 0;
  ASSERT_EQ(waitpid(middle, &st, 0), middle);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 0);
  pid_t worker = 0;
  ASSERT_EQ(read(fds[0], &worker, sizeof worker), static_cast<ssize_t>(sizeof worker));
  close(fds[0]);
  close(fds[1]);
  const auto t0 = clock_type::now();
  ASSERT_EQ(waitpid(worker, &st, 0), worker);
  EXPECT_LT(clock_type::now() - t0, 10s) << "the orphan ran on";
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 42);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

// With its parent alive the watch does nothing: the child ends on its own terms.
TEST(ParentWatch, LeavesAChildWithALiveParentAlone) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!kopt::exit_when_parent_dies(42, 10ms)) _exit(3);
    std::this_thread::sleep_for(300ms);
    _exit(0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}
