// The Slurm pieces that need no cluster: `--gpu auto` (which GPU a worker
// takes from SLURM_STEP_GPUS/CUDA_VISIBLE_DEVICES), telling a worker that
// was stopped from outside (scancel, preemption, time limit, SIGTERM) from
// one its candidate killed, and the worker client running the unfinished
// part of a request again in a new worker without blaming the candidate.
// test_slurm_cluster does the same through a real srun.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <map>
#include <sstream>

#include "../common/test_util.hpp"
#include "common/error.hpp"
#include "core/gpu_select.hpp"
#include "runner/worker_client.hpp"

using namespace kopt;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

harness::env_reader env_of(std::map<std::string, std::string> m) {
  return [m](const char* n) -> std::optional<std::string> {
    auto it = m.find(n);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST(GpuSelect, IndexAndAuto) {
  EXPECT_EQ(harness::resolve_gpu("3", env_of({})).ordinal, 3);
  EXPECT_EQ(harness::resolve_gpu("3", env_of({})).how, "--gpu 3");
  // A Slurm step with one GPU: CUDA renumbers the visible one as 0.
  const auto s = harness::resolve_gpu(
      "auto", env_of({{"SLURM_STEP_GPUS", "5"}, {"CUDA_VISIBLE_DEVICES", "5"}}));
  EXPECT_EQ(s.ordinal, 0);
  EXPECT_NE(s.how.find("CUDA_VISIBLE_DEVICES=5"), std::string::npos) << s.how;
  EXPECT_NE(s.how.find("SLURM_STEP_GPUS=5"), std::string::npos) << s.how;
  EXPECT_EQ(s.to_json().at("slurm_step_gpus"), "5");
  // Slurm named the GPU without restricting visibility: its node index.
  const auto n = harness::resolve_gpu("auto", env_of({{"SLURM_STEP_GPUS", "6,7"}}));
  EXPECT_EQ(n.ordinal, 6);
  EXPECT_NE(n.how.find("SLURM_STEP_GPUS=6,7"), std::string::npos);
  EXPECT_EQ(harness::resolve_gpu("auto", env_of({{"SLURM_JOB_GPUS", "2"}})).ordinal,
            2);  // a batch job
  EXPECT_EQ(harness::resolve_gpu("auto", env_of({})).ordinal, 0);
  EXPECT_THROW(harness::resolve_gpu("first", env_of({})), std::invalid_argument);
  EXPECT_THROW(harness::resolve_gpu("-1", env_of({})), std::invalid_argument);
  EXPECT_THROW(harness::resolve_gpu("auto", env_of({{"SLURM_STEP_GPUS", "gpu"}})),
               std::invalid_argument);
}

TEST(StoppedFromOutside, SignalsExitCodesAndSlurmMessages) {
  auto sig = [](int s) {
    exit_status st;
    st.signal = s;
    return st;
  };
  auto code = [](int c) {
    exit_status st;
    st.exited = true;
    st.code = c;
    return st;
  };
  EXPECT_TRUE(runner::stopped_from_outside(sig(SIGTERM), ""));
  EXPECT_TRUE(runner::stopped_from_outside(sig(SIGKILL), ""));
  EXPECT_TRUE(runner::stopped_from_outside(code(143), ""));  // srun after scancel (measured)
  EXPECT_TRUE(runner::stopped_from_outside(code(137), ""));
  EXPECT_FALSE(runner::stopped_from_outside(sig(SIGSEGV), ""));
  EXPECT_FALSE(runner::stopped_from_outside(code(3), "fatal"));
  EXPECT_FALSE(runner::stopped_from_outside(code(139), ""));
  // Slurm 22.05's own words, whatever the exit code.
  EXPECT_TRUE(runner::stopped_from_outside(
      code(0), "slurmstepd-n1: error: *** STEP 3.0 ON n1 CANCELLED AT 2026-12-01T22:59:44 ***"));
  EXPECT_TRUE(runner::stopped_from_outside(
      code(1), "slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT x DUE TO TIME LIMIT ***"));
  EXPECT_TRUE(runner::stopped_from_outside(
      code(1), "*** STEP 4.0 ON n1 CANCELLED AT x DUE TO PREEMPTION ***"));
  EXPECT_TRUE(
      runner::stopped_from_outside(code(1), "srun: Job step aborted: Waiting up to 32 seconds"));
  exit_status ours = sig(SIGKILL);
  ours.timed_out = true;  // our own silence deadline: the running subject's outcome
  EXPECT_FALSE(runner::stopped_from_outside(ours, ""));
}

namespace {

// Answers every workload "ok", except that while DIR/stop-N exists the N-th
// start stops itself on workload w2 the way MODE says: SIGTERM (as scancel
// does), a Slurm cancel message and exit 143 (as srun does), or SIGSEGV (a
// crash, which stays the candidate's).
const char* kWorker = R"PY(
import json, os, signal, sys, time
MODE = "@MODE@"
DIR = "@DIR@"
starts = len(open(os.path.join(DIR, "starts.log")).readlines()) if os.path.exists(os.path.join(DIR, "starts.log")) else 0
open(os.path.join(DIR, "starts.log"), "a").write(json.dumps(sys.argv[1:]) + "\n")
def emit(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
emit({"type": "hello", "protocol": 2, "ok": True, "device": {"name": "Fake GPU"}})
for line in sys.stdin:
    req = json.loads(line)
    open(os.path.join(DIR, "requests.log"), "a").write(line)
    rid = req.get("id", "")
    if req["type"] == "shutdown":
        emit({"type": "bye", "id": rid}); sys.exit(0)
    roles = [s["role"] for s in req["subjects"]]
    for w in req["workloads"]:
        emit({"type": "workload_begin", "id": rid, "workload": w})
        if w == "w2" and (MODE == "always" or starts == 0):
            if MODE in ("sigterm", "always"):
                os.kill(os.getpid(), signal.SIGTERM)
            elif MODE == "srun_cancel":
                sys.stderr.write("slurmstepd-n1: error: *** STEP 7.0 ON n1 CANCELLED AT 2026-12-01T23:00:00 ***\n")
                sys.stderr.write("srun: error: n1: task 0: Terminated\n"); sys.stderr.flush()
                os._exit(143)
            elif MODE == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
        emit({"type": "workload_result", "id": rid, "workload": w,
              "results": [{"role": r, "status": "ok", "timing": {"median_ns": 1000.0}} for r in roles]})
    emit({"type": "done", "id": rid})
)PY";

class OutsideStopBase : public ::testing::Test {
 protected:
  runner::worker_options options(const std::string& mode) {
    std::string text = std::string("#!/usr/bin/python3\n") + kWorker;
    for (auto [k, v] :
         {std::pair<std::string, std::string>{"@MODE@", mode}, {"@DIR@", dir_.path().string()}})
      for (auto p = text.find(k); p != std::string::npos; p = text.find(k))
        text.replace(p, k.size(), v);
    kopt::test::write_text(dir_ / "worker.py", text, true);
    runner::worker_options o;
    o.worker_exe = (dir_ / "worker.py").string();
    o.gpu_auto = true;
    o.hello_timeout = 20s;
    o.silence_timeout = 20s;
    o.max_restarts = 3;
    return o;
  }
  static kopt::protocol::evaluate_request request() {
    kopt::protocol::evaluate_request r;
    r.operator_snapshot = {{"name", "op"}};
    r.subjects = {{"candidate", {{"source", "c"}}, {}}, {"baseline", {{"source", "b"}}, {}}};
    r.workloads = {"w1", "w2", "w3"};
    return r;
  }
  std::vector<json> requests() const {
    std::vector<json> out;
    std::istringstream in(kopt::test::read_text(dir_ / "requests.log"));
    for (std::string l; std::getline(in, l);)
      if (!l.empty() && json::parse(l).at("type") == "evaluate") out.push_back(json::parse(l));
    return out;
  }
  kopt::test::scratch_dir dir_;
};

class OutsideStop : public OutsideStopBase, public ::testing::WithParamInterface<std::string> {};

}  // namespace

TEST_P(OutsideStop, RequestRunsAgainWithoutBlame) {
  if (::access("/usr/bin/python3", X_OK) != 0)
    GTEST_SKIP() << "/usr/bin/python3 is needed for the fake worker";
  runner::worker_client c(options(GetParam()));
  const auto rep = c.evaluate(request());
  for (const char* w : {"w1", "w2", "w3"})
    for (const char* role : {"candidate", "baseline"}) {
      ASSERT_TRUE(rep.results.count(w) && rep.results.at(w).count(role)) << w << " " << role;
      EXPECT_EQ(rep.results.at(w).at(role).status, kopt::protocol::outcome::ok)
          << w << " " << role << ": " << rep.results.at(w).at(role).message;
    }
  EXPECT_EQ(rep.restarts, 1);
  ASSERT_FALSE(rep.events.empty());
  EXPECT_NE(rep.events.front().find("stopped from outside"), std::string::npos)
      << rep.events.front();
  // The second worker got the unfinished workloads with every subject.
  const auto rq = requests();
  ASSERT_EQ(rq.size(), 2u);
  EXPECT_EQ(rq[1].at("workloads"), json({"w2", "w3"}));
  EXPECT_EQ(rq[1].at("subjects").size(), 2u);
  // `--gpu auto` was passed to every start.
  const std::string starts = kopt::test::read_text(dir_ / "starts.log");
  EXPECT_NE(starts.find(R"(["--gpu", "auto"])"), std::string::npos) << starts;
}

INSTANTIATE_TEST_SUITE_P(Ways, OutsideStop, ::testing::Values("sigterm", "srun_cancel"));

TEST_F(OutsideStopBase, ACrashIsStillTheCandidates) {
  if (::access("/usr/bin/python3", X_OK) != 0)
    GTEST_SKIP() << "/usr/bin/python3 is needed for the fake worker";
  runner::worker_client c(options("segv"));
  const auto rep = c.evaluate(request());
  // No fatal message and no culprit: recorded for everyone on w2, as before.
  EXPECT_EQ(rep.results.at("w2").at("candidate").status, kopt::protocol::outcome::crashed);
  EXPECT_EQ(rep.results.at("w3").at("candidate").status, kopt::protocol::outcome::ok);
}

TEST_F(OutsideStopBase, StoppedEveryTimeGivesUpWithAnError) {
  if (::access("/usr/bin/python3", X_OK) != 0)
    GTEST_SKIP() << "/usr/bin/python3 is needed for the fake worker";
  runner::worker_client c(options("always"));
  try {
    c.evaluate(request());
    FAIL() << "expected an error";
  } catch (const kopt::error& e) {
    EXPECT_NE(std::string(e.what()).find("stopped from outside"), std::string::npos) << e.what();
  }
}
