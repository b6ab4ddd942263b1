// Lints kopt's own technique documents: every one must parse without
// errors, ids must be unique, cross-references must resolve, and each must
// carry a usable example (a cuda block whose kernels the plan launches).
#include <gtest/gtest.h>

#include <set>

#include "kb/library.hpp"

namespace kb = kopt::kb;

TEST(KbTechniques, LintHasZeroErrors) {
  const std::filesystem::path dir = std::filesystem::path(KOPT_SOURCE_DIR) / "knowledge_base/techniques";
  const kb::load_result r = kb::load_directories({dir});
  std::size_t errors = 0;
  for (const auto& d : r.diagnostics) {
    if (d.level == kb::diagnostic::severity::error) {
      ++errors;
      ADD_FAILURE() << d.to_string();
    }
  }
  EXPECT_EQ(errors, 0u);
  EXPECT_GE(r.files, 40u);
  EXPECT_EQ(r.documents.size(), r.files) << "every file is a valid document";
  std::set<std::string> bottlenecks_covered;
  for (const auto& d : r.documents) {
    ASSERT_TRUE(d.ex.has_value()) << d.id;
    EXPECT_FALSE(d.ex->kernels.empty()) << d.id;
    EXPECT_EQ(d.sections.size(), kb::section_names().size()) << d.id;
    bottlenecks_covered.insert(d.bottlenecks.begin(), d.bottlenecks.end());
  }
  // Every diagnosis class has at least one technique to retrieve.
  for (std::string_view b : kb::bottleneck_classes())
    EXPECT_EQ(bottlenecks_covered.count(std::string(b)), 1u) << "no document for " << b;
}

TEST(KbTechniques, BuiltinDirectoryIsFound) {
  const auto dir = kb::builtin_directory();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(std::filesystem::exists(dir / "vectorized-loads.md"));
}
