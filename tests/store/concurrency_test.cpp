// WAL behaviour with two connections: readers never block the one writer,
// and the writer never blocks readers; a second writer waits for the busy
// timeout and then fails with a clear "locked" error.
#include <gtest/gtest.h>

#include <chrono>

#include "common/error.hpp"
#include "store/store.hpp"
#include "temp_dir.hpp"

namespace ks = kopt::store;
using clock_type = std::chrono::steady_clock;

namespace {

ks::row_id add_campaign(ks::store& s, ks::row_id op) {
  ks::campaign_record c;
  c.operator_id = op;
  c.provider = "autotune";
  return s.create_campaign(c);
}

std::int64_t count_campaigns(ks::store& s) {
  auto st = s.db().prepare("SELECT count(*) FROM campaigns");
  st.step();
  return st.get_int(0);
}

long elapsed_ms(clock_type::time_point since) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - since).count());
}

class StoreConcurrency : public ::testing::Test {
 protected:
  void SetUp() override {
    writer_.emplace(ks::store::open(path(), {.busy_timeout = std::chrono::milliseconds(2000)}));
    ks::operator_record op;
    op.name = "op";
    op.op_type = "op";
    op.content_hash = "hash";
    const std::vector<ks::workload_record> none;
    op_ = writer_->put_operator(op, none).operator_id;
    add_campaign(*writer_, op_);
  }
  std::filesystem::path path() const { return dir_ / "kopt.db"; }

  kopt::test::temp_dir dir_;
  std::optional<ks::store> writer_;
  ks::row_id op_ = 0;
};

}  // namespace

TEST_F(StoreConcurrency, ReaderInReadTransactionDoesNotBlockWriter) {
  auto reader =
      ks::store::open(path(), {.read_only = true, .busy_timeout = std::chrono::milliseconds(2000)});
  ks::transaction snapshot(reader.db(), ks::transaction::kind::deferred);
  ASSERT_EQ(count_campaigns(reader), 1);  // the read transaction now holds a snapshot

  const auto t0 = clock_type::now();
  add_campaign(*writer_, op_);  // autocommit write
  {
    ks::transaction tx(writer_->db());  // and an explicit BEGIN IMMEDIATE one
    add_campaign(*writer_, op_);
    tx.commit();
  }
  // The writer never waited for the reader (the busy timeout is 2 s).
  EXPECT_LT(elapsed_ms(t0), 1000);
  EXPECT_EQ(count_campaigns(*writer_), 3);

  EXPECT_EQ(count_campaigns(reader), 1);  // still its snapshot
  snapshot.commit();
  EXPECT_EQ(count_campaigns(reader), 3);  // a new read sees the commits
}

TEST_F(StoreConcurrency, WriterHoldingWriteLockDoesNotBlockReader) {
  ks::transaction tx(writer_->db());
  add_campaign(*writer_, op_);  // uncommitted

  auto reader =
      ks::store::open(path(), {.read_only = true, .busy_timeout = std::chrono::milliseconds(2000)});
  const auto t0 = clock_type::now();
  EXPECT_EQ(reader.list_campaigns().size(), 1u);  // committed state only
  EXPECT_LT(elapsed_ms(t0), 1000);
  tx.commit();
  EXPECT_EQ(reader.list_campaigns().size(), 2u);
}

TEST_F(StoreConcurrency, SecondWriterTimesOutWithLockedError) {
  ks::transaction tx(writer_->db());
  add_campaign(*writer_, op_);

  auto second = ks::store::open(path(), {.busy_timeout = std::chrono::milliseconds(150)});
  const auto t0 = clock_type::now();
  try {
    add_campaign(second, op_);
    FAIL() << "second writer was not blocked";
  } catch (const kopt::store_error& e) {
    EXPECT_NE(std::string(e.what()).find("locked"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path().string()), std::string::npos) << e.what();
  }
  EXPECT_GE(elapsed_ms(t0), 140);  // it did wait for the busy timeout
  tx.commit();
  add_campaign(second, op_);  // free again
  EXPECT_EQ(count_campaigns(second), 3);
}
