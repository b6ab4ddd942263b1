// The FTS5 index and retrieve(): structured ranking (bottleneck, operator,
// architecture), prose and trigram full-text search, and the token budget.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.hpp"
#include "kb/index.hpp"
#include "kb/library.hpp"
#include "kb_test_util.hpp"

namespace kb = kopt::kb;
using kb::test::doc_spec;

namespace {

kb::document make(const std::string& id, const std::string& bottlenecks, const std::string& ops,
                  const std::string& arch = "[sm_80]", const std::string& how_extra = "") {
  doc_spec s;
  s.front = {"id: " + id,
             "title: Technique " + id,
             "bottlenecks: " + bottlenecks,
             "operators: " + ops,
             "arch: " + arch,
             "tags: [" + id + "-tag]"};
  s.how += "\n" + how_extra;
  kb::parse_result r = kb::parse_document(s.render(), id + ".md", id);
  for (const auto& d : r.diagnostics)
    EXPECT_NE(d.level, kb::diagnostic::severity::error) << d.to_string();
  return std::move(*r.doc);
}

std::vector<std::string> ids(const kb::retrieval& r) {
  std::vector<std::string> out;
  for (const auto& s : r.snippets) out.push_back(s.id);
  return out;
}

std::vector<std::string> hit_ids(const std::vector<kb::text_hit>& hits, std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < hits.size() && i < n; ++i) out.push_back(hits[i].id);
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

kb::index synthetic() {
  std::vector<kb::document> docs;
  docs.push_back(make("spills-only", "[register-spills]", "[gemm]"));
  docs.push_back(make("latency-only", "[latency-bound]", "[gemm]"));
  docs.push_back(make("both-classes", "[latency-bound, register-spills]", "[any]"));
  docs.push_back(make("bandwidth-doc", "[memory-bound-far-from-peak]", "[elementwise]", "[sm_80]",
                      "Prefetch the persistent accumulator tiles with double buffering."));
  docs.push_back(make("hopper-only", "[register-spills]", "[gemm]", "[sm_90a]"));
  return kb::index(std::move(docs));
}

const kb::index& real() {
  static const kb::index idx = [] {
    const auto r = kb::load_directories({std::string(KOPT_SOURCE_DIR) + "/knowledge_base/techniques"});
    EXPECT_TRUE(r.ok());
    EXPECT_GE(r.documents.size(), 40u);
    return kb::index(r.documents);
  }();
  return idx;
}

}  // namespace

TEST(KbRetrieve, BottleneckMatchesComeFirstPrimaryWeighsMost) {
  const kb::index idx = synthetic();
  kb::query q;
  q.bottlenecks = {"register-spills", "latency-bound"};
  q.budget_tokens = 100000;
  q.max_documents = 10;
  const kb::retrieval r = idx.retrieve(q);
  // both (2+1) > spills (2, then ids) > latency (1); bandwidth-doc matches nothing.
  EXPECT_EQ(ids(r), (std::vector<std::string>{"both-classes", "hopper-only", "spills-only",
                                              "latency-only"}));
  EXPECT_EQ(r.candidates, 4u);
  EXPECT_EQ(r.snippets[0].matched_bottlenecks,
            (std::vector<std::string>{"register-spills", "latency-bound"}));
  EXPECT_DOUBLE_EQ(r.snippets[0].bottleneck_score, 3.0);
}

TEST(KbRetrieve, TextOnlyMatchesRankAfterBottleneckMatches) {
  const kb::index idx = synthetic();
  kb::query q;
  q.bottlenecks = {"latency-bound"};
  q.text = "persistent accumulator prefetch";
  q.budget_tokens = 100000;
  q.max_documents = 10;
  const kb::retrieval r = idx.retrieve(q);
  ASSERT_EQ(ids(r), (std::vector<std::string>{"both-classes", "latency-only", "bandwidth-doc"}));
  EXPECT_GT(r.snippets[2].text_score, 0.0);
  EXPECT_TRUE(r.snippets[2].matched_bottlenecks.empty());
}

TEST(KbRetrieve, OperatorAndArchitectureFilter) {
  const kb::index idx = synthetic();
  kb::query q;
  q.bottlenecks = {"register-spills"};
  q.operator_class = "gemm";
  q.arch = "sm_90";  // not sm_90a: hopper-only drops out
  q.budget_tokens = 100000;
  const kb::retrieval r = idx.retrieve(q);
  // Equal bottleneck score: the exact operator match beats "any".
  EXPECT_EQ(ids(r), (std::vector<std::string>{"spills-only", "both-classes"}));
  EXPECT_TRUE(r.snippets[0].operator_exact);
  EXPECT_FALSE(r.snippets[1].operator_exact);

  q.arch = "sm_90a";
  EXPECT_EQ(ids(idx.retrieve(q)),
            (std::vector<std::string>{"hopper-only", "spills-only", "both-classes"}));

  kb::query e;
  e.operator_class = "elementwise";
  e.budget_tokens = 100000;
  // No bottleneck, no text: every document for the operator ("any" included).
  EXPECT_EQ(ids(idx.retrieve(e)), (std::vector<std::string>{"bandwidth-doc", "both-classes"}));
}

TEST(KbRetrieve, RejectsUnknownClasses) {
  const kb::index idx = synthetic();
  kb::query q;
  q.bottlenecks = {"slowness"};
  EXPECT_THROW(idx.retrieve(q), kopt::error);
  kb::query o;
  o.operator_class = "matmul";
  EXPECT_THROW(idx.retrieve(o), kopt::error);
  kb::query a;
  a.arch = "hopper";
  EXPECT_THROW(idx.retrieve(a), kopt::error);
}

TEST(KbSearch, TrigramFindsIdentifiers) {
  const kb::index& idx = real();
  EXPECT_TRUE(contains(hit_ids(idx.search_text("cp.async"), 3), "cp-async-pipeline"));
  EXPECT_TRUE(contains(hit_ids(idx.search_text("__shfl_xor_sync"), 5), "warp-shuffle-reduction"));
  EXPECT_TRUE(contains(hit_ids(idx.search_text("ldmatrix"), 3), "mma-sync-ldmatrix"));
  // Substring of an identifier, not a word: only the trigram table can find it.
  const auto hits = idx.search_text("shfl_xor");
  ASSERT_FALSE(hits.empty());
  EXPECT_GT(hits[0].ident_score, 0.0);
}

TEST(KbSearch, ProseIsStemmed) {
  const kb::index& idx = real();
  // "swizzling" stems to "swizzl", as "swizzle" does.
  EXPECT_TRUE(contains(hit_ids(idx.search_text("swizzling"), 3), "smem-xor-swizzle"));
  const auto hits = idx.search_text("welford variance");
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].id, "welford-layernorm");
}

TEST(KbSearch, QueryTextIsNeverFts5Syntax) {
  const kb::index& idx = real();
  EXPECT_NO_THROW(idx.search_text("\"unbalanced NEAR( AND * - OR ^col:"));
  EXPECT_TRUE(idx.search_text("").empty());
  EXPECT_TRUE(idx.search_text("  ,; ").empty());
}

TEST(KbRetrieve, BudgetIsRespected) {
  const kb::index& idx = real();
  std::size_t previous_tokens = 0;
  for (std::size_t budget : {60u, 150u, 400u, 900u, 2000u, 6000u}) {
    kb::query q;
    q.bottlenecks = {"memory-bound-far-from-peak", "uncoalesced"};
    q.operator_class = "normalization";
    q.arch = "sm_90a";
    q.budget_tokens = budget;
    const kb::retrieval r = idx.retrieve(q);
    std::size_t sum = 0;
    for (const auto& s : r.snippets) {
      EXPECT_EQ(s.tokens, kb::estimate_tokens(s.text));
      EXPECT_NE(s.text.find("[kb:" + s.id + "]"), std::string::npos) << "labelled for dropout";
      EXPECT_FALSE(s.sections.empty());
      // An example is never cut: its fences stay balanced.
      const auto fences = [&] {
        std::size_t n = 0, p = 0;
        while ((p = s.text.find("```", p)) != std::string::npos) ++n, p += 3;
        return n;
      }();
      EXPECT_EQ(fences % 2, 0u) << s.text;
      sum += s.tokens;
    }
    EXPECT_EQ(sum, r.tokens);
    EXPECT_LE(r.tokens, budget) << "budget " << budget;
    EXPECT_GE(r.tokens, previous_tokens) << "more budget never yields less";
    EXPECT_LE(r.snippets.size(), q.max_documents);
    previous_tokens = r.tokens;
    // A tight budget goes to fewer documents rather than to crumbs of many.
    EXPECT_LE(r.snippets.size(), std::max<std::size_t>(1, budget / q.min_tokens_per_document));
    if (budget >= 400) {
      ASSERT_FALSE(r.snippets.empty());
      EXPECT_EQ(r.snippets[0].sections[0], "How") << "the recipe comes first";
      EXPECT_FALSE(r.snippets[0].matched_bottlenecks.empty());
    }
  }
}

TEST(KbRetrieve, SnippetCutsAtLineBoundaries) {
  const kb::index& idx = real();
  const kb::document* d = idx.find("vectorized-loads");
  ASSERT_NE(d, nullptr);
  const auto whole = kb::make_snippet(*d, {"How"}, 100000);
  ASSERT_TRUE(whole.has_value());
  EXPECT_FALSE(whole->truncated);
  const std::size_t small = whole->tokens * 2 / 3;
  const auto cut = kb::make_snippet(*d, {"How"}, small);
  ASSERT_TRUE(cut.has_value());
  EXPECT_TRUE(cut->truncated);
  EXPECT_LE(cut->tokens, small);
  // Every kept line is a whole line of the section.
  const std::string body = cut->text.substr(cut->text.find("#### How\n") + 9);
  const std::string kept = body.substr(0, body.rfind("[...]"));
  EXPECT_EQ(d->find_section("How")->text.rfind(kept, 0), 0u);
  EXPECT_FALSE(kb::make_snippet(*d, {"How"}, 5).has_value()) << "not even the title fits";
}
