// `kopt kb search|show|lint` through the real executable: exit codes, JSON
// on stdout, user directories added with --kb-dir.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kb_test_util.hpp"

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

class KbCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kopt-kbcli-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  result kopt(const std::vector<std::string>& args) {
    std::string cmd = "env HOME=" + quote(dir_.string()) + " " + quote(KOPT_BIN);
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " >" + quote((dir_ / "out").string()) + " 2>" + quote((dir_ / "err").string());
    const int st = std::system(cmd.c_str());
    result r;
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp(dir_ / "out");
    r.err = slurp(dir_ / "err");
    return r;
  }
  fs::path write(const std::string& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
    return dir_ / rel;
  }
  fs::path dir_;
};

}  // namespace

TEST_F(KbCli, LintOfTheBundledDocumentsPasses) {
  const result r = kopt({"kb", "lint", "--json"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["valid"].get<bool>());
  EXPECT_EQ(j["errors"], 0);
  EXPECT_GE(j["documents"].get<int>(), 40);
}

TEST_F(KbCli, LintReportsAUserDocumentWithFileAndLine) {
  kopt::kb::test::doc_spec s;
  s.front[0] = "id: my-trick";
  s.front[2] = "bottlenecks: [slowness]";
  s.pitfalls = "- None.";
  const fs::path f = write("mine/my-trick.md", s.render());
  const result r = kopt({"kb", "lint", "--kb-dir", (dir_ / "mine").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(f.string() + ":4: error: unknown bottleneck class 'slowness'"),
            std::string::npos)
      << r.err;
  // search still works and says the broken document was skipped
  const result s2 = kopt({"kb", "search", "--kb-dir", (dir_ / "mine").string(), "cp.async"});
  EXPECT_EQ(s2.code, 0) << s2.err;
  EXPECT_NE(s2.err.find("document skipped"), std::string::npos);
}

TEST_F(KbCli, SearchJsonRanksAndRespectsTheBudget) {
  const result r = kopt({"kb", "search", "--bottleneck", "register-spills", "--operator", "gemm",
                         "--budget", "600", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_FALSE(j["snippets"].empty());
  EXPECT_LE(j["tokens"].get<int>(), 600);
  EXPECT_EQ(j["snippets"][0]["matched_bottlenecks"][0], "register-spills");
  EXPECT_NE(j["snippets"][0]["text"].get<std::string>().find("[kb:"), std::string::npos);
}

TEST_F(KbCli, UserDocumentsAreSearchable) {
  kopt::kb::test::doc_spec s;
  s.front[0] = "id: my-trick";
  s.front[5] = "tags: [zebraintrinsicxyz]";
  s.pitfalls = "- None.";
  write("mine/my-trick.md", s.render());
  const result r =
      kopt({"kb", "--kb-dir", (dir_ / "mine").string(), "search", "zebraintrinsic", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_FALSE(j["snippets"].empty());
  EXPECT_EQ(j["snippets"][0]["id"], "my-trick");
}

TEST_F(KbCli, ShowAndItsErrors) {
  const result r = kopt({"kb", "show", "cp-async-pipeline", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["id"], "cp-async-pipeline");
  EXPECT_NE(j["example"]["source"].get<std::string>().find("cp.async"), std::string::npos);
  EXPECT_EQ(kopt({"kb", "show", "no-such-technique"}).code, 3);
  EXPECT_EQ(kopt({"kb", "search", "--bottleneck", "slowness"}).code, 1);
  EXPECT_EQ(kopt({"kb", "search", "--budget", "-1"}).code, 2);
}

// `kb lint --run` checks a reference document's kernels: without a GPU it
// says so, compile-checks them instead and exits 5; on a GPU it evaluates
// them against the config's naive reference and they must pass. One
// reference, copied with its config, keeps the test short.
TEST_F(KbCli, LintRunChecksReferenceKernelsOrSaysThereIsNoGpu) {
  // kopt's argmax reference config, under a document of its own without
  // cross-references (kopt's documents are left out with --no-builtin).
  const fs::path src = fs::path(KOPT_SOURCE_DIR) / "knowledge_base/references";
  fs::create_directories(dir_ / "refs");
  fs::copy(src / "argmax-row-warp", dir_ / "refs/argmax-row-warp", fs::copy_options::recursive);
  write("refs/argmax-row-warp.md", R"(---
id: argmax-row-warp
title: Row-wise argmax, one block per row
bottlenecks: [memory-bound-far-from-peak]
operators: [topk]
arch: [sm_80]
tags: [argmax]
kind: reference
config: argmax-row-warp/operator.json
---

## What it computes

The index of the largest value of each row.

## Techniques

A (value, index) warp-shuffle reduction, then one across the warps of the block.

## When to use it

Greedy sampling over a vocabulary.

## How to see it in the counters

DRAM throughput near peak at large shapes.

## Measured

PENDING
)");
  const result r =
      kopt({"kb", "--no-builtin", "--kb-dir", (dir_ / "refs").string(), "lint", "--run", "--json"});
  if (r.out.empty()) {
    // A build without the worker cannot compile or run anything.
    EXPECT_EQ(r.code, 5) << r.err;
    EXPECT_NE(r.err.find("needs a build with the worker"), std::string::npos) << r.err;
    return;
  }
  const json j = json::parse(r.out);
  ASSERT_EQ(j["references"].size(), 1u) << r.out;
  const json& ref = j["references"][0];
  EXPECT_EQ(ref["id"], "argmax-row-warp");
  EXPECT_TRUE(ref["ok"].get<bool>()) << ref.dump(2);
  EXPECT_EQ(j["reference_failures"], 0);
  if (r.code == 5) {
    EXPECT_TRUE(ref["detail"].contains("needs_gpu")) << ref.dump(2);
    ASSERT_TRUE(ref["detail"].contains("compile")) << ref.dump(2);
    EXPECT_EQ(ref["detail"]["compile"].size(), 2u);  // the naive reference and the baseline
    for (const auto& c : ref["detail"]["compile"]) EXPECT_EQ(c["status"], "ok") << c.dump();
    EXPECT_NE(r.err.find("no GPU"), std::string::npos) << r.err;
  } else {
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(j["references_run"].get<bool>());
    EXPECT_EQ(ref["detail"]["roles"]["baseline"]["status"], "ok") << ref.dump(2);
  }
}

// `--only` narrows --compile / --run to the named documents (a re-check of
// the references a change touched costs minutes of GPU time, not the whole
// knowledge base); an id that names no document is an error before anything
// runs.
TEST_F(KbCli, LintOnlyCompilesTheNamedDocuments) {
  const result bad = kopt({"kb", "lint", "--compile", "--only", "no-such-document"});
  EXPECT_EQ(bad.code, 3) << bad.err;
  EXPECT_NE(bad.err.find("--only no-such-document"), std::string::npos) << bad.err;
  const result r = kopt({"kb", "lint", "--compile", "--json", "--only", "argmax-row-warp", "--only",
                         "vectorized-loads"});
  if (r.out.empty()) {
    EXPECT_EQ(r.code, 5) << r.err;  // a build without the worker
    return;
  }
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_TRUE(j.contains("references") && j.contains("compile")) << r.out;
  ASSERT_EQ(j["references"].size(), 1u) << r.out;
  EXPECT_EQ(j["references"][0]["id"], "argmax-row-warp");
  ASSERT_EQ(j["compile"].size(), 1u) << r.out;
  EXPECT_EQ(j["compile"][0]["id"], "vectorized-loads");
  EXPECT_TRUE(j["compile"][0]["ok"].get<bool>()) << j["compile"][0].dump();
  EXPECT_GT(j["documents"].get<int>(), 2);        // every document is still linted
  EXPECT_FALSE(j["references_run"].get<bool>());  // compiled, not run on a GPU
  // The tuning options need --compile / --run, and --seeds / --max-time / --peaks need --run:
  // silently ignored, they would make a user think a check ran as asked.
  EXPECT_EQ(kopt({"kb", "lint", "--only", "argmax-row-warp"}).code, 2);
  EXPECT_EQ(kopt({"kb", "lint", "--compile", "--seeds", "2"}).code, 2);
  EXPECT_EQ(kopt({"kb", "lint", "--run", "--peaks", (dir_ / "missing.json").string()}).code, 2);
}

// --only naming a document that does not parse reports that document's errors (exit 1), not
// "no document with that id".
TEST_F(KbCli, LintOnlyOfABrokenDocumentReportsItsErrors) {
  kopt::kb::test::doc_spec s;
  s.front[0] = "id: my-trick";
  s.front[2] = "bottlenecks: [slowness]";
  write("mine/my-trick.md", s.render());
  const result r = kopt({"kb", "--no-builtin", "--kb-dir", (dir_ / "mine").string(), "lint",
                         "--compile", "--only", "my-trick"});
  EXPECT_EQ(
      r.code,
      r.out.empty() && r.err.find("needs a build with the worker") != std::string::npos ? 5 : 1)
      << r.err;
  EXPECT_NE(r.err.find("unknown bottleneck class 'slowness'"), std::string::npos) << r.err;
}
