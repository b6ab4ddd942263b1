// The worker protocol as types: the one contract between kopt (the control
// plane: agent/runner's worker client, the summaries and the store mapping)
// and kopt-worker (profiler/worker). Both sides build and read their JSON
// lines through these structs (nlohmann::json to_json/from_json), so a field
// is named, defaulted and checked in one place, and a kind of failure is a
// value (outcome, error_code) rather than a message to search for a prefix.
// docs/worker-protocol.md describes the same protocol for humans.
//
// Header-only and free of CUDA: the control plane includes it on machines
// with no GPU and no toolkit (CMake target kopt::protocol).
//
// Versioning: the worker's hello and every request carry `protocol`. A
// request of another version is answered with an error (code
// unsupported_protocol) and a hello of another version is refused by the
// client, so that a kopt and a kopt-worker of different builds stop with a
// clear message instead of misreading each other. Bump `version` on any
// change that an older peer would misread (a renamed or retyped field, a new
// required field, a new message type); optional additions that older peers
// may ignore keep the number.
//
// The measurements inside a result (correctness, timing, counters, ...) and
// the compile metadata stay JSON objects here: they are produced by the
// evaluator, stored as they are (evaluations.*_json) and read by name where
// needed; the protocol types the envelope and the decisions made from it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace kopt::protocol {

using json = nlohmann::json;

inline constexpr int version = 2;

// --- outcomes ----------------------------------------------------------------

// What happened to one subject (reference, baseline, candidate) on one
// workload, or at compile time. The one outcome enum of kopt: the worker
// emits it, the worker client attributes fatal ones, the summaries and the
// store mapping (runner/record.cpp) read it.
enum class outcome {
  ok,
  incorrect,           // outputs differ from the reference beyond tolerance
  compile_error,       // NVRTC refused the source
  compile_timeout,     // NVRTC ran past its time limit
  rejected_format,     // the candidate does not validate against the operator
  rejected_integrity,  // forbidden constructs, or faster than the speed of light
  launch_error,        // module or kernel not loadable / launchable
  reference_failed,    // the reference itself failed: nothing to compare against
  crashed,             // the subject killed the worker (trap, illegal address)
  timeout,             // the subject hung (ran past launch_timeout_ms)
  clock_lost,          // the worker's CUPTI clock failed: not the subject's fault
  not_run,             // no result for the subject (kopt's summaries only)
};

inline constexpr std::array<std::pair<outcome, std::string_view>, 12> outcome_names{{
    {outcome::ok, "ok"},
    {outcome::incorrect, "incorrect"},
    {outcome::compile_error, "compile_error"},
    {outcome::compile_timeout, "compile_timeout"},
    {outcome::rejected_format, "rejected_format"},
    {outcome::rejected_integrity, "rejected_integrity"},
    {outcome::launch_error, "launch_error"},
    {outcome::reference_failed, "reference_failed"},
    {outcome::crashed, "crashed"},
    {outcome::timeout, "timeout"},
    {outcome::clock_lost, "clock_lost"},
    {outcome::not_run, "not_run"},
}};

inline std::string_view to_string(outcome o) noexcept {
  for (const auto& [v, n] : outcome_names)
    if (v == o) return n;
  return "not_run";
}
inline std::optional<outcome> parse_outcome(std::string_view s) noexcept {
  for (const auto& [v, n] : outcome_names)
    if (n == s) return v;
  return std::nullopt;
}
// Outcomes print as their wire names (logs, test failure messages).
inline std::ostream& operator<<(std::ostream& os, outcome o) {
  return os << to_string(o);
}

// The outcomes that end a worker process (message `fatal`).
inline bool is_fatal(outcome o) noexcept {
  return o == outcome::crashed || o == outcome::timeout || o == outcome::clock_lost;
}

// --- errors ------------------------------------------------------------------

// Why a request was answered with `error` instead of results. The control
// plane decides on the code: a refused request is the campaign's problem
// (bad operator, unknown metric), an internal error is the worker's.
enum class error_code {
  bad_request,           // not JSON, not an object, an unknown type, a field of the wrong type
  unsupported_protocol,  // the request's `protocol` is not this worker's
  rejected,              // well-formed but refused (operator snapshot invalid, bad setting)
  unknown_metric,        // a counters metric the GPU's chip does not know
  counters_unavailable,  // the CUPTI profiler cannot run here (permissions, chip)
  internal,              // the worker failed on its own (CUDA error outside any subject)
};

inline constexpr std::array<std::pair<error_code, std::string_view>, 6> error_code_names{{
    {error_code::bad_request, "bad_request"},
    {error_code::unsupported_protocol, "unsupported_protocol"},
    {error_code::rejected, "rejected"},
    {error_code::unknown_metric, "unknown_metric"},
    {error_code::counters_unavailable, "counters_unavailable"},
    {error_code::internal, "internal"},
}};

inline std::string_view to_string(error_code c) noexcept {
  for (const auto& [v, n] : error_code_names)
    if (v == c) return n;
  return "rejected";
}
inline std::optional<error_code> parse_error_code(std::string_view s) noexcept {
  for (const auto& [v, n] : error_code_names)
    if (n == s) return v;
  return std::nullopt;
}

// A message or request that does not follow this protocol. `code` says how
// the worker answers it (bad_request or unsupported_protocol).
class protocol_error : public std::runtime_error {
 public:
  protocol_error(error_code code, const std::string& what)
      : std::runtime_error(what), code_(code) {}
  error_code code() const noexcept { return code_; }

 private:
  error_code code_;
};

inline void to_json(json& j, outcome o) {
  j = std::string(to_string(o));
}
inline void from_json(const json& j, outcome& o) {
  if (!j.is_string())
    throw protocol_error(error_code::bad_request, "an outcome must be a string, not " + j.dump());
  const auto p = parse_outcome(j.get_ref<const std::string&>());
  if (!p) throw protocol_error(error_code::bad_request, "unknown outcome " + j.dump());
  o = *p;
}
inline void to_json(json& j, error_code c) {
  j = std::string(to_string(c));
}
inline void from_json(const json& j, error_code& c) {
  // A code this build does not know reads as `rejected`: still a refusal.
  c = j.is_string()
          ? parse_error_code(j.get_ref<const std::string&>()).value_or(error_code::rejected)
          : error_code::rejected;
}

namespace detail {

// Reads an optional field with a type check: absent or null keeps the
// default; present with the wrong type is a protocol error naming it.
template <typename T>
void read(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    out = it->template get<T>();
  } catch (const protocol_error&) {
    throw;
  } catch (const json::exception& e) {
    throw protocol_error(error_code::bad_request, std::string("field '") + key + "': " + e.what());
  }
}

inline const json& object_of(const json& j, const char* what) {
  if (!j.is_object())
    throw protocol_error(error_code::bad_request, std::string(what) + " must be a JSON object");
  return j;
}

inline std::string type_of(const json& j) {
  std::string t;
  read(object_of(j, "a protocol line"), "type", t);
  if (t.empty()) throw protocol_error(error_code::bad_request, "a protocol line needs a \"type\"");
  return t;
}

}  // namespace detail

// Refuses a peer of another protocol version with a message that says both.
inline void check_version(int theirs, std::string_view who) {
  if (theirs != version)
    throw protocol_error(error_code::unsupported_protocol,
                         std::string(who) + " speaks protocol " + std::to_string(theirs) +
                             ", this build speaks " + std::to_string(version) +
                             " (kopt and kopt-worker must come from the same build)");
}

// --- requests (kopt -> worker) -------------------------------------------------

// The CUPTI record kind that times kernels (docs/methodology.md, "The clock").
enum class clock_kind { concurrent_kernel, kernel };
inline std::string_view to_string(clock_kind c) noexcept {
  return c == clock_kind::kernel ? "kernel" : "concurrent_kernel";
}
inline void to_json(json& j, clock_kind c) {
  j = std::string(to_string(c));
}
inline void from_json(const json& j, clock_kind& c) {
  if (j == "kernel")
    c = clock_kind::kernel;
  else if (j == "concurrent_kernel")
    c = clock_kind::concurrent_kernel;
  else
    throw protocol_error(
        error_code::rejected,
        "settings.clock must be \"kernel\" or \"concurrent_kernel\", not " + j.dump());
}

// The timing stopping rule (docs/measurement.md); unset fields keep the
// worker's defaults.
struct timing_rule {
  std::optional<int> min_samples, max_samples;
  std::optional<double> min_time_s, max_time_s, max_rsd, max_median_se;
  bool operator==(const timing_rule&) const = default;
};
inline void to_json(json& j, const timing_rule& t) {
  j = json::object();
  if (t.min_samples) j["min_samples"] = *t.min_samples;
  if (t.min_time_s) j["min_time_s"] = *t.min_time_s;
  if (t.max_rsd) j["max_rsd"] = *t.max_rsd;
  if (t.max_median_se) j["max_median_se"] = *t.max_median_se;
  if (t.max_time_s) j["max_time_s"] = *t.max_time_s;
  if (t.max_samples) j["max_samples"] = *t.max_samples;
}
inline void from_json(const json& j, timing_rule& t) {
  detail::object_of(j, "settings.timing");
  auto opt = [&](const char* k, auto& v) {
    if (j.contains(k) && !j.at(k).is_null()) {
      typename std::decay_t<decltype(v)>::value_type x{};
      detail::read(j, k, x);
      v = x;
    }
  };
  opt("min_samples", t.min_samples);
  opt("min_time_s", t.min_time_s);
  opt("max_rsd", t.max_rsd);
  opt("max_median_se", t.max_median_se);
  opt("max_time_s", t.max_time_s);
  opt("max_samples", t.max_samples);
}

// Settings of an evaluate request. The defaults are the protocol's: a field
// left out means this value on both sides.
struct settings {
  int seeds = 3;  // correctness seeds (the worker clamps to 1..16)
  std::uint64_t base_seed = 20261130;
  bool time_reference = false;
  bool recheck = true;
  bool recompile = false;  // compile the subjects even when their cubins are cached
  clock_kind clock = clock_kind::concurrent_kernel;
  int launch_timeout_ms = 10000;
  double warmup_s = 0.025;
  timing_rule timing;
  std::string counters = "none";     // counters tier: none, default, full
  std::vector<std::string> metrics;  // explicit metric list (instead of a tier)
  // Time the subjects interleaved sample by sample (A B B A for two) in one
  // loop: the promotion comparison (stage compare, docs/measurement.md).
  bool interleave = false;
  // Correctness checks only, no timing and no counters: the compute-sanitizer
  // runs (docs/integrity.md), where kernels are orders of magnitude slower.
  bool checks_only = false;
  // Settings this build does not name, kept and sent as they are, so that a
  // setting added on one side passes through code that has not learned it.
  json extra = json::object();

  // Counters asked for (a tier other than none, or a metric list).
  bool wants_counters() const { return counters != "none" || !metrics.empty(); }
  bool operator==(const settings&) const = default;
};

inline constexpr std::array<const char*, 13> settings_keys{
    "seeds",    "base_seed", "time_reference", "recheck",    "recompile",  "clock", "launch_timeout_ms",
    "warmup_s", "timing",    "counters",       "metrics",    "interleave", "checks_only"};

inline void to_json(json& j, const settings& s) {
  j = s.extra.is_object() ? s.extra : json::object();
  j["seeds"] = s.seeds;
  j["base_seed"] = s.base_seed;
  j["time_reference"] = s.time_reference;
  j["recheck"] = s.recheck;
  j["recompile"] = s.recompile;
  j["clock"] = s.clock;
  j["launch_timeout_ms"] = s.launch_timeout_ms;
  j["warmup_s"] = s.warmup_s;
  j["timing"] = s.timing;
  j["counters"] = s.counters;
  j["metrics"] = s.metrics;
  j["interleave"] = s.interleave;
  j["checks_only"] = s.checks_only;
}
inline void from_json(const json& j, settings& s) {
  detail::object_of(j, "settings");
  detail::read(j, "seeds", s.seeds);
  detail::read(j, "base_seed", s.base_seed);
  detail::read(j, "time_reference", s.time_reference);
  detail::read(j, "recheck", s.recheck);
  detail::read(j, "recompile", s.recompile);
  detail::read(j, "clock", s.clock);
  detail::read(j, "launch_timeout_ms", s.launch_timeout_ms);
  detail::read(j, "warmup_s", s.warmup_s);
  detail::read(j, "timing", s.timing);
  detail::read(j, "counters", s.counters);
  detail::read(j, "metrics", s.metrics);
  detail::read(j, "interleave", s.interleave);
  detail::read(j, "checks_only", s.checks_only);
  if (s.counters != "none" && s.counters != "default" && s.counters != "full")
    throw protocol_error(
        error_code::rejected,
        "settings.counters must be none, default or full, not \"" + s.counters + "\"");
  s.extra = json::object();
  for (const auto& [k, v] : j.items()) {
    bool known = false;
    for (const char* n : settings_keys) known = known || k == n;
    if (!known) s.extra[k] = v;
  }
}

// One subject to evaluate besides the reference.
struct subject {
  std::string role = "candidate";                  // baseline, seed, candidate, x, winner, ...
  json candidate = json::object();                 // the candidate format, source inlined
  std::map<std::string, std::int64_t> parameters;  // tunable values over the candidate's defaults
  bool operator==(const subject&) const = default;
};
inline void to_json(json& j, const subject& s) {
  j = {{"role", s.role}, {"candidate", s.candidate}};
  if (!s.parameters.empty()) j["parameters"] = s.parameters;
}
inline void from_json(const json& j, subject& s) {
  detail::object_of(j, "a subject");
  detail::read(j, "role", s.role);
  if (!j.contains("candidate") || !j.at("candidate").is_object())
    throw protocol_error(error_code::bad_request,
                         "subject '" + s.role + "' needs a \"candidate\" object");
  s.candidate = j.at("candidate");
  detail::read(j, "parameters", s.parameters);
}

struct evaluate_request {
  std::string id;
  json operator_snapshot = json::object();  // the operator config with sources inlined
  std::vector<subject> subjects;
  std::vector<std::string> workloads;  // ids; empty: every workload of the operator
  protocol::settings settings;
  bool operator==(const evaluate_request&) const = default;
};
struct calibrate_request {
  std::string id;
  bool operator==(const calibrate_request&) const = default;
};
struct ping_request {
  std::string id;
  bool operator==(const ping_request&) const = default;
};
struct shutdown_request {
  std::string id;
  bool operator==(const shutdown_request&) const = default;
};
using request = std::variant<evaluate_request, calibrate_request, ping_request, shutdown_request>;

inline void to_json(json& j, const evaluate_request& r) {
  j = {{"type", "evaluate"},
       {"protocol", version},
       {"id", r.id},
       {"operator", r.operator_snapshot},
       {"subjects", r.subjects},
       {"workloads", r.workloads},
       {"settings", r.settings}};
}
inline void to_json(json& j, const calibrate_request& r) {
  j = {{"type", "calibrate"}, {"protocol", version}, {"id", r.id}};
}
inline void to_json(json& j, const ping_request& r) {
  j = {{"type", "ping"}, {"protocol", version}, {"id", r.id}};
}
inline void to_json(json& j, const shutdown_request& r) {
  j = {{"type", "shutdown"}, {"protocol", version}, {"id", r.id}};
}
inline void to_json(json& j, const request& r) {
  std::visit([&](const auto& x) { to_json(j, x); }, r);
}

// The id of a request line, if it has one (to address the error answer to a
// request that does not parse).
inline std::string request_id(const json& j) {
  if (j.is_object())
    if (auto it = j.find("id"); it != j.end() && it->is_string()) return it->get<std::string>();
  return {};
}

// Reads one request line (already parsed as JSON). Throws protocol_error:
// unsupported_protocol for another or a missing version, bad_request for
// anything malformed, rejected for a bad setting value.
inline request parse_request(const json& j) {
  const std::string type = detail::type_of(j);
  if (!j.contains("protocol") || !j.at("protocol").is_number_integer())
    throw protocol_error(error_code::unsupported_protocol,
                         "the request carries no protocol version; this worker speaks protocol " +
                             std::to_string(version));
  check_version(j.at("protocol").get<int>(), "the request");
  std::string id;
  detail::read(j, "id", id);
  if (type == "evaluate") {
    evaluate_request r;
    r.id = id;
    if (!j.contains("operator") || !j.at("operator").is_object())
      throw protocol_error(error_code::bad_request, "evaluate needs an \"operator\" object");
    r.operator_snapshot = j.at("operator");
    detail::read(j, "subjects", r.subjects);
    detail::read(j, "workloads", r.workloads);
    detail::read(j, "settings", r.settings);
    return r;
  }
  if (type == "calibrate") return calibrate_request{id};
  if (type == "ping") return ping_request{id};
  if (type == "shutdown") return shutdown_request{id};
  throw protocol_error(error_code::bad_request, "unknown request type '" + type + "'");
}

// --- messages (worker -> kopt) ---------------------------------------------------

// First line of every worker, unasked.
struct hello {
  int protocol = version;
  bool ok = true;
  std::string error;             // why not ok (no usable GPU)
  json device = json::object();  // the device description (docs/worker-protocol.md)
  json calibration;              // measured peaks, {"skipped": ...}, or null
  std::string worker_version;
  // The launch floor of the default clock, measured before any request
  // (docs/worker-protocol.md, "hello"): {"clock", "median_ns", "kernel"}
  // as evaluator::launch_floor writes it, {"skipped": ...} in a profile-only
  // worker, {"error": ...} when it could not be measured, null from a
  // worker that does not measure it (an optional addition: version 2).
  json launch_floor;
  // Which GPU the worker took and why ({"spec":"auto","ordinal":..,"how":..});
  // null from a worker that does not say (docs/worker-protocol.md).
  json gpu_selection;
  bool operator==(const hello&) const = default;
};

// One subject's compilation (reference first).
struct compiled {
  std::string id, role;
  outcome status = outcome::ok;  // ok, compile_error, compile_timeout, rejected_format,
                                 // rejected_integrity, launch_error
  std::string message;
  json compile = json::object();  // compile metadata: log, kernels, cubin_hash, duration_ms, ...
  bool operator==(const compiled&) const = default;
};

struct workload_begin {
  std::string id, workload;
  bool operator==(const workload_begin&) const = default;
};

// One subject on one workload. `detail` holds the measurements as the
// evaluator wrote them (launches, correctness, timing, recheck,
// sample_check, counters); role, status and message are typed.
struct result {
  std::string role;
  outcome status = outcome::not_run;
  std::string message;
  json detail = json::object();
  bool operator==(const result&) const = default;
};

struct workload_result {
  std::string id, workload;
  std::vector<result> results;
  bool operator==(const workload_result&) const = default;
};

struct done {
  std::string id;
  bool operator==(const done&) const = default;
};

// The worker ends after this (a hang, a sticky CUDA error, a lost clock).
struct fatal {
  std::string id;
  outcome status = outcome::crashed;    // crashed, timeout or clock_lost
  std::string role, workload, message;  // role empty: no subject to blame
  bool operator==(const fatal&) const = default;
};

struct error {
  std::string id;  // empty when the request had none (not JSON)
  error_code code = error_code::rejected;
  std::string message;
  bool operator==(const error&) const = default;
};

struct calibrated {
  std::string id;
  json result = json::object();
  bool operator==(const calibrated&) const = default;
};

struct pong {
  std::string id;
  bool operator==(const pong&) const = default;
};

struct bye {
  std::string id;
  bool operator==(const bye&) const = default;
};

using message = std::variant<hello, compiled, workload_begin, workload_result, done, fatal, error,
                             calibrated, pong, bye>;

inline void to_json(json& j, const hello& m) {
  j = {{"type", "hello"}, {"protocol", m.protocol}, {"ok", m.ok}};
  if (!m.ok || !m.error.empty()) j["error"] = m.error;
  if (m.ok) {
    j["device"] = m.device;
    j["calibration"] = m.calibration;
    j["worker_version"] = m.worker_version;
    if (!m.launch_floor.is_null()) j["launch_floor"] = m.launch_floor;
  }
  if (!m.gpu_selection.is_null()) j["gpu_selection"] = m.gpu_selection;
}
inline void to_json(json& j, const compiled& m) {
  j = {{"type", "compiled"}, {"id", m.id},           {"role", m.role},
       {"status", m.status}, {"message", m.message}, {"compile", m.compile}};
}
inline void to_json(json& j, const workload_begin& m) {
  j = {{"type", "workload_begin"}, {"id", m.id}, {"workload", m.workload}};
}
inline void to_json(json& j, const result& r) {
  j = r.detail.is_object() ? r.detail : json::object();
  j["role"] = r.role;
  j["status"] = r.status;
  j["message"] = r.message;
}
inline void to_json(json& j, const workload_result& m) {
  j = {{"type", "workload_result"}, {"id", m.id}, {"workload", m.workload}, {"results", m.results}};
}
inline void to_json(json& j, const done& m) {
  j = {{"type", "done"}, {"id", m.id}};
}
inline void to_json(json& j, const fatal& m) {
  j = {{"type", "fatal"},        {"id", m.id},          {"status", m.status}, {"role", m.role},
       {"workload", m.workload}, {"message", m.message}};
}
inline void to_json(json& j, const error& m) {
  j = {{"type", "error"}, {"code", m.code}, {"message", m.message}};
  if (!m.id.empty()) j["id"] = m.id;
}
inline void to_json(json& j, const calibrated& m) {
  j = {{"type", "calibrated"}, {"id", m.id}, {"result", m.result}};
}
inline void to_json(json& j, const pong& m) {
  j = {{"type", "pong"}, {"id", m.id}};
}
inline void to_json(json& j, const bye& m) {
  j = {{"type", "bye"}, {"id", m.id}};
}
inline void to_json(json& j, const message& m) {
  std::visit([&](const auto& x) { to_json(j, x); }, m);
}

inline void from_json(const json& j, result& r) {
  detail::object_of(j, "a result");
  detail::read(j, "role", r.role);
  detail::read(j, "status", r.status);
  detail::read(j, "message", r.message);
  r.detail = j;
  r.detail.erase("role");
  r.detail.erase("status");
  r.detail.erase("message");
}

// Reads one worker line (already parsed as JSON). A hello of another
// protocol version is refused here (protocol_error unsupported_protocol);
// anything malformed is a protocol_error bad_request.
inline message parse_message(const json& j) {
  const std::string type = detail::type_of(j);
  std::string id;
  detail::read(j, "id", id);
  if (type == "hello") {
    hello m;
    if (!j.contains("protocol") || !j.at("protocol").is_number_integer())
      throw protocol_error(error_code::unsupported_protocol,
                           "the worker's hello carries no protocol version");
    m.protocol = j.at("protocol").get<int>();
    check_version(m.protocol, "the GPU worker");
    detail::read(j, "ok", m.ok);
    detail::read(j, "error", m.error);
    detail::read(j, "device", m.device);
    if (j.contains("calibration")) m.calibration = j.at("calibration");
    detail::read(j, "worker_version", m.worker_version);
    if (j.contains("launch_floor")) m.launch_floor = j.at("launch_floor");
    if (j.contains("gpu_selection")) m.gpu_selection = j.at("gpu_selection");
    return m;
  }
  if (type == "compiled") {
    compiled m;
    m.id = id;
    detail::read(j, "role", m.role);
    detail::read(j, "status", m.status);
    detail::read(j, "message", m.message);
    detail::read(j, "compile", m.compile);
    return m;
  }
  if (type == "workload_begin") {
    workload_begin m{id, {}};
    detail::read(j, "workload", m.workload);
    return m;
  }
  if (type == "workload_result") {
    workload_result m;
    m.id = id;
    detail::read(j, "workload", m.workload);
    detail::read(j, "results", m.results);
    return m;
  }
  if (type == "done") return done{id};
  if (type == "fatal") {
    fatal m;
    m.id = id;
    detail::read(j, "status", m.status);
    detail::read(j, "role", m.role);
    detail::read(j, "workload", m.workload);
    detail::read(j, "message", m.message);
    return m;
  }
  if (type == "error") {
    error m;
    m.id = id;
    detail::read(j, "code", m.code);
    detail::read(j, "message", m.message);
    return m;
  }
  if (type == "calibrated") {
    calibrated m{id, json::object()};
    if (j.contains("result")) m.result = j.at("result");
    return m;
  }
  if (type == "pong") return pong{id};
  if (type == "bye") return bye{id};
  throw protocol_error(error_code::bad_request, "unknown message type '" + type + "'");
}

// The id a message answers (empty for hello and for errors about lines
// without one).
inline std::string answer_id(const message& m) {
  return std::visit(
      [](const auto& x) -> std::string {
        if constexpr (requires { x.id; })
          return x.id;
        else
          return {};
      },
      m);
}

}  // namespace kopt::protocol
