// Speed of light: the GPU peak table (configs/hardware/gpus.json), FLOP and
// byte counts per workload (default bytes: inputs read once, outputs
// written once, in-place inputs twice), and the SOL fraction with its
// "impossible" flag.
#include <gtest/gtest.h>

#include <filesystem>

#include "../common/test_util.hpp"
#include "common/error.hpp"
#include "config/operator.hpp"
#include "core/roofline.hpp"

namespace fs = std::filesystem;
using namespace kopt;
using namespace kopt::harness;

namespace {

const fs::path kSource(KOPT_SOURCE_DIR);

config::operator_config load(const fs::path& file) {
  auto r = config::load_operator_file(file);
  if (!r.ok()) {
    std::string s;
    for (const auto& d : r.diagnostics) s += d.to_string() + "\n";
    throw std::runtime_error(file.string() + " does not load:\n" + s);
  }
  return *r.op;
}

config::operator_config load_text(const std::string& text) {
  auto r = config::load_operator_text(text, "t.json", kSource / "configs" / "examples");
  if (!r.ok()) {
    std::string s;
    for (const auto& d : r.diagnostics) s += d.to_string() + "\n";
    throw std::runtime_error("test config does not load:\n" + s);
  }
  return *r.op;
}

gpu_peaks h200() {
  const auto table = load_peak_table(kSource / "configs" / "hardware" / "gpus.json");
  auto p = find_peaks(table, "NVIDIA H200");
  if (!p) throw std::runtime_error("no H200 in gpus.json");
  return *p;
}

// y = x (+)= r in place; z out. Bytes default: x twice (in place), r once, z once.
const char* kInPlace = R"JSON({
  "name": "inplace_t",
  "axes": {"n": {"type": "var"}},
  "inputs": {"x": {"shape": ["n"], "dtype": "float32", "in_place": true},
             "r": {"shape": ["n"], "dtype": "bfloat16"}},
  "outputs": {"z": {"shape": ["n", 2], "dtype": "float64"}},
  "roofline": {"flops": "3 * n", "flop_unit": "fp32"},
  "workloads": [{"id": "w", "axes": {"n": 1000}}],
  "reference": {
    "source": "extern \"C\" __global__ void ip_ref(float* x, const void* r, double* z, long long n) {}",
    "launches": [{"kernel": "ip_ref", "grid": ["ceil_div(n, 256)"], "block": [256],
                  "args": [{"tensor": "x"}, {"tensor": "r"}, {"tensor": "z"}, {"int": "n", "type": "int64"}]}]
  }
})JSON";

}  // namespace

TEST(Peaks, FindsH200FromTheShippedTable) {
  const auto table = load_peak_table(kSource / "configs" / "hardware" / "gpus.json");
  const auto p = find_peaks(table, "NVIDIA H200");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->name, "H200");
  EXPECT_DOUBLE_EQ(p->dram_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(p->flops_per_s.at("fp32"), 67e12);
  EXPECT_DOUBLE_EQ(p->flops_per_s.at("bf16_tensor"), 989.5e12);
  EXPECT_EQ(p->source, "datasheet");
  // The CUDA device name carries suffixes.
  const auto nvl = find_peaks(table, "NVIDIA H200 NVL");
  ASSERT_TRUE(nvl.has_value());
  EXPECT_EQ(nvl->name, "H200");
  const auto h100 = find_peaks(table, "NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(h100.has_value());
  EXPECT_EQ(h100->name, "H100");
  EXPECT_DOUBLE_EQ(h100->dram_bytes_per_s, 3.35e12);
  EXPECT_FALSE(find_peaks(table, "Tesla V100-SXM2-16GB").has_value());
  EXPECT_FALSE(find_peaks(nlohmann::json::object(), "NVIDIA H200").has_value());
  const auto j = p->to_json();
  EXPECT_EQ(j.at("name"), "H200");
  EXPECT_EQ(j.at("flops_per_s").at("fp32"), 67e12);
}

TEST(Peaks, TableErrors) {
  kopt::test::scratch_dir dir;
  EXPECT_THROW(load_peak_table(dir / "missing.json"), kopt::error);
  kopt::test::write_text(dir / "bad.json", "{ \"gpus\": ");
  try {
    load_peak_table(dir / "bad.json");
    FAIL() << "a truncated table was accepted";
  } catch (const kopt::error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
}

TEST(Roofline, VectorAddDefaultBytes) {
  const auto op = load(kSource / "configs" / "examples" / "vector_add.json");
  const auto c = roofline_for(op, *op.find_workload("n1000"));
  EXPECT_DOUBLE_EQ(c.flops, 1000.0);
  EXPECT_DOUBLE_EQ(c.bytes, 3 * 1000 * 4.0);  // a, b read; out written
  const auto big = roofline_for(op, *op.find_workload("n16m"));
  EXPECT_DOUBLE_EQ(big.bytes, 3 * 16777216 * 4.0);
}

TEST(Roofline, RmsnormMixedShapes) {
  const auto op = load(kSource / "configs" / "examples" / "rmsnorm.json");
  const auto c = roofline_for(op, *op.find_workload("t16_h4096"));
  EXPECT_DOUBLE_EQ(c.flops, 4.0 * 16 * 4096);
  EXPECT_DOUBLE_EQ(c.bytes, 16 * 4096 * 2.0 + 4096 * 2.0 + 16 * 4096 * 2.0);
  // Agrees with the config library's own rule.
  EXPECT_DOUBLE_EQ(c.bytes, static_cast<double>(config::roofline_bytes(op, *op.find_workload("t16_h4096"))));
}

TEST(Roofline, InPlaceInputsCountTwice) {
  const auto op = load_text(kInPlace);
  const auto c = roofline_for(op, op.workloads.at(0));
  EXPECT_DOUBLE_EQ(c.flops, 3000.0);
  EXPECT_DOUBLE_EQ(c.bytes, 2 * 1000 * 4.0 + 1000 * 2.0 + 2000 * 8.0);
}

TEST(Roofline, ExplicitBytesExpression) {
  auto j = nlohmann::json::parse(kInPlace);
  j["roofline"]["bytes"] = "n * 100";
  const auto op = load_text(j.dump());
  const auto c = roofline_for(op, op.workloads.at(0));
  EXPECT_DOUBLE_EQ(c.bytes, 100000.0);
}

TEST(Roofline, BadWorkloadThrows) {
  const auto op = load_text(kInPlace);
  config::workload w;
  w.id = "no_axes";
  EXPECT_THROW(roofline_for(op, w), kopt::error);
}

TEST(SpeedOfLight, MemoryBoundFraction) {
  const auto p = h200();
  // 4.8 GB at 4.8 TB/s = 1 ms; 1 GFLOP at 67 TFLOP/s = ~15 us.
  const roofline_counts c{1e9, 4.8e9};
  const auto r = speed_of_light(c, "fp32", p, 2e6);
  EXPECT_DOUBLE_EQ(r.t_memory_ns, 1e6);
  EXPECT_NEAR(r.t_compute_ns, 1e9 / 67e12 * 1e9, 1e-6);
  EXPECT_DOUBLE_EQ(r.t_sol_ns, 1e6);
  EXPECT_EQ(r.bound, "memory");
  EXPECT_DOUBLE_EQ(r.fraction, 0.5);
  EXPECT_FALSE(r.impossible);
  const auto j = r.to_json();
  EXPECT_EQ(j.at("bound"), "memory");
  EXPECT_DOUBLE_EQ(j.at("fraction").get<double>(), 0.5);
  EXPECT_EQ(j.at("impossible"), false);
}

TEST(SpeedOfLight, ComputeBound) {
  const auto p = h200();
  const roofline_counts c{989.5e12, 1e6};  // one second of bf16 tensor work
  const auto r = speed_of_light(c, "bf16_tensor", p, 2e9);
  EXPECT_EQ(r.bound, "compute");
  EXPECT_DOUBLE_EQ(r.t_sol_ns, 1e9);
  EXPECT_DOUBLE_EQ(r.fraction, 0.5);
  // The same work counted as fp32 is 14.8x slower at its peak.
  const auto r32 = speed_of_light(c, "fp32", p, 2e9);
  EXPECT_GT(r32.t_sol_ns, r.t_sol_ns * 14);
  EXPECT_TRUE(r32.impossible);
}

TEST(SpeedOfLight, FasterThanLightIsImpossible) {
  const auto p = h200();
  const roofline_counts c{0, 4.8e9};  // T_SOL = 1 ms
  EXPECT_FALSE(speed_of_light(c, "fp32", p, 1e6).impossible);         // exactly SOL
  EXPECT_FALSE(speed_of_light(c, "fp32", p, 1e6 / 1.015).impossible); // within the 2 % tolerance
  const auto r = speed_of_light(c, "fp32", p, 0.9e6);
  EXPECT_TRUE(r.impossible);
  EXPECT_NEAR(r.fraction, 1.0 / 0.9, 1e-12);
  EXPECT_TRUE(speed_of_light(c, "fp32", p, 1e6 / 1.015, 0.01).impossible);  // a tighter tolerance
}

TEST(SpeedOfLight, UnknownUnitAndNoMeasurement) {
  const auto p = h200();
  const roofline_counts c{1e15, 4.8e9};
  const auto r = speed_of_light(c, "no_such_unit", p, 2e6);
  EXPECT_EQ(r.t_compute_ns, 0.0);
  EXPECT_EQ(r.bound, "memory");
  EXPECT_DOUBLE_EQ(r.t_sol_ns, 1e6);
  const auto z = speed_of_light(c, "fp32", p, 0.0);
  EXPECT_EQ(z.fraction, 0.0);
  EXPECT_FALSE(z.impossible);
}
