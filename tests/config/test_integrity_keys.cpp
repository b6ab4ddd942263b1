// The operator-config keys of issue 17: tolerance.form (max_of, the default,
// and sum, torch.allclose's rule, applied by tolerance::accepts),
// integrity.allow_clock_reads, workloads[].private and
// integrity.private_fraction/private_seed. Each parses,
// survives the snapshot, and is rejected with a clear message when wrong;
// a config that uses none of them keeps its snapshot (and content hash).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "config/operator.hpp"

using namespace kopt::config;
using json = nlohmann::json;

namespace {

json base_operator() {
  return {{"name", "scale"},
          {"axes", {{"n", {{"type", "var"}}}}},
          {"inputs", {{"x", {{"shape", {"n"}}, {"dtype", "float32"}}}}},
          {"outputs", {{"y", {{"shape", {"n"}}, {"dtype", "float32"}}}}},
          {"workloads",
           {{{"id", "small"}, {"axes", {{"n", 16}}}}, {{"id", "large"}, {"axes", {{"n", 4096}}}}}},
          {"reference",
           {{"source", "extern \"C\" __global__ void k(const float* x, float* y, int n) {}\n"},
            {"launches",
             {{{"kernel", "k"},
               {"grid", {1}},
               {"block", {32}},
               {"args",
                {{{"tensor", "x"}}, {{"tensor", "y"}}, {{"int", "n"}, {"type", "int32"}}}}}}}}}};
}

load_result load(const json& j) {
  return load_operator_text(j.dump(), "<test>", ".");
}

std::string diagnostics(const load_result& r) {
  std::string s;
  for (const auto& d : r.diagnostics) s += d.to_string() + "\n";
  return s;
}

}  // namespace

TEST(IntegrityKeys, DefaultsLeaveTheSnapshotAsItWas) {
  const auto r = load(base_operator());
  ASSERT_TRUE(r.ok()) << diagnostics(r);
  EXPECT_EQ(r.op->tol.form, tolerance_form::max_of);
  EXPECT_FALSE(r.op->integ.allow_clock_reads);
  for (const auto& w : r.op->workloads) EXPECT_FALSE(w.is_private);
  const json snap = r.op->snapshot();
  EXPECT_FALSE(snap.contains("integrity"));
  EXPECT_FALSE(snap.at("tolerance").contains("form"));
  for (const auto& w : snap.at("workloads")) EXPECT_FALSE(w.contains("private"));
}

TEST(IntegrityKeys, ParseAndSurviveTheSnapshot) {
  json j = base_operator();
  j["tolerance"] = {{"atol", 0.01}, {"rtol", 0.02}, {"form", "sum"}};
  j["integrity"] = {{"allow_clock_reads", true}};
  j["workloads"][1]["private"] = true;
  const auto r = load(j);
  ASSERT_TRUE(r.ok()) << diagnostics(r);
  EXPECT_EQ(r.op->tol.form, tolerance_form::sum);
  EXPECT_EQ(r.op->find_tensor("y")->tol->form, tolerance_form::sum);  // outputs inherit it
  EXPECT_TRUE(r.op->integ.allow_clock_reads);
  EXPECT_FALSE(r.op->find_workload("small")->is_private);
  EXPECT_TRUE(r.op->find_workload("large")->is_private);
  // The snapshot is what the worker gets: it must carry all three.
  const auto again = load(r.op->snapshot());
  ASSERT_TRUE(again.ok()) << diagnostics(again);
  EXPECT_EQ(again.op->tol.form, tolerance_form::sum);
  EXPECT_TRUE(again.op->integ.allow_clock_reads);
  EXPECT_TRUE(again.op->find_workload("large")->is_private);
  EXPECT_EQ(again.op->content_hash(), r.op->content_hash());
  EXPECT_NE(r.op->content_hash(), load(base_operator()).op->content_hash());
}

TEST(IntegrityKeys, WrongValuesAreClearErrors) {
  json j = base_operator();
  j["tolerance"] = {{"form", "allclose"}};
  auto r = load(j);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(diagnostics(r).find("form must be \"max_of\""), std::string::npos) << diagnostics(r);
  j = base_operator();
  j["integrity"] = {{"allow_clocks", true}};
  r = load(j);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(diagnostics(r).find("allow_clocks"), std::string::npos) << diagnostics(r);
  j = base_operator();
  j["workloads"][0]["private"] = "yes";
  EXPECT_FALSE(load(j).ok());
}

TEST(IntegrityKeys, TheTwoFormsDifferExactlyWhereTheyShould) {
  tolerance t;
  t.atol = 0.01;
  t.rtol = 0.1;
  // |ref| = 1: max_of allows 0.1, sum allows 0.11.
  EXPECT_TRUE(t.accepts(0.1, 1.0));
  EXPECT_FALSE(t.accepts(0.105, 1.0));
  t.form = tolerance_form::sum;
  EXPECT_TRUE(t.accepts(0.105, 1.0));
  EXPECT_FALSE(t.accepts(0.111, 1.0));
  // |ref| = 0: both allow atol only.
  EXPECT_TRUE(t.accepts(0.01, 0.0));
  EXPECT_FALSE(t.accepts(0.011, 0.0));
  EXPECT_STREQ(tolerance_form_name(tolerance_form::sum), "sum");
  EXPECT_STREQ(tolerance_form_name(tolerance_form::max_of), "max_of");
}

namespace {
json many_workloads(int n) {
  json j = base_operator();
  j["workloads"] = json::array();
  for (int i = 0; i < n; ++i)
    j["workloads"].push_back({{"id", "w" + std::to_string(i)}, {"axes", {{"n", 16 * (i + 1)}}}});
  return j;
}
std::vector<std::string> private_ids(const operator_config& op) {
  std::vector<std::string> out;
  for (const auto& w : op.workloads)
    if (w.is_private) out.push_back(w.id);
  return out;
}
}  // namespace

// The fraction form: a seeded, deterministic choice made when the config is
// loaded, landing in is_private (the flag every consumer reads); the
// snapshot keeps the rule, not the chosen flags, and reloads to the same set.
TEST(IntegrityKeys, PrivateFractionChoosesBySeed) {
  json j = many_workloads(10);
  j["integrity"] = {{"private_fraction", 0.3}, {"private_seed", 5}};
  const auto r = load(j);
  ASSERT_TRUE(r.ok()) << diagnostics(r);
  const auto priv = private_ids(*r.op);
  ASSERT_EQ(priv.size(), 3u);
  for (const auto& w : r.op->workloads) EXPECT_EQ(w.private_by_fraction, w.is_private);
  std::vector<std::string> ids;
  for (const auto& w : r.op->workloads) ids.push_back(w.id);
  EXPECT_EQ(private_fraction_choice(ids, 0.3, 5), priv);
  // Deterministic: the same config, and its snapshot, choose the same set.
  EXPECT_EQ(private_ids(*load(j).op), priv);
  const json snap = r.op->snapshot();
  EXPECT_EQ(snap.at("integrity").at("private_fraction"), 0.3);
  EXPECT_EQ(snap.at("integrity").at("private_seed"), 5);
  for (const auto& w : snap.at("workloads")) EXPECT_FALSE(w.contains("private")) << w.dump();
  const auto again = load(snap);
  ASSERT_TRUE(again.ok()) << diagnostics(again);
  EXPECT_EQ(private_ids(*again.op), priv);
  EXPECT_EQ(again.op->content_hash(), r.op->content_hash());
  // The seed picks the set: over ten seeds, more than one set comes out.
  std::set<std::vector<std::string>> sets;
  for (int s = 0; s < 10; ++s) sets.insert(private_fraction_choice(ids, 0.3, s));
  EXPECT_GT(sets.size(), 1u);
  // A small fraction still chooses one; hand-marked ones are added to it.
  j = many_workloads(3);
  j["integrity"] = {{"private_fraction", 0.1}};
  j["workloads"][0]["private"] = true;
  const auto small = load(j);
  ASSERT_TRUE(small.ok()) << diagnostics(small);
  std::vector<std::string> ids3 = {"w0", "w1", "w2"};
  const auto chosen = private_fraction_choice(ids3, 0.1, 0);
  ASSERT_EQ(chosen.size(), 1u);
  std::set<std::string> want(chosen.begin(), chosen.end());
  want.insert("w0");
  const auto got = private_ids(*small.op);
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want);
  EXPECT_FALSE(small.op->find_workload("w0")->private_by_fraction);
}

TEST(IntegrityKeys, PrivateFractionErrors) {
  for (const json& bad : {json(0), json(1), json(1.5), json("half")}) {
    json j = many_workloads(4);
    j["integrity"] = {{"private_fraction", bad}};
    const auto r = load(j);
    EXPECT_FALSE(r.ok()) << bad.dump();
    EXPECT_NE(diagnostics(r).find("private_fraction"), std::string::npos) << diagnostics(r);
  }
  json j = many_workloads(4);
  j["integrity"] = {{"private_seed", 3}};
  auto r = load(j);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(diagnostics(r).find("private_seed is used only with private_fraction"),
            std::string::npos)
      << diagnostics(r);
  // Nothing public left: an error, whichever way the workloads became private.
  j = many_workloads(2);
  j["workloads"][0]["private"] = true;
  j["workloads"][1]["private"] = true;
  r = load(j);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(diagnostics(r).find("at least one must stay public"), std::string::npos)
      << diagnostics(r);
  j = many_workloads(1);
  j["integrity"] = {{"private_fraction", 0.5}};
  EXPECT_FALSE(load(j).ok());
}
