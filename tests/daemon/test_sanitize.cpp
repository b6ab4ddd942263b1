// compute-sanitizer in daemon campaigns (docs/integrity.md, class 4): the
// daemon's leased-worker evaluator runs a finalist under the tool before
// promotion, as `kopt run` does, in throwaway --profile-only workers started
// through the slot's launch prefix (never in the daemon's process). A shell
// script stands in for compute-sanitizer: it logs how it was called, writes
// the log a real tool would (clean, or one racecheck hazard while
// DIR/sanitize_errors exists) and execs the fake worker. A missing tool is
// recorded as skipped with its reason.
#include <fmt/format.h>

#include "fake_worker.hpp"
#include "support.hpp"

using namespace kopt;
using namespace kopt::test;
using json = nlohmann::json;

namespace {

const char* fake_sanitizer_sh = R"SH(#!/bin/sh
# compute-sanitizer --tool T --log-file L --target-processes P [--racecheck-report R] CMD...
tool=""; log=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tool) tool="$2"; shift 2;;
    --log-file) log="$2"; shift 2;;
    --target-processes|--racecheck-report) shift 2;;
    *) break;;
  esac
done
echo "$tool $*" >> "@DIR@/sanitizer.log"
if [ -e "@DIR@/sanitize_errors" ] && [ "$tool" = "racecheck" ]; then
  printf '========= COMPUTE-SANITIZER\n========= Error: Race reported between Write access at k+0x40\n========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n' > "$log"
else
  printf '========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n' > "$log"
fi
exec "$@"
)SH";

store::row_id submit(daemon_process& d, const json& op, const std::string& tag) {
  const auto file = d.state().parent_path() / (tag + ".json");
  spit(file, op.dump(2));
  auto [rc, out] = run_kopt({"--db", d.db_path().string(), "submit", file.string()},
                            d.state().parent_path(), tag);
  EXPECT_EQ(rc, 0) << slurp(d.state().parent_path() / (tag + ".err"));
  return std::stoll(out);
}

// The "sanitize" record of every promotion decision of a campaign.
std::vector<json> sanitize_records(const daemon_process& d, store::row_id id) {
  auto db = d.reader();
  auto st = db.db().prepare(
      "SELECT data_json FROM events WHERE campaign_id = ? AND kind IN ('promoted', "
      "'not_promoted') ORDER BY id");
  st.bind(1, id);
  std::vector<json> out;
  while (st.step()) {
    const auto j = json::parse(st.get_text(0));
    if (j.contains("sanitize") && !j.at("sanitize").is_null()) out.push_back(j.at("sanitize"));
  }
  return out;
}

fs::path install_fake_sanitizer(const fs::path& dir) {
  const auto p = dir / "compute-sanitizer";
  spit(p, replace_dir(fake_sanitizer_sh, dir));
  fs::permissions(p, fs::perms(0755));
  return p;
}

}  // namespace

TEST(DaemonSanitize, FinalistsRunUnderTheToolBeforePromotion) {
  temp_dir dir;
  const auto wdir = dir / "worker";
  json cfg = {{"gpus", 1}, {"worker", install_fake_worker(wdir)}};
  const auto tool = install_fake_sanitizer(wdir);
  daemon_process d(dir.path(), cfg);
  fs::create_directories(d.state());
  const auto clean = submit(d, campaign_operator("vadd", 4), "clean");
  d.spawn({"KOPT_COMPUTE_SANITIZER=" + tool.string()});
  d.wait_ready();
  ASSERT_TRUE(eventually([&] { return d.campaign_state(clean) == "done"; }, 120s)) << d.log();

  const auto records = sanitize_records(d, clean);
  ASSERT_FALSE(records.empty()) << "no finalist reached the sanitizer\n" << d.log();
  for (const auto& r : records) {
    EXPECT_EQ(r.value("status", ""), "ok") << r.dump();
    EXPECT_EQ(r.value("sanitizer", ""), tool.string());
    ASSERT_EQ(r.at("tools").size(), 3u) << r.dump();
    EXPECT_FALSE(r.value("workload", "").empty());
  }
  // Each tool in its own worker, --profile-only, through the slot's prefix.
  const std::string slog = slurp(wdir / "sanitizer.log");
  for (const auto* t : {"memcheck", "racecheck", "initcheck"})
    EXPECT_NE(slog.find(std::string(t) + " " + (wdir / "worker.py").string()), std::string::npos)
        << slog;
  EXPECT_NE(slog.find("--profile-only"), std::string::npos) << slog;
  EXPECT_NE(slurp(wdir / "prefix.log").find(tool.string() + " --tool racecheck"),
            std::string::npos);
  EXPECT_GT(d.scalar("SELECT count(*) FROM events WHERE kind = 'promoted'"), 0);

  // A finalist with a race: no promotion, the tool's message is the reason.
  spit(wdir / "sanitize_errors", "");
  const auto racy = submit(d, campaign_operator("vadd2", 4), "racy");
  ASSERT_TRUE(eventually([&] { return d.campaign_state(racy) == "done"; }, 120s)) << d.log();
  const auto bad = sanitize_records(d, racy);
  ASSERT_FALSE(bad.empty()) << d.log();
  for (const auto& r : bad) EXPECT_EQ(r.value("status", ""), "rejected_integrity") << r.dump();
  EXPECT_EQ(d.scalar(fmt::format(
                "SELECT count(*) FROM events WHERE campaign_id = {} AND kind = 'promoted'", racy)),
            0);
  EXPECT_GT(d.scalar(fmt::format("SELECT count(*) FROM events WHERE campaign_id = {} AND kind = "
                                 "'not_promoted' AND message LIKE '%compute-sanitizer racecheck%'",
                                 racy)),
            0)
      << d.log();
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(10s).has_value());
}

TEST(DaemonSanitize, MissingToolIsRecordedAsSkipped) {
  temp_dir dir;
  const auto wdir = dir / "worker";
  json cfg = {{"gpus", 1}, {"worker", install_fake_worker(wdir)}};
  daemon_process d(dir.path(), cfg);
  fs::create_directories(d.state());
  const auto id = submit(d, campaign_operator("vadd", 4), "vadd");
  d.spawn({"KOPT_COMPUTE_SANITIZER=" + (wdir / "no-such-sanitizer").string()});
  d.wait_ready();
  ASSERT_TRUE(eventually([&] { return d.campaign_state(id) == "done"; }, 120s)) << d.log();
  const auto records = sanitize_records(d, id);
  ASSERT_FALSE(records.empty()) << d.log();
  for (const auto& r : records) {
    EXPECT_EQ(r.value("status", ""), "skipped") << r.dump();
    EXPECT_NE(r.value("reason", "").find("compute-sanitizer not found"), std::string::npos)
        << r.dump();
  }
  EXPECT_GT(d.scalar("SELECT count(*) FROM events WHERE kind = 'promoted'"), 0);
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(10s).has_value());
}
