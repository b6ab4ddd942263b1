// Diagnosis rules on synthetic inputs shaped like what the worker reports
// for well-understood kernels (GPU tests check the same on real ones).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/diagnosis.hpp"
#include "core/roofline.hpp"

namespace {

using kopt::harness::diagnose;
using kopt::harness::diagnosis_input;

bool has(const kopt::harness::diagnosis& d, const std::string& cls) {
  return std::any_of(d.findings.begin(), d.findings.end(),
                     [&](const auto& f) { return f.cls == cls; });
}

diagnosis_input h200() {
  diagnosis_input in;
  in.sm_count = 132;
  in.peak_bytes_per_s = 4.8e12;
  in.peak_flops_per_s = 6.7e13;  // fp32
  return in;
}

diagnosis_input::launch grid(std::int64_t blocks, std::int64_t threads, int per_sm) {
  diagnosis_input::launch l;
  l.kernel = "k";
  l.blocks = blocks;
  l.threads_per_block = threads;
  l.blocks_per_sm = per_sm;
  return l;
}

TEST(Diagnosis, CopyNearPeakIsMemoryBoundNearPeak) {
  auto in = h200();
  in.median_ns = 500e3;  // 2 GiB in 0.5 ms = 4.3 TB/s
  in.roofline_bytes = 2.0 * (1 << 30);
  in.metrics["dram__bytes_read.sum"] = 1.0 * (1 << 30);
  in.metrics["dram__bytes_write.sum"] = 1.0 * (1 << 30);
  in.metrics["gpu__time_duration.sum"] = 500e3;
  in.launches = {grid(132 * 16, 256, 8)};
  const auto d = diagnose(in);
  EXPECT_TRUE(has(d, "memory-bound-near-peak")) << d.to_text();
  EXPECT_FALSE(has(d, "compute-bound"));
  EXPECT_NEAR(d.derived.at("dram_fraction_of_peak").get<double>(), 0.894, 0.01);
}

TEST(Diagnosis, SlowStreamingKernelIsFarFromPeakWithEvidence) {
  auto in = h200();
  in.median_ns = 2e6;  // 1 GiB moved in 2 ms: 11 % of peak
  in.roofline_bytes = 1.0 * (1 << 30);
  in.roofline_flops = 1.0 * (1 << 28);
  in.metrics["dram__bytes_read.sum"] = 0.5 * (1 << 30);
  in.metrics["dram__bytes_write.sum"] = 0.5 * (1 << 30);
  in.metrics["sm__warps_active.avg.pct_of_peak_sustained_active"] = 80;
  in.launches = {grid(132 * 64, 256, 8)};
  const auto d = diagnose(in);
  EXPECT_EQ(d.primary, "memory-bound-far-from-peak") << d.to_text();
  const auto& f = d.findings.front();
  EXPECT_NEAR(f.evidence.at("dram_fraction_of_peak").get<double>(), 0.112, 0.01);
  EXPECT_NE(f.summary.find("11%"), std::string::npos) << f.summary;
}

TEST(Diagnosis, BusyFmaPipeIsComputeBound) {
  auto in = h200();
  in.median_ns = 3e6;
  in.roofline_bytes = 8.0 * (1 << 20);
  in.roofline_flops = 1.6e11;
  in.metrics["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"] = 85;
  in.metrics["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"] = 0;
  in.metrics["dram__bytes_read.sum"] = 4.0 * (1 << 20);
  in.metrics["dram__bytes_write.sum"] = 4.0 * (1 << 20);
  in.launches = {grid(132 * 8, 256, 8)};
  const auto d = diagnose(in);
  EXPECT_TRUE(has(d, "compute-bound")) << d.to_text();
  EXPECT_FALSE(has(d, "memory-bound-far-from-peak"));
}

TEST(Diagnosis, OneBlockKernelIsLatencyBoundAndUnderFilled) {
  auto in = h200();
  in.median_ns = 80e3;
  in.roofline_bytes = 4096;
  in.metrics["sm__warps_active.avg.pct_of_peak_sustained_active"] = 1.6;
  in.metrics["sm__cycles_active.avg"] = 1500;
  in.metrics["sm__cycles_elapsed.avg"] = 150000;
  in.metrics["dram__bytes_read.sum"] = 4096;
  in.metrics["dram__bytes_write.sum"] = 0;
  in.metrics["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"] = 0.5;
  in.launches = {grid(1, 32, 32)};
  const auto d = diagnose(in);
  EXPECT_TRUE(has(d, "latency-bound") || has(d, "occupancy-limited")) << d.to_text();
  EXPECT_TRUE(has(d, "under-filled-grid")) << d.to_text();
  // The low bandwidth is a consequence, not the bottleneck to fix first.
  EXPECT_TRUE(d.primary == "under-filled-grid" || d.primary == "latency-bound") << d.to_text();
}

TEST(Diagnosis, ShortKernelIsLaunchBound) {
  auto in = h200();
  in.median_ns = 2500;
  in.roofline_bytes = 8192;
  in.launches = {grid(1, 256, 8)};
  const auto d = diagnose(in);
  EXPECT_EQ(d.primary, "launch-bound") << d.to_text();
}

TEST(Diagnosis, SpillsAndExcessBytesAreReportedWithNumbers) {
  auto in = h200();
  in.median_ns = 1e6;
  in.roofline_bytes = 1e9;
  in.metrics["dram__bytes_read.sum"] = 2.5e9;
  in.metrics["dram__bytes_write.sum"] = 0.5e9;
  in.metrics["l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"] = 1e8;
  auto l = grid(132 * 8, 256, 4);
  l.spill_bytes = 96;
  in.launches = {l};
  const auto d = diagnose(in);
  ASSERT_TRUE(has(d, "excess-bytes")) << d.to_text();
  ASSERT_TRUE(has(d, "register-spills")) << d.to_text();
  for (const auto& f : d.findings) {
    if (f.cls == "excess-bytes") EXPECT_NEAR(f.evidence.at("ratio").get<double>(), 3.0, 1e-9);
    if (f.cls == "register-spills") EXPECT_EQ(f.evidence.at("spill_bytes").get<std::int64_t>(), 96);
  }
}

// Serialized wgmma (ptxas advisory C75xx) is named even without counters:
// the roofline alone cannot tell a serialized MMA stream from a slow one.
TEST(Diagnosis, PtxasWgmmaSerializationIsATensorCoreFinding) {
  auto in = h200();
  in.median_ns = 1.4e6;
  in.roofline_flops = 3.3e11;
  in.roofline_bytes = 1e8;
  in.peak_flops_per_s = 9.9e14;
  auto l = grid(32 * 50, 256, 1);
  l.kernel = "ua";
  l.performance_advisories = {
      "(C7520) wgmma.mma_async instructions are serialized due to program dependence"};
  in.launches = {l};
  const auto d = diagnose(in);
  ASSERT_TRUE(has(d, "tensor-core-underused")) << d.to_text();
  for (const auto& f : d.findings)
    if (f.cls == "tensor-core-underused" && f.evidence.contains("ptxas_advisories")) {
      EXPECT_GE(f.severity, 0.7);
      EXPECT_NE(f.summary.find("C7520"), std::string::npos) << f.summary;
      EXPECT_EQ(f.evidence["ptxas_advisories"][0]["kernel"], "ua");
    }
  in.launches[0].performance_advisories.clear();
  const auto quiet = diagnose(in);
  for (const auto& f : quiet.findings) EXPECT_FALSE(f.evidence.contains("ptxas_advisories"));
}

TEST(Diagnosis, TailEffectFromWaveQuantization) {
  auto in = h200();
  in.median_ns = 200e3;
  in.roofline_bytes = 1e8;
  // 1.2 waves: 132 * 2 resident blocks per wave, 317 blocks.
  in.launches = {grid(317, 256, 2)};
  const auto d = diagnose(in);
  EXPECT_TRUE(has(d, "tail-effect")) << d.to_text();
}

// A plan of one-block helper launches around a big main launch (the paged
// attention plan: an offset scan, a path that returns at once, 1600 blocks of
// the real kernel) is judged by the main launch. Its waves come from its own
// occupancy; when that is unknown, no grid finding is drawn from a helper.
TEST(Diagnosis, GridFindingsComeFromTheMainLaunch) {
  auto in = h200();
  in.median_ns = 900e3;
  in.roofline_bytes = 1e8;
  auto helper = grid(1, 1024, 2);
  auto main = grid(1600, 384, 1);
  in.launches = {helper, main, grid(1, 128, 8)};
  auto d = diagnose(in);
  EXPECT_FALSE(has(d, "under-filled-grid")) << d.to_text();
  EXPECT_FALSE(has(d, "tail-effect")) << d.to_text();  // 12.1 waves
  EXPECT_NEAR(d.derived.value("waves", -1.0), 1600.0 / 132.0, 1e-9);
  main.blocks_per_sm = 0;  // the occupancy query failed
  in.launches = {helper, main};
  d = diagnose(in);
  EXPECT_FALSE(has(d, "under-filled-grid")) << d.to_text();
  EXPECT_FALSE(d.derived.contains("waves")) << d.derived.dump();
  // A plan whose main launch really is small is still under-filled.
  in.launches = {grid(1, 32, 32), grid(40, 256, 4)};
  d = diagnose(in);
  EXPECT_TRUE(has(d, "under-filled-grid")) << d.to_text();
}

TEST(Diagnosis, EmptyInputGivesUnknownNotACrash) {
  const auto d = diagnose(diagnosis_input{});
  EXPECT_EQ(d.primary, "unknown");
  EXPECT_TRUE(d.findings.empty());
  EXPECT_TRUE(d.to_json().contains("derived"));
}

}  // namespace

// Launch-bound is judged against the worker's measured floor when there is
// one (the same rule as the evaluation summary): 4 us is launch-bound
// without a floor, not with a 640 ns floor; 1 us is, with that floor.
TEST(Diagnosis, LaunchBoundIsJudgedAgainstTheMeasuredFloor) {
  auto in = h200();
  in.roofline_bytes = 8192;
  in.launches = {grid(1, 256, 8)};
  in.median_ns = 4000;
  EXPECT_EQ(diagnose(in).primary, "launch-bound");
  in.launch_floor_ns = 640;
  const auto d = diagnose(in);
  EXPECT_NE(d.primary, "launch-bound") << d.to_text();
  for (const auto& f : d.findings) EXPECT_NE(f.cls, "launch-bound") << d.to_text();
  in.median_ns = 1000;
  const auto d2 = diagnose(in);
  EXPECT_EQ(d2.primary, "launch-bound") << d2.to_text();
  EXPECT_NE(d2.to_text().find("measured launch floor"), std::string::npos) << d2.to_text();
  EXPECT_EQ(kopt::harness::is_launch_bound(1000, 640), true);
  EXPECT_EQ(kopt::harness::is_launch_bound(1300, 640), false);
  EXPECT_EQ(kopt::harness::is_launch_bound(9000, 0), true);
}
