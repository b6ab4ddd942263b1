// Schema v3: a store at version 2 with evaluation rows migrates to v3 with
// every row, column and index kept, and afterwards takes the outcomes v2
// folded away (compile_timeout, rejected_format, reference_failed).
#include <gtest/gtest.h>

#include <span>

#include "common/error.hpp"
#include "store/migrations.hpp"
#include "store/store.hpp"
#include "temp_dir.hpp"

namespace ks = kopt::store;

namespace {

std::int64_t count_rows(ks::database& db, const std::string& sql) {
  auto st = db.prepare(sql);
  EXPECT_TRUE(st.step());
  return st.get_int(0);
}

}  // namespace

TEST(StoreMigrationV3, EvaluationsKeepTheirRowsAndTakeTheNewStatuses) {
  ASSERT_GE(ks::schema_version(), 3);  // v4 (agent campaigns) follows
  kopt::test::temp_dir dir;
  const auto path = dir / "kopt.db";
  {
    // A file as kopt at schema version 2 left it, with one evaluation.
    ks::database db(path, ks::database::open_mode::read_write_create);
    db.exec("PRAGMA foreign_keys = ON");
    const auto steps = ks::migrations();
    ks::migrate(db, std::span(steps.data(), 2));
    ASSERT_EQ(db.pragma_int("user_version"), 2);
    db.exec(
        "INSERT INTO operators(id, name, op_type, config_json, content_hash, created_at) "
        "VALUES (1, 'op', 'custom', '{}', 'h', 0);"
        "INSERT INTO workloads(id, operator_id, key, position, axes_json, weight) VALUES (1, 1, "
        "'w', 0, '{}', 1);"
        "INSERT INTO campaigns(id, operator_id, provider, settings_json, created_at, updated_at) "
        "VALUES (1, 1, 'autotune', '{}', 0, 0);"
        "INSERT INTO candidates(id, campaign_id, origin, source, source_hash, launch_plan_json, "
        "created_at) "
        "VALUES (1, 1, 'seed', 'src', 'sh', '{}', 0);"
        "INSERT INTO evaluations(id, candidate_id, workload_id, stage, status, median_ns, "
        "timing_json, error, "
        "created_at) VALUES (7, 1, 1, 'full', 'compile_error', 1234.5, '{\"samples\":3}', "
        "'compile_timeout: NVRTC ran past 60 s', 42);");
    // v2 refuses the outcomes it did not know.
    EXPECT_THROW(db.exec("INSERT INTO evaluations(candidate_id, workload_id, status, created_at) "
                         "VALUES (1, 1, 'compile_timeout', 0)"),
                 kopt::store_error);
  }
  auto s = ks::store::open(path);  // migrates through v3 to the newest
  EXPECT_EQ(s.file_schema_version(), ks::schema_version());
  auto& db = s.db();
  EXPECT_EQ(count_rows(db, "SELECT count(*) FROM schema_migrations WHERE version = 3"), 1);
  EXPECT_EQ(
      count_rows(
          db,
          "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name IN "
          "('evaluations_by_candidate','evaluations_by_workload','evaluations_by_compilation')"),
      3);
  EXPECT_EQ(count_rows(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'evaluations_v3'"), 0);
  const auto before = s.evaluations_of(1);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].id, 7);
  EXPECT_EQ(before[0].status, ks::eval_status::compile_error);
  EXPECT_EQ(before[0].timing.median_ns.value_or(0), 1234.5);
  EXPECT_EQ(before[0].error.value_or(""), "compile_timeout: NVRTC ran past 60 s");
  EXPECT_EQ(count_rows(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);

  for (auto st : {ks::eval_status::compile_timeout, ks::eval_status::rejected_format,
                  ks::eval_status::reference_failed}) {
    ks::evaluation_record e;
    e.candidate_id = 1;
    e.workload_id = 1;
    e.status = st;
    s.add_evaluation(e);
  }
  const auto after = s.evaluations_of(1);
  ASSERT_EQ(after.size(), 4u);
  std::vector<std::string> names;
  for (const auto& e : after) names.emplace_back(ks::to_string(e.status));
  EXPECT_NE(std::find(names.begin(), names.end(), "compile_timeout"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "rejected_format"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "reference_failed"), names.end());
  // Deleting the candidate still cascades to its evaluations (the foreign
  // key of the rebuilt table).
  db.exec("DELETE FROM candidates WHERE id = 1");
  EXPECT_EQ(count_rows(db, "SELECT count(*) FROM evaluations"), 0);
}
