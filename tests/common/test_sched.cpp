// common/sched: a thread's request for a short scheduling slice is applied
// (Linux 6.12+), clamped as the kernel does, kept to the calling thread, and
// reported as "unsupported", not as an error, where the kernel has no
// custom slices.
#include <gtest/gtest.h>

#include <thread>

#include "common/sched.hpp"

namespace kopt {
namespace {

using std::chrono::microseconds;

TEST(Sched, ASliceRequestIsAppliedToTheCallingThreadOnly) {
  // On a fresh thread, so the test runner's own thread keeps its slice.
  std::optional<microseconds> before, after, clamped_low, clamped_high, other;
  slice_request r, low, high;
  std::thread t([&] {
    before = thread_slice();
    r = request_thread_slice(microseconds(350));
    after = thread_slice();
    std::thread inner([&] { other = thread_slice(); });
    inner.join();
    low = request_thread_slice(microseconds(20));
    clamped_low = thread_slice();
    high = request_thread_slice(microseconds(5'000'000));
    clamped_high = thread_slice();
  });
  t.join();
  if (!before) {
    // A kernel before 6.12 reports no slice for SCHED_OTHER threads.
    EXPECT_EQ(r.outcome, slice_request::result::unsupported) << r.detail;
    EXPECT_NE(r.detail.find("6.12"), std::string::npos) << r.detail;
    GTEST_SKIP() << "this kernel has no custom scheduling slices (Linux < 6.12): " << r.detail;
  }
  ASSERT_EQ(r.outcome, slice_request::result::applied) << r.detail;
  EXPECT_EQ(after, microseconds(350));
  EXPECT_EQ(low.outcome, slice_request::result::applied) << low.detail;
  EXPECT_EQ(clamped_low, microseconds(100));
  EXPECT_EQ(high.outcome, slice_request::result::applied) << high.detail;
  EXPECT_EQ(clamped_high, microseconds(100'000));
  // The main thread never asked: it keeps the default (which is not 350 us
  // on any kernel's default settings).
  EXPECT_NE(thread_slice(), microseconds(350));
  ASSERT_TRUE(other.has_value());
}

}  // namespace
}  // namespace kopt
