// Prompts and issue 17: a private workload never reaches a prompt (table,
// weights, measurements), the accuracy sentence states the enforced form of
// the tolerance rule, and the attainable fraction (with the measured launch
// floor) is shown only when the measurements carry it.
#include <gtest/gtest.h>

#include "fixture.hpp"
#include "prompts/context.hpp"
#include "prompts/engine.hpp"

namespace kopt::prompts {
namespace {

std::string render_first(const prompt_inputs& in) {
  return template_set::load_directory(testing::source_dir / "prompts" / "templates")
      .render("first", build_context(in))
      .text;
}

TEST(PromptIntegrity, PrivateWorkloadsNeverReachThePrompt) {
  config::operator_config op = testing::load_rmsnorm();
  ASSERT_NE(op.find_workload("t2048_h4096"), nullptr);
  for (auto& w : op.workloads)
    if (w.id == "t2048_h4096") w.is_private = true;
  const std::string text = render_first(testing::full_inputs(op));
  EXPECT_EQ(text.find("t2048_h4096"), std::string::npos) << text;
  EXPECT_NE(text.find("t1_h4096"), std::string::npos);
}

TEST(PromptIntegrity, AccuracyStatesTheEnforcedForm) {
  config::operator_config op = testing::load_rmsnorm();
  EXPECT_NE(render_first(testing::full_inputs(op)).find("<= max(atol, rtol x |reference|)"),
            std::string::npos);
  // As a config with "form": "sum" loads: the outputs inherit the form.
  op.tol.form = config::tolerance_form::sum;
  for (auto& t : op.outputs)
    if (t.tol) t.tol->form = config::tolerance_form::sum;
  const std::string text = render_first(testing::full_inputs(op));
  EXPECT_NE(text.find("<= atol + rtol x |reference|"), std::string::npos) << text;
  EXPECT_EQ(text.find("max(atol"), std::string::npos);
}

TEST(PromptIntegrity, AttainableFractionOnlyWithALaunchFloor) {
  const config::operator_config op = testing::load_rmsnorm();
  prompt_inputs in = testing::full_inputs(op);
  EXPECT_EQ(render_first(in).find("attainable fraction"), std::string::npos);
  for (auto& m : in.measurements)
    if (m.sol_fraction) m.attainable_fraction = std::max(*m.sol_fraction, 0.5);
  const std::string text = render_first(in);
  EXPECT_NE(text.find("Weighted attainable fraction, max(SOL, the measured launch floor) / median"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace kopt::prompts
