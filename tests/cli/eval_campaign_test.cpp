// `kopt eval` and `kopt profile` store their evaluation as a campaign of its
// own (provider "eval"); that campaign must end `done` (evaluated) or
// `failed` (no GPU, a refused request), never stay `running`. The real
// `kopt` binary runs against a FAKE worker (a python3 script written by the
// test that speaks the JSON-lines protocol of docs/worker-protocol.md), so
// the GPU path is covered on a machine without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../store/temp_dir.hpp"
#include "protocol/protocol.hpp"
#include "store/store.hpp"

namespace fs = std::filesystem;

namespace {

const char* kPython = "/usr/bin/python3";

// MODE: ok (answers every evaluate), no_gpu (hello ok:false, exit 77),
// reject (answers evaluate with an error).
const char* kFakeWorker = R"PY(#!/usr/bin/python3
import json, sys

MODE = "@MODE@"

def emit(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()

if len(sys.argv) > 1 and sys.argv[1] == "compile":
    # Compiling needs no GPU: the real worker does it, so that the compile
    # checks of a run without a GPU pass as they would on any machine.
    import os
    real = "@REAL_WORKER@"
    if os.path.exists(real):
        os.execv(real, [real] + sys.argv[1:])
    sys.stderr.write("fake worker: no compiler here\n")
    sys.exit(1)
if MODE == "no_gpu":
    emit({"type": "hello", "protocol": @PROTOCOL@, "ok": False, "error": "no CUDA device (fake worker)"})
    sys.exit(77)
emit({"type": "hello", "protocol": @PROTOCOL@, "ok": True, "device": {"name": "Fake GPU", "arch": "sm_90a"},
      "worker_version": "fake"})
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    req = json.loads(line)
    rid = req.get("id", "")
    t = req.get("type")
    if t == "shutdown":
        emit({"type": "bye", "id": rid})
        sys.exit(0)
    if t != "evaluate":
        emit({"type": "pong", "id": rid})
        continue
    if MODE == "reject":
        emit({"type": "error", "id": rid, "message": "operator snapshot does not validate (fake)"})
        continue
    roles = [s["role"] for s in req.get("subjects", [])]
    for r in ["reference"] + roles:
        emit({"type": "compiled", "id": rid, "role": r, "status": "ok", "message": "",
              "compile": {"status": "ok", "kernels": {}}})
    timed = roles + (["reference"] if req.get("settings", {}).get("time_reference") else [])
    for w in req["workloads"]:
        emit({"type": "workload_begin", "id": rid, "workload": w})
        results = [{"role": r, "status": "ok", "message": "",
                    "correctness": [{"seed": 1, "passed": True, "outputs": {}}],
                    "timing": {"median_ns": 5000.0, "samples": 10, "rsd": 0.01}} for r in timed]
        if req.get("settings", {}).get("counters"):
            # Enough metrics that the text report walks a real std::map.
            for x in results:
                x["counters"] = {"passes": 1, "mode": "range", "wall_ms": 1.5, "outputs_verified": True,
                                 "metrics": {"fake__metric_%02d.sum" % k: 1000.0 * k for k in range(40)}}
        emit({"type": "workload_result", "id": rid, "workload": w, "results": results})
    emit({"type": "done", "id": rid})
)PY";

struct result {
  int code = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path example(const std::string& name) {
  return fs::path(KOPT_SOURCE_DIR) / "configs" / "examples" / name;
}

class EvalCampaign : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is needed for the fake worker";
    if (!fs::exists(example("rmsnorm.json"))) GTEST_SKIP() << "no configs/examples/rmsnorm.json";
  }

  fs::path fake_worker(const std::string& mode) {
    std::string src = kFakeWorker;
    auto put = [&](const std::string& key, const std::string& v) {
      for (auto p = src.find(key); p != std::string::npos; p = src.find(key))
        src.replace(p, key.size(), v);
    };
    put("@MODE@", mode);
    put("@PROTOCOL@", std::to_string(kopt::protocol::version));
    put("@REAL_WORKER@", std::string(KOPT_BINARY_DIR) + "/bin/kopt-worker");
    const fs::path p = dir_ / ("worker-" + mode + ".py");
    std::ofstream(p) << src;
    fs::permissions(p, fs::perms::owner_all);
    return p;
  }

  result kopt(const std::vector<std::string>& args) {
    std::string cmd =
        "cd " + quote(dir_.path().string()) +
        " && env -u KOPT_DB -u XDG_STATE_HOME HOME=" + quote((dir_ / "home").string()) +
        " KOPT_CACHE_DIR=" + quote((dir_ / "cache").string()) + " " + quote(KOPT_BIN);
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " >" + quote((dir_ / "stdout.txt").string()) + " 2>" +
           quote((dir_ / "stderr.txt").string());
    const int status = std::system(cmd.c_str());
    result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir_ / "stdout.txt");
    r.err = slurp(dir_ / "stderr.txt");
    return r;
  }

  // The one campaign the command stored.
  kopt::store::campaign_record only_campaign() {
    auto s = kopt::store::store::open(db(), {.read_only = true});
    const auto all = s.list_campaigns();
    EXPECT_EQ(all.size(), 1u);
    return all.empty() ? kopt::store::campaign_record{} : all.front();
  }

  std::string db() const { return (dir_ / "kopt.db").string(); }
  kopt::test::temp_dir dir_;
};

TEST_F(EvalCampaign, EvalEndsDone) {
  const auto r = kopt({"--db", db(), "eval", example("rmsnorm.json").string(), "--worker",
                       fake_worker("ok").string(), "--json"});
  if (r.code == 2 && r.err.find("eval") != std::string::npos)
    GTEST_SKIP() << "kopt built without `kopt eval`";
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const auto c = only_campaign();
  EXPECT_EQ(c.provider, "eval");
  EXPECT_EQ(c.state, kopt::store::campaign_state::done) << kopt::store::to_string(c.state);
  EXPECT_EQ(c.stop_reason.value_or(""), "evaluated");
  EXPECT_TRUE(c.finished_at.has_value());
}

TEST_F(EvalCampaign, ProfileEndsDone) {
  const auto r = kopt({"--db", db(), "profile", example("rmsnorm.json").string(), "--worker",
                       fake_worker("ok").string(), "--json"});
  if (r.code == 2 && r.err.find("profile") != std::string::npos)
    GTEST_SKIP() << "kopt built without `kopt profile`";
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const auto c = only_campaign();
  EXPECT_EQ(c.state, kopt::store::campaign_state::done) << kopt::store::to_string(c.state);
  EXPECT_TRUE(c.finished_at.has_value());
}

// The text report lists every counter. It once looped over items() of a
// temporary json (freed before the loop ran), which crashed `kopt profile
// --full` on the H200 and is a heap-use-after-free under ASan.
TEST_F(EvalCampaign, ProfileTextListsTheCounters) {
  const auto r = kopt({"--db", db(), "profile", example("rmsnorm.json").string(), "--worker",
                       fake_worker("ok").string()});
  if (r.code == 2 && r.err.find("profile") != std::string::npos)
    GTEST_SKIP() << "kopt built without `kopt profile`";
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("fake__metric_00.sum"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fake__metric_39.sum"), std::string::npos) << r.out;
}

TEST_F(EvalCampaign, NoGpuEndsFailedWithTheReason) {
  const auto r = kopt({"--db", db(), "eval", example("rmsnorm.json").string(), "--worker",
                       fake_worker("no_gpu").string()});
  if (r.code == 2 && r.err.find("eval") != std::string::npos)
    GTEST_SKIP() << "kopt built without `kopt eval`";
  EXPECT_EQ(r.code, 5) << r.err;  // exit_no_gpu
  const auto c = only_campaign();
  EXPECT_EQ(c.state, kopt::store::campaign_state::failed) << kopt::store::to_string(c.state);
  EXPECT_NE(c.stop_reason.value_or("").find("no CUDA device (fake worker)"), std::string::npos)
      << c.stop_reason.value_or("");
}

TEST_F(EvalCampaign, RefusedRequestEndsFailed) {
  const auto r = kopt({"--db", db(), "profile", example("rmsnorm.json").string(), "--worker",
                       fake_worker("reject").string()});
  if (r.code == 2 && r.err.find("profile") != std::string::npos)
    GTEST_SKIP() << "kopt built without `kopt profile`";
  EXPECT_NE(r.code, 0) << r.out;
  const auto c = only_campaign();
  EXPECT_EQ(c.state, kopt::store::campaign_state::failed) << kopt::store::to_string(c.state);
  EXPECT_NE(c.stop_reason.value_or("").find("does not validate (fake)"), std::string::npos)
      << c.stop_reason.value_or("");
}

}  // namespace
