// Shared by the campaign tests: a small operator (six workloads from launch
// bound to large), a store with a submitted campaign, and a fake GPU whose
// kernel times follow from the candidate: "// speed X" in the source scales
// the time, and the tunable parameters BLOCK/ITEMS have an optimum at
// 512/8 (the seed's defaults are 256/4).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "../store/temp_dir.hpp"
#include "campaign/fake_evaluator.hpp"
#include "campaign/loop.hpp"
#include "campaign/sources.hpp"
#include "campaign/submission.hpp"
#include "config/operator.hpp"
#include "store/store.hpp"

namespace kopt::test {

using json = nlohmann::json;

inline json kernel(const std::string& name, const std::string& marker, json params = json::object()) {
  json c = {{"source", "extern \"C\" __global__ void " + name +
                           "(const float* a, const float* b, float* out, long long n) { " + marker +
                           "\n }\n"},
            {"launches",
             {{{"kernel", name},
               {"grid", {"ceil_div(n, 256)"}},
               {"block", {256}},
               {"args", {{{"tensor", "a"}}, {{"tensor", "b"}}, {{"tensor", "out"}}, {{"int", "n"}, {"type", "int64"}}}}}}}};
  if (!params.empty()) c["parameters"] = params;
  return c;
}

inline json seed_params(bool big) {
  if (!big)
    return {{"BLOCK", {{"values", {64, 128, 256, 512, 1024}}, {"default", 256}}},
            {"ITEMS", {{"values", {1, 2, 4, 8}}, {"default", 4}}}};
  return {{"BLOCK", {{"values", {32, 64, 128, 256, 512, 1024}}, {"default", 256}}},
          {"ITEMS", {{"values", {1, 2, 4, 8, 16, 32}}, {"default", 4}}},
          {"UNROLL", {{"values", {1, 2, 4, 8}}, {"default", 2}}}};
}

inline json operator_json(bool baseline = true, bool big_space = false, double heavy_weight = 0.1) {
  json wl = json::array();
  const std::pair<const char*, long long> sizes[] = {{"n1k", 1000},   {"n4k", 4096},   {"n64k", 65536},
                                                     {"n1m", 1 << 20}, {"n4m", 4 << 20}, {"n16m", 16 << 20}};
  double weights[] = {0.2, 0.1, 0.2, 0.2, heavy_weight, 0.1};
  for (std::size_t i = 0; i < 6; ++i)
    wl.push_back({{"id", sizes[i].first}, {"axes", {{"n", sizes[i].second}}}, {"weight", weights[i]}});
  json op = {{"name", "vadd"},
             {"op_type", "elementwise"},
             {"description", "out = a + b"},
             {"axes", {{"n", {{"type", "var"}}}}},
             {"inputs", {{"a", {{"shape", {"n"}}, {"dtype", "float32"}}}, {"b", {{"shape", {"n"}}, {"dtype", "float32"}}}}},
             {"outputs", {{"out", {{"shape", {"n"}}, {"dtype", "float32"}}}}},
             {"roofline", {{"flops", "n"}, {"flop_unit", "fp32"}}},
             {"workloads", wl},
             {"reference", kernel("ref", "// reference")},
             {"seed", kernel("seed", "// speed 1.0", seed_params(big_space))},
             {"campaign", {{"provider", "autotune"}, {"seed", 7}}}};
  if (baseline) op["baseline"] = kernel("base", "// speed 1.1");
  return op;
}

inline config::operator_config load_op(const json& j) {
  auto r = config::load_operator_text(j.dump(), "test.json", ".");
  for (const auto& d : r.diagnostics) ADD_FAILURE() << d.to_string();
  if (!r.ok()) throw std::runtime_error("test operator invalid");
  return *r.op;
}

// Speed factor from "// speed X" in the source (1 when absent) times the
// parameter penalty (optimum BLOCK=512, ITEMS=8, UNROLL=4).
inline double speed_factor(const json& cand) {
  const std::string src = cand.value("source", "");
  double f = 1.0;
  if (auto p = src.find("// speed "); p != std::string::npos) f = std::stod(src.substr(p + 9));
  const auto pt = campaign::default_point(cand);
  auto pen = [&](const char* k, double best, double w) {
    if (auto it = pt.find(k); it != pt.end()) f *= 1.0 + w * std::abs(std::log2(static_cast<double>(it->second) / best));
  };
  pen("BLOCK", 512, 0.08);
  pen("ITEMS", 8, 0.05);
  pen("UNROLL", 4, 0.03);
  return f;
}

inline double workload_size(const std::string& w) {
  if (w == "n1k") return 1000;
  if (w == "n4k") return 4096;
  if (w == "n64k") return 65536;
  if (w == "n1m") return 1 << 20;
  if (w == "n4m") return 4 << 20;
  return 16 << 20;
}

inline campaign::fake_evaluator::model default_model() {
  return [](const campaign::eval_subject& s, const std::string& w) {
    campaign::fake_truth t;
    const std::string src = s.candidate.value("source", "");
    if (src.find("// broken") != std::string::npos) t.status = "incorrect";
    if (src.find("// nocompile") != std::string::npos) t.compile_status = "compile_error";
    if (auto p = src.find("// noise "); p != std::string::npos) t.noise_rsd = std::stod(src.substr(p + 9));
    const double base = 2000 + workload_size(w) * 0.01;  // launch floor + bandwidth
    t.time_ns = base * speed_factor(s.candidate);
    t.sol_time_ns = base * 0.5;
    return t;
  };
}

struct fixture {
  temp_dir dir;
  json op_json;
  config::operator_config op;
  store::store db;
  store::row_id campaign_id = 0;

  explicit fixture(json opj = operator_json(), json settings = json::object(), store::budget_limits budget = {})
      : op_json(std::move(opj)), op(load_op(op_json)), db(store::store::open(dir / "kopt.db")) {
    const auto put = campaign::store_operator(db, op);
    store::campaign_record c;
    c.operator_id = put.operator_id;
    c.provider = "test";
    json s = {{"candidates_per_iteration", 4}, {"dropout_p", 0.3}, {"seed", 7}, {"target_sol_fraction", 0.99}};
    if (settings.is_object()) s.update(settings);
    c.settings = s;
    c.budget = budget;
    campaign_id = db.create_campaign(c);
  }
  store::store reopen() { return store::store::open(dir / "kopt.db"); }
  campaign::loop_settings settings() { return campaign::loop_settings::from_campaign(*db.find_campaign(campaign_id)); }
  std::int64_t count_events(const std::string& kind) {
    std::int64_t n = 0;
    for (const auto& e : db.events_of(campaign_id)) n += e.kind == kind;
    return n;
  }
};

// A source that proposes variants of the parent's source with "// speed X"
// markers from a list (one list per iteration; empty list: nothing).
inline campaign::scripted_source::script speeds_script(std::vector<std::vector<std::string>> per_iteration) {
  return [per_iteration](const campaign::prompt_context& ctx) {
    campaign::source_answer a;
    const auto i = static_cast<std::size_t>(ctx.iteration - 1);
    if (i >= per_iteration.size()) return a;
    int k = 0;
    for (const auto& m : per_iteration[i]) {
      json c = kernel("cand", "// speed " + m + " it" + std::to_string(ctx.iteration) + "_" + std::to_string(k++));
      a.proposals.push_back({c, store::candidate_origin::llm, "scripted"});
    }
    a.tokens = 1000;
    a.cost_usd = 0.01;
    return a;
  };
}

}  // namespace kopt::test
