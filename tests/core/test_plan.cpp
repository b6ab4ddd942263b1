// Launch plans: tensor shapes per workload, launch plans resolved for a
// workload and parameter values (grid/block/cluster/shared memory, every
// argument kind, workspaces, scalar overrides), int32 overflow of an int
// argument, and validate_plan against device limits (threads per block,
// block and grid dims, shared memory with static shared, clusters,
// negative workspace sizes).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/error.hpp"
#include "config/operator.hpp"
#include "core/plan.hpp"

namespace fs = std::filesystem;
using namespace kopt;
using namespace kopt::harness;
using kopt::config::dtype;
using kind = kopt::config::launch_arg::kind;

namespace {

const fs::path kExamples = fs::path(KOPT_SOURCE_DIR) / "configs" / "examples";

std::string diagnostics(const config::load_result& r) {
  std::string s;
  for (const auto& d : r.diagnostics) s += d.to_string() + "\n";
  return s;
}

config::operator_config load_example(const std::string& file) {
  auto r = config::load_operator_file(kExamples / file);
  if (!r.ok()) throw std::runtime_error(file + " does not load:\n" + diagnostics(r));
  return *r.op;
}

// An operator with every argument kind, a const axis, an in-place input,
// workspaces, two launches (the first in clusters) and a per-workload
// scalar override.
const char* kPlanConfig = R"JSON({
  "name": "plan_t",
  "axes": {"n": {"type": "var"}, "k": {"type": "const", "value": 4}},
  "scalars": {"alpha": {"dtype": "float32", "value": 2.0}},
  "inputs": {
    "x":   {"shape": ["n", "k"], "dtype": "float32"},
    "acc": {"shape": ["n"], "dtype": "float64", "in_place": true},
    "idx": {"shape": ["n"], "dtype": "int32", "generator": {"kind": "int_range", "low": 0, "high": "n"}}
  },
  "outputs": {"y": {"shape": ["n", "k"], "dtype": "bfloat16"}},
  "roofline": {"flops": "2 * n * k", "flop_unit": "fp32"},
  "workloads": [
    {"id": "small", "axes": {"n": 64}},
    {"id": "big", "axes": {"n": 4096}, "weight": 2, "scalars": {"alpha": 0.5}}
  ],
  "reference": {
    "source": "extern \"C\" __global__ void plan_ref(const float* x, double* acc, const int* idx, void* y, long long n, float alpha) {}",
    "launches": [{"kernel": "plan_ref", "grid": ["ceil_div(n * k, 256)"], "block": [256],
                  "args": [{"tensor": "x"}, {"tensor": "acc"}, {"tensor": "idx"}, {"tensor": "y"},
                           {"int": "n * k", "type": "int64"}, {"scalar": "alpha", "type": "float32"}]}]
  },
  "seed": {
    "source": "extern \"C\" __global__ void s1(const float* x, float* ws, int n, double alpha) {}\nextern \"C\" __global__ void s2(void* y) {}",
    "parameters": {"B": {"values": [64, 128], "default": 128}, "C": {"values": [1, 2], "default": 2}},
    "workspaces": {"ws": {"bytes": "n * 4", "zero_init": true}, "scratch": {"bytes": "B * 8"}},
    "launches": [
      {"kernel": "s1", "grid": ["2 * ceil_div(n, B)", 2], "block": ["B", 1, 1], "cluster": ["C"],
       "shared_bytes": "B * 4",
       "args": [{"tensor": "x"}, {"workspace": "ws"}, {"int": "n", "type": "int32"}, {"scalar": "alpha", "type": "float64"}]},
      {"kernel": "s2", "grid": [1], "block": [32], "args": [{"tensor": "y"}]}
    ]
  }
})JSON";

config::operator_config plan_config() {
  auto r = config::load_operator_text(kPlanConfig, "plan_t.json", kExamples);
  if (!r.ok()) throw std::runtime_error("the test config does not load:\n" + diagnostics(r));
  return *r.op;
}

const resolved_tensor& find(const std::vector<resolved_tensor>& ts, const std::string& name) {
  for (const auto& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

config::workload make_workload(std::int64_t n) {
  config::workload w;
  w.id = "handmade";
  w.axes["n"] = n;
  return w;
}

resolved_launch simple_launch() {
  resolved_launch l;
  l.kernel = "k";
  l.grid = {1000, 1, 1};
  l.block = {256, 1, 1};
  return l;
}

resolved_plan one_launch(const resolved_launch& l) {
  resolved_plan p;
  p.launches.push_back(l);
  return p;
}

bool mentions(const std::vector<std::string>& problems, const std::string& needle) {
  for (const auto& p : problems)
    if (p.find(needle) != std::string::npos) return true;
  return false;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

}  // namespace

TEST(ResolveTensors, RmsnormExample) {
  const auto op = load_example("rmsnorm.json");
  const auto* w = op.find_workload("t16_h4096");
  ASSERT_NE(w, nullptr);
  const auto ts = resolve_tensors(op, *w);
  ASSERT_EQ(ts.size(), 3u);
  const auto& x = find(ts, "x");
  EXPECT_EQ(x.shape, (std::vector<std::int64_t>{16, 4096}));
  EXPECT_EQ(x.elements, 16 * 4096);
  EXPECT_EQ(x.bytes, 16 * 4096 * 2);
  EXPECT_EQ(x.type, dtype::bfloat16);
  EXPECT_FALSE(x.is_output);
  const auto& weight = find(ts, "weight");
  EXPECT_EQ(weight.shape, std::vector<std::int64_t>{4096});
  EXPECT_EQ(weight.bytes, 8192);
  const auto& out = find(ts, "out");
  EXPECT_TRUE(out.is_output);
  EXPECT_EQ(out.bytes, 16 * 4096 * 2);
  // Inputs come before outputs.
  EXPECT_TRUE(ts.back().is_output);
}

TEST(ResolveTensors, ConstAxisInPlaceAndDtypes) {
  const auto op = plan_config();
  const auto ts = resolve_tensors(op, *op.find_workload("small"));
  ASSERT_EQ(ts.size(), 4u);
  EXPECT_EQ(find(ts, "x").shape, (std::vector<std::int64_t>{64, 4}));
  EXPECT_EQ(find(ts, "x").bytes, 64 * 4 * 4);
  EXPECT_TRUE(find(ts, "acc").in_place);
  EXPECT_FALSE(find(ts, "acc").is_output);
  EXPECT_EQ(find(ts, "acc").bytes, 64 * 8);
  EXPECT_FALSE(find(ts, "x").in_place);
  EXPECT_EQ(find(ts, "idx").bytes, 64 * 4);
  EXPECT_EQ(find(ts, "y").type, dtype::bfloat16);
  EXPECT_EQ(find(ts, "y").bytes, 64 * 4 * 2);
  EXPECT_TRUE(find(ts, "y").is_output);
}

TEST(ResolveTensors, BadShapesThrow) {
  const auto op = plan_config();
  EXPECT_THROW(resolve_tensors(op, make_workload(-1)), kopt::error);
  // tokens * hidden overflows int64 (x is the first tensor resolved).
  const auto rms = load_example("rmsnorm.json");
  config::workload huge;
  huge.id = "huge";
  huge.axes["tokens"] = std::int64_t{1} << 32;
  huge.axes["hidden"] = std::int64_t{1} << 32;
  try {
    (void)resolve_tensors(rms, huge);
    FAIL() << "an element count of 2^64 was accepted";
  } catch (const kopt::error& e) {
    EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
  }
  // An axis the workload does not give.
  config::workload none;
  none.id = "none";
  EXPECT_THROW(resolve_tensors(op, none), kopt::error);
}

TEST(ResolveTensorsDeathTest, ByteCountOverflowIsAnErrorNotUB) {
  // n = 2^60: x has 2^62 elements (fits int64) but 2^64 bytes (does not).
  // Run in a child: with -fno-sanitize-recover a signed overflow aborts.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto op = plan_config();
  EXPECT_EXIT(
      {
        try {
          (void)resolve_tensors(op, make_workload(std::int64_t{1} << 60));
        } catch (const kopt::error&) {
          std::_Exit(0);
        }
        std::_Exit(1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(ResolvePlan, RmsnormSeedWithDefaults) {
  const auto op = load_example("rmsnorm.json");
  ASSERT_TRUE(op.seed.has_value());
  const auto params = default_parameters(*op.seed);
  EXPECT_EQ(params.at("BLOCK"), 256);
  EXPECT_EQ(params.at("VEC"), 8);
  const auto plan = resolve_plan(op, *op.seed, *op.find_workload("t16_h4096"), params);
  ASSERT_EQ(plan.launches.size(), 1u);
  const auto& l = plan.launches[0];
  EXPECT_EQ(l.kernel, "rmsnorm_seed");
  EXPECT_EQ(l.grid, (std::array<std::int64_t, 3>{16, 1, 1}));
  EXPECT_EQ(l.block, (std::array<std::int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(l.cluster, (std::array<std::int64_t, 3>{0, 0, 0}));
  EXPECT_EQ(l.shared_bytes, 0);
  ASSERT_EQ(l.args.size(), 5u);
  EXPECT_EQ(l.args[0].k, kind::tensor);
  EXPECT_EQ(l.args[0].name, "x");
  EXPECT_EQ(l.args[1].name, "weight");
  EXPECT_EQ(l.args[2].name, "out");
  EXPECT_EQ(l.args[3].k, kind::integer);
  EXPECT_EQ(l.args[3].type, dtype::int32);
  EXPECT_EQ(l.args[3].int_value, 4096);
  EXPECT_EQ(l.args[4].k, kind::scalar);
  EXPECT_EQ(l.args[4].type, dtype::float32);
  EXPECT_DOUBLE_EQ(l.args[4].float_value, 1e-6);
  EXPECT_TRUE(plan.workspace_bytes.empty());
  EXPECT_TRUE(validate_plan(plan, device_limits{}).empty());
}

TEST(ResolvePlan, VectorAddSeedParametersChangeTheGrid) {
  const auto op = load_example("vector_add.json");
  ASSERT_TRUE(op.seed.has_value());
  auto params = default_parameters(*op.seed);  // BLOCK 256, ITEMS 4
  EXPECT_EQ(resolve_plan(op, *op.seed, *op.find_workload("n1000"), params).launches[0].grid[0], 1);
  EXPECT_EQ(resolve_plan(op, *op.seed, *op.find_workload("n16m"), params).launches[0].grid[0], 16384);
  params["BLOCK"] = 128;
  params["ITEMS"] = 1;
  const auto plan = resolve_plan(op, *op.seed, *op.find_workload("n1m"), params);
  EXPECT_EQ(plan.launches[0].grid[0], 8192);
  EXPECT_EQ(plan.launches[0].block[0], 128);
  EXPECT_EQ(plan.launches[0].args[3].type, dtype::int64);
  EXPECT_EQ(plan.launches[0].args[3].int_value, 1048576);
  // The reference.
  const auto ref = resolve_plan(op, op.reference, *op.find_workload("n1000"), default_parameters(op.reference));
  EXPECT_EQ(ref.launches[0].kernel, "vector_add_ref");
  EXPECT_EQ(ref.launches[0].grid[0], 4);  // ceil_div(1000, 256)
}

TEST(ResolvePlan, ClustersWorkspacesScalarsAndOverrides) {
  const auto op = plan_config();
  ASSERT_TRUE(op.seed.has_value());
  const auto defaults = default_parameters(*op.seed);
  EXPECT_EQ(defaults.at("B"), 128);
  EXPECT_EQ(defaults.at("C"), 2);

  const auto plan = resolve_plan(op, *op.seed, *op.find_workload("big"), defaults);
  ASSERT_EQ(plan.launches.size(), 2u);
  const auto& l = plan.launches[0];
  EXPECT_EQ(l.kernel, "s1");
  EXPECT_EQ(l.grid, (std::array<std::int64_t, 3>{64, 2, 1}));
  EXPECT_EQ(l.block, (std::array<std::int64_t, 3>{128, 1, 1}));
  EXPECT_EQ(l.cluster, (std::array<std::int64_t, 3>{2, 1, 1}));  // unspecified dims are 1
  EXPECT_EQ(l.shared_bytes, 512);
  ASSERT_EQ(l.args.size(), 4u);
  EXPECT_EQ(l.args[0].k, kind::tensor);
  EXPECT_EQ(l.args[1].k, kind::workspace);
  EXPECT_EQ(l.args[1].name, "ws");
  EXPECT_EQ(l.args[2].k, kind::integer);
  EXPECT_EQ(l.args[2].int_value, 4096);
  EXPECT_EQ(l.args[3].k, kind::scalar);
  EXPECT_EQ(l.args[3].type, dtype::float64);
  EXPECT_DOUBLE_EQ(l.args[3].float_value, 0.5);  // the workload's override of alpha = 2
  const auto& l2 = plan.launches[1];
  EXPECT_EQ(l2.kernel, "s2");
  EXPECT_EQ(l2.cluster, (std::array<std::int64_t, 3>{0, 0, 0}));
  EXPECT_EQ(l2.shared_bytes, 0);
  EXPECT_EQ(plan.workspace_bytes.at("ws"), 4096 * 4);
  EXPECT_EQ(plan.workspace_bytes.at("scratch"), 128 * 8);
  EXPECT_TRUE(plan.workspace_zero_init.at("ws"));
  EXPECT_FALSE(plan.workspace_zero_init.at("scratch"));
  EXPECT_TRUE(validate_plan(plan, device_limits{}).empty()) << joined(validate_plan(plan, device_limits{}));

  // Without the override the operator's value applies.
  const auto small = resolve_plan(op, *op.seed, *op.find_workload("small"), defaults);
  EXPECT_DOUBLE_EQ(small.launches[0].args[3].float_value, 2.0);

  // Other parameter values.
  const auto p2 = resolve_plan(op, *op.seed, *op.find_workload("big"), {{"B", 64}, {"C", 1}});
  EXPECT_EQ(p2.launches[0].grid[0], 128);
  EXPECT_EQ(p2.launches[0].cluster, (std::array<std::int64_t, 3>{1, 1, 1}));
  EXPECT_EQ(p2.workspace_bytes.at("scratch"), 512);
}

TEST(ResolvePlan, Int32ArgumentOverflowIsRefused) {
  const auto op = plan_config();
  const auto params = default_parameters(*op.seed);
  const auto ok = resolve_plan(op, *op.seed, make_workload(2147483647), params);
  EXPECT_EQ(ok.launches[0].args[2].int_value, 2147483647);
  try {
    (void)resolve_plan(op, *op.seed, make_workload(2147483648LL), params);
    FAIL() << "an int32 argument of 2^31 was accepted";
  } catch (const kopt::error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("int32"), std::string::npos) << m;
    EXPECT_NE(m.find("2147483648"), std::string::npos) << m;
    EXPECT_NE(m.find("s1"), std::string::npos) << m;
  }
  // int64 arguments take it (the reference passes n * k as int64).
  const auto ref = resolve_plan(op, op.reference, make_workload(2147483648LL), {});
  EXPECT_EQ(ref.launches[0].args[4].int_value, 2147483648LL * 4);
}

TEST(ResolvePlan, ErrorsNameTheLaunchAndField) {
  const auto op = plan_config();
  config::workload none;
  none.id = "none";
  try {
    (void)resolve_plan(op, *op.seed, none, default_parameters(*op.seed));
    FAIL() << "resolved without a value for n";
  } catch (const kopt::error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown name \"n\""), std::string::npos) << m;
  }
  // A parameter the caller did not give.
  try {
    (void)resolve_plan(op, *op.seed, *op.find_workload("small"), {{"C", 1}});
    FAIL() << "resolved without a value for B";
  } catch (const kopt::error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown name \"B\""), std::string::npos) << m;
  }
  // A missing value in a launch (not a workspace) names the launch and field.
  auto no_ws = *op.seed;
  no_ws.workspaces.clear();
  try {
    (void)resolve_plan(op, no_ws, *op.find_workload("small"), {{"C", 1}});
    FAIL() << "resolved without a value for B";
  } catch (const kopt::error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("launches[0] (s1).grid[0]"), std::string::npos) << m;
  }
  // A scalar the operator does not have (an edited candidate).
  auto cand = *op.seed;
  cand.launches[0].args[3].name = "beta";
  try {
    (void)resolve_plan(op, cand, *op.find_workload("small"), default_parameters(cand));
    FAIL() << "an unknown scalar was accepted";
  } catch (const kopt::error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown scalar beta"), std::string::npos) << m;
    EXPECT_NE(m.find("launches[0] (s1)"), std::string::npos) << m;
  }
  // More than three dimensions.
  cand = *op.seed;
  cand.launches[1].grid = {"1", "1", "1", "1"};
  EXPECT_THROW((void)resolve_plan(op, cand, *op.find_workload("small"), default_parameters(cand)), kopt::error);
  // Division by zero in an expression.
  cand = *op.seed;
  cand.launches[1].shared_bytes = "n / (B - B)";
  EXPECT_THROW((void)resolve_plan(op, cand, *op.find_workload("small"), default_parameters(cand)), kopt::error);
}

TEST(ValidatePlan, FittingPlanHasNoProblems) {
  EXPECT_TRUE(validate_plan(one_launch(simple_launch()), device_limits{}).empty());
  auto l = simple_launch();
  l.block = {32, 32, 1};  // exactly 1024
  l.grid = {2147483647, 65535, 65535};
  l.shared_bytes = 232448;  // exactly the opt-in limit
  EXPECT_TRUE(validate_plan(one_launch(l), device_limits{}).empty()) << joined(validate_plan(one_launch(l), device_limits{}));
}

TEST(ValidatePlan, ThreadsPerBlock) {
  auto l = simple_launch();
  l.block = {1024, 2, 1};
  const auto p = validate_plan(one_launch(l), device_limits{});
  ASSERT_EQ(p.size(), 1u) << joined(p);
  EXPECT_NE(p[0].find("2048 threads per block"), std::string::npos) << p[0];
  EXPECT_NE(p[0].find("launches[0] (k)"), std::string::npos) << p[0];
  l.block = {2048, 1, 1};
  const auto p2 = validate_plan(one_launch(l), device_limits{});
  EXPECT_TRUE(mentions(p2, "block[0] = 2048 exceeds the device limit 1024")) << joined(p2);
  EXPECT_TRUE(mentions(p2, "2048 threads per block")) << joined(p2);
}

TEST(ValidatePlan, BlockDims) {
  auto l = simple_launch();
  l.block = {1, 1, 65};
  EXPECT_TRUE(mentions(validate_plan(one_launch(l), device_limits{}), "block[2] = 65 exceeds the device limit 64"));
  l.block = {0, 1, 1};
  EXPECT_TRUE(mentions(validate_plan(one_launch(l), device_limits{}), "block[0] = 0 must be >= 1"));
  l.block = {32, -4, 1};
  EXPECT_TRUE(mentions(validate_plan(one_launch(l), device_limits{}), "block[1] = -4 must be >= 1"));
}

TEST(ValidatePlan, GridDims) {
  auto l = simple_launch();
  l.grid = {2147483648LL, 1, 1};
  EXPECT_TRUE(mentions(validate_plan(one_launch(l), device_limits{}), "grid[0] = 2147483648 exceeds"));
  l.grid = {1, 65536, 1};
  EXPECT_TRUE(mentions(validate_plan(one_launch(l), device_limits{}), "grid[1] = 65536 exceeds the device limit 65535"));
  l.grid = {1, 1, 70000};
  EXPECT_TRUE(mentions(validate_plan(one_launch(l), device_limits{}), "grid[2] = 70000 exceeds"));
  l.grid = {0, 1, 1};
  EXPECT_TRUE(mentions(validate_plan(one_launch(l), device_limits{}), "grid[0] = 0 must be >= 1"));
}

TEST(ValidatePlan, SharedMemoryIncludingStatic) {
  auto l = simple_launch();
  l.shared_bytes = 232449;
  const auto p = validate_plan(one_launch(l), device_limits{});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("opt-in limit of 232448"), std::string::npos) << p[0];

  // 200000 dynamic fits alone, not with 40000 bytes of static shared memory.
  l.shared_bytes = 200000;
  EXPECT_TRUE(validate_plan(one_launch(l), device_limits{}).empty());
  const auto ps = validate_plan(one_launch(l), device_limits{}, {{"k", 40000}});
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_NE(ps[0].find("240000 bytes"), std::string::npos) << ps[0];
  EXPECT_NE(ps[0].find("200000 dynamic + 40000 static"), std::string::npos) << ps[0];
  // Static shared memory of another kernel does not count.
  EXPECT_TRUE(validate_plan(one_launch(l), device_limits{}, {{"other", 40000}}).empty());
  // Static alone beyond the limit.
  l.shared_bytes = 0;
  EXPECT_FALSE(validate_plan(one_launch(l), device_limits{}, {{"k", 232449}}).empty());
  // A smaller device (A100: 163 KB opt-in).
  device_limits a100;
  a100.max_shared_optin = 166912;
  l.shared_bytes = 200000;
  EXPECT_TRUE(mentions(validate_plan(one_launch(l), a100), "166912"));
  l.shared_bytes = -1;
  EXPECT_TRUE(mentions(validate_plan(one_launch(l), device_limits{}), "shared_bytes = -1 is negative"));
}

TEST(ValidatePlan, Clusters) {
  auto l = simple_launch();
  l.grid = {8, 1, 1};
  l.cluster = {2, 1, 1};
  EXPECT_TRUE(validate_plan(one_launch(l), device_limits{}).empty());
  l.cluster = {8, 1, 1};
  EXPECT_TRUE(validate_plan(one_launch(l), device_limits{}).empty());  // portable limit exactly

  l.grid = {7, 1, 1};
  l.cluster = {2, 1, 1};
  auto p = validate_plan(one_launch(l), device_limits{});
  EXPECT_TRUE(mentions(p, "grid[0] = 7 is not a multiple of cluster[0] = 2")) << joined(p);

  l.grid = {16, 4, 1};
  l.cluster = {4, 4, 1};
  p = validate_plan(one_launch(l), device_limits{});
  ASSERT_EQ(p.size(), 1u) << joined(p);
  EXPECT_NE(p[0].find("cluster of 16 blocks exceeds the portable limit of 8"), std::string::npos) << p[0];

  l.grid = {8, 1, 1};
  l.cluster = {2, 0, 1};
  EXPECT_TRUE(mentions(validate_plan(one_launch(l), device_limits{}), "cluster[1] = 0 must be >= 1"));

  device_limits ampere;
  ampere.supports_clusters = false;
  l.cluster = {2, 1, 1};
  EXPECT_TRUE(mentions(validate_plan(one_launch(l), ampere), "sm_90"));
  // No cluster: nothing to say on Ampere either.
  l.cluster = {0, 0, 0};
  EXPECT_TRUE(validate_plan(one_launch(l), ampere).empty());
}

TEST(ValidatePlan, NegativeWorkspaceAndEveryProblemReported) {
  resolved_plan plan;
  plan.workspace_bytes["ws"] = -8;
  plan.workspace_bytes["fine"] = 64;
  auto bad = simple_launch();
  bad.block = {2048, 1, 1};
  bad.grid = {0, 1, 1};
  plan.launches.push_back(simple_launch());
  plan.launches.push_back(bad);
  const auto p = validate_plan(plan, device_limits{});
  EXPECT_TRUE(mentions(p, "workspaces.ws: -8 bytes is negative")) << joined(p);
  EXPECT_FALSE(mentions(p, "workspaces.fine")) << joined(p);
  EXPECT_TRUE(mentions(p, "launches[1] (k): block[0] = 2048")) << joined(p);
  EXPECT_TRUE(mentions(p, "launches[1] (k): grid[0] = 0")) << joined(p);
  EXPECT_FALSE(mentions(p, "launches[0]")) << joined(p);
  EXPECT_GE(p.size(), 4u);
}

TEST(ValidatePlan, ResolvedSeedWithOversizedParameter) {
  const auto op = load_example("rmsnorm.json");
  auto params = default_parameters(*op.seed);
  params["BLOCK"] = 1024;
  EXPECT_TRUE(validate_plan(resolve_plan(op, *op.seed, *op.find_workload("t1_h4096"), params), device_limits{}).empty());
  params["BLOCK"] = 2048;
  const auto p = validate_plan(resolve_plan(op, *op.seed, *op.find_workload("t1_h4096"), params), device_limits{});
  EXPECT_TRUE(mentions(p, "2048 threads per block")) << joined(p);
  EXPECT_TRUE(mentions(p, "rmsnorm_seed")) << joined(p);
}

TEST(ValidatePlanDeathTest, HugeBlockDimsDoNotOverflow) {
  // A candidate's expressions can produce any int64; the validator is the
  // guard and must report, not overflow (UB; aborts under UBSan).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto l = simple_launch();
  l.block = {std::int64_t{1} << 40, std::int64_t{1} << 40, 1};
  const auto plan = one_launch(l);
  EXPECT_EXIT(
      {
        const auto p = validate_plan(plan, device_limits{});
        std::_Exit(mentions(p, "exceeds") ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(DeviceLimits, JsonRoundTrip) {
  device_limits d;
  d.max_threads_per_block = 512;
  d.max_block = {512, 512, 32};
  d.max_grid = {1000, 2000, 3000};
  d.max_shared_optin = 99999;
  d.max_cluster_blocks = 16;
  d.supports_clusters = false;
  const auto back = device_limits::from_json(d.to_json());
  EXPECT_EQ(back.max_threads_per_block, 512);
  EXPECT_EQ(back.max_block, d.max_block);
  EXPECT_EQ(back.max_grid, d.max_grid);
  EXPECT_EQ(back.max_shared_optin, 99999);
  EXPECT_EQ(back.max_cluster_blocks, 16);
  EXPECT_FALSE(back.supports_clusters);
  const auto defaults = device_limits::from_json(nlohmann::json::object());
  EXPECT_EQ(defaults.max_threads_per_block, 1024);
  EXPECT_TRUE(defaults.supports_clusters);
}

TEST(ResolvedLaunch, ToJson) {
  auto l = simple_launch();
  l.cluster = {2, 1, 1};
  l.shared_bytes = 128;
  const auto j = to_json(l);
  EXPECT_EQ(j.at("kernel"), "k");
  EXPECT_EQ(j.at("grid"), nlohmann::json::array({1000, 1, 1}));
  EXPECT_EQ(j.at("block"), nlohmann::json::array({256, 1, 1}));
  EXPECT_EQ(j.at("cluster"), nlohmann::json::array({2, 1, 1}));
  EXPECT_EQ(j.at("shared_bytes"), 128);
}
