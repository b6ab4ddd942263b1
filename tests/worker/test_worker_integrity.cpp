// One adversarial candidate per applicable row of docs/integrity.md, each
// caught with the right status, on a real GPU, through the real worker and
// its restart logic. Fatal candidates (hang, trap, illegal address) sit in
// the middle of the subject list on purpose: the worker dies, is restarted,
// and the candidates after them must still be evaluated.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "config/operator.hpp"
#include "core/seeds.hpp"
#include "gpu_test_support.hpp"
#include "runner/evaluation.hpp"
#include "runner/sanitize.hpp"

namespace {

using json = nlohmann::json;
constexpr std::uint64_t base_seed = 777;

// out = 2 * x + y (float32); x, y uniform in [-1, 1).
json scale_add_operator(const std::string& bytes_expr = "") {
  json op = {
      {"name", "scale_add"},
      {"op_type", "elementwise"},
      {"description", "out = 2 x + y"},
      {"axes", {{"n", {{"type", "var"}}}}},
      {"inputs",
       {{"x", {{"shape", {"n"}}, {"dtype", "float32"}, {"generator", {{"kind", "uniform"}, {"low", -1}, {"high", 1}}}}},
        {"y", {{"shape", {"n"}}, {"dtype", "float32"}, {"generator", {{"kind", "uniform"}, {"low", -1}, {"high", 1}}}}}}},
      {"outputs", {{"out", {{"shape", {"n"}}, {"dtype", "float32"}}}}},
      {"tolerance", {{"atol", 1e-5}, {"rtol", 1e-5}}},
      {"roofline", {{"flops", "2 * n"}, {"flop_unit", "fp32"}}},
      {"workloads",
       {{{"id", "odd"}, {"axes", {{"n", 4097}}}, {"weight", 1}},
        {{"id", "m2"}, {"axes", {{"n", 2 * 1024 * 1024}}}, {"weight", 1}}}},
      {"reference",
       {{"source",
         "extern \"C\" __global__ void ref(const float* x, const float* y, float* out, int n) {\n"
         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) out[i] = 2.0f * x[i] + y[i];\n}\n"},
        {"launches",
         {{{"kernel", "ref"}, {"grid", {"ceil_div(n, 256)"}}, {"block", {256}},
           {"args", {{{"tensor", "x"}}, {{"tensor", "y"}}, {{"tensor", "out"}}, {{"int", "n"}, {"type", "int32"}}}}}}}}}};
  if (!bytes_expr.empty()) op["roofline"]["bytes"] = bytes_expr;
  return op;
}

json candidate(const std::string& body, const std::string& shared = "0") {
  return {{"source", "extern \"C\" __global__ void k(const float* x, const float* y, float* out, int n) {\n" + body + "\n}\n"},
          {"launches",
           {{{"kernel", "k"}, {"grid", {"ceil_div(n, 256)"}}, {"block", {256}}, {"shared_bytes", shared},
             {"args", {{{"tensor", "x"}}, {{"tensor", "y"}}, {{"tensor", "out"}}, {{"int", "n"}, {"type", "int32"}}}}}}}};
}

const std::string idx = "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n";

// A candidate "fitted" to the first input set: it ignores its inputs and
// regenerates exactly the values the worker generated for seed 0.
json fitted_candidate(const std::string& workload) {
  const auto set0 = kopt::harness::input_set_seed(base_seed, workload, 0);
  const auto sx = kopt::harness::tensor_seed(set0, "x");
  const auto sy = kopt::harness::tensor_seed(set0, "y");
  std::string body = fmt::format(R"(
  auto mix = [](unsigned long long v) {{
    v += 0x9E3779B97F4A7C15ull; v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
    v = (v ^ (v >> 27)) * 0x94D049BB133111EBull; return v ^ (v >> 31); }};
  auto unit = [&](unsigned long long s, unsigned long long j) {{
    return ((double)(mix(s ^ mix(j)) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }};
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {{
    float xv = (float)(-1.0 + 2.0 * unit({}ull, i));
    float yv = (float)(-1.0 + 2.0 * unit({}ull, i));
    out[i] = 2.0f * xv + yv;
  }})",
                                 sx, sy);
  return candidate(body);
}

class WorkerIntegrity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto w = kopt::testing::start_worker_or_skip();
    hello_ = new json(w->start());
    worker_ = w.release();
  }
  static void TearDownTestSuite() {
    delete worker_;
    delete hello_;
  }
  static kopt::runner::worker_client* worker_;
  static json* hello_;

  static kopt::runner::evaluation_report run(const json& op, const json& subjects,
                                             std::vector<std::string> workloads,
                                             const std::string& clock = "",
                                             const json& extra_settings = {}) {
    json req = {{"operator", op},
                {"subjects", subjects},
                {"workloads", workloads},
                {"settings",
                 {{"seeds", 3}, {"base_seed", base_seed}, {"launch_timeout_ms", 3000},
                  {"timing", {{"min_samples", 10}, {"min_time_s", 0.02}, {"max_time_s", 0.5}}}}}};
    if (!clock.empty()) req["settings"]["clock"] = clock;
    for (const auto& [k, v] : extra_settings.items()) req["settings"][k] = v;
    return worker_->evaluate(req);
  }
};
kopt::runner::worker_client* WorkerIntegrity::worker_ = nullptr;
json* WorkerIntegrity::hello_ = nullptr;

json snapshot(const json& op) {
  auto r = kopt::config::load_operator_text(op.dump(), "<test>", ".");
  if (!r.ok()) {
    std::string msg;
    for (const auto& d : r.diagnostics) msg += d.to_string() + "\n";
    ADD_FAILURE() << msg;
    return op;
  }
  return r.op->snapshot();
}

TEST_F(WorkerIntegrity, EveryCheatIsCaughtWithItsStatus) {
  const json op = snapshot(scale_add_operator());
  const std::string good = idx + "  if (i < n) out[i] = 2.0f * x[i] + y[i];";
  json subjects = json::array();
  auto add = [&](const std::string& role, const json& c) { subjects.push_back({{"role", role}, {"candidate", c}}); };
  add("good", candidate(good));
  add("partial_output", candidate(idx + "  if (i < n / 2) out[i] = 2.0f * x[i] + y[i];"));
  add("stale_memory", candidate("  /* trusts whatever the output buffer holds */"));
  add("single_input_fit", fitted_candidate("m2"));
  add("input_mutation", candidate(idx + "  if (i < n) { out[i] = 2.0f * x[i] + y[i]; ((float*)y)[i] = 0.0f; }"));
  add("hang", candidate(idx + "  if (n > 0) { while (true) { __nanosleep(1000); } }"));
  add("skip_when_done", candidate(idx + "  if (i < n) { if (!isnan(out[i])) return; out[i] = 2.0f * x[i] + y[i]; }"));
  add("hidden_state", json{{"source",
                            "__device__ int calls;\n"
                            "extern \"C\" __global__ void k(const float* x, const float* y, float* out, int n) {\n" +
                                idx + "  if (i < n) out[i] = 2.0f * x[i] + y[i];\n  if (i == 0) calls++;\n}\n"},
                           {"launches", candidate("").at("launches")}});
  add("trap", candidate(idx + "  if (i == 7) asm volatile(\"trap;\");\n  if (i < n) out[i] = 2.0f * x[i] + y[i];"));
  add("out_of_bounds", candidate(idx + "  if (i < n) out[i] = 2.0f * x[i] + y[i];\n  if (i == 0) out[n + 40] = 1.0f;"));
  add("illegal_address", candidate(idx + "  if (i == 3) *(volatile float*)(0x10) = 1.0f;\n  if (i < n) out[i] = 2.0f * x[i] + y[i];"));
  add("oversized_shared", candidate(good, "300000"));
  add("device_malloc", candidate(idx + "  float* p = (float*)malloc(16); if (p) { p[0] = 1; free(p); }\n"
                                 "  if (i < n) out[i] = 2.0f * x[i] + y[i];"));

  const auto rep = run(op, subjects, {"odd", "m2"});
  for (const auto& e : rep.events) std::cout << "event: " << e << '\n';
  auto status = [&](const std::string& w, const std::string& role) {
    auto it = rep.results.find(w);
    if (it == rep.results.end() || !it->second.count(role)) return std::string("<missing>");
    return std::string(kopt::protocol::to_string(it->second.at(role).status));
  };
  auto message = [&](const std::string& w, const std::string& role) {
    return rep.results.count(w) && rep.results.at(w).count(role) ? rep.results.at(w).at(role).message : "";
  };
  for (const auto& w : {"odd", "m2"}) {
    SCOPED_TRACE(w);
    EXPECT_EQ(status(w, "good"), "ok") << message(w, "good");
    EXPECT_EQ(status(w, "partial_output"), "incorrect");
    EXPECT_EQ(status(w, "stale_memory"), "incorrect");
    EXPECT_EQ(status(w, "input_mutation"), "rejected_integrity");
    EXPECT_NE(message(w, "input_mutation").find("modified input 'y'"), std::string::npos) << message(w, "input_mutation");
    // The fill is the same before checked and timed calls (poison at random
    // positions), so a kernel that skips elements not holding the poison is
    // simply wrong on the checks.
    EXPECT_EQ(status(w, "skip_when_done"), "incorrect") << message(w, "skip_when_done");
    EXPECT_EQ(status(w, "hidden_state"), "rejected_integrity");
    EXPECT_NE(message(w, "hidden_state").find("calls"), std::string::npos);
    EXPECT_EQ(status(w, "out_of_bounds"), "rejected_integrity") << message(w, "out_of_bounds");
    EXPECT_NE(message(w, "out_of_bounds").find("guard region of output out"), std::string::npos);
    EXPECT_EQ(status(w, "oversized_shared"), "launch_error");
    EXPECT_NE(message(w, "oversized_shared").find("opt-in limit"), std::string::npos);
    EXPECT_EQ(status(w, "device_malloc"), "rejected_integrity");
    EXPECT_NE(message(w, "device_malloc").find("malloc"), std::string::npos);
  }
  // Fitted to seed 0 of workload m2: passes that seed, fails the next one.
  EXPECT_EQ(status("m2", "single_input_fit"), "incorrect");
  EXPECT_NE(message("m2", "single_input_fit").find("seed 1"), std::string::npos) << message("m2", "single_input_fit");
  // Fatal ones: the worker died, was restarted, and the rest still ran.
  EXPECT_EQ(status("odd", "hang"), "timeout");
  EXPECT_EQ(status("odd", "trap"), "crashed");
  EXPECT_EQ(status("odd", "illegal_address"), "crashed");
  EXPECT_EQ(rep.restarts, 3);
}

// A rejected candidate's damage (a written input, a smashed guard region, a
// hidden global) must not be blamed on the next subject of the same request:
// the worker regenerates inputs and output buffers after a failed subject.
// The replay corpus on the H200 showed correct answers failing right after
// an input-mutating or out-of-bounds one before this reset existed.
TEST_F(WorkerIntegrity, DamageIsNotBlamedOnTheNextSubject) {
  const json op = snapshot(scale_add_operator());
  const std::string good = idx + "  if (i < n) out[i] = 2.0f * x[i] + y[i];";
  json subjects = json::array();
  auto add = [&](const std::string& role, const json& c) { subjects.push_back({{"role", role}, {"candidate", c}}); };
  add("input_mutation", candidate(idx + "  if (i < n) { out[i] = 2.0f * x[i] + y[i]; ((float*)x)[i] = 5.0f; }"));
  add("good_after_mutation", candidate(good));
  add("out_of_bounds", candidate(good + "\n  if (i == 0) { out[n + 40] = 1.0f; out[-3] = 1.0f; }"));
  add("good_after_oob", candidate(good));
  add("partial_output", candidate(idx + "  if (i < n / 3) out[i] = 2.0f * x[i] + y[i];"));
  add("good_after_partial", candidate(good));
  const auto rep = run(op, subjects, {"odd", "m2"});
  auto result = [&](const std::string& w, const std::string& role) {
    auto it = rep.results.find(w);
    if (it == rep.results.end() || !it->second.count(role)) return std::pair<std::string, std::string>{"<missing>", ""};
    return std::pair{std::string(kopt::protocol::to_string(it->second.at(role).status)),
                     it->second.at(role).message};
  };
  for (const auto& w : {"odd", "m2"}) {
    SCOPED_TRACE(w);
    EXPECT_EQ(result(w, "input_mutation").first, "rejected_integrity") << result(w, "input_mutation").second;
    EXPECT_EQ(result(w, "out_of_bounds").first, "rejected_integrity") << result(w, "out_of_bounds").second;
    EXPECT_EQ(result(w, "partial_output").first, "incorrect");
    for (const auto* g : {"good_after_mutation", "good_after_oob", "good_after_partial"})
      EXPECT_EQ(result(w, g).first, "ok") << g << ": " << result(w, g).second;
  }
}

TEST_F(WorkerIntegrity, FasterThanSpeedOfLightIsRejected) {
  // The roofline claims 1000x the bytes the operator moves: an honest
  // kernel then "beats" physics, which must be an integrity failure.
  const json op = snapshot(scale_add_operator("1000 * 12 * n"));
  json subjects = json::array({{{"role", "candidate"},
                                {"candidate", candidate(idx + "  if (i < n) out[i] = 2.0f * x[i] + y[i];")}}});
  const auto rep = run(op, subjects, {"m2"});
  auto cfg = kopt::config::load_operator_text(op.dump(), "<t>", ".");
  ASSERT_TRUE(cfg.ok());
  kopt::harness::gpu_peaks peaks;
  peaks.name = "test";
  peaks.dram_bytes_per_s = 4.8e12;
  peaks.flops_per_s["fp32"] = 6.7e13;
  const auto s = kopt::runner::summarize(*cfg.op, rep, "candidate", peaks);
  ASSERT_EQ(s.rows.size(), 2u);
  for (const auto& r : s.rows)
    if (r.workload == "m2") {
      EXPECT_EQ(r.status, kopt::protocol::outcome::rejected_integrity);
      EXPECT_NE(r.message.find("faster than the speed of light"), std::string::npos);
    }
}

TEST_F(WorkerIntegrity, L2ResidencyHintsGainNothingAcrossTheFlush) {
  // Inputs of 2 Mi floats (24 MiB in all) fit in the 60 MB L2. A kernel that
  // marks its loads evict_last (the closest a candidate without host code
  // gets to a persisting-L2 window) must not be measurably faster than the
  // plain kernel, because the L2 is flushed and persisting lines reset
  // before every sample.
  const json op = snapshot(scale_add_operator());
  const std::string plain = idx + "  if (i < n) out[i] = 2.0f * x[i] + y[i];";
  const std::string sticky = idx + R"(
  if (i < n) {
    unsigned long long pol;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    float a, b;
    asm volatile("ld.global.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(a) : "l"(x + i), "l"(pol));
    asm volatile("ld.global.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(b) : "l"(y + i), "l"(pol));
    out[i] = 2.0f * a + b;
  })";
  json subjects = json::array({{{"role", "plain"}, {"candidate", candidate(plain)}},
                               {{"role", "evict_last"}, {"candidate", candidate(sticky)}}});
  const auto rep = run(op, subjects, {"m2"});
  const auto& r = rep.results.at("m2");
  ASSERT_EQ(r.at("plain").status, kopt::protocol::outcome::ok) << r.at("plain").message;
  ASSERT_EQ(r.at("evict_last").status, kopt::protocol::outcome::ok) << r.at("evict_last").message;
  const double plain_ns = r.at("plain").detail.at("timing").at("median_ns").get<double>();
  const double sticky_ns = r.at("evict_last").detail.at("timing").at("median_ns").get<double>();
  std::cout << fmt::format("plain {:.2f} us, evict_last {:.2f} us\n", plain_ns / 1e3, sticky_ns / 1e3);
  EXPECT_GT(sticky_ns, 0.9 * plain_ns);
}

TEST_F(WorkerIntegrity, TheClockIsRecordedAndTheKernelKindIncludesTheLaunch) {
  // The default clock (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) starts when the
  // first block runs; the serialized "kernel" kind also counts the launch's
  // front-end work. On the H200 they differ by about 1.4 to 2 us per launch
  // (docs/benchmarks.md); each result must say which it used.
  const json op = snapshot(scale_add_operator());
  json subjects = json::array({{{"role", "plain"}, {"candidate", candidate(idx + "  if (i < n) out[i] = 2.0f * x[i] + y[i];")}}});
  const auto serial = run(op, subjects, {"m2"}, "kernel");
  const auto concurrent = run(op, subjects, {"m2"});
  const auto again = run(op, subjects, {"m2"}, "kernel");  // and back: the switch works both ways
  const auto& a = serial.results.at("m2").at("plain");
  const auto& b = concurrent.results.at("m2").at("plain");
  const auto& c = again.results.at("m2").at("plain");
  ASSERT_EQ(a.status, kopt::protocol::outcome::ok) << a.message;
  ASSERT_EQ(b.status, kopt::protocol::outcome::ok) << b.message;
  ASSERT_EQ(c.status, kopt::protocol::outcome::ok) << c.message;
  EXPECT_EQ(a.detail.at("timing").at("clock"), "kernel");
  EXPECT_EQ(b.detail.at("timing").at("clock"), "concurrent_kernel");
  EXPECT_EQ(c.detail.at("timing").at("clock"), "kernel");
  const double ka = a.detail.at("timing").at("median_ns").get<double>();
  const double kb = b.detail.at("timing").at("median_ns").get<double>();
  const double kc = c.detail.at("timing").at("median_ns").get<double>();
  std::cout << fmt::format("kernel clock {:.2f} us, concurrent_kernel {:.2f} us, kernel again {:.2f} us\n", ka / 1e3,
                           kb / 1e3, kc / 1e3);
  EXPECT_GT(ka, kb + 300.0);
  EXPECT_GT(kc, kb + 300.0);
}

// ---------------------------------------------------------------- issue 17
// One test per class of hole (docs/integrity.md, "Classes of hole"), each
// written against the class, not against one kernel.

std::string status_of(const kopt::runner::evaluation_report& rep, const std::string& w,
                      const std::string& role) {
  auto it = rep.results.find(w);
  if (it == rep.results.end() || !it->second.count(role)) return "<missing>";
  return std::string(kopt::protocol::to_string(it->second.at(role).status));
}
std::string message_of(const kopt::runner::evaluation_report& rep, const std::string& w,
                       const std::string& role) {
  auto it = rep.results.find(w);
  if (it == rep.results.end() || !it->second.count(role)) return "";
  return it->second.at(role).message;
}

// Class 1: a kernel that computes honestly only when its output looks like
// a checked call's (the old fill: the poison in every element) and skips
// the work otherwise. With the same fill before every call, poison at
// random positions, it can no longer tell; it is caught on every workload.
TEST_F(WorkerIntegrity, PoisonSensingKernelIsCaught) {
  const json op = snapshot(scale_add_operator());
  const std::string sensing = R"(
  // "checked" when the first 64 outputs all hold the NaN poison.
  __shared__ int all_nan;
  if (threadIdx.x == 0) {
    all_nan = 1;
    for (int j = 0; j < 64 && j < n; ++j) all_nan &= isnan(out[j]) ? 1 : 0;
  }
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (!all_nan) return;  // a timed call: skip the work
  if (i < n) out[i] = 2.0f * x[i] + y[i];)";
  json subjects =
      json::array({{{"role", "poison_sensing"}, {"candidate", candidate(sensing)}},
                   {{"role", "good"},
                    {"candidate", candidate(idx + "  if (i < n) out[i] = 2.0f * x[i] + y[i];")}}});
  const auto rep = run(op, subjects, {"odd", "m2"});
  for (const auto& w : {"odd", "m2"}) {
    SCOPED_TRACE(w);
    const auto st = status_of(rep, w, "poison_sensing");
    EXPECT_TRUE(st == "incorrect" || st == "rejected_integrity")
        << st << ": " << message_of(rep, w, "poison_sensing");
    EXPECT_EQ(status_of(rep, w, "good"), "ok") << message_of(rep, w, "good");
    // The good kernel's last timed sample was compared with the reference.
    const auto& g = rep.results.at(w).at("good").detail;
    ASSERT_TRUE(g.at("timing").contains("last_sample_check")) << g.dump();
    EXPECT_TRUE(g.at("timing").at("last_sample_check").at("passed").get<bool>());
  }
}

// Class 2a: state kept in the guard region in front of the output, the
// canary "restored" from its neighbouring word (which worked while the
// canary was one word repeated). Canaries are now random per word and per
// call and verified on the host: the damage is seen.
TEST_F(WorkerIntegrity, GuardRegionStateIsCaught) {
  const json op = snapshot(scale_add_operator());
  const std::string guard_state = R"(
  unsigned long long* g = reinterpret_cast<unsigned long long*>(out);  // out is 256-byte aligned
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const bool done_before = g[-1] == 0x5EEDF00Dull;
  if (!done_before && i < n) out[i] = 2.0f * x[i] + y[i];
  if (i == 0) g[-1] = isnan(out[1]) ? g[-2] : 0x5EEDF00Dull;  // "restore" or keep state)";
  json subjects = json::array({{{"role", "guard_state"}, {"candidate", candidate(guard_state)}}});
  const auto rep = run(op, subjects, {"odd", "m2"});
  for (const auto& w : {"odd", "m2"}) {
    SCOPED_TRACE(w);
    EXPECT_EQ(status_of(rep, w, "guard_state"), "rejected_integrity")
        << message_of(rep, w, "guard_state");
    EXPECT_NE(message_of(rep, w, "guard_state").find("guard region"), std::string::npos)
        << message_of(rep, w, "guard_state");
  }
}

// Class 2b: a __constant__ table written through a generic pointer (no
// writable section in the cubin, so the static rule passes it): the module
// data hash after the call sees the change. Some drivers fault on the write
// instead (then the worker reports it crashed); either way it never passes.
TEST_F(WorkerIntegrity, ModuleDataWrittenThroughAPointerIsCaught) {
  const json op = snapshot(scale_add_operator());
  json cand = candidate("");
  cand["source"] =
      "__constant__ float scale[2] = {2.0f, 0.0f};\n"
      "extern \"C\" __global__ void k(const float* x, const float* y, float* out, int n) {\n" +
      idx +
      "  if (i < n) out[i] = scale[0] * x[i] + y[i];\n"
      "  if (i == 0) { float* p = const_cast<float*>(&scale[1]); *p = *p + 1.0f; }\n}\n";
  json subjects = json::array({{{"role", "constant_state"}, {"candidate", cand}}});
  const auto rep = run(op, subjects, {"m2"});
  const auto st = status_of(rep, "m2", "constant_state");
  EXPECT_TRUE(st == "rejected_integrity" || st == "crashed")
      << st << ": " << message_of(rep, "m2", "constant_state");
  if (st == "rejected_integrity") {
    EXPECT_NE(message_of(rep, "m2", "constant_state").find("module's own data 'scale'"),
              std::string::npos)
        << message_of(rep, "m2", "constant_state");
  }
  std::cout << "constant write through a pointer: " << st << ": "
            << message_of(rep, "m2", "constant_state") << '\n';
}

// Class 3: clock reads. Refused by default; with integrity.allow_clock_reads
// a kernel that uses the clock to skip work most of the time is still
// caught by the output checks, and the setting is recorded with the result.
TEST_F(WorkerIntegrity, ClockReadsAreRefusedAndAClockBasedSkipIsCaughtWhenAllowed) {
  const std::string clock_skip = R"(
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (((t >> 10) & 7) != 0) return;  // works in one microsecond-window of eight
  if (i < n) out[i] = 2.0f * x[i] + y[i];)";
  const std::string clock_honest = R"(
  const long long c = clock64();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * x[i] + y[i] + (c == -1 ? 1.0f : 0.0f);)";
  json subjects = json::array({{{"role", "clock_skip"}, {"candidate", candidate(clock_skip)}},
                               {{"role", "clock_honest"}, {"candidate", candidate(clock_honest)}}});
  const auto refused = run(snapshot(scale_add_operator()), subjects, {"m2"});
  for (const auto* role : {"clock_skip", "clock_honest"}) {
    EXPECT_EQ(status_of(refused, "m2", role), "rejected_integrity") << role;
    EXPECT_NE(message_of(refused, "m2", role).find("reads a clock"), std::string::npos)
        << message_of(refused, "m2", role);
  }
  json allowing = scale_add_operator();
  allowing["integrity"] = {{"allow_clock_reads", true}};
  const auto rep = run(snapshot(allowing), subjects, {"odd", "m2"});
  for (const auto& w : {"odd", "m2"}) {
    SCOPED_TRACE(w);
    const auto st = status_of(rep, w, "clock_skip");
    EXPECT_TRUE(st == "incorrect" || st == "rejected_integrity")
        << st << ": " << message_of(rep, w, "clock_skip");
    EXPECT_EQ(status_of(rep, w, "clock_honest"), "ok") << message_of(rep, w, "clock_honest");
    const auto& d = rep.results.at(w).at("clock_honest").detail;
    ASSERT_TRUE(d.contains("integrity")) << d.dump();
    EXPECT_TRUE(d.at("integrity").at("allow_clock_reads").get<bool>());
    EXPECT_FALSE(d.at("integrity").at("clock_reads").empty());
  }
}

// The interleaved comparison (A B B A in one loop): both subjects timed,
// marked interleaved, and a kernel with several times the work is slower.
// The challenger adds a dependent chain of 384 FMAs per element (~0.8 G FMA
// on m2: ~24 us of FP32 issue on an H200 against ~8 us of memory traffic
// for the plain kernel, so about 3x): a second read stream was only 1.09x
// slower (it hits L2), too close to tell the comparison from noise.
TEST_F(WorkerIntegrity, InterleavedComparisonTimesBothInOneLoop) {
  const json op = snapshot(scale_add_operator());
  const std::string plain = idx + "  if (i < n) out[i] = 2.0f * x[i] + y[i];";
  const std::string twice = idx + R"(
  if (i < n) {
    const float a = x[i];
    float c = 0.0f;
#pragma unroll 1
    for (int k = 0; k < 384; ++k) c = fmaf(c, 0.999f, a);  // work the result depends on
    out[i] = 2.0f * a + y[i] + (c == 12345.0f ? 1e-30f : 0.0f);
  })";
  json subjects = json::array({{{"role", "incumbent"}, {"candidate", candidate(plain)}},
                               {{"role", "challenger"}, {"candidate", candidate(twice)}}});
  const auto rep = run(op, subjects, {"m2"}, "", {{"interleave", true}});
  const auto& a = rep.results.at("m2").at("incumbent");
  const auto& b = rep.results.at("m2").at("challenger");
  ASSERT_EQ(a.status, kopt::protocol::outcome::ok) << a.message;
  ASSERT_EQ(b.status, kopt::protocol::outcome::ok) << b.message;
  for (const auto* r : {&a, &b}) {
    const auto& t = r->detail.at("timing");
    ASSERT_TRUE(t.contains("interleaved")) << t.dump();
    EXPECT_EQ(t.at("interleaved").at("order"), "ABBA");
    EXPECT_GE(t.at("samples").get<int>(), 10);
  }
  const double na = a.detail.at("timing").at("median_ns").get<double>();
  const double nb = b.detail.at("timing").at("median_ns").get<double>();
  const double sa = a.detail.at("timing").at("samples").get<double>();
  const double sb = b.detail.at("timing").at("samples").get<double>();
  std::cout << fmt::format(
      "interleaved: incumbent {:.2f} us ({} samples), challenger {:.2f} us ({} samples)\n",
      na / 1e3, sa, nb / 1e3, sb);
  EXPECT_GT(nb, na * 1.5);  // ~3x expected; 1.5x leaves room for clocks, never for noise
  EXPECT_NEAR(sa, sb, 0.1 * std::max(sa, sb) + 4);  // A B B A: equal shares
}

// The launch floor: measured at worker start with the timing clock, in the
// hello message and with every timing; an empty-bodied kernel is not
// measured faster than it. The rule: one floor per device and driver (the
// first worker measures it, stores it beside the calibration, and every
// later worker loads it), so the timing of any worker reports exactly the
// floor of its own hello and of the suite's first hello, even after the
// restarts that the crashing candidates of the other tests cause.
TEST_F(WorkerIntegrity, LaunchFloorIsMeasuredAndReported) {
  ASSERT_TRUE(hello_->contains("launch_floor")) << hello_->dump();
  const auto& lf = hello_->at("launch_floor");
  ASSERT_TRUE(lf.contains("median_ns")) << lf.dump();
  const double floor_ns = lf.at("median_ns").get<double>();
  std::cout << fmt::format("launch floor ({}): {:.0f} ns\n", lf.value("clock", "?"), floor_ns);
  EXPECT_GT(floor_ns, 100.0);
  EXPECT_LT(floor_ns, 20000.0);
  EXPECT_EQ(lf.value("clock", ""), "concurrent_kernel");
  const json op = snapshot(scale_add_operator());
  json subjects =
      json::array({{{"role", "tiny"},
                    {"candidate", candidate(idx + "  if (i < n) out[i] = 2.0f * x[i] + y[i];")}}});
  const auto rep = run(op, subjects, {"odd"});
  const auto& t = rep.results.at("odd").at("tiny");
  ASSERT_EQ(t.status, kopt::protocol::outcome::ok) << t.message;
  ASSERT_TRUE(t.detail.at("timing").contains("launch_floor_ns"));
  const double reported = t.detail.at("timing").at("launch_floor_ns").get<double>();
  ASSERT_TRUE(rep.launch_floor.is_object() && rep.launch_floor.contains("median_ns"))
      << rep.launch_floor.dump();
  std::cout << fmt::format("timing reports {:.0f} ns; its worker's hello {:.0f} ns (cached: {})\n",
                           reported, rep.launch_floor.at("median_ns").get<double>(),
                           rep.launch_floor.value("cached", false));
  EXPECT_DOUBLE_EQ(reported, rep.launch_floor.at("median_ns").get<double>());
  EXPECT_DOUBLE_EQ(reported, floor_ns);
  EXPECT_GE(t.detail.at("timing").at("median_ns").get<double>(), 0.8 * floor_ns);
}

// Class 4: a race that usually passes. The reduction step reads a value
// another warp wrote, with a sleep where the __syncthreads() belongs: the
// ordinary checks usually see the right answer, compute-sanitizer racecheck
// reports the hazard. An honest kernel comes out clean from all three tools
// (no false positives from the harness's own kernels).
TEST_F(WorkerIntegrity, RacyKernelIsCaughtByComputeSanitizer) {
  const json op = snapshot(scale_add_operator());
  const std::string racy = R"(
  __shared__ float buf[256];
  const int t = threadIdx.x;
  const int i = blockIdx.x * 256 + t;
  buf[t] = i < n ? 2.0f * x[i] + y[i] : 0.0f;
  __nanosleep(5000);  // instead of __syncthreads(): usually long enough
  const int src = t ^ 128;  // written by another warp
  const int j = blockIdx.x * 256 + src;
  if (j < n) out[j] = buf[src];)";
  const std::string good = idx + "  if (i < n) out[i] = 2.0f * x[i] + y[i];";
  auto request = [&](const std::string& role, const std::string& body) {
    return json{{"operator", op},
                {"subjects", json::array({{{"role", role}, {"candidate", candidate(body)}}})},
                {"workloads", {"odd"}}};
  };
  const auto plain =
      run(op, json::array({{{"role", "racy"}, {"candidate", candidate(racy)}}}), {"odd"});
  std::cout << "racy kernel without the sanitizer: " << status_of(plain, "odd", "racy") << '\n';

  const auto bad = kopt::runner::sanitize(kopt::testing::worker_opts(), request("racy", racy));
  if (bad.status == "skipped") GTEST_SKIP() << bad.reason;
  std::cout << "sanitize(racy): " << bad.to_json().dump(2) << '\n';
  EXPECT_EQ(bad.status, "rejected_integrity") << bad.reason;
  bool race_found = false;
  for (const auto& t : bad.tools)
    if (t.tool == "racecheck" && t.status == "errors" && t.errors > 0) race_found = true;
  EXPECT_TRUE(race_found) << bad.to_json().dump(2);

  const auto clean = kopt::runner::sanitize(kopt::testing::worker_opts(), request("good", good));
  EXPECT_EQ(clean.status, "ok") << clean.to_json().dump(2);
  ASSERT_EQ(clean.tools.size(), 3u);
  for (const auto& t : clean.tools) EXPECT_EQ(t.status, "ok") << t.tool << ": " << t.message;
}

}  // namespace
