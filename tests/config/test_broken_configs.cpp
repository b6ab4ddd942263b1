// Data-driven: every tests/data/broken-configs/NAME.json must fail to load,
// and every line of NAME.expected must equal one diagnostic exactly (with the
// file shown by its base name). Lines starting with '#' are comments.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/operator.hpp"

namespace fs = std::filesystem;
using namespace kopt::config;

namespace {

const fs::path kDir = fs::path(KOPT_SOURCE_DIR) / "tests" / "data" / "broken-configs";

std::vector<fs::path> cases() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kDir))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> expected_lines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    out.push_back(line);
  }
  return out;
}

}  // namespace

TEST(BrokenConfigs, AtLeastThirty) { EXPECT_GE(cases().size(), 30u); }

TEST(BrokenConfigs, EachFailsWithItsExpectedDiagnostics) {
  for (const auto& file : cases()) {
    SCOPED_TRACE(file.filename().string());
    fs::path exp = file;
    exp.replace_extension(".expected");
    ASSERT_TRUE(fs::exists(exp)) << "missing " << exp;
    const auto expected = expected_lines(exp);
    ASSERT_FALSE(expected.empty()) << exp << " lists no diagnostics";

    const load_result r = load_operator_file(file);
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(has_errors(r.diagnostics));
    std::vector<std::string> got;
    std::string all;
    for (diagnostic d : r.diagnostics) {
      d.file = fs::path(d.file).filename().string();
      got.push_back(d.to_string());
      all += "  " + got.back() + "\n";
    }
    for (const auto& line : expected) {
      EXPECT_NE(std::find(got.begin(), got.end(), line), got.end())
          << "expected diagnostic not reported:\n  " << line << "\nreported:\n" << all;
    }
  }
}
