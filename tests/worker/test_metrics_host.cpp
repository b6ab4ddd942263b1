// The CUPTI Profiler Host API needs no GPU: metric names are validated, and
// pass counts and config images computed, for a chip by name. CPU test.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.hpp"
#include "counters/metrics.hpp"

namespace {

using kopt::counters::metric_catalog;
using kopt::counters::tier;
using kopt::counters::tier_metrics;

TEST(MetricsHost, TiersAreValidOnHopperAndTheDefaultIsCheap) {
  metric_catalog cat("GH100");
  const auto d = cat.configure(tier_metrics(tier::default_tier), {});
  const auto f = cat.configure(tier_metrics(tier::full), {});
  std::cout << "GH100 passes: default " << d.passes << ", full " << f.passes << '\n';
  // The budget for the default tier: about 2 passes on GH100.
  EXPECT_GE(d.passes, 1u);
  EXPECT_LE(d.passes, 2u);
  EXPECT_GT(f.passes, d.passes);
  EXPECT_FALSE(d.image.empty());
  const auto infos = cat.describe({"dram__bytes_read.sum"});
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].type, "counter");
  EXPECT_NE(infos[0].description.find("DRAM"), std::string::npos) << infos[0].description;
}

TEST(MetricsHost, UnknownNamesGetOneClearErrorWithSuggestions) {
  metric_catalog cat("GH100");
  try {
    cat.describe({"dram__bytes_red.sum", "gpu__time_duration.sum", "dram__bytes_read.summ"});
    FAIL() << "expected an error";
  } catch (const kopt::error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("dram__bytes_red.sum: unknown; did you mean dram__bytes_read"), std::string::npos) << m;
    // A valid base with a bad roll-up is explained as such.
    EXPECT_NE(m.find("'dram__bytes_read' is a base metric"), std::string::npos) << m;
    EXPECT_EQ(m.find("gpu__time_duration.sum:"), std::string::npos) << "a valid name was reported: " << m;
    EXPECT_NE(m.find("GH100"), std::string::npos);
  }
}

TEST(MetricsHost, ConfigImagesAreCachedPerChipAndMetricList) {
  const auto dir = std::filesystem::temp_directory_path() / ("kopt-cupti-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  metric_catalog cat("GH100");
  const auto& names = tier_metrics(tier::default_tier);
  const auto a = cat.configure(names, dir);
  EXPECT_FALSE(a.from_cache);
  const auto b = cat.configure(names, dir);
  EXPECT_TRUE(b.from_cache);
  EXPECT_EQ(a.image, b.image);
  EXPECT_EQ(a.passes, b.passes);
  // A different list is a different entry.
  const auto c = cat.configure({"dram__bytes_read.sum"}, dir);
  EXPECT_FALSE(c.from_cache);
  // A damaged entry is rebuilt, not trusted.
  for (const auto& e : std::filesystem::directory_iterator(dir)) std::filesystem::resize_file(e.path(), 3);
  const auto d = cat.configure(names, dir);
  EXPECT_FALSE(d.from_cache);
  EXPECT_EQ(d.passes, a.passes);
  std::filesystem::remove_all(dir);
}

TEST(MetricsHost, UnknownChipIsAClearError) {
  try {
    metric_catalog cat("NOPE42");
    FAIL();
  } catch (const kopt::error& e) {
    EXPECT_NE(std::string(e.what()).find("NOPE42"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("GH100"), std::string::npos) << "supported chips should be listed";
  }
}

}  // namespace
