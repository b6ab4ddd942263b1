// What the model must not see: the evaluator's seeds, the generator
// distributions (they would let a kernel fit the inputs), tolerance slack
// beyond what the config states, the campaign's budget and dropout settings,
// and the names of API-key variables. Both the context and the rendered
// system + first-generation prompt are checked.
#include <gtest/gtest.h>

#include "fixture.hpp"
#include "prompts/engine.hpp"

namespace kopt::prompts {
namespace {

// Distinctive values planted in the parts of the config the builder must
// not copy, so that finding one in the prompt means it leaked.
config::operator_config planted_operator() {
  config::operator_config op = testing::load_rmsnorm();
  op.campaign.seed = 987654321;
  op.campaign.dropout_p = 0.4321;
  op.campaign.limits.tokens = 7654321;
  op.campaign.limits.cost_usd = 77.125;
  op.campaign.limits.wall_time_s = 12345;
  op.campaign.model = "secret-model-name";
  op.tol.atol = 0.0123;
  op.tol.rtol = 0.0234;
  op.tol.matched_ratio = 0.9987;
  for (auto& t : op.inputs) {
    if (t.gen && t.gen->k == config::generator::kind::normal) {
      t.gen->mean = 0.0371;
      t.gen->stddev = 1.0419;
    } else if (t.gen) {
      t.gen->low = 0.5173;
      t.gen->high = 1.4827;
    }
  }
  return op;
}

const char* const forbidden[] = {
    // seeds: the campaign's and the worker's default base seed
    "987654321", "20261130", "base_seed", "seeds",
    // generator parameters and kinds
    "0.0371", "1.0419", "0.5173", "1.4827", "stddev", "generator",
    // exact tolerance slack (the config's values are stated to one digit)
    "0.0123", "0.0234", "matched_ratio", "slack",
    // campaign settings
    "0.4321", "7654321", "77.125", "12345", "secret-model-name", "dropout", "budget",
    // credentials
    "API_KEY", "OPENAI", "ANTHROPIC", "KOPT_", "api_key", "Bearer", "sk-"};

TEST(secrets, first_generation_prompt_leaks_no_evaluator_secrets) {
  const config::operator_config op = planted_operator();
  const nlohmann::json ctx = build_context(testing::full_inputs(op));
  const template_set set =
      template_set::load_directory(testing::source_dir / "prompts" / "templates");
  for (const char* name : {"system", "first", "revise", "fix_compile", "fix_wrong", "broaden"}) {
    const std::string text = set.render(name, ctx).text;
    for (const char* f : forbidden) {
      EXPECT_EQ(text.find(f), std::string::npos) << "'" << f << "' appears in the " << name
                                                 << " prompt";
    }
  }
  const std::string dumped = ctx.dump();
  for (const char* f : forbidden) {
    EXPECT_EQ(dumped.find(f), std::string::npos) << "'" << f << "' appears in the context";
  }
}

TEST(secrets, tolerances_are_stated_as_the_config_says_them_loosely) {
  const config::operator_config op = planted_operator();
  const nlohmann::json ctx = build_context(testing::full_inputs(op));
  const std::string text =
      template_set::load_directory(testing::source_dir / "prompts" / "templates")
          .render("first", ctx)
          .text;
  // One significant digit of atol and rtol, and the matched share as the
  // config states it (a percentage), nothing finer.
  EXPECT_NE(text.find("passing where |output - reference| <= max(atol, rtol x |reference|) with "
                      "atol about 0.01 and rtol about 0.02, on at least 99.87 % of elements"),
            std::string::npos);
  // With the example's exact matching, every element is required.
  const config::operator_config plain = testing::load_rmsnorm();
  const std::string t2 =
      template_set::load_directory(testing::source_dir / "prompts" / "templates")
          .render("first", build_context(testing::full_inputs(plain)))
          .text;
  EXPECT_NE(t2.find("passing where |output - reference| <= max(atol, rtol x |reference|) with atol "
                    "about 0.02 and rtol about 0.02, on every element"),
            std::string::npos);
}

}  // namespace
}  // namespace kopt::prompts
