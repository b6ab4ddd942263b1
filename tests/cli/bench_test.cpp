// The benchmark suite (configs/bench) and `kopt bench` without a GPU:
// every config validates; every Atrex-Bench operator has a config and every
// shape exactly one workload; the roofline expressions reproduce the
// Atrex-Bench FLOP and byte counts per shape (exactly, or within the
// documented tolerance of configs/bench/data/roofline_tolerances.json for
// counts taken from one random draw); the weights follow the weight rule;
// and the command's argument errors, suite discovery, --ops filtering and
// compile-only path (exit 5).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "../store/temp_dir.hpp"
#include "config/operator.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path suite_dir = fs::path(KOPT_SOURCE_DIR) / "configs" / "bench";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> suite_configs() {
  std::vector<fs::path> out;
  if (!fs::is_directory(suite_dir)) return out;
  for (const auto& e : fs::directory_iterator(suite_dir))
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Atrex-Bench operators with data in configs/bench/data (not the tolerance table).
std::vector<std::string> data_ops() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(suite_dir / "data"))
    if (e.path().extension() == ".json" && e.path().stem() != "roofline_tolerances")
      out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The data operator a config belongs to: its name, or the longest operator
// name that prefixes it followed by "_" (per-dtype splits such as
// paged_attention_decode_fp16).
std::string op_of(const std::string& stem, const std::vector<std::string>& ops) {
  std::string best;
  for (const auto& o : ops)
    if ((stem == o || stem.rfind(o + "_", 0) == 0) && o.size() > best.size()) best = o;
  return best;
}

TEST(BenchSuite, EveryConfigValidatesAndEveryShapeHasOneWorkload) {
  const auto configs = suite_configs();
  if (configs.empty()) GTEST_SKIP() << "no configs/bench yet";
  const auto ops = data_ops();
  ASSERT_EQ(ops.size(), 24u);
  std::map<std::string, std::multiset<std::string>> covered;
  for (const auto& p : configs) {
    auto loaded = kopt::config::load_operator_file(p.string());
    std::string diags;
    for (const auto& d : loaded.diagnostics)
      if (d.level == kopt::config::diagnostic::severity::error) diags += d.to_string() + "\n";
    ASSERT_TRUE(loaded.ok()) << diags;
    const std::string op = op_of(p.stem().string(), ops);
    ASSERT_FALSE(op.empty()) << p << " belongs to no Atrex-Bench operator";
    for (const auto& w : loaded.op->workloads) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(w.id, m, std::regex("^s([0-9]+)_"))) << p << ": " << w.id;
      covered[op].insert(m[1].str());
    }
  }
  for (const auto& op : ops) {
    const json data = json::parse(slurp(suite_dir / "data" / (op + ".json")));
    std::multiset<std::string> want;
    for (const auto& [sid, s] : data.at("shapes").items()) want.insert(sid);
    EXPECT_EQ(covered[op], want) << op << ": every Atrex-Bench shape needs exactly one workload";
  }
}

TEST(BenchSuite, RooflineMatchesAtrexCountsAndWeightsFollowTheRule) {
  const auto configs = suite_configs();
  if (configs.empty()) GTEST_SKIP() << "no configs/bench yet";
  const auto ops = data_ops();
  const json tol = json::parse(slurp(suite_dir / "data" / "roofline_tolerances.json")).at("operators");
  std::size_t checked = 0;
  for (const auto& p : configs) {
    auto loaded = kopt::config::load_operator_file(p.string());
    ASSERT_TRUE(loaded.ok()) << p;
    const std::string op = op_of(p.stem().string(), ops);
    const json shapes = json::parse(slurp(suite_dir / "data" / (op + ".json"))).at("shapes");
    const double ftol = tol.contains(op) ? tol[op].value("flops", 0.0) : 0.0;
    const double btol = tol.contains(op) ? tol[op].value("bytes", 0.0) : 0.0;
    for (const auto& w : loaded.op->workloads) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(w.id, m, std::regex("^s([0-9]+)_")));
      const json& s = shapes.at(m[1].str());
      double want_flops = 0;
      for (const auto& [unit, v] : s.at("flops").items()) want_flops += v.get<double>();
      const double want_bytes = s.at("read_bytes").get<double>() + s.at("write_bytes").get<double>();
      const double flops = static_cast<double>(kopt::config::roofline_flops(*loaded.op, w));
      const double bytes = static_cast<double>(kopt::config::roofline_bytes(*loaded.op, w));
      EXPECT_LE(std::abs(flops - want_flops), ftol * std::max(want_flops, 1.0))
          << p.stem() << " " << w.id << ": flops " << flops << " vs Atrex-Bench " << want_flops;
      EXPECT_LE(std::abs(bytes - want_bytes), btol * std::max(want_bytes, 1.0))
          << p.stem() << " " << w.id << ": bytes " << bytes << " vs Atrex-Bench " << want_bytes;
      EXPECT_NEAR(w.weight, s.at("weight").get<double>(), 1e-12 + 1e-9 * w.weight) << p.stem() << " " << w.id;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0u);
}

// ------------------------------------------------------------ kopt bench
struct result {
  int code = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class BenchCli : public ::testing::Test {
 protected:
  result kopt(const std::vector<std::string>& args) {
    std::string cmd = "cd " + quote(dir_.path().string()) + " && env -u KOPT_DB -u XDG_STATE_HOME HOME=" +
                      quote((dir_ / "home").string()) + " " + quote(KOPT_BIN);
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " >" + quote((dir_ / "out").string()) + " 2>" + quote((dir_ / "err").string());
    const int st = std::system(cmd.c_str());
    result r;
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp(dir_ / "out");
    r.err = slurp(dir_ / "err");
    return r;
  }
  void SetUp() override {
    if (kopt({"bench", "--help"}).code != 0) GTEST_SKIP() << "kopt built without the worker: no bench command";
  }
  kopt::test::temp_dir dir_;
};

TEST_F(BenchCli, ArgumentErrors) {
  auto r = kopt({"bench", "--suite", (dir_ / "nowhere").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is not a folder"), std::string::npos) << r.err;

  fs::create_directories(dir_ / "empty");
  r = kopt({"bench", "--suite", (dir_ / "empty").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no *.json configs"), std::string::npos) << r.err;

  if (suite_configs().empty()) return;
  r = kopt({"bench", "--suite", suite_dir.string(), "--ops", "rms_norm,no_such_op", "--list"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no operator \"no_such_op\""), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());

  EXPECT_EQ(kopt({"bench", "--launch-bound-us", "-1"}).code, 2);
  EXPECT_EQ(kopt({"bench", "--frobnicate"}).code, 2);
}

TEST_F(BenchCli, DiscoversTheSuiteAndFiltersOps) {
  const auto configs = suite_configs();
  if (configs.empty()) GTEST_SKIP() << "no configs/bench yet";
  auto r = kopt({"bench", "--suite", suite_dir.string(), "--list"});
  EXPECT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<std::string> names;
  for (std::string l; std::getline(lines, l);) names.push_back(l.substr(0, l.find(' ')));
  ASSERT_EQ(names.size(), configs.size()) << r.out;
  for (std::size_t i = 0; i < configs.size(); ++i) EXPECT_EQ(names[i], configs[i].stem().string());

  r = kopt({"bench", "--suite", suite_dir.string(), "--ops", "silu_and_mul,rms_norm", "--list"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("rms_norm ", 0), 0u) << r.out;  // suite order, not --ops order
  EXPECT_NE(r.out.find("\nsilu_and_mul "), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2);
}

TEST_F(BenchCli, WithoutAWorkerItCompileChecksAndExits5) {
  // Copy two small configs into a private suite, so the run is short; the
  // launch prefix /bin/false keeps the worker from starting even on a GPU
  // machine (the compile checks run kopt-worker directly).
  for (const auto* n : {"rms_norm", "silu_and_mul"}) {
    if (!fs::exists(suite_dir / (std::string(n) + ".json"))) GTEST_SKIP() << "no configs/bench/" << n;
  }
  fs::create_directories(dir_ / "suite");
  for (const auto& e : fs::directory_iterator(suite_dir))
    if (e.is_regular_file() && (e.path().filename().string().rfind("rms_norm", 0) == 0 ||
                                e.path().filename().string().rfind("silu_and_mul", 0) == 0))
      fs::copy_file(e.path(), dir_ / "suite" / e.path().filename());
  const std::string suite = (dir_ / "suite").string();
  auto r = kopt({"bench", "--suite", suite, "--no-store", "--launch-prefix", "/bin/false"});
  EXPECT_EQ(r.code, 5) << r.out << r.err;
  EXPECT_NE(r.out.find("need a GPU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rms_norm"), std::string::npos) << r.out;

  r = kopt({"bench", "--suite", suite, "--ops", "rms_norm", "--no-store", "--launch-prefix", "/bin/false",
            "--json"});
  EXPECT_EQ(r.code, 5) << r.err;
  const json j = json::parse(r.out);
  EXPECT_FALSE(j.at("gpu").get<bool>());
  ASSERT_EQ(j.at("operators").size(), 1u);
  EXPECT_EQ(j["operators"][0]["name"], "rms_norm");
  EXPECT_EQ(j["operators"][0]["status"], "needs_gpu");
  bool reference_ok = false;
  for (const auto& c : j["operators"][0]["compile_checks"])
    if (c["role"] == "reference") reference_ok = c["status"] == "ok";
  EXPECT_TRUE(reference_ok) << j.dump(2);
  EXPECT_GT(j["total"]["weight"].get<double>(), 0.0);
}

// A stored bench run keeps its evaluations: the baseline's rows reach the
// store (they once failed the store's stage rule, and the command printed a
// SQL error instead). The stand-in worker reports every workload correct,
// so the figures are not measurements; only what is stored is checked.
TEST_F(BenchCli, StoresTheBaselinesEvaluations) {
  const fs::path fake = fs::path(KOPT_SOURCE_DIR) / "tests/cli/fake_worker.py";
  const fs::path real = fs::path(KOPT_BIN).parent_path() / "kopt-worker";
  if (!fs::exists(real)) GTEST_SKIP() << "kopt-worker is not built: the stand-in worker compiles with it";
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is missing";
  if (!fs::exists(suite_dir / "silu_and_mul.json")) GTEST_SKIP() << "no configs/bench/silu_and_mul";
  fs::create_directories(dir_ / "suite");
  for (const auto& e : fs::directory_iterator(suite_dir))
    if (e.is_regular_file() && e.path().filename().string().rfind("silu_and_mul", 0) == 0)
      fs::copy_file(e.path(), dir_ / "suite" / e.path().filename());
  const std::string db = (dir_ / "k.db").string();
  ASSERT_EQ(setenv("FAKE_WORKER_DELAY_S", "0", 1), 0);
  ASSERT_EQ(setenv("FAKE_WORKER_REAL", real.c_str(), 1), 0);
  auto r = kopt({"--db", db, "bench", "--suite", (dir_ / "suite").string(), "--worker", fake.string(),
                 "--json"});
  unsetenv("FAKE_WORKER_DELAY_S");
  unsetenv("FAKE_WORKER_REAL");
  // 1: the stand-in's made-up times fail the speed-of-light rule on some
  // workloads, which is an invalid result, not a failed command.
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.out << r.err;
  EXPECT_EQ(r.err.find("CHECK constraint"), std::string::npos) << r.err;
  r = kopt({"--db", db, "show", "candidate", "1", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json cand = json::parse(r.out);
  EXPECT_EQ(cand.at("origin"), "baseline");
  auto loaded = kopt::config::load_operator_file((suite_dir / "silu_and_mul.json").string());
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(cand.at("evaluations").size(), loaded.op->workloads.size()) << r.out.substr(0, 2000);
  for (const auto& e : cand["evaluations"]) EXPECT_EQ(e.at("stage"), "full");
}

}  // namespace
