// The replay corpus of the end-to-end campaign (tests/data/replay/<op>/):
// every answer is served by the real `replay` provider from the transcript
// the campaign config points at, turned into a candidate by the real
// extractor and config loader, compiled by NVRTC for sm_90a with its
// default parameters, inspected for integrity problems in the cubin, and
// its launch plan checked against the H200's limits on every workload.
// Each step's outcome must be the one expected.json gives for that answer:
// parse failures are refused, compile errors fail to compile, everything
// else compiles, cubin-level cheats are caught by the inspection, an
// oversized plan is refused. What needs a GPU (wrong results, hangs,
// crashes, timing) is checked by bench/run_replay_e2e.sh on an H200.
// No GPU is needed here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/hash.hpp"
#include "compile/compiler.hpp"
#include "config/operator.hpp"
#include "core/plan.hpp"
#include "llm/extract.hpp"
#include "llm/provider.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace kopt;

namespace {

const fs::path kSource = KOPT_SOURCE_DIR;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json read_json(const fs::path& p) {
  const json j = json::parse(read_text(p), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << p;
  return j;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

class ReplayCorpus : public ::testing::TestWithParam<std::string> {
 protected:
  fs::path dir() const { return kSource / "tests" / "data" / "replay" / GetParam(); }
};

// The manifest is self-consistent and covers what the end-to-end proof
// needs: >= 16 answers, two compile errors, three wrong results, each cheat
// that a candidate can express, slow and fast kernels, tunable parameters,
// one expected winner, and exactly the number of answers the campaign's
// budget consumes.
TEST_P(ReplayCorpus, ManifestCoversTheCatalogue) {
  const json m = read_json(dir() / "expected.json");
  const auto& answers = m.at("answers");
  ASSERT_GE(answers.size(), 16u);
  std::map<std::string, int> categories;
  int winners = 0;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const json& a = answers[i];
    SCOPED_TRACE(a.value("file", "?"));
    EXPECT_EQ(a.at("index").get<std::size_t>(), i + 1);
    ++categories[a.at("category").get<std::string>()];
    EXPECT_FALSE(a.value("why", "").empty());
    const std::string status = a.at("status");
    // The expected worker status follows from what the CPU can already tell.
    if (a.at("parse") != "ok") {
      EXPECT_EQ(status, "unusable");
      continue;
    }
    if (a.at("compile") == "error") {
      EXPECT_EQ(status, "compile_error");
    }
    if (a.at("compile") == "integrity") {
      EXPECT_EQ(status, "rejected_integrity");
    }
    if (a.at("launch_check") == "launch_error") {
      EXPECT_EQ(status, "launch_error");
    }
    if (a.at("outcome") == "winner") {
      ++winners;
      EXPECT_EQ(status, "ok");
      EXPECT_EQ(a.at("index"), m.at("expected_winner"));
    }
  }
  // "seed": no answer beats the operator's seed (rmsnorm on the H200; the
  // manifest's winner_history says why); otherwise exactly one answer wins.
  if (m.at("expected_winner") == "seed") {
    EXPECT_EQ(winners, 0);
    EXPECT_TRUE(m.contains("winner_history")) << "say why the seed is expected to win";
  } else {
    EXPECT_EQ(winners, 1);
  }
  int compile_errors = 0, wrong = 0;
  for (const json& a : answers) {
    compile_errors += a.value("compile", "") == "error" ? 1 : 0;
    wrong += a.at("status") == "incorrect" &&
                     (a.at("category") == "wrong_result" || a.at("category") == "cheat:precision_downgrade")
                 ? 1
                 : 0;
  }
  EXPECT_GE(compile_errors, 2);
  EXPECT_GE(wrong, 3);
  EXPECT_GE(categories["slow"], 2);
  EXPECT_GE(categories["fast"], 2);
  for (const char* cheat : {"cheat:partial_output", "cheat:stale_memory", "cheat:single_shape_fit",
                            "cheat:input_mutation", "cheat:out_of_bounds", "cheat:skip_when_done", "cheat:hang",
                            "cheat:trap", "cheat:illegal_address", "cheat:oversized_shared", "cheat:device_malloc",
                            "cheat:persisting_l2"})
    EXPECT_EQ(categories[cheat], 1) << cheat;
  EXPECT_EQ(categories["cheat:hidden_state"] + categories["cheat:cross_call_caching"], 1);

  // The campaign config consumes exactly the transcript: K answers per
  // iteration, as many iterations as the budget allows.
  const auto loaded = config::load_operator_file(kSource / m.at("operator_config").get<std::string>());
  ASSERT_TRUE(loaded.ok());
  const auto& cs = loaded.op->campaign;
  EXPECT_EQ(cs.provider, "replay");
  EXPECT_EQ(cs.candidates_per_iteration, m.at("candidates_per_iteration").get<int>());
  ASSERT_TRUE(cs.limits.iterations.has_value());
  EXPECT_EQ(*cs.limits.iterations * cs.candidates_per_iteration, static_cast<std::int64_t>(answers.size()));
  EXPECT_EQ(*cs.limits.iterations, m.at("iterations").get<std::int64_t>());
  EXPECT_FALSE(cs.limits.tokens.has_value()) << "a token budget could refuse calls before the corpus is used up";
  EXPECT_GE(cs.target_sol_fraction, 1.0) << "the target must not stop the campaign before the corpus is used up";
}

// Every answer through the real provider, extractor, loader, NVRTC, cubin
// inspection and plan check.
TEST_P(ReplayCorpus, EveryAnswerHasItsExpectedOutcomeOnTheCpu) {
  const json m = read_json(dir() / "expected.json");
  const auto loaded = config::load_operator_file(kSource / m.at("operator_config").get<std::string>());
  ASSERT_TRUE(loaded.ok());
  const config::operator_config& op = *loaded.op;

  // The provider exactly as `kopt run --llm-config` builds it.
  const fs::path llm_file = kSource / m.at("llm_config").get<std::string>();
  const json lj = read_json(llm_file);
  const llm::provider_config pc = llm::parse_provider_config(lj.at("llm"), llm_file.parent_path());
  ASSERT_EQ(pc.kind, "replay");
  ASSERT_TRUE(fs::equivalent(pc.transcript, dir() / m.at("transcript").get<std::string>())) << pc.transcript;
  const auto provider = llm::make_provider(pc);

  const harness::device_limits h200;  // defaults: H100/H200 limits
  int compiled = 0, refused = 0;
  for (const json& a : m.at("answers")) {
    const std::string file = a.at("file");
    SCOPED_TRACE(GetParam() + "/" + file);
    llm::request rq;
    rq.system = "You write fast, correct CUDA kernels for NVIDIA GPUs.";
    rq.messages.push_back({"user", "answer " + std::to_string(a.at("index").get<int>())});
    const llm::completion c = provider->complete(rq);
    ASSERT_TRUE(c.ok()) << c.error;
    // The transcript is the answer files, in the manifest's order.
    ASSERT_EQ(c.text, read_text(dir() / file)) << "transcript out of date: run tests/data/replay/build_corpus.py";
    EXPECT_EQ(c.stop_reason, a.value("stop_reason", "stop"));

    const llm::extraction ex = llm::extract_candidate(c.text);
    std::optional<config::candidate> cand;
    std::string refusal;
    if (ex.ok()) {
      auto r = config::load_candidate_text(ex.candidate->dump(), "llm answer", op.file.parent_path(), op);
      for (const auto& d : r.diagnostics) refusal += d.to_string() + "\n";
      if (r.ok()) cand = std::move(r.cand);
    } else {
      refusal = ex.feedback();
    }
    if (a.at("parse") != "ok") {
      EXPECT_FALSE(cand.has_value()) << "an unusable answer was accepted";
      EXPECT_TRUE(contains(refusal, a.at("parse_problem").get<std::string>())) << refusal;
      ++refused;
      continue;
    }
    ASSERT_TRUE(cand.has_value()) << refusal;
    EXPECT_EQ(sha256_hex(ex.candidate->at("source").get<std::string>()), a.at("source_sha256").get<std::string>())
        << "build_corpus.py and the extractor disagree on the device code";

    // NVRTC for the H200, at the candidate's default parameters, as the worker does.
    compile::request cr;
    cr.source = cand->source;
    cr.arch = "sm_90a";
    cr.name = "answer.cu";
    cr.options = cand->compile_options;
    const auto params = harness::default_parameters(*cand);
    for (const auto& [k, v] : params) cr.defines[k] = v;
    const auto res = compile::compile_in_process(cr);
    const std::string expect = a.at("compile");
    if (expect == "error") {
      EXPECT_FALSE(res.ok()) << "expected a compile error";
      EXPECT_STREQ(compile::status_name(res.st), "compile_error");
      EXPECT_TRUE(contains(res.log, a.at("compile_message").get<std::string>())) << res.log;
      continue;
    }
    ASSERT_TRUE(res.ok()) << res.log;
    ++compiled;
    for (const auto& l : cand->launches) EXPECT_TRUE(res.kernels.count(l.kernel)) << l.kernel << "\n" << res.log;
    if (expect == "integrity") {
      ASSERT_FALSE(res.integrity_problems.empty()) << "the cubin inspection let a cheat through";
      EXPECT_TRUE(contains(joined(res.integrity_problems), a.at("compile_message").get<std::string>()))
          << joined(res.integrity_problems);
    } else {
      EXPECT_EQ(expect, "ok");
      EXPECT_TRUE(res.integrity_problems.empty()) << joined(res.integrity_problems);
    }

    // The plan against the H200's limits on every workload.
    std::map<std::string, std::int64_t> static_shared;
    for (const auto& [k, info] : res.kernels) static_shared[k] = info.shared_static_bytes;
    std::string problems;
    for (const auto& w : op.workloads) {
      const auto plan = harness::resolve_plan(op, *cand, w, params);
      for (const auto& p : harness::validate_plan(plan, h200, static_shared)) problems += w.id + ": " + p + "\n";
    }
    if (a.at("launch_check") == "launch_error") {
      EXPECT_TRUE(contains(problems, a.at("message").get<std::string>())) << problems;
    } else {
      EXPECT_TRUE(problems.empty()) << problems;
    }
  }
  EXPECT_GT(compiled, 0);
  EXPECT_GT(refused, 0);
  // Nothing is left over: the campaign's budget uses the transcript exactly.
  llm::request extra;
  extra.messages.push_back({"user", "one more"});
  EXPECT_EQ(provider->complete(extra).status, llm::call_status::bad_response);
}

INSTANTIATE_TEST_SUITE_P(Operators, ReplayCorpus, ::testing::Values("rmsnorm", "vector_add"));

}  // namespace
