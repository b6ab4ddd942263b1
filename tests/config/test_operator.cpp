// The operator config loader and validator: the examples validate clean,
// several problems in one file are all reported with positions, snapshots
// are canonical and hashes stable, and unit checks of single rules.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/hash.hpp"
#include "config/operator.hpp"

namespace fs = std::filesystem;
using namespace kopt::config;

namespace {

const fs::path kExamples = fs::path(KOPT_SOURCE_DIR) / "configs" / "examples";

std::string all(const std::vector<diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += d.to_string() + "\n";
  return out;
}

bool contains(const std::vector<diagnostic>& ds, const std::string& needle) {
  for (const auto& d : ds)
    if (d.to_string().find(needle) != std::string::npos) return true;
  return false;
}

// A small valid config; tests patch it with JSON merge patches.
nlohmann::json base_config() {
  return nlohmann::json::parse(R"JSON({
    "name": "scale",
    "axes": {"n": {"type": "var"}, "k": {"type": "const", "value": 4}},
    "scalars": {"alpha": {"dtype": "float32", "value": 2.0}},
    "inputs": {"x": {"shape": ["n", "k"], "dtype": "float32"},
               "idx": {"shape": ["n"], "dtype": "int32", "generator": {"kind": "int_range", "low": 0, "high": "n"}}},
    "outputs": {"y": {"shape": ["n", "k"], "dtype": "float32"}},
    "roofline": {"flops": "n * k", "flop_unit": "fp32"},
    "workloads": [{"id": "a", "axes": {"n": 10}}, {"id": "b", "axes": {"n": 1000}, "weight": 3}],
    "reference": {
      "source": "extern \"C\" __global__ void scale_ref(const float* x, const int* idx, float* y, long long n, float alpha) {}",
      "launches": [{"kernel": "scale_ref", "grid": ["ceil_div(n * k, 256)"], "block": [256],
                    "args": [{"tensor": "x"}, {"tensor": "idx"}, {"tensor": "y"}, {"int": "n * k", "type": "int64"}, {"scalar": "alpha"}]}]
    },
    "seed": {
      "source": "extern \"C\" __global__ void scale_seed(const float* x, const int* idx, float* y, long long n, float alpha, float* ws) {}",
      "parameters": {"B": {"values": [128, 256], "default": 256}},
      "workspaces": {"ws": {"bytes": "n * 4", "zero_init": true}},
      "launches": [{"kernel": "scale_seed", "grid": ["ceil_div(n * k, B)"], "block": ["B"], "shared_bytes": "B * 4",
                    "args": [{"tensor": "x"}, {"tensor": "idx"}, {"tensor": "y"}, {"int": "n * k", "type": "int64"}, {"scalar": "alpha"}, {"workspace": "ws"}]}]
    }
  })JSON");
}

load_result load(const nlohmann::json& j, const fs::path& base = kExamples) {
  return load_operator_text(j.dump(2), "t.json", base);
}

load_result patched(const nlohmann::json& patch) {
  nlohmann::json j = base_config();
  j.merge_patch(patch);
  return load(j);
}

}  // namespace

TEST(Examples, RmsnormValidatesClean) {
  auto r = load_operator_file(kExamples / "rmsnorm.json");
  ASSERT_TRUE(r.ok()) << all(r.diagnostics);
  EXPECT_TRUE(r.diagnostics.empty()) << all(r.diagnostics);
  const operator_config& op = *r.op;
  EXPECT_EQ(op.name, "rmsnorm_bf16");
  EXPECT_EQ(op.workloads.size(), 9u);
  EXPECT_EQ(op.find_tensor("x")->type, dtype::bfloat16);
  ASSERT_TRUE(op.seed);
  EXPECT_EQ(op.seed->source_file, "rmsnorm_seed.cu");
  EXPECT_NE(op.seed->source.find("rmsnorm_seed"), std::string::npos);
  EXPECT_EQ(op.seed->find_parameter("VEC")->default_value, 8);
  EXPECT_EQ(op.reference.launches[0].args[4].k, launch_arg::kind::scalar);
  EXPECT_EQ(op.file, kExamples / "rmsnorm.json");
  // Default bytes rule: x read, weight read, out written.
  const workload& w = *op.find_workload("t16_h4096");
  EXPECT_EQ(roofline_bytes(op, w), 16 * 4096 * 2 + 4096 * 2 + 16 * 4096 * 2);
  EXPECT_EQ(roofline_flops(op, w), 4 * 16 * 4096);
  EXPECT_EQ(tensor_shape(op, *op.find_tensor("out"), w), (std::vector<std::int64_t>{16, 4096}));
}

TEST(Examples, VectorAddValidatesClean) {
  auto r = load_operator_file(kExamples / "vector_add.json");
  ASSERT_TRUE(r.ok()) << all(r.diagnostics);
  EXPECT_TRUE(r.diagnostics.empty()) << all(r.diagnostics);
  EXPECT_EQ(r.op->inputs.size(), 2u);
  // "a" has no generator: floats default to normal(0, 1).
  ASSERT_TRUE(r.op->find_tensor("a")->gen);
  EXPECT_EQ(r.op->find_tensor("a")->gen->k, generator::kind::normal);
  EXPECT_EQ(r.op->find_tensor("b")->gen->k, generator::kind::uniform);
  // Output tolerance inherits the operator's.
  ASSERT_TRUE(r.op->find_tensor("out")->tol);
  EXPECT_DOUBLE_EQ(r.op->find_tensor("out")->tol->atol, 1e-6);
}

TEST(Loader, BaseConfigIsValid) {
  auto r = load(base_config());
  ASSERT_TRUE(r.ok()) << all(r.diagnostics);
  EXPECT_TRUE(r.diagnostics.empty()) << all(r.diagnostics);
  const auto names = workload_names(*r.op, r.op->workloads[1], r.op->seed->default_parameters());
  EXPECT_EQ(names.at("n"), 1000);
  EXPECT_EQ(names.at("k"), 4);
  EXPECT_EQ(names.at("B"), 256);
}

TEST(Loader, ReportsEveryProblemWithPositions) {
  const std::string text = R"({
  "name": "multi",
  "axes": {"n": {"type": "var"}},
  "inputs": {"x": {"shape": ["m"], "dtype": "float33"}},
  "outputs": {"y": {"shape": ["n"], "dtype": "float32", "colour": 1}},
  "workloads": [{"id": "a", "axes": {"n": 0}, "weight": -1}],
  "reference": {"source": "extern \"C\" __global__ void k(float* y) {}",
                "compile_options": ["-G"],
                "launches": [{"kernel": "k", "grid": ["n +"], "block": [32], "args": [{"tensor": "z"}]}]},
  "campaign": {"provider": "openia"}
})";
  auto r = load_operator_text(text, "multi.json", ".");
  EXPECT_FALSE(r.ok());
  const auto& d = r.diagnostics;
  EXPECT_TRUE(contains(d, "multi.json:4:30: error: inputs.x.shape[0]: unknown axis \"m\""))
      << all(d);
  EXPECT_TRUE(contains(d,
                       "multi.json:4:45: error: inputs.x.dtype: unknown dtype \"float33\"; did you "
                       "mean \"float32\"?"))
      << all(d);
  EXPECT_TRUE(contains(d, "multi.json:5:57: error: outputs.y.colour: unknown field \"colour\""))
      << all(d);
  EXPECT_TRUE(
      contains(d, "multi.json:6:43: error: workloads[0].axes.n: axis value must be >= 1, got 0"))
      << all(d);
  EXPECT_TRUE(
      contains(d, "multi.json:6:57: error: workloads[0].weight: weight must be > 0, got -1"))
      << all(d);
  EXPECT_TRUE(
      contains(d, "error: reference.compile_options[0]: compile option \"-G\" is not allowed"))
      << all(d);
  EXPECT_TRUE(contains(d,
                       "multi.json:9:59: error: reference.launches[0].grid[0]: expression \"n +\": "
                       "expected a number"))
      << all(d);
  EXPECT_TRUE(contains(d, "error: reference.launches[0].args[0].tensor: unknown tensor \"z\""))
      << all(d);
  EXPECT_TRUE(contains(d,
                       "multi.json:10:28: error: campaign.provider: unknown provider \"openia\"; "
                       "did you mean \"openai\"?"))
      << all(d);
  EXPECT_GE(d.size(), 9u);
  // Sorted by position.
  for (std::size_t i = 1; i < d.size(); ++i)
    EXPECT_LE(std::make_pair(d[i - 1].line, d[i - 1].column),
              std::make_pair(d[i].line, d[i].column));
}

TEST(Loader, DiagnosticFormat) {
  diagnostic d;
  d.file = "op.json";
  d.line = 3;
  d.column = 7;
  d.path = "inputs.x";
  d.message = "boom";
  EXPECT_EQ(d.to_string(), "op.json:3:7: error: inputs.x: boom");
  d.level = diagnostic::severity::warning;
  d.path.clear();
  EXPECT_EQ(d.to_string(), "op.json:3:7: warning: boom");
  d.line = 0;
  EXPECT_EQ(d.to_string(), "op.json: warning: boom");
}

TEST(Loader, MissingFileIsADiagnostic) {
  auto r = load_operator_file("/nonexistent/op.json");
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_NE(r.diagnostics[0].to_string().find("cannot read /nonexistent/op.json"),
            std::string::npos);
}

TEST(Snapshot, CanonicalAndStable) {
  auto a = load_operator_file(kExamples / "rmsnorm.json");
  ASSERT_TRUE(a.ok());
  auto b = load_operator_file(kExamples / "rmsnorm.json");
  EXPECT_EQ(a.op->content_hash(), b.op->content_hash());
  EXPECT_EQ(a.op->content_hash(), kopt::sha256_hex(a.op->snapshot().dump()));
  EXPECT_EQ(a.op->content_hash().size(), 64u);
  const auto snap = a.op->snapshot();
  // Sources inlined, file names gone: the snapshot stands on its own.
  EXPECT_FALSE(snap["seed"].contains("source_file"));
  EXPECT_NE(snap["seed"]["source"].get<std::string>().find("rmsnorm_seed"), std::string::npos);
  // Keys sorted.
  EXPECT_LT(snap.dump().find("\"axes\""), snap.dump().find("\"workloads\""));

  // The snapshot is itself a valid config with the same hash, from anywhere.
  auto c = load_operator_text(snap.dump(1), "snap.json", "/");
  ASSERT_TRUE(c.ok()) << all(c.diagnostics);
  EXPECT_EQ(c.op->content_hash(), a.op->content_hash());
}

TEST(Snapshot, SameContentSameHashDifferentContentDifferentHash) {
  // Key order and whitespace do not matter.
  nlohmann::json j = base_config();
  auto r1 = load_operator_text(j.dump(), "a.json", ".");
  auto r2 = load_operator_text(j.dump(4), "b.json", ".");
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(r1.op->content_hash(), r2.op->content_hash());
  // Writing a default explicitly does not change the content.
  j["workloads"][0]["weight"] = 1.0;
  auto r3 = load(j);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3.op->content_hash(), r1.op->content_hash());
  // Any change of content does.
  j["workloads"][0]["weight"] = 2.0;
  auto r4 = load(j);
  ASSERT_TRUE(r4.ok());
  EXPECT_NE(r4.op->content_hash(), r1.op->content_hash());
}

TEST(Snapshot, InlinedSourceFileChangesHash) {
  const fs::path dir = fs::temp_directory_path() / ("kopt_cfg_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json j = base_config();
  j["reference"].erase("source");
  j["reference"]["source_file"] = "ref.cu";
  auto write = [&](const std::string& body) { std::ofstream(dir / "ref.cu") << body; };
  write("extern \"C\" __global__ void scale_ref(float* y) {}\n");
  auto a = load_operator_text(j.dump(), "x.json", dir);
  ASSERT_TRUE(a.ok()) << all(a.diagnostics);
  EXPECT_EQ(a.op->reference.source_file, "ref.cu");
  write("extern \"C\" __global__ void scale_ref(float* y) { /* changed */ }\n");
  auto b = load_operator_text(j.dump(), "x.json", dir);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a.op->content_hash(), b.op->content_hash());
  // Inline source with the same text as the file: same content, same hash.
  nlohmann::json k = base_config();
  k["reference"]["source"] = "extern \"C\" __global__ void scale_ref(float* y) { /* changed */ }\n";
  auto c = load(k);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(b.op->content_hash(), c.op->content_hash());
  fs::remove_all(dir);
}

TEST(Validator, UnknownTopLevelFieldWithSuggestion) {
  auto r = patched({{"workload", nlohmann::json::array()}});
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.diagnostics, "unknown field \"workload\"; did you mean \"workloads\"?"))
      << all(r.diagnostics);
}

TEST(Validator, ConstAxisCannotBeOverridden) {
  nlohmann::json j = base_config();
  j["workloads"][0]["axes"]["k"] = 8;
  auto r = load(j);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(contains(
      r.diagnostics,
      "workloads[0].axes.k: axis \"k\" is const (value 4) and cannot be set by a workload"))
      << all(r.diagnostics);
}

TEST(Validator, DuplicateNamesAcrossKinds) {
  auto r = patched({{"scalars", {{"n", {{"dtype", "float32"}, {"value", 1}}}}}});
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.diagnostics, "scalars.n: a scalar \"n\" has the same name as an axis"))
      << all(r.diagnostics);
  nlohmann::json j = base_config();
  j["seed"]["parameters"]["x"] = {{"values", {1}}};
  r = load(j);
  EXPECT_TRUE(
      contains(r.diagnostics, "seed.parameters.x: parameter \"x\" has the same name as an input"))
      << all(r.diagnostics);
}

TEST(Validator, ParameterOnlyInItsCandidate) {
  // B is a parameter of the seed, not of the reference.
  nlohmann::json j = base_config();
  j["reference"]["launches"][0]["block"] = {"B"};
  auto r = load(j);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.diagnostics, "reference.launches[0].block[0]: unknown name \"B\""))
      << all(r.diagnostics);
}

TEST(Validator, PerWorkloadEvaluation) {
  nlohmann::json j = base_config();
  j["seed"]["launches"][0]["grid"] = {"ceil_div(n, n - 10)"};
  auto r = load(j);
  EXPECT_FALSE(r.ok());
  // Only workload "a" (n = 10) divides by zero.
  EXPECT_TRUE(contains(r.diagnostics,
                       "seed.launches[0].grid[0]: workload \"a\": expression \"ceil_div(n, n - "
                       "10)\": division by zero in ceil_div (column 1)"))
      << all(r.diagnostics);
  EXPECT_FALSE(contains(r.diagnostics, "workload \"b\""));

  j = base_config();
  j["seed"]["launches"][0]["block"] = {"B * 8"};
  r = load(j);
  EXPECT_TRUE(
      contains(r.diagnostics,
               "seed.launches[0].block[0]: workload \"a\": block.x = 2048 exceeds the limit 1024"))
      << all(r.diagnostics);

  j = base_config();
  j["seed"]["launches"][0]["grid"] = {"n - 1000"};
  r = load(j);
  // Both workloads, one diagnostic (issue 18: a mistake is reported once
  // with the workloads it affects).
  EXPECT_TRUE(contains(r.diagnostics,
                       "workload \"a\": grid.x = -990 must be >= 1 (expression \"n - 1000\") (also "
                       "in workload \"b\", with their own values)"))
      << all(r.diagnostics);

  j = base_config();
  j["reference"]["launches"][0]["args"][3] = {{"int", "n * 3000000"}, {"type", "int32"}};
  r = load(j);
  EXPECT_TRUE(contains(r.diagnostics,
                       "workload \"b\": value 3000000000 of \"n * 3000000\" does not fit in int32"))
      << all(r.diagnostics);

  j = base_config();
  j["roofline"]["flops"] = "n * 4611686018427387904";
  r = load(j);
  EXPECT_TRUE(contains(r.diagnostics,
                       "roofline.flops: workload \"a\": expression \"n * 4611686018427387904\": "
                       "integer overflow in '*' (column 3)"))
      << all(r.diagnostics);
}

TEST(Validator, GeneratorRules) {
  auto r = patched({{"inputs", {{"x", {{"generator", {{"kind", "normal"}, {"stddev", 0}}}}}}}});
  EXPECT_TRUE(contains(r.diagnostics, "inputs.x.generator.stddev: stddev must be > 0, got 0"))
      << all(r.diagnostics);
  r = patched(
      {{"inputs", {{"x", {{"generator", {{"kind", "uniform"}, {"low", 1}, {"high", 1}}}}}}}});
  EXPECT_TRUE(contains(r.diagnostics, "inputs.x.generator.high: uniform needs low < high"))
      << all(r.diagnostics);
  r = patched({{"inputs", {{"idx", {{"generator", {{"kind", "normal"}}}}}}}});
  EXPECT_TRUE(contains(
      r.diagnostics,
      "inputs.idx.generator.kind: generator \"normal\" needs a floating-point tensor, not int32"))
      << all(r.diagnostics);
  r = patched({{"inputs", {{"idx", {{"generator", nullptr}}}}}});
  EXPECT_TRUE(contains(r.diagnostics, "inputs.idx: integer input \"idx\" needs a \"generator\""))
      << all(r.diagnostics);
  r = patched({{"inputs",
                {{"idx",
                  {{"dtype", "int8"},
                   {"generator", {{"kind", "int_range"}, {"low", 0}, {"high", "n"}}}}}}}});
  EXPECT_TRUE(contains(r.diagnostics, "workload \"b\": int_range [0, 1000) does not fit in int8"))
      << all(r.diagnostics);
  EXPECT_FALSE(contains(r.diagnostics, "workload \"a\": int_range"));
  r = patched(
      {{"inputs", {{"idx", {{"generator", {{"kind", "int_range"}, {"low", "n"}, {"high", 5}}}}}}}});
  EXPECT_TRUE(contains(
      r.diagnostics, "workload \"a\": int_range needs low < high (high is exclusive), got [10, 5)"))
      << all(r.diagnostics);
  r = patched({{"inputs",
                {{"idx",
                  {{"generator",
                    {{"kind", "permutation"}, {"n", 5}, {"low", nullptr}, {"high", nullptr}}}}}}}});
  EXPECT_TRUE(contains(r.diagnostics,
                       "workload \"a\": permutation of [0, 5) cannot fill rows of length 10"))
      << all(r.diagnostics);
  r = patched(
      {{"inputs",
        {{"idx",
          {{"generator",
            {{"kind", "constant"}, {"value", 1.5}, {"low", nullptr}, {"high", nullptr}}}}}}}});
  EXPECT_TRUE(contains(r.diagnostics, "constant for an integer tensor must be an integer, got 1.5"))
      << all(r.diagnostics);
  r = patched(
      {{"inputs",
        {{"idx",
          {{"generator", {{"kind", "permutation"}, {"low", nullptr}, {"high", nullptr}}}}}}}});
  EXPECT_TRUE(r.ok()) << all(r.diagnostics);
  // disjoint: one permutation over the whole tensor, so n must cover every element (k = 4 rows
  // of n here), and the flag must be a boolean.
  r = patched({{"inputs",
                {{"idx",
                  {{"shape", {"k", "n"}},
                   {"generator",
                    {{"kind", "permutation"},
                     {"n", "2 * n"},
                     {"disjoint", true},
                     {"low", nullptr},
                     {"high", nullptr}}}}}}}});
  EXPECT_TRUE(contains(r.diagnostics,
                       "workload \"a\": disjoint permutation of [0, 20) cannot fill 40 elements "
                       "without repeating a value"))
      << all(r.diagnostics);
  r = patched({{"inputs",
                {{"idx",
                  {{"shape", {"k", "n"}},
                   {"generator",
                    {{"kind", "permutation"},
                     {"n", "k * n"},
                     {"disjoint", true},
                     {"low", nullptr},
                     {"high", nullptr}}}}}}}});
  EXPECT_TRUE(r.ok()) << all(r.diagnostics);
  ASSERT_TRUE(r.op.has_value());
  for (const auto& t : r.op->inputs) {
    if (t.name == "idx") {
      EXPECT_TRUE(t.gen && t.gen->disjoint_rows);
    }
  }
  r = patched({{"inputs",
                {{"idx",
                  {{"generator",
                    {{"kind", "permutation"},
                     {"disjoint", "yes"},
                     {"low", nullptr},
                     {"high", nullptr}}}}}}}});
  EXPECT_TRUE(contains(r.diagnostics, "inputs.idx.generator.disjoint")) << all(r.diagnostics);
  EXPECT_FALSE(r.ok());
}

TEST(Validator, ToleranceRules) {
  auto r = patched({{"tolerance", {{"matched_ratio", 0}}}});
  EXPECT_TRUE(
      contains(r.diagnostics, "tolerance.matched_ratio: matched_ratio must be in (0, 1], got 0"))
      << all(r.diagnostics);
  r = patched({{"tolerance", {{"atol", -1}}}});
  EXPECT_TRUE(contains(r.diagnostics, "tolerance.atol: atol must be >= 0, got -1"))
      << all(r.diagnostics);
  r = patched({{"inputs", {{"x", {{"tolerance", {{"atol", 1}}}}}}}});
  EXPECT_TRUE(contains(
      r.diagnostics, "inputs.x.tolerance: a tolerance applies to outputs and in-place inputs only"))
      << all(r.diagnostics);
  // Per-output override inherits unspecified fields.
  r = patched({{"tolerance", {{"atol", 0.5}, {"rtol", 0.25}}},
               {"outputs", {{"y", {{"tolerance", {{"rtol", 0.125}}}}}}}});
  ASSERT_TRUE(r.ok()) << all(r.diagnostics);
  EXPECT_DOUBLE_EQ(r.op->find_tensor("y")->tol->atol, 0.5);
  EXPECT_DOUBLE_EQ(r.op->find_tensor("y")->tol->rtol, 0.125);
  // In-place inputs: counted twice by the default bytes rule.
  r = patched({{"inputs", {{"x", {{"in_place", true}}}}}});
  ASSERT_TRUE(r.ok()) << all(r.diagnostics);
  const auto& op = *r.op;
  EXPECT_EQ(roofline_bytes(op, op.workloads[0]), 2 * 10 * 4 * 4 + 10 * 4 + 10 * 4 * 4);
}

TEST(Validator, CompileOptions) {
  EXPECT_EQ(check_compile_option("--use_fast_math"), std::nullopt);
  EXPECT_EQ(check_compile_option("-lineinfo"), std::nullopt);
  EXPECT_EQ(check_compile_option("--ftz=true"), std::nullopt);
  EXPECT_EQ(check_compile_option("--prec-div=false"), std::nullopt);
  EXPECT_EQ(check_compile_option("-maxrregcount=128"), std::nullopt);
  EXPECT_NE(check_compile_option("-maxrregcount=8"), std::nullopt);
  EXPECT_NE(check_compile_option("-maxrregcount=abc"), std::nullopt);
  EXPECT_NE(check_compile_option("--ftz=yes"), std::nullopt);
  EXPECT_NE(check_compile_option("-arch=sm_80")->find("architecture"), std::string::npos);
  EXPECT_NE(check_compile_option("-DBLOCK=3")->find("parameters"), std::string::npos);
  EXPECT_NE(check_compile_option("-I/usr/include")->find("include paths"), std::string::npos);
  EXPECT_NE(check_compile_option("--frobnicate")->find("allow-list"), std::string::npos);
}

TEST(Validator, KernelNotInSourceIsAWarning) {
  nlohmann::json j = base_config();
  j["reference"]["launches"][0]["kernel"] = "other_kernel";
  auto r = load(j);
  EXPECT_TRUE(r.ok()) << all(r.diagnostics);
  EXPECT_TRUE(contains(r.diagnostics,
                       "warning: reference.launches[0].kernel: kernel \"other_kernel\" not found "
                       "as a __global__ function"))
      << all(r.diagnostics);
}

TEST(Validator, CampaignRules) {
  auto r = patched(
      {{"campaign",
        {{"budget", {{"iterations", -1}}}, {"target_sol_fraction", 1.5}, {"dropout_p", 1}}}});
  EXPECT_TRUE(
      contains(r.diagnostics, "campaign.budget.iterations: iterations must be >= 0, got -1"))
      << all(r.diagnostics);
  EXPECT_TRUE(
      contains(r.diagnostics,
               "campaign.target_sol_fraction: target_sol_fraction must be in (0, 1], got 1.5"))
      << all(r.diagnostics);
  EXPECT_TRUE(contains(r.diagnostics, "campaign.dropout_p: dropout_p must be in [0, 1), got 1"))
      << all(r.diagnostics);
  r = patched({{"campaign",
                {{"provider", "anthropic"},
                 {"model", "claude"},
                 {"budget", {{"cost_usd", 5.5}}},
                 {"seed", 18446744073709551615ull}}}});
  ASSERT_TRUE(r.ok()) << all(r.diagnostics);
  EXPECT_EQ(r.op->campaign.provider, "anthropic");
  EXPECT_EQ(r.op->campaign.seed, 18446744073709551615ull);
  EXPECT_DOUBLE_EQ(*r.op->campaign.limits.cost_usd, 5.5);
  EXPECT_FALSE(r.op->campaign.limits.iterations);
}

TEST(Candidate, LoadStandaloneCandidate) {
  auto opr = load(base_config());
  ASSERT_TRUE(opr.ok());
  const std::string good = R"JSON({
    "source": "extern \"C\" __global__ void k2(const float* x, float* y) {}",
    "parameters": {"T": {"values": [64, 128]}},
    "launches": [{"kernel": "k2", "grid": ["ceil_div(n, T)"], "block": ["T"], "args": [{"tensor": "x"}, {"tensor": "y"}]}],
    "compile_options": ["--use_fast_math", "--fmad=true"]
  })JSON";
  auto c = load_candidate_text(good, "cand.json", ".", *opr.op);
  ASSERT_TRUE(c.ok()) << all(c.diagnostics);
  EXPECT_EQ(c.cand->find_parameter("T")->default_value, 64);  // first value by default
  EXPECT_EQ(c.cand->to_json()["parameters"]["T"]["default"], 64);

  const std::string bad = R"JSON({
  "source": "extern \"C\" __global__ void k2(float* y) {}",
  "launches": [{"kernel": "k2", "grid": ["ceil_div(n, T)"], "block": [1], "args": [{"tensor": "yy"}]}]
})JSON";
  c = load_candidate_text(bad, "cand.json", ".", *opr.op);
  EXPECT_FALSE(c.ok());
  EXPECT_TRUE(contains(c.diagnostics,
                       "cand.json:3:42: error: launches[0].grid[0]: unknown name \"T\" in "
                       "expression \"ceil_div(n, T)\""))
      << all(c.diagnostics);
  EXPECT_TRUE(contains(c.diagnostics,
                       "cand.json:3:95: error: launches[0].args[0].tensor: unknown tensor \"yy\"; "
                       "did you mean \"y\"?"))
      << all(c.diagnostics);

  c = load_candidate_text("{\"source\": 1,", "cand.json", ".", *opr.op);
  EXPECT_FALSE(c.ok());
  EXPECT_TRUE(contains(c.diagnostics, "cand.json:1:14: error: JSON syntax error"))
      << all(c.diagnostics);
}

TEST(Model, Dtypes) {
  for (auto name : dtype_names()) {
    auto t = parse_dtype(name);
    ASSERT_TRUE(t) << name;
    EXPECT_EQ(dtype_name(*t), name);
  }
  EXPECT_EQ(parse_dtype("bool"), dtype::boolean);
  EXPECT_EQ(parse_dtype("float"), std::nullopt);
  EXPECT_EQ(dtype_size(dtype::bfloat16), 2u);
  EXPECT_EQ(dtype_size(dtype::float8_e4m3fn), 1u);
  EXPECT_EQ(dtype_size(dtype::int64), 8u);
  EXPECT_TRUE(dtype_is_float(dtype::float8_e5m2));
  EXPECT_FALSE(dtype_is_float(dtype::boolean));
  EXPECT_TRUE(dtype_is_integer(dtype::uint8));
}
