// Issue 18 at the command line: exit codes and messages for bad input.
// `kopt validate` on a number no double holds and on a file name that is
// not UTF-8 (exit 1 with a located error, never 10); `kopt submit` never
// reads an API key file; `kopt eval` without a GPU exits 1 (not 5, "no
// GPU") when the reference does not compile, and NVRTC's log names the
// config's own source file; the compile check refuses a plan that does not
// match its kernel's signature, a kernel missing from the source, a
// generator kernel with the wrong signature and shared memory above the
// architecture's limit; and render's fmt_double on large values.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../store/temp_dir.hpp"
#include "cli/render.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

void spit(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

json base_config() {
  return json::parse(R"JSON({
    "name": "scale",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
    "roofline": {"flops": "n", "flop_unit": "fp32"},
    "workloads": [{"id": "a", "axes": {"n": 1024}}, {"id": "b", "axes": {"n": 4096}}],
    "reference": {
      "source": "extern \"C\" __global__ void ref(const float* x, float* y, long long n) { long long i = blockIdx.x * 256 + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }",
      "launches": [{"kernel": "ref", "grid": ["ceil_div(n, 256)"], "block": [256],
                    "args": [{"tensor": "x"}, {"tensor": "y"}, {"int": "n", "type": "int64"}]}]
    }
  })JSON");
}

class CliHardening : public ::testing::Test {
 protected:
  result kopt(const std::vector<std::string>& args) {
    std::string cmd = "cd " + quote(dir_.path().string()) +
                      " && env -u KOPT_DB HOME=" + quote((dir_ / "home").string()) +
                      " KOPT_CACHE_DIR=" + quote((dir_ / "cache").string());
    cmd += " " + quote(KOPT_BIN);
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " >" + quote((dir_ / "o.txt").string()) + " 2>" + quote((dir_ / "e.txt").string());
    const int st = std::system(cmd.c_str());
    result r;
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp(dir_ / "o.txt");
    r.err = slurp(dir_ / "e.txt");
    return r;
  }
  fs::path write(const std::string& name, const json& j) {
    spit(dir_ / name, j.dump(2));
    return dir_ / name;
  }
  std::string db() const { return (dir_ / "kopt.db").string(); }
  kopt::test::temp_dir dir_;
};

bool have_worker() {
  return fs::exists(fs::path(KOPT_BIN).parent_path() / "kopt-worker");
}

}  // namespace

TEST(Render, FmtDoubleOfLargeValuesIsExact) {
  // 1e59 with 2 digits needs 63 characters, 1e300 needs 304: the old
  // 64-byte buffer returned snprintf's would-be length and so stack bytes.
  char buf[512];
  for (double v : {1e59, 1e300, -1.7e308, 123.456}) {
    std::snprintf(buf, sizeof buf, "%.2f", v);
    EXPECT_EQ(kopt::cli::fmt_double(v, 2), std::string(buf));
  }
}

TEST_F(CliHardening, ValidateNumberTooLargeIsExit1WithPosition) {
  spit(dir_ / "big.json", "{\n  \"name\": 1e400\n}\n");
  const auto r = kopt({"validate", "big.json"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("big.json:2:11: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("number 1e400 is out of the range of a double"), std::string::npos) << r.err;
  EXPECT_EQ(kopt({"--db", db(), "submit", "big.json"}).code, 1);
}

TEST_F(CliHardening, ValidateJsonOnANonUtf8FileName) {
  const std::string name = "op\xff.json";
  spit(dir_ / name, "{\"name\": ");
  auto r = kopt({"validate", "--json", name});
  EXPECT_EQ(r.code, 1) << r.err;
  json j;
  ASSERT_NO_THROW(j = json::parse(r.out)) << r.out;
  EXPECT_EQ(j["files"][0]["file"], "op\\xff.json");
}

TEST_F(CliHardening, SubmitNeverReadsAnApiKeyFile) {
  fs::create_directories(dir_ / "cfg");
  spit(dir_ / "openai.key", "sk-proj-ABCDEFsecret0123456789\n");
  ::chmod((dir_ / "openai.key").c_str(), 0600);
  auto j = base_config();
  j["seed"] = j["reference"];
  j["seed"].erase("source");
  j["seed"]["source_file"] = "../openai.key";
  write("cfg/op.json", j);
  const auto r = kopt({"--db", db(), "submit", "cfg/op.json"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("like an API key file"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("ABCDEFsecret"), std::string::npos);
  if (fs::exists(db())) EXPECT_EQ(slurp(db()).find("ABCDEFsecret"), std::string::npos);
}

TEST_F(CliHardening, EvalOfAReferenceThatDoesNotCompileIsExit1AndNamesTheFile) {
  if (!have_worker()) GTEST_SKIP() << "no kopt-worker in this build (KOPT_ENABLE_WORKER=OFF)";
  spit(dir_ / "broken_ref.cu",
       "extern \"C\" __global__ void ref(const float* x, float* y, long long n) { oops; }\n");
  auto j = base_config();
  j["reference"].erase("source");
  j["reference"]["source_file"] = "broken_ref.cu";
  write("op.json", j);
  const auto r = kopt({"eval", "op.json", "--no-store"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("broken_ref.cu("), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("reference.cu"), std::string::npos) << r.out;
  // A good config without a GPU still exits 5 (no GPU).
  write("good.json", base_config());
  const auto g = kopt({"eval", "good.json", "--no-store", "--json"});
  if (g.out.find("\"gpu\": true") == std::string::npos) EXPECT_EQ(g.code, 5) << g.out << g.err;
}

TEST_F(CliHardening, CompileCheckRefusesPlansTheKernelsCannotTake) {
  if (!have_worker()) GTEST_SKIP() << "no kopt-worker in this build (KOPT_ENABLE_WORKER=OFF)";
  struct bad_case {
    const char* what;
    std::function<void(json&)> patch;
    const char* role;
    const char* message;
  };
  const std::vector<bad_case> cases = {
      {"int32 where the kernel takes long long",
       [](json& j) { j["reference"]["launches"][0]["args"][2]["type"] = "int32"; }, "reference",
       "argument 2 is int \"n\" as int32 (4 bytes), but parameter 2 of the kernel is 8 bytes"},
      {"an argument missing", [](json& j) { j["reference"]["launches"][0]["args"].erase(2); },
       "reference", "passes 2 argument(s) but the kernel takes 3"},
      {"a kernel name not in the source",
       [](json& j) {
         j["seed"] = j["reference"];
         j["seed"]["launches"][0]["kernel"] = "ref_v2";
       },
       "seed", "has no kernel 'ref_v2'"},
      {"a generator kernel with the wrong signature",
       [](json& j) {
         j["inputs"]["x"]["generator"] = {
             {"kind", "kernel"},
             {"kernel", "fill"},
             {"source", "extern \"C\" __global__ void fill(float* d, int n) { if (n) d[0] = 1; }"}};
       },
       "generator:x",
       "a generator kernel is launched as kernel(T* data, long long n, unsigned long long seed)"},
      {"a generator kernel name missing from its source",
       [](json& j) {
         j["inputs"]["x"]["generator"] = {{"kind", "kernel"},
                                          {"kernel", "fill"},
                                          {"source",
                                           "extern \"C\" __global__ void fill2(float* d, long long "
                                           "n, unsigned long long s) {}"}};
       },
       "generator:x", "has no kernel 'fill'"},
      {"static + dynamic shared memory above sm_90's 227 KiB",
       [](json& j) {
         j["reference"]["source"] =
             "extern \"C\" __global__ void ref(const float* x, float* y, long long n) { __shared__ "
             "float s[4096]; "
             "s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); y[threadIdx.x] = s[255 - "
             "threadIdx.x]; }";
         j["reference"]["launches"][0]["shared_bytes"] = "225000";
       },
       "reference", "opt-in limit"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto j = base_config();
    c.patch(j);
    write("case.json", j);
    const auto r = kopt({"eval", "case.json", "--no-store", "--json"});
    ASSERT_EQ(r.code, 1) << r.out << r.err;
    json out;
    ASSERT_NO_THROW(out = json::parse(r.out)) << r.out;
    bool found = false;
    for (const auto& cc : out.at("compile_checks"))
      if (cc.at("role") == c.role) {
        found = true;
        EXPECT_EQ(cc.at("status"), "launch_error") << cc.dump(2);
      }
    EXPECT_TRUE(found) << r.out;
    // The message itself is in the text output.
    const auto t = kopt({"eval", "case.json", "--no-store"});
    EXPECT_NE(t.out.find(c.message), std::string::npos) << t.out;
  }
}
