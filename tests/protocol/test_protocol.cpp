// The typed worker protocol (profiler/protocol/protocol.hpp): every request
// and every message to JSON and back (through a text line, as on the wire),
// the version check on both sides, and the clear errors for lines that do
// not follow the protocol.
#include <gtest/gtest.h>

#include "protocol/protocol.hpp"

namespace p = kopt::protocol;
using json = nlohmann::json;

namespace {

// Serializes as the wire does (one line of text) and parses back.
json wire(const json& j) {
  const std::string line = j.dump();
  EXPECT_EQ(line.find('\n'), std::string::npos);
  return json::parse(line);
}

p::request request_round_trip(const p::request& r) {
  return p::parse_request(wire(json(r)));
}
p::message message_round_trip(const p::message& m) {
  return p::parse_message(wire(json(m)));
}

p::evaluate_request full_evaluate() {
  p::evaluate_request r;
  r.id = "e7";
  r.operator_snapshot = {{"name", "rmsnorm"}, {"workloads", json::array({{{"id", "t16"}}})}};
  r.subjects = {{"baseline", {{"source", "__global__ void k() {}"}}, {}},
                {"candidate",
                 {{"source", "__global__ void k2() {}"}, {"launches", json::array()}},
                 {{"BLOCK", 256}}}};
  r.workloads = {"t16", "t2500"};
  auto& s = r.settings;
  s.seeds = 5;
  s.base_seed = 12345678901234ULL;
  s.time_reference = true;
  s.recheck = false;
  s.recompile = true;
  s.clock = p::clock_kind::kernel;
  s.launch_timeout_ms = 2500;
  s.warmup_s = 0.5;
  s.timing.min_time_s = 0.2;
  s.timing.max_time_s = 2.0;
  s.timing.min_samples = 20;
  s.counters = "full";
  s.metrics = {"dram__bytes.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed"};
  s.extra = {{"sanitize", true}, {"tolerance", {{"form", "ulp"}}}};
  return r;
}

}  // namespace

TEST(Protocol, EveryRequestRoundTrips) {
  const std::vector<p::request> all = {full_evaluate(), p::evaluate_request{},
                                       p::calibrate_request{"c1"}, p::ping_request{"r2"},
                                       p::shutdown_request{"r3"}};
  for (const auto& r : all) {
    const json j = r;
    EXPECT_EQ(j.at("protocol"), p::version) << j.dump();
    EXPECT_EQ(request_round_trip(r), r) << j.dump();
  }
  EXPECT_EQ(json(p::calibrate_request{"c1"}).at("type"), "calibrate");
  EXPECT_EQ(json(full_evaluate()).at("type"), "evaluate");
}

TEST(Protocol, EveryMessageRoundTrips) {
  p::hello h;
  h.device = {
      {"name", "NVIDIA H200"}, {"sm_count", 132}, {"limits", {{"max_threads_per_block", 1024}}}};
  h.calibration = {{"dram_bytes_per_s", 4.1e12}, {"cached", true}};
  h.worker_version = "0.1.0";
  h.gpu_selection = {{"spec", "auto"}, {"ordinal", 0}, {"how", "CUDA_VISIBLE_DEVICES=3"}};
  p::hello refused;
  refused.ok = false;
  refused.error = "no usable CUDA device: no driver";
  refused.device = json::object();
  // Which GPU it tried is said also when it cannot use it.
  refused.gpu_selection = {{"spec", "7"}, {"ordinal", 7}, {"how", "--gpu 7"}};

  p::compiled c{"e1",
                "candidate",
                p::outcome::compile_timeout,
                "NVRTC ran past 60 s",
                {{"status", "timeout"}, {"log", "..."}, {"kernels", {{"k", {{"registers", 32}}}}}}};
  p::result ok{"candidate",
               p::outcome::ok,
               "",
               {{"timing", {{"median_ns", 5123.5}, {"samples_ns", {5100.0, 5123.5}}}},
                {"correctness", json::array({{{"seed", 1}, {"passed", true}}})},
                {"counters", {{"metrics", {{"dram__bytes.sum", 1.0e9}}}}}}};
  p::result bad{"baseline", p::outcome::incorrect, "out: 3 of 4096 elements differ",
                json::object()};
  p::result ref{"reference", p::outcome::reference_failed, "the reference produced NaN",
                json::object()};

  const std::vector<p::message> all = {
      h,
      refused,
      c,
      p::workload_begin{"e1", "t16"},
      p::workload_result{"e1", "t16", {ok, bad, ref}},
      p::workload_result{"e1", "t2500", {}},
      p::done{"e1"},
      p::fatal{"e1", p::outcome::timeout, "candidate", "t16", "ran past 10000 ms"},
      p::fatal{"e1", p::outcome::clock_lost, "", "t16", "CUPTI returned 0 kernel records"},
      p::error{"e2", p::error_code::unknown_metric, "CUPTI does not know this metric"},
      p::error{"", p::error_code::bad_request, "request is not JSON"},
      p::calibrated{"c1", {{"dram_bytes_per_s", 4.0e12}}},
      p::pong{"r2"},
      p::bye{"r3"},
  };
  for (const auto& m : all) EXPECT_EQ(message_round_trip(m), m) << json(m).dump();
  EXPECT_EQ(p::answer_id(p::message{p::done{"e9"}}), "e9");
  EXPECT_EQ(p::answer_id(p::message{h}), "");
}

TEST(Protocol, EveryOutcomeAndErrorCodeHasOneName) {
  for (const auto& [o, name] : p::outcome_names) {
    EXPECT_EQ(p::to_string(o), name);
    EXPECT_EQ(p::parse_outcome(name), o);
    EXPECT_EQ(json(o).get<p::outcome>(), o);
  }
  for (const auto& [c, name] : p::error_code_names) {
    EXPECT_EQ(p::parse_error_code(name), c);
    EXPECT_EQ(json(c).get<p::error_code>(), c);
  }
  EXPECT_FALSE(p::parse_outcome("compile_timeout ").has_value());
  EXPECT_TRUE(p::is_fatal(p::outcome::crashed));
  EXPECT_FALSE(p::is_fatal(p::outcome::incorrect));
  // A code from a newer build still reads as a refusal.
  EXPECT_EQ(json("some_new_code").get<p::error_code>(), p::error_code::rejected);
}

TEST(Protocol, AnUnknownVersionIsRefusedWithAClearError) {
  json req = json(p::ping_request{"r1"});
  req["protocol"] = 99;
  try {
    p::parse_request(req);
    FAIL() << "a request of protocol 99 was accepted";
  } catch (const p::protocol_error& e) {
    EXPECT_EQ(e.code(), p::error_code::unsupported_protocol);
    EXPECT_NE(std::string(e.what()).find("speaks protocol 99"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("this build speaks " + std::to_string(p::version)),
              std::string::npos)
        << e.what();
  }
  req.erase("protocol");
  try {
    p::parse_request(req);
    FAIL() << "a request without a protocol version was accepted";
  } catch (const p::protocol_error& e) {
    EXPECT_EQ(e.code(), p::error_code::unsupported_protocol);
    EXPECT_NE(std::string(e.what()).find("no protocol version"), std::string::npos) << e.what();
  }
  // The control plane's side: a worker of another version.
  json hello = json(p::hello{});
  hello["protocol"] = 1;
  try {
    p::parse_message(hello);
    FAIL() << "a hello of protocol 1 was accepted";
  } catch (const p::protocol_error& e) {
    EXPECT_EQ(e.code(), p::error_code::unsupported_protocol);
    EXPECT_NE(std::string(e.what()).find("the GPU worker speaks protocol 1"), std::string::npos)
        << e.what();
  }
}

TEST(Protocol, MalformedLinesAreProtocolErrors) {
  auto code_of = [](const json& j, bool is_request) {
    try {
      if (is_request)
        p::parse_request(j);
      else
        p::parse_message(j);
    } catch (const p::protocol_error& e) {
      return std::optional<p::error_code>(e.code());
    }
    return std::optional<p::error_code>();
  };
  const int v = p::version;
  EXPECT_EQ(code_of(json::array(), true), p::error_code::bad_request);
  EXPECT_EQ(code_of(json{{"protocol", v}}, true), p::error_code::bad_request);  // no type
  EXPECT_EQ(code_of(json{{"type", "frobnicate"}, {"protocol", v}}, true),
            p::error_code::bad_request);
  EXPECT_EQ(code_of(json{{"type", "evaluate"}, {"protocol", v}}, true),
            p::error_code::bad_request);  // no operator
  json ev = json(full_evaluate());
  ev["settings"]["seeds"] = "three";
  EXPECT_EQ(code_of(ev, true), p::error_code::bad_request);
  ev = json(full_evaluate());
  ev["settings"]["clock"] = "wall";
  EXPECT_EQ(code_of(ev, true), p::error_code::rejected);
  ev = json(full_evaluate());
  ev["settings"]["counters"] = "everything";
  EXPECT_EQ(code_of(ev, true), p::error_code::rejected);
  ev = json(full_evaluate());
  ev["subjects"][0].erase("candidate");
  EXPECT_EQ(code_of(ev, true), p::error_code::bad_request);

  EXPECT_EQ(code_of(json{{"type", "workload_result"},
                         {"results", {{{"role", "x"}, {"status", "splendid"}}}}},
                    false),
            p::error_code::bad_request);
  EXPECT_EQ(code_of(json{{"type", "telemetry"}}, false), p::error_code::bad_request);
  EXPECT_EQ(code_of(json{{"type", "hello"}, {"ok", true}}, false),
            p::error_code::unsupported_protocol);
}

TEST(Protocol, DefaultsAndUnknownSettingsPassThrough) {
  // A minimal evaluate (as a hand-written test would send) reads with the
  // protocol's defaults.
  const auto r = std::get<p::evaluate_request>(p::parse_request({{"type", "evaluate"},
                                                                 {"protocol", p::version},
                                                                 {"id", "e1"},
                                                                 {"operator", json::object()}}));
  EXPECT_EQ(r.settings, p::settings{});
  EXPECT_FALSE(r.settings.wants_counters());
  // Settings this build does not name survive a pass through it.
  json ev = json(full_evaluate());
  ev["settings"]["allow_clock_reads"] = true;
  const auto back = std::get<p::evaluate_request>(p::parse_request(ev));
  EXPECT_EQ(back.settings.extra.value("allow_clock_reads", false), true);
  EXPECT_EQ(json(back).at("settings").value("allow_clock_reads", false), true);
  EXPECT_TRUE(back.settings.wants_counters());
  // Lenient messages: what the fake workers of the tests send.
  const auto m = p::parse_message(
      {{"type", "compiled"}, {"id", "e1"}, {"role", "candidate"}, {"status", "ok"}});
  EXPECT_EQ(std::get<p::compiled>(m).status, p::outcome::ok);
  EXPECT_TRUE(std::get<p::compiled>(m).compile.empty());
}

namespace {

// Issue 17's additions: typed settings (interleave, checks_only) and the
// hello's launch floor, optional on the wire (protocol 2 readers without
// them still parse the line; a line without them reads the defaults).
TEST(Protocol, IntegritySettingsAndLaunchFloorAreTyped) {
  auto r = std::get<p::evaluate_request>(p::parse_request({{"type", "evaluate"},
                                                           {"protocol", p::version},
                                                           {"id", "e1"},
                                                           {"operator", json::object()}}));
  EXPECT_FALSE(r.settings.interleave);
  EXPECT_FALSE(r.settings.checks_only);
  json ev = json(r);
  ev["settings"]["interleave"] = true;
  ev["settings"]["checks_only"] = true;
  const auto back = std::get<p::evaluate_request>(p::parse_request(ev));
  EXPECT_TRUE(back.settings.interleave);
  EXPECT_TRUE(back.settings.checks_only);
  EXPECT_FALSE(back.settings.extra.contains("interleave"));  // typed, not passed through
  EXPECT_EQ(json(back).at("settings").value("checks_only", false), true);

  p::hello h;
  h.device = {{"name", "Fake GPU"}};
  h.launch_floor = {{"clock", "concurrent_kernel"}, {"median_ns", 2100.0}};
  const json hj = json(p::message{h});
  EXPECT_EQ(hj.at("launch_floor").value("median_ns", 0.0), 2100.0);
  EXPECT_EQ(std::get<p::hello>(p::parse_message(hj)), h);
  json old = hj;
  old.erase("launch_floor");  // a worker that does not measure it
  EXPECT_TRUE(std::get<p::hello>(p::parse_message(old)).launch_floor.is_null());
  EXPECT_FALSE(json(p::message{p::hello{}}).contains("launch_floor"));
}

}  // namespace
