// Issue 18, the operator config loader: bad input is an ordinary located
// error, never an exception or an internal error. A number no double holds,
// a file name that is not UTF-8, duplicate keys, weights at the extremes,
// shared memory no GPU has, one mistake repeated per workload, and which
// files a "source_file" may read (confinement to a directory after
// symlinks, never an API key file, not even through a hard link).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "config/operator.hpp"

namespace fs = std::filesystem;
using namespace kopt::config;

namespace {

std::string all(const std::vector<diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += d.to_string() + "\n";
  return out;
}

std::size_t count_containing(const std::vector<diagnostic>& ds, const std::string& needle) {
  std::size_t n = 0;
  for (const auto& d : ds) n += d.to_string().find(needle) != std::string::npos;
  return n;
}

// A small valid config (the one of test_operator.cpp, reduced).
nlohmann::json base_config() {
  return nlohmann::json::parse(R"JSON({
    "name": "scale",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
    "roofline": {"flops": "n", "flop_unit": "fp32"},
    "workloads": [{"id": "a", "axes": {"n": 10}}, {"id": "b", "axes": {"n": 1000}, "weight": 3}],
    "reference": {
      "source": "extern \"C\" __global__ void scale_ref(const float* x, float* y, long long n) {}",
      "launches": [{"kernel": "scale_ref", "grid": ["ceil_div(n, 256)"], "block": [256],
                    "args": [{"tensor": "x"}, {"tensor": "y"}, {"int": "n", "type": "int64"}]}]
    }
  })JSON");
}

struct temp_dir {
  fs::path path;
  temp_dir() {
    std::random_device rd;
    path = fs::temp_directory_path() /
           ("kopt-hardening-" + std::to_string(rd()) + std::to_string(getpid()));
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void spit(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

const char* kKernel =
    "extern \"C\" __global__ void scale_ref(const float* x, float* y, long long n) {}\n";

}  // namespace

TEST(ConfigHardening, NumberTooLargeForADoubleIsALocatedError) {
  // Before: nlohmann threw out_of_range 406 ("number overflow"), which
  // escaped the loader: `kopt validate` exited 10 (internal error).
  const std::string text = "{\n  \"name\": \"x\",\n  \"weight_of_nothing\": 1e400\n}\n";
  load_result r;
  ASSERT_NO_THROW(r = load_operator_text(text, "big.json", "."));
  EXPECT_FALSE(r.ok());
  ASSERT_FALSE(r.diagnostics.empty());
  EXPECT_EQ(r.diagnostics[0].line, 3) << all(r.diagnostics);
  EXPECT_EQ(r.diagnostics[0].column, 24) << all(r.diagnostics);
  EXPECT_NE(all(r.diagnostics).find("1e400 is out of the range of a double"), std::string::npos)
      << all(r.diagnostics);
  // Negative too, inside a real config.
  auto j = base_config().dump(2);
  j.replace(j.find("\"weight\": 3"), 11, "\"weight\": -1e400");
  ASSERT_NO_THROW(r = load_operator_text(j, "neg.json", "."));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(count_containing(r.diagnostics, "neg.json:"), 1u) << all(r.diagnostics);
}

TEST(ConfigHardening, DuplicateKeysAreErrorsNamingTheKey) {
  // (Already an error for operator configs before issue 18; kept as a test
  // next to the daemon config's, which was not.)
  const auto r = load_operator_text("{\"name\": \"a\",\n \"name\": \"b\"}", "dup.json", ".");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(count_containing(r.diagnostics, "dup.json:2:2: error: duplicate key \"name\""), 1u)
      << all(r.diagnostics);
}

TEST(ConfigHardening, FileNameThatIsNotUtf8IsShownEscaped) {
  temp_dir d;
  const fs::path bad = d.path / "op\xff\xfe.json";
  spit(bad, "{ \"name\": ");  // a syntax error: the diagnostic carries the name
  const auto r = load_operator_file(bad);
  ASSERT_FALSE(r.ok());
  ASSERT_FALSE(r.diagnostics.empty());
  const std::string label = r.diagnostics[0].file;
  EXPECT_NE(label.find("op\\xff\\xfe.json"), std::string::npos) << label;
  // What `kopt validate --json` does with it: must not throw (type_error 316).
  EXPECT_NO_THROW((void)nlohmann::json({{"file", label}}).dump());
}

TEST(ConfigHardening, WeightsAtTheExtremesAreRefused) {
  for (const char* w : {"1e308", "5e-324", "1e10", "1e-10"}) {
    auto j = base_config().dump(2);
    j.replace(j.find("\"weight\": 3"), 11, std::string("\"weight\": ") + w);
    const auto r = load_operator_text(j, "w.json", ".");
    EXPECT_FALSE(r.ok()) << w;
    EXPECT_EQ(count_containing(r.diagnostics, "is outside [1e-9, 1e9]"), 1u)
        << w << all(r.diagnostics);
  }
  auto j = base_config();
  j["workloads"][1]["weight"] = 1e9;
  EXPECT_TRUE(load_operator_text(j.dump(), "ok.json", ".").ok());
}

TEST(ConfigHardening, SharedMemoryAboveEveryTargetsLimitIsAnError) {
  auto j = base_config();
  j["reference"]["launches"][0]["shared_bytes"] = "232449";
  auto r = load_operator_text(j.dump(2), "smem.json", ".");
  EXPECT_FALSE(r.ok()) << all(r.diagnostics);
  EXPECT_GE(count_containing(r.diagnostics, "error: reference.launches[0].shared_bytes"), 1u)
      << all(r.diagnostics);
  j["reference"]["launches"][0]["shared_bytes"] = "232448";  // 227 KiB: allowed
  r = load_operator_text(j.dump(2), "smem.json", ".");
  EXPECT_TRUE(r.ok()) << all(r.diagnostics);
}

TEST(ConfigHardening, OneMistakeOnEveryWorkloadIsReportedOnce) {
  auto j = base_config();
  nlohmann::json wl = nlohmann::json::array();
  for (int i = 0; i < 8; ++i)
    wl.push_back({{"id", "w" + std::to_string(i)}, {"axes", {{"n", 100 + i}}}});
  j["workloads"] = wl;
  // Three mistakes, each on all eight workloads: the same message (division
  // by zero), and two whose values differ per workload.
  j["reference"]["launches"][0]["shared_bytes"] = "4096 / (n - n)";
  j["reference"]["launches"][0]["grid"] = {"ceil_div(n, 256)", "n * 1000"};
  j["reference"]["launches"][0]["block"] = {"n * 100"};
  const auto r = load_operator_text(j.dump(2), "rep.json", ".");
  ASSERT_FALSE(r.ok());
  std::size_t errors = 0;
  for (const auto& d : r.diagnostics) errors += d.level == diagnostic::severity::error;
  EXPECT_EQ(errors, 3u) << all(r.diagnostics);
  EXPECT_EQ(count_containing(r.diagnostics,
                             "workload \"w0\": expression \"4096 / (n - n)\": division by zero"),
            1u)
      << all(r.diagnostics);
  EXPECT_EQ(count_containing(r.diagnostics, "(also in workloads \"w1\", \"w2\", \"w3\", \"w4\", "
                                            "\"w5\", \"w6\", \"w7\")"),
            1u)
      << all(r.diagnostics);
  EXPECT_EQ(count_containing(r.diagnostics, "\"w7\", with their own values)"), 2u)
      << all(r.diagnostics);
}

TEST(ConfigHardening, SourceFilesStayInsideTheConfinementDirectory) {
  temp_dir d;
  const fs::path spool = d.path / "spool" / "team";
  fs::create_directories(spool / "sub");
  spit(d.path / "outside.cu", std::string(kKernel) + "// OUTSIDE-MARKER\n");
  spit(spool / "sub" / "inside.cu", kKernel);
  fs::create_symlink(d.path / "outside.cu", spool / "link.cu");
  file_policy policy;
  policy.confine_to = spool;
  auto with_source = [&](const std::string& file) {
    auto j = base_config();
    j["reference"].erase("source");
    j["reference"]["source_file"] = file;
    return load_operator_text(j.dump(2), "team/op.json", spool, policy);
  };
  for (const std::string& f : {(d.path / "outside.cu").string(), std::string("../../outside.cu"),
                               std::string("link.cu"), std::string("/etc/passwd")}) {
    const auto r = with_source(f);
    EXPECT_FALSE(r.ok()) << f;
    EXPECT_EQ(count_containing(r.diagnostics, "is outside this config's spool directory"), 1u)
        << f << "\n"
        << all(r.diagnostics);
    EXPECT_EQ(all(r.diagnostics).find("OUTSIDE-MARKER"), std::string::npos);
  }
  const auto ok = with_source("sub/inside.cu");
  EXPECT_TRUE(ok.ok()) << all(ok.diagnostics);
  // Without a confinement (kopt submit, kopt validate), the same relative
  // path resolves against the config's directory as before.
  auto j = base_config();
  j["reference"].erase("source");
  j["reference"]["source_file"] = "../../outside.cu";
  EXPECT_TRUE(load_operator_text(j.dump(2), "op.json", spool).ok());
}

TEST(ConfigHardening, ApiKeyFilesAreNeverRead) {
  temp_dir d;
  const fs::path spool = d.path / "spool";
  fs::create_directories(spool);
  const fs::path key = d.path / "openai.key";
  spit(key, "sk-proj-0123456789abcdefABCDEF0123456789\n");
  ::chmod(key.c_str(), 0600);
  fs::create_hard_link(key, spool / "innocent.cu");  // inside the spool, the key's inode
  file_policy policy;
  policy.confine_to = spool;
  policy.key_files = {key};
  auto with_source = [&](const std::string& file, const file_policy& p) {
    auto j = base_config();
    j["seed"] = j["reference"];
    j["seed"].erase("source");
    j["seed"]["source_file"] = file;
    return load_operator_text(j.dump(2), "op.json", spool, p);
  };
  auto r = with_source("innocent.cu", policy);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(count_containing(r.diagnostics, "is an API key file of kopt"), 1u)
      << all(r.diagnostics);
  EXPECT_EQ(all(r.diagnostics).find("sk-proj"), std::string::npos);
  // `kopt submit`: no confinement and no list of key files, but a file that
  // holds one token and no code (what every API key file is) is refused.
  r = with_source("../openai.key", file_policy{});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(count_containing(r.diagnostics, "like an API key file"), 1u) << all(r.diagnostics);
  EXPECT_EQ(all(r.diagnostics).find("sk-proj"), std::string::npos);
}

TEST(ConfigHardening, SourceFileThatIsNotUtf8IsRefused) {
  temp_dir d;
  spit(d.path / "latin1.cu", std::string(kKernel) + "// caf\xe9\n");
  auto j = base_config();
  j["reference"].erase("source");
  j["reference"]["source_file"] = "latin1.cu";
  load_result r;
  ASSERT_NO_THROW(r = load_operator_text(j.dump(2), "op.json", d.path));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(count_containing(r.diagnostics, "is not valid UTF-8"), 1u) << all(r.diagnostics);
}
