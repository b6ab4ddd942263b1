// common/data_paths: the one lookup of kopt's data files. The order
// (environment, beside the binary, build tree, install prefix), that a
// KOPT_PROMPTS_DIR pointing nowhere is an error and not a fallback, and that
// this test binary (which lives in the build tree) gets the source tree's
// directories with origin "build tree". The installed-binary side (data
// beside the binary, never the source tree) is test_install's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "../common/test_util.hpp"
#include "common/data_paths.hpp"

namespace fs = std::filesystem;
using namespace kopt;

namespace {

struct env_guard {
  explicit env_guard(std::initializer_list<const char*> names) {
    for (const char* n : names) {
      const char* v = std::getenv(n);
      saved.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(n);
    }
  }
  ~env_guard() {
    for (const auto& [n, v] : saved) {
      if (v)
        ::setenv(n.c_str(), v->c_str(), 1);
      else
        ::unsetenv(n.c_str());
    }
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
};

}  // namespace

TEST(DataPaths, BuildTreeBinaryUsesTheSourceTree) {
  env_guard g{"KOPT_DATA_DIR", "KOPT_PROMPTS_DIR"};
  const fs::path src(KOPT_SOURCE_DIR);
  struct want {
    data::kind k;
    fs::path dir;
  };
  for (const auto& w : {want{data::kind::prompts, src / "prompts/templates"},
                        want{data::kind::techniques, src / "knowledge_base/techniques"},
                        want{data::kind::references, src / "knowledge_base/references"},
                        want{data::kind::hardware, src / "configs/hardware"},
                        want{data::kind::bench, src / "configs/bench"}}) {
    const auto l = data::find(w.k);
    ASSERT_TRUE(l.found) << data::name(w.k) << ": looked in " << l.looked_in();
    EXPECT_EQ(l.found->dir, w.dir.lexically_normal()) << data::name(w.k);
    EXPECT_EQ(l.found->how, data::origin::build_tree) << data::name(w.k);
    // Beside the binary was tried first (and is not there in a build tree).
    ASSERT_GE(l.tried.size(), 2u);
    EXPECT_EQ(l.tried.front().how, data::origin::beside_binary);
  }
  EXPECT_EQ(data::peaks_file(), (src / "configs/hardware/gpus.json").lexically_normal().string());
  EXPECT_EQ(data::peaks_file("/x/peaks.json"), "/x/peaks.json");
}

TEST(DataPaths, EnvironmentComesFirstAndFallsThroughPerKind) {
  env_guard g{"KOPT_DATA_DIR", "KOPT_PROMPTS_DIR"};
  test::scratch_dir d;
  fs::create_directories(d.path() / "hardware");
  test::write_text(d.path() / "hardware/gpus.json", "{}");
  ::setenv("KOPT_DATA_DIR", d.path().c_str(), 1);
  const auto hw = data::find(data::kind::hardware);
  ASSERT_TRUE(hw.found);
  EXPECT_EQ(hw.found->how, data::origin::environment);
  EXPECT_EQ(hw.found->detail, "$KOPT_DATA_DIR");
  EXPECT_EQ(data::peaks_file(), (d.path() / "hardware/gpus.json").string());
  // No prompts/ under KOPT_DATA_DIR: the next place is used (as
  // scripts/device-env.sh relies on), and the environment one is listed.
  const auto pr = data::find(data::kind::prompts);
  ASSERT_TRUE(pr.found);
  EXPECT_EQ(pr.found->how, data::origin::build_tree);
  EXPECT_EQ(pr.tried.front().dir, (d.path() / "prompts").lexically_normal());
  EXPECT_TRUE(pr.problem.empty());
}

TEST(DataPaths, PromptsDirThatPointsNowhereIsAProblem) {
  env_guard g{"KOPT_DATA_DIR", "KOPT_PROMPTS_DIR"};
  ::setenv("KOPT_PROMPTS_DIR", "/nonexistent/kopt-templates", 1);
  const auto l = data::find(data::kind::prompts);
  EXPECT_FALSE(l.found);
  EXPECT_NE(l.problem.find("KOPT_PROMPTS_DIR=/nonexistent/kopt-templates"), std::string::npos)
      << l.problem;
  EXPECT_TRUE(data::find_dir(data::kind::prompts).empty());
  test::scratch_dir d;
  ::setenv("KOPT_PROMPTS_DIR", d.path().c_str(), 1);
  const auto ok = data::find(data::kind::prompts);
  ASSERT_TRUE(ok.found);
  EXPECT_EQ(ok.found->how, data::origin::environment);
  EXPECT_EQ(ok.found->detail, "$KOPT_PROMPTS_DIR");
}

TEST(DataPaths, NamesAreTheInstalledLayout) {
  EXPECT_EQ(data::name(data::kind::prompts), "prompts");
  EXPECT_EQ(data::name(data::kind::techniques), "knowledge_base/techniques");
  EXPECT_EQ(data::name(data::kind::hardware), "hardware");
  EXPECT_EQ(data::name(data::origin::beside_binary), "beside the binary");
  EXPECT_EQ(data::name(data::origin::install_prefix), "install prefix");
}
