// Golden files: each template rendered with the fixed context of
// fixture.hpp must equal tests/prompts/golden/<case>.txt byte for byte.
// After an intended change run with KOPT_UPDATE_GOLDEN=1 to rewrite the
// files, then review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "fixture.hpp"
#include "llm/extract.hpp"
#include "prompts/engine.hpp"

namespace kopt::prompts {
namespace {

using testing::full_inputs;
using testing::load_rmsnorm;
using testing::read_text;
using testing::source_dir;

const std::filesystem::path golden_dir = source_dir / "tests" / "prompts" / "golden";

bool update_mode() {
  const char* v = std::getenv("KOPT_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out.empty() ? "(none)" : out;
}

// The items lists head the file, so that a change in what is optional shows
// in the diff too.
std::string golden_text(const rendered& r) {
  return "# present: " + join(r.present_items) + "\n# dropped: " + join(r.dropped_items) +
         "\n\n" + r.text;
}

void check_golden(const std::string& case_name, const rendered& r) {
  const auto file = golden_dir / (case_name + ".txt");
  const std::string actual = golden_text(r);
  if (update_mode()) {
    std::filesystem::create_directories(golden_dir);
    std::ofstream out(file, std::ios::binary);
    out << actual;
    ASSERT_TRUE(out.good()) << "cannot write " << file;
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(file))
      << file << " is missing; run with KOPT_UPDATE_GOLDEN=1 to create it";
  const std::string expected = read_text(file);
  if (expected == actual) return;
  // Point at the first differing line: a whole-prompt diff is unreadable.
  std::istringstream e(expected), a(actual);
  std::string el, al;
  int line = 0;
  while (true) {
    ++line;
    const bool he = static_cast<bool>(std::getline(e, el));
    const bool ha = static_cast<bool>(std::getline(a, al));
    if (!he && !ha) break;
    if (he != ha || el != al) {
      FAIL() << case_name << ": differs from " << file << " at line " << line
             << "\n  expected: " << (he ? el : "(end of file)")
             << "\n  actual:   " << (ha ? al : "(end of file)")
             << "\nIf the change is intended, rerun with KOPT_UPDATE_GOLDEN=1.";
    }
  }
  FAIL() << case_name << ": differs from " << file << " (line endings?)";
}

class golden : public ::testing::Test {
 protected:
  void SetUp() override {
    op_ = load_rmsnorm();
    set_ = template_set::load_directory(source_dir / "prompts" / "templates");
  }
  config::operator_config op_;
  template_set set_;
};

TEST_F(golden, every_template_with_full_context) {
  const nlohmann::json ctx = build_context(full_inputs(op_));
  for (const std::string name : {"system", "first", "revise", "fix_compile", "fix_wrong", "broaden"}) {
    SCOPED_TRACE(name);
    const rendered r = set_.render(name, ctx);
    EXPECT_FALSE(r.text.empty());
    check_golden(name, r);
  }
}

TEST_F(golden, first_with_items_dropped) {
  const nlohmann::json ctx = build_context(full_inputs(op_));
  const std::set<std::string> drop = {"measurements", "diagnosis:launch_bound", "history:c9",
                                      "snippet:coalesced-access", "not-in-this-template"};
  const rendered r = set_.render("first", ctx, drop);
  // Dropped items are reported (in the order the template meets them), and
  // their text is gone.
  EXPECT_EQ(r.dropped_items, (std::vector<std::string>{"measurements", "diagnosis:launch_bound",
                                                       "snippet:coalesced-access", "history:c9"}));
  EXPECT_EQ(r.present_items,
            (std::vector<std::string>{"diagnosis:two_pass_reads", "snippet:vector-alignment-tails",
                                      "history:c7"}));
  EXPECT_EQ(r.text.find("Weighted fraction of speed of light"), std::string::npos);
  EXPECT_EQ(r.text.find("cached the row in shared memory"), std::string::npos);
  EXPECT_EQ(r.text.find("### Coalesced access"), std::string::npos);
  EXPECT_NE(r.text.find("### Vector loads and tails"), std::string::npos);
  check_golden("first_dropped", r);
}

TEST_F(golden, first_without_measurements_or_history) {
  prompt_inputs in;
  in.op = &op_;
  in.gpu = testing::h200();
  in.parent = *op_.seed;
  in.parent_label = "seed";
  in.measurements_note = "none are stored for the seed kernel yet.";
  const rendered r = set_.render("first", build_context(in));
  EXPECT_NE(r.text.find("No measurements: none are stored for the seed kernel yet."),
            std::string::npos);
  EXPECT_EQ(r.text.find("## Diagnosis"), std::string::npos);
  EXPECT_EQ(r.text.find("## Earlier attempts"), std::string::npos);
  EXPECT_EQ(r.present_items, std::vector<std::string>{"measurements"});
  check_golden("first_no_measurements", r);
}

TEST_F(golden, full_context_contains_the_facts_it_promises) {
  const rendered r = set_.render("first", build_context(full_inputs(op_)));
  // Operator signature.
  for (const char* s : {"rmsnorm_bf16", "`x`: bfloat16 [tokens, hidden]", "`weight`: bfloat16 [hidden]",
                        "`out`: bfloat16 [tokens, hidden]", "`eps`: float32 = 1e-06",
                        "| t8192_h8192 | hidden=8192, tokens=8192 |"}) {
    EXPECT_NE(r.text.find(s), std::string::npos) << s;
  }
  // GPU facts from the peak table.
  for (const char* s : {"NVIDIA H200", "sm_90a", "132 SMs", "60 MiB L2", "4.8 TB/s", "67 TFLOP/s (fp32)"}) {
    EXPECT_NE(r.text.find(s), std::string::npos) << s;
  }
  // Parent source and plan, measurements and findings with numbers.
  EXPECT_NE(r.text.find("rmsnorm_seed(const __nv_bfloat16*"), std::string::npos);
  EXPECT_NE(r.text.find("{\"kernel\": \"rmsnorm_seed\", \"grid\": [\"tokens\"], \"block\": [\"BLOCK\"]"), std::string::npos);
  EXPECT_NE(r.text.find("| t2048_h4096 | 0.15 | ok | 14.80 |"), std::string::npos);
  EXPECT_NE(r.text.find("- launch_bound: t1_h4096 runs 1 block on 132 SMs"), std::string::npos);
}

// The example in the system prompt is what the model imitates: it must be
// an answer that kopt's extractor accepts without notes.
TEST_F(golden, the_format_example_is_a_valid_answer) {
  const rendered r = set_.render("system", build_context(full_inputs(op_)));
  const auto example = r.text.find("Example (");
  ASSERT_NE(example, std::string::npos);
  const llm::extraction x = llm::extract_candidate(r.text.substr(example));
  EXPECT_TRUE(x.ok()) << x.feedback();
  EXPECT_TRUE(x.notes.empty()) << x.notes.front();
  ASSERT_TRUE(x.candidate.has_value());
  EXPECT_EQ(x.candidate->at("launches").at(0).at("kernel"), "scale_rows");
  EXPECT_EQ(x.candidate->at("parameters").at("BLOCK").at("default"), 256);
  // And the parent's plan as the prompt shows it is a valid plan too.
  const rendered f = set_.render("first", build_context(full_inputs(op_)));
  const auto cur = f.text.find("## Current kernel");
  const auto end = f.text.find("Tunable parameters:");
  ASSERT_NE(cur, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const llm::extraction p = llm::extract_candidate(f.text.substr(cur, end - cur));
  EXPECT_TRUE(p.ok()) << p.feedback();
  ASSERT_TRUE(p.candidate.has_value());
  EXPECT_EQ(p.candidate->at("launches").at(0).at("kernel"), "rmsnorm_seed");
}

// The loop's templates mark two stable prefixes: the operator and the GPU
// (the same for every call of a campaign), then the parent and its
// measurements (the same until a promotion); what dropout redraws every
// iteration (snippets, feedback, history) comes after both.
TEST_F(golden, loop_templates_mark_the_stable_prefixes) {
  const nlohmann::json ctx = build_context(full_inputs(op_));
  for (const std::string name : {"first", "revise", "broaden"}) {
    SCOPED_TRACE(name);
    const rendered r = set_.render(name, ctx);
    ASSERT_EQ(r.cache_breaks.size(), 2u);
    const std::string campaign_prefix = r.text.substr(0, r.cache_breaks[0]);
    EXPECT_EQ(campaign_prefix.rfind("## Operator", 0), 0u) << "the prompt opens with the operator";
    EXPECT_NE(campaign_prefix.find("## Target GPU"), std::string::npos);
    EXPECT_EQ(campaign_prefix.find("## Current kernel"), std::string::npos);
    const std::string parent_prefix = r.text.substr(0, r.cache_breaks[1]);
    EXPECT_NE(parent_prefix.find("## Current kernel"), std::string::npos);
    EXPECT_NE(parent_prefix.find("## Measurements of the current kernel"), std::string::npos);
    for (const char* later :
         {"## Earlier attempts", "## Techniques that may apply", "## Feedback", "## Your task"})
      EXPECT_EQ(parent_prefix.find(later), std::string::npos) << later;
  }
  // The loop's templates open with the same bytes up to the second breakpoint.
  const rendered a = set_.render("first", ctx), b = set_.render("revise", ctx),
                 c = set_.render("broaden", ctx);
  EXPECT_EQ(a.text.substr(0, a.cache_breaks[1]), b.text.substr(0, b.cache_breaks[1]));
  EXPECT_EQ(c.text.substr(0, c.cache_breaks[1]), b.text.substr(0, b.cache_breaks[1]));
}

}  // namespace
}  // namespace kopt::prompts
