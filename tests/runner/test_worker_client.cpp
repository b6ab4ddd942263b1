// The control plane's worker client against FAKE workers: small python3
// scripts written by each test that speak the JSON-lines protocol and log
// every request they receive. Covers the hello handshake (ok, refused,
// silent, wrong protocol, noise on stdout), evaluate with a candidate that
// kills the worker (fatal message, restart, the request resent without the
// candidate and with only the remaining workloads), a worker that dies
// without a word, a worker that goes silent (silence timeout), rejected
// requests, stale messages, single-answer calls, the launch prefix and the
// scrubbed environment.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "../common/test_util.hpp"
#include "common/error.hpp"
#include "runner/worker_client.hpp"

namespace fs = std::filesystem;
using namespace kopt;
using namespace kopt::runner;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const char* kPython = "/usr/bin/python3";

// The fake worker. MODE and DIR are substituted by the test.
const char* kFakeWorker = R"PY(
import json, os, signal, sys, time

MODE = "@MODE@"
DIR = "@DIR@"

def log(name, obj):
    with open(os.path.join(DIR, name), "a") as f:
        f.write(json.dumps(obj) + "\n")

def emit(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()

starts = 0
if os.path.exists(os.path.join(DIR, "starts.log")):
    with open(os.path.join(DIR, "starts.log")) as f:
        starts = sum(1 for _ in f)
log("starts.log", {"argv": sys.argv[1:], "has_openai_key": "OPENAI_API_KEY" in os.environ,
                   "has_anthropic_key": "ANTHROPIC_API_KEY" in os.environ,
                   "prefixed": os.environ.get("KOPT_WORKER_PREFIXED", "")})
first_start = starts == 0

if MODE == "silent":
    time.sleep(60)
    sys.exit(0)
if MODE == "hello_fail":
    emit({"type": "hello", "protocol": @PROTOCOL@, "ok": False, "error": "no CUDA device: the driver is not loaded"})
    sys.exit(77)
if MODE == "bad_protocol":
    emit({"type": "hello", "protocol": @OTHER_PROTOCOL@, "ok": True, "device": {"name": "Fake GPU"}})
    time.sleep(60)
    sys.exit(0)
if MODE == "noise":
    sys.stdout.write("some library printed this\n\n")
    sys.stdout.flush()

emit({"type": "hello", "protocol": @PROTOCOL@, "ok": True, "device": {"name": "Fake GPU", "arch": "sm_90a"},
      "worker_version": "fake"})

while True:
    line = sys.stdin.readline()
    if not line:
        break
    line = line.strip()
    if not line:
        continue
    req = json.loads(line)
    log("requests.log", req)
    rid = req.get("id", "")
    t = req.get("type")
    if MODE == "mute":
        continue
    if t == "shutdown":
        emit({"type": "bye", "id": rid})
        sys.exit(0)
    if t == "ping":
        emit({"type": "pong", "id": "not-" + rid})   # someone else's answer first
        emit({"type": "pong", "id": rid, "starts": starts + 1})
        continue
    if t != "evaluate":
        emit({"type": "error", "id": rid, "message": "unknown request type"})
        continue
    if MODE == "reject":
        emit({"type": "error", "id": rid, "message": "operator snapshot does not validate"})
        continue
    if MODE == "internal_error":
        emit({"type": "error", "id": rid, "code": "internal", "message": "cudaMalloc: out of memory"})
        continue
    if MODE in ("bad_metric", "no_counters") and "--profile-only" in sys.argv:
        if MODE == "bad_metric":
            emit({"type": "error", "id": rid, "code": "unknown_metric",
                  "message": "CUPTI does not know this metric on chip GH100: dram__byts.sum"})
        else:
            emit({"type": "error", "id": rid, "code": "counters_unavailable",
                  "message": "hardware counters unavailable: ERR_NVGPUCTRPERM"})
        continue
    roles = [s["role"] for s in req.get("subjects", [])]
    if MODE == "stale":
        emit({"type": "workload_result", "id": "e999", "workload": "w1",
              "results": [{"role": r, "status": "incorrect"} for r in roles]})
    for r in ["reference"] + roles:
        emit({"type": "compiled", "id": rid, "role": r, "status": "ok"})
    for w in req["workloads"]:
        emit({"type": "workload_begin", "id": rid, "workload": w})
        if MODE == "crash_candidate" and w == "w2" and "candidate" in roles:
            emit({"type": "fatal", "id": rid, "status": "crashed", "role": "candidate", "workload": "w2",
                  "message": "an illegal memory access was encountered"})
            sys.exit(3)
        if MODE == "die_silently" and w == "w2" and first_start:
            sys.stderr.write("fake worker: segfault now\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGSEGV)
        if MODE == "hang" and first_start:
            time.sleep(60)
        if MODE == "clock_lost" and w == "w2" and first_start:
            emit({"type": "fatal", "id": rid, "status": "clock_lost", "role": "baseline", "workload": "w2",
                  "message": "CUPTI returned 0 kernel samples for 8 launched in 2 batches in a row"})
            sys.exit(3)
        if "--profile-only" in sys.argv:
            results = [{"role": r, "status": "ok", "counters": {"mode": "fake", "metrics": {"dram__bytes_read.sum": 42.0}}}
                       for r in roles]
            emit({"type": "workload_result", "id": rid, "workload": w, "results": results})
            continue
        results = [{"role": r, "status": "ok", "timing": {"median_ns": 1000.0 + len(w)}} for r in roles]
        emit({"type": "workload_result", "id": rid, "workload": w, "results": results})
    emit({"type": "done", "id": rid})
)PY";

class FakeWorker : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is needed for the fake worker";
  }

  std::string make_worker(const std::string& mode) {
    std::string text = std::string("#!") + kPython + "\n" + kFakeWorker;
    auto sub = [&](const std::string& key, const std::string& value) {
      for (auto pos = text.find(key); pos != std::string::npos; pos = text.find(key, pos + value.size()))
        text.replace(pos, key.size(), value);
    };
    sub("@MODE@", mode);
    sub("@PROTOCOL@", std::to_string(kopt::protocol::version));
    sub("@OTHER_PROTOCOL@", std::to_string(kopt::protocol::version + 1));
    sub("@DIR@", dir_.path().string());
    const auto exe = dir_ / ("fake-worker-" + mode);
    kopt::test::write_text(exe, text, true);
    return exe.string();
  }

  worker_options options(const std::string& mode) {
    worker_options o;
    o.worker_exe = make_worker(mode);
    o.hello_timeout = 20s;
    o.silence_timeout = 20s;
    return o;
  }

  std::vector<json> log_lines(const std::string& name) const {
    std::vector<json> out;
    std::istringstream in(kopt::test::read_text(dir_ / name));
    std::string line;
    while (std::getline(in, line))
      if (!line.empty()) out.push_back(json::parse(line));
    return out;
  }

  std::vector<json> evaluate_requests() const {
    std::vector<json> out;
    for (auto& r : log_lines("requests.log"))
      if (r.value("type", "") == "evaluate") out.push_back(r);
    return out;
  }

  static json request(std::vector<std::string> workloads = {"w1", "w2", "w3"}) {
    return {{"operator", {{"name", "fake_op"}}},
            {"subjects", json::array({{{"role", "candidate"}, {"candidate", {{"source", "cand"}}}},
                                      {{"role", "baseline"}, {"candidate", {{"source", "base"}}}}})},
            {"workloads", workloads}};
  }

  // A request written as JSON, read through the protocol.
  static kopt::protocol::evaluate_request typed(json req) {
    req["type"] = "evaluate";
    req["protocol"] = kopt::protocol::version;
    return std::get<kopt::protocol::evaluate_request>(kopt::protocol::parse_request(req));
  }

  static std::vector<std::string> roles_of(const json& req) {
    std::vector<std::string> r;
    for (const auto& s : req.at("subjects")) r.push_back(s.at("role").get<std::string>());
    return r;
  }

  kopt::test::scratch_dir dir_;
};

}  // namespace

TEST_F(FakeWorker, HelloAndShutdown) {
  auto o = options("normal");
  o.gpu = 3;
  o.cache_dir = (dir_ / "cache").string();
  {
    worker_client c(o);
    const auto& hello = c.start();
    EXPECT_EQ(hello.device.at("name"), "Fake GPU");
    EXPECT_EQ(hello.protocol, kopt::protocol::version);
    EXPECT_EQ(hello.worker_version, "fake");
    // A second start() reuses the running worker.
    c.start();
    c.stop();
  }
  const auto starts = log_lines("starts.log");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].at("argv"), json::array({"--gpu", "3", "--cache-dir", (dir_ / "cache").string()}));
  const auto reqs = log_lines("requests.log");
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].at("type"), "shutdown");
}

TEST_F(FakeWorker, NormalEvaluation) {
  worker_client c(options("normal"));
  std::vector<std::string> seen;
  const auto rep = c.evaluate(request(), [&](const kopt::protocol::message& m) {
    seen.push_back(json(m).value("type", ""));
  });
  EXPECT_EQ(rep.restarts, 0);
  EXPECT_TRUE(rep.events.empty());
  EXPECT_EQ(rep.device.at("name"), "Fake GPU");
  EXPECT_EQ(rep.compiled.size(), 3u);  // reference, candidate, baseline
  EXPECT_TRUE(rep.compiled.count("reference"));
  for (const char* w : {"w1", "w2", "w3"}) {
    ASSERT_TRUE(rep.results.count(w)) << w;
    EXPECT_EQ(rep.results.at(w).at("candidate").status, kopt::protocol::outcome::ok) << w;
    EXPECT_EQ(rep.results.at(w).at("baseline").status, kopt::protocol::outcome::ok) << w;
    EXPECT_DOUBLE_EQ(rep.results.at(w).at("candidate").detail.at("timing").at("median_ns").get<double>(), 1002.0);
  }
  EXPECT_EQ(seen.front(), "compiled");
  EXPECT_EQ(seen.back(), "done");
  const auto reqs = evaluate_requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].at("type"), "evaluate");
  EXPECT_EQ(reqs[0].at("protocol"), kopt::protocol::version);
  EXPECT_TRUE(reqs[0].contains("id"));
  EXPECT_EQ(reqs[0].at("operator").at("name"), "fake_op");
  // A second evaluation on the same worker gets a new id.
  (void)c.evaluate(request({"w3"}));
  const auto reqs2 = evaluate_requests();
  ASSERT_EQ(reqs2.size(), 2u);
  EXPECT_NE(reqs2[0].at("id"), reqs2[1].at("id"));
  EXPECT_EQ(reqs2[1].at("workloads"), json::array({"w3"}));
  EXPECT_EQ(log_lines("starts.log").size(), 1u);
}

TEST_F(FakeWorker, CandidateCrashRestartsWithoutItAndOnlyTheRest) {
  worker_client c(options("crash_candidate"));
  const auto rep = c.evaluate(request());
  EXPECT_EQ(rep.restarts, 1);
  ASSERT_EQ(rep.events.size(), 1u);
  EXPECT_NE(rep.events[0].find("crashed"), std::string::npos) << rep.events[0];
  EXPECT_NE(rep.events[0].find("candidate"), std::string::npos) << rep.events[0];
  EXPECT_NE(rep.events[0].find("w2"), std::string::npos) << rep.events[0];

  // What the fake worker received: first everything, then the baseline
  // alone on the workloads not finished (w2, w3).
  const auto reqs = evaluate_requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(roles_of(reqs[0]), (std::vector<std::string>{"candidate", "baseline"}));
  EXPECT_EQ(reqs[0].at("workloads"), json::array({"w1", "w2", "w3"}));
  EXPECT_EQ(roles_of(reqs[1]), std::vector<std::string>{"baseline"});
  EXPECT_EQ(reqs[1].at("workloads"), json::array({"w2", "w3"}));
  EXPECT_NE(reqs[0].at("id"), reqs[1].at("id"));
  EXPECT_EQ(log_lines("starts.log").size(), 2u);

  // Results: the candidate ran w1, crashed on w2 and is not run on w3; the
  // baseline has all three.
  EXPECT_EQ(rep.results.at("w1").at("candidate").status, kopt::protocol::outcome::ok);
  EXPECT_EQ(rep.results.at("w2").at("candidate").status, kopt::protocol::outcome::crashed);
  EXPECT_EQ(rep.results.at("w2").at("candidate").message, "an illegal memory access was encountered");
  EXPECT_EQ(rep.results.at("w3").at("candidate").status, kopt::protocol::outcome::crashed);
  EXPECT_NE(rep.results.at("w3").at("candidate").message.find("not run"), std::string::npos)
      << rep.results.at("w3").at("candidate").message;
  for (const char* w : {"w1", "w2", "w3"})
    EXPECT_EQ(rep.results.at(w).at("baseline").status, kopt::protocol::outcome::ok) << w;
}

TEST_F(FakeWorker, SilentDeathIsChargedToTheWorkloadForEveryone) {
  worker_client c(options("die_silently"));
  const auto rep = c.evaluate(request());
  EXPECT_EQ(rep.restarts, 1);
  // No culprit known: w2 is recorded as crashed for every subject and the
  // reference, and the rest (w3) is resent with all subjects.
  for (const char* role : {"candidate", "baseline", "reference"}) {
    ASSERT_TRUE(rep.results.at("w2").count(role)) << role;
    EXPECT_EQ(rep.results.at("w2").at(role).status, kopt::protocol::outcome::crashed) << role;
  }
  const auto& msg = rep.results.at("w2").at("candidate").message;
  EXPECT_NE(msg.find("signal 11"), std::string::npos) << msg;
  EXPECT_NE(msg.find("segfault now"), std::string::npos) << msg;  // the worker's stderr
  const auto reqs = evaluate_requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(roles_of(reqs[1]), (std::vector<std::string>{"candidate", "baseline"}));
  EXPECT_EQ(reqs[1].at("workloads"), json::array({"w3"}));
  EXPECT_EQ(rep.results.at("w1").at("candidate").status, kopt::protocol::outcome::ok);
  EXPECT_EQ(rep.results.at("w3").at("candidate").status, kopt::protocol::outcome::ok);
  EXPECT_EQ(rep.results.at("w3").at("baseline").status, kopt::protocol::outcome::ok);
}

TEST_F(FakeWorker, SilenceTimeout) {
  auto o = options("hang");
  o.silence_timeout = 1s;
  worker_client c(o);
  const auto t0 = std::chrono::steady_clock::now();
  const auto rep = c.evaluate(request());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 15.0);
  EXPECT_GE(took, 1.0);
  EXPECT_EQ(rep.restarts, 1);
  ASSERT_FALSE(rep.events.empty());
  EXPECT_NE(rep.events[0].find("silent"), std::string::npos) << rep.events[0];
  // The hang happened in w1 (after workload_begin): timeout for everyone there.
  ASSERT_TRUE(rep.results.count("w1"));
  EXPECT_EQ(rep.results.at("w1").at("candidate").status, kopt::protocol::outcome::timeout);
  EXPECT_EQ(rep.results.at("w1").at("baseline").status, kopt::protocol::outcome::timeout);
  // The restarted worker (which does not hang) did the rest.
  const auto reqs = evaluate_requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].at("workloads"), json::array({"w2", "w3"}));
  EXPECT_EQ(rep.results.at("w2").at("candidate").status, kopt::protocol::outcome::ok);
  EXPECT_EQ(rep.results.at("w3").at("baseline").status, kopt::protocol::outcome::ok);
}

TEST_F(FakeWorker, GivesUpAfterMaxRestarts) {
  auto o = options("crash_candidate");
  o.max_restarts = 1;
  worker_client c(o);
  json req = request();
  // Only the candidate: once it is dropped nothing is left anyway.
  req["subjects"] = json::array({{{"role", "candidate"}, {"candidate", {{"source", "cand"}}}}});
  const auto rep = c.evaluate(req);
  EXPECT_EQ(rep.restarts, 1);
  EXPECT_EQ(rep.results.at("w2").at("candidate").status, kopt::protocol::outcome::crashed);
  EXPECT_EQ(evaluate_requests().size(), 1u);
}

TEST_F(FakeWorker, HelloRefusedThrowsWithTheReason) {
  worker_client c(options("hello_fail"));
  try {
    c.start();
    FAIL() << "start() accepted ok=false";
  } catch (const kopt::error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device: the driver is not loaded"), std::string::npos) << e.what();
  }
}

TEST_F(FakeWorker, SilentAtHelloTimesOut) {
  auto o = options("silent");
  o.hello_timeout = 1s;
  worker_client c(o);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c.start();
    FAIL() << "start() returned without a hello";
  } catch (const kopt::error& e) {
    EXPECT_NE(std::string(e.what()).find("silent"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

TEST_F(FakeWorker, ProtocolMismatchThrows) {
  worker_client c(options("bad_protocol"));
  try {
    c.start();
    FAIL() << "start() accepted another protocol version";
  } catch (const kopt::error& e) {
    const std::string theirs = "speaks protocol " + std::to_string(kopt::protocol::version + 1);
    EXPECT_NE(std::string(e.what()).find(theirs), std::string::npos) << e.what();
  }
}

TEST_F(FakeWorker, NonProtocolOutputIsSkipped) {
  worker_client c(options("noise"));
  EXPECT_EQ(c.start().device.at("name"), "Fake GPU");
  const auto rep = c.evaluate(request({"w1"}));
  EXPECT_EQ(rep.results.at("w1").at("candidate").status, kopt::protocol::outcome::ok);
}

TEST_F(FakeWorker, RejectedRequestThrows) {
  worker_client c(options("reject"));
  try {
    (void)c.evaluate(request());
    FAIL() << "an error answer was not raised";
  } catch (const request_rejected& e) {
    // An error without a code (an older evaluator path) reads as a refusal.
    EXPECT_EQ(e.code(), kopt::protocol::error_code::rejected);
    EXPECT_NE(std::string(e.what()).find("operator snapshot does not validate"), std::string::npos) << e.what();
  }
  worker_client c2(options("internal_error"));
  try {
    (void)c2.evaluate(request());
    FAIL() << "an error answer was not raised";
  } catch (const request_rejected& e) {
    EXPECT_EQ(e.code(), kopt::protocol::error_code::internal);
  }
}

TEST_F(FakeWorker, StaleMessagesAreIgnored) {
  worker_client c(options("stale"));
  const auto rep = c.evaluate(request());
  EXPECT_EQ(rep.results.at("w1").at("candidate").status, kopt::protocol::outcome::ok);
  EXPECT_EQ(rep.results.at("w1").at("baseline").status, kopt::protocol::outcome::ok);
}

TEST_F(FakeWorker, EvaluateNeedsWorkloads) {
  worker_client c(options("normal"));
  json req = request();
  req.erase("workloads");
  EXPECT_THROW((void)c.evaluate(req), kopt::error);
}

TEST_F(FakeWorker, CallMatchesTheAnswerById) {
  worker_client c(options("normal"));
  const auto a = c.call(kopt::protocol::ping_request{}, 10s);
  ASSERT_TRUE(std::holds_alternative<kopt::protocol::pong>(a)) << json(a).dump();
  const auto b = c.call(kopt::protocol::ping_request{}, 10s);
  EXPECT_NE(kopt::protocol::answer_id(a), kopt::protocol::answer_id(b));
  EXPECT_EQ(log_lines("starts.log").size(), 1u);  // one worker answered both
  const auto reqs = log_lines("requests.log");
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].at("id"), kopt::protocol::answer_id(a));
}

TEST_F(FakeWorker, CallOnMuteWorkerTimesOut) {
  worker_client c(options("mute"));  // says hello, then never answers
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)c.call(kopt::protocol::ping_request{}, 1s);
    FAIL() << "call() returned without an answer";
  } catch (const kopt::error& e) {
    EXPECT_NE(std::string(e.what()).find("silent"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  // The next call starts a fresh worker.
  EXPECT_THROW((void)c.call(kopt::protocol::ping_request{}, 1s), kopt::error);
  EXPECT_EQ(log_lines("starts.log").size(), 2u);
}

TEST_F(FakeWorker, LaunchPrefixAndScrubbedEnvironment) {
  ASSERT_EQ(setenv("OPENAI_API_KEY", "sk-should-not-leak", 1), 0);
  ASSERT_EQ(setenv("ANTHROPIC_API_KEY", "sk-ant-should-not-leak", 1), 0);
  auto o = options("normal");
  o.launch_prefix = {"/usr/bin/env", "KOPT_WORKER_PREFIXED=yes"};
  {
    worker_client c(o);
    c.start();
  }
  unsetenv("OPENAI_API_KEY");
  unsetenv("ANTHROPIC_API_KEY");
  const auto starts = log_lines("starts.log");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].at("prefixed"), "yes");
  EXPECT_EQ(starts[0].at("has_openai_key"), false);
  EXPECT_EQ(starts[0].at("has_anthropic_key"), false);
  EXPECT_EQ(starts[0].at("argv"), json::array({"--gpu", "0"}));
}

TEST_F(FakeWorker, MissingWorkerExecutableThrows) {
  worker_options o;
  o.worker_exe = (dir_ / "no-such-worker").string();
  worker_client c(o);
  EXPECT_THROW(c.start(), kopt::error);
}

TEST_F(FakeWorker, ClockLostRestartsAndMeasuresTheWorkloadAgainWithEverySubject) {
  worker_client c(options("clock_lost"));
  const auto rep = c.evaluate(request());
  EXPECT_EQ(rep.restarts, 1);
  ASSERT_EQ(rep.events.size(), 1u);
  EXPECT_NE(rep.events[0].find("clock lost"), std::string::npos) << rep.events[0];
  // Not the baseline's fault: both subjects are sent again for w2 and w3,
  // and both end ok everywhere.
  const auto reqs = evaluate_requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(roles_of(reqs[1]), (std::vector<std::string>{"candidate", "baseline"}));
  EXPECT_EQ(reqs[1].at("workloads"), json::array({"w2", "w3"}));
  for (const char* w : {"w1", "w2", "w3"})
    for (const char* r : {"candidate", "baseline"})
      EXPECT_EQ(rep.results.at(w).at(r).status, kopt::protocol::outcome::ok) << w << " " << r;
}

TEST_F(FakeWorker, CountersComeFromASeparateProfileOnlyWorker) {
  worker_options o = options("profile");
  worker_client timing(o);
  worker_client profiler(profiler_options(o));
  json req = request({"w1", "w2"});
  req["settings"] = {{"seeds", 3}, {"counters", "default"}};
  const auto rep = evaluate_with_counters(timing, &profiler, typed(req));
  for (const char* w : {"w1", "w2"})
    for (const char* r : {"candidate", "baseline"}) {
      const auto& res = rep.results.at(w).at(r);
      EXPECT_EQ(res.status, kopt::protocol::outcome::ok);
      EXPECT_TRUE(res.detail.contains("timing")) << "timing comes from the timing worker";
      ASSERT_TRUE(res.detail.contains("counters")) << w << " " << r;
      EXPECT_EQ(res.detail.at("counters").at("metrics").at("dram__bytes_read.sum"), 42.0);
    }
  // Two processes: the timing worker never saw a counters setting; the
  // profiling worker was started with --profile-only, got one seed, and
  // exited after its request.
  const auto starts = log_lines("starts.log");
  ASSERT_EQ(starts.size(), 2u);
  const auto reqs = evaluate_requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].at("settings").at("counters"), "none");
  EXPECT_TRUE(reqs[0].at("settings").at("metrics").empty());
  EXPECT_EQ(reqs[0].at("settings").at("seeds"), 3);
  EXPECT_EQ(reqs[1].at("settings").at("counters"), "default");
  EXPECT_EQ(reqs[1].at("settings").at("seeds"), 1);
  bool profile_only = false;
  for (const auto& s : starts)
    for (const auto& a : s.at("argv"))
      if (a == "--profile-only") profile_only = true;
  EXPECT_TRUE(profile_only);
  // Nothing asked: no profiling worker is started.
  json plain = request({"w1"});
  worker_client t2(options("profile"));
  worker_client p2(profiler_options(options("profile")));
  const auto rep2 = evaluate_with_counters(t2, &p2, typed(plain));
  EXPECT_FALSE(rep2.results.at("w1").at("candidate").detail.contains("counters"));
}

TEST_F(FakeWorker, AnUnknownMetricIsTheCallersErrorAMissingProfilerIsAnEvent) {
  json req = request({"w1"});
  req["settings"] = {{"metrics", {"dram__byts.sum"}}};
  {
    worker_client timing(options("bad_metric"));
    worker_client profiler(profiler_options(options("bad_metric")));
    try {
      (void)evaluate_with_counters(timing, &profiler, typed(req));
      FAIL() << "an unknown metric did not fail the request";
    } catch (const request_rejected& e) {
      EXPECT_EQ(e.code(), kopt::protocol::error_code::unknown_metric);
      EXPECT_NE(std::string(e.what()).find("dram__byts.sum"), std::string::npos) << e.what();
    }
  }
  worker_client timing(options("no_counters"));
  worker_client profiler(profiler_options(options("no_counters")));
  const auto rep = evaluate_with_counters(timing, &profiler, typed(req));
  EXPECT_EQ(rep.results.at("w1").at("candidate").status, kopt::protocol::outcome::ok);
  EXPECT_TRUE(rep.results.at("w1").at("candidate").detail.contains("timing"));
  ASSERT_EQ(rep.events.size(), 1u);
  EXPECT_NE(rep.events[0].find("counters failed"), std::string::npos) << rep.events[0];
  EXPECT_NE(rep.events[0].find("ERR_NVGPUCTRPERM"), std::string::npos) << rep.events[0];
}
