// Compile-checks the Example of every technique document with NVRTC for
// sm_90a (in process; no GPU needed), each tunable parameter at its default,
// and checks that the kernels the launch plan names are in the module.
#include <gtest/gtest.h>

#include "kb/compile_check.hpp"
#include "kb/library.hpp"

namespace kb = kopt::kb;

namespace {

const std::vector<kb::document>& techniques() {
  static const std::vector<kb::document> docs = [] {
    const kb::load_result r = kb::load_directories(
        {std::filesystem::path(KOPT_SOURCE_DIR) / "knowledge_base/techniques"});
    EXPECT_TRUE(r.ok());
    return r.documents;
  }();
  return docs;
}

std::string lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& p : v) s += p + "\n";
  return s;
}

}  // namespace

TEST(KbCompileExamples, EveryExampleCompilesForSm90a) {
  ASSERT_GE(techniques().size(), 40u);
  std::size_t integrity_rejections = 0;
  for (const auto& d : techniques()) {
    const kb::compile_outcome c = kb::compile_example(d, "sm_90a", nullptr);
    EXPECT_TRUE(c.compiled) << d.file << ": " << c.status << "\n" << lines(c.problems) << c.log;
    if (!c.compiled) continue;
    EXPECT_FALSE(c.result.cubin.empty()) << d.id;
    for (const auto& k : d.ex->kernels)
      EXPECT_EQ(c.result.kernels.count(k), 1u) << d.id << ": kernel " << k << " not in the module";
    // Failed in ExamplesPassTheIntegrityCheck; noted here for the log.
    if (!c.result.integrity_problems.empty()) {
      ++integrity_rejections;
      std::cout << "note: " << d.file << ": compiles, but kopt's integrity check rejects it:\n"
                << lines(c.result.integrity_problems);
    }
  }
  RecordProperty("integrity_rejections", static_cast<int>(integrity_rejections));
}

// Every example must also be acceptable as a candidate: kopt's integrity
// check (profiler/core/cubin_inspect.cpp) refuses writable module-scope
// variables, and NVRTC-shipped headers can bring some in (static data members
// of cooperative_groups, __nv_atomic_triv_cp_helper<T>::__val behind 64-bit
// atomicExch). The examples avoid those headers' paths (cluster intrinsics,
// release/acquire PTX), and this keeps them honest.
TEST(KbCompileExamples, ExamplesPassTheIntegrityCheck) {
  for (const auto& d : techniques()) {
    const kb::compile_outcome c = kb::compile_example(d, "sm_90a", nullptr);
    EXPECT_TRUE(c.ok) << d.file << ": " << c.status << "\n" << lines(c.problems);
    EXPECT_TRUE(c.result.integrity_problems.empty()) << d.file;
  }
}

TEST(KbCompileExamples, ABrokenExampleFails) {
  ASSERT_FALSE(techniques().empty());
  kb::document d = techniques().front();
  d.ex->source += "\nextern \"C\" __global__ void broken() { undeclared_name = 1; }\n";
  const kb::compile_outcome c = kb::compile_example(d, "sm_90a", nullptr);
  EXPECT_FALSE(c.compiled);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.status, kopt::compile::status_name(kopt::compile::result::status::error));
  EXPECT_NE(c.log.find("undeclared_name"), std::string::npos);

  kb::document m = techniques().front();
  m.ex->kernels.push_back("not_in_the_source");
  const kb::compile_outcome k = kb::compile_example(m, "sm_90a", nullptr);
  EXPECT_TRUE(k.compiled);
  EXPECT_FALSE(k.ok);
  EXPECT_EQ(k.status, "missing_kernel");
}
