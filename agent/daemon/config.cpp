#include "daemon/config.hpp"

#include <fmt/format.h>

#include <fstream>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "config/detail/json_locator.hpp"
#include "llm/provider.hpp"
#include "llm/router.hpp"

namespace kopt::daemon {

using json = nlohmann::json;

namespace {

class reader {
 public:
  reader(const json& j, std::string where, std::string file)
      : j_(j), where_(std::move(where)), file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw kopt::config_error(fmt::format("daemon config {}: {}{}: {}", file_, where_, key, what));
  }
  void only(std::initializer_list<const char*> keys) const {
    std::set<std::string> known(keys.begin(), keys.end());
    for (const auto& [k, v] : j_.items())
      if (!known.count(k)) {
        std::string list;
        for (const auto& x : known) list += (list.empty() ? "" : ", ") + x;
        fail(k, "unknown field (known: " + list + ")");
      }
  }
  bool has(const char* k) const { return j_.contains(k) && !j_.at(k).is_null(); }
  std::string str(const char* k, const std::string& def) const {
    if (!has(k)) return def;
    if (!j_.at(k).is_string()) fail(k, "must be a string, not " + j_.at(k).dump());
    return j_.at(k).get<std::string>();
  }
  double num(const char* k, double def, double lo, double hi) const {
    if (!has(k)) return def;
    if (!j_.at(k).is_number()) fail(k, "must be a number, not " + j_.at(k).dump());
    const double v = j_.at(k).get<double>();
    if (v < lo || v > hi) fail(k, fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    return v;
  }
  std::int64_t integer(const char* k, std::int64_t def, std::int64_t lo, std::int64_t hi) const {
    if (!has(k)) return def;
    if (!j_.at(k).is_number_integer()) fail(k, "must be an integer, not " + j_.at(k).dump());
    const auto v = j_.at(k).get<std::int64_t>();
    if (v < lo || v > hi) fail(k, fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    return v;
  }
  bool boolean(const char* k, bool def) const {
    if (!has(k)) return def;
    if (!j_.at(k).is_boolean()) fail(k, "must be true or false, not " + j_.at(k).dump());
    return j_.at(k).get<bool>();
  }
  std::vector<std::string> strings(const char* k) const {
    if (!has(k)) return {};
    const json& a = j_.at(k);
    if (!a.is_array()) fail(k, "must be an array of strings");
    std::vector<std::string> out;
    for (const auto& x : a) {
      if (!x.is_string()) fail(k, "must be an array of strings, has " + x.dump());
      out.push_back(x.get<std::string>());
    }
    return out;
  }
  reader sub(const char* k) const {
    static const json empty = json::object();
    if (!has(k)) return reader(empty, where_ + k + ".", file_);
    if (!j_.at(k).is_object()) fail(k, "must be an object");
    return reader(j_.at(k), where_ + k + ".", file_);
  }
  const json& raw() const { return j_; }

 private:
  const json& j_;
  std::string where_;
  std::string file_;
};

std::filesystem::path resolve(const std::filesystem::path& base, const std::string& p) {
  if (p.empty()) return {};
  std::filesystem::path x(p);
  return x.is_absolute() ? x : (base / x).lexically_normal();
}

}  // namespace

daemon_config parse_config(const json& j, const std::filesystem::path& file) {
  const std::string label = file.empty() ? std::string("(inline)") : file.string();
  if (!j.is_object())
    throw kopt::config_error("daemon config " + label + ": must be a JSON object");
  reader r(j, "", label);
  r.only({"state_dir", "database", "spool_dir", "gpus", "evaluator", "worker", "fake", "providers",
          "knowledge_base", "prompts_dir", "limits", "http", "log", "$comment"});
  daemon_config c;
  c.file = file;
  // Relative paths are relative to the config file, so that a config and its
  // state directory can move together.
  const auto base = file.empty() ? std::filesystem::current_path()
                                 : std::filesystem::absolute(file).parent_path();
  const std::string sd = r.str("state_dir", "");
  if (sd.empty())
    r.fail("state_dir", "is required (the directory that holds the database, spool and lock)");
  c.state_dir = resolve(base, sd);
  c.db_path = r.has("database") ? resolve(base, r.str("database", "")) : c.state_dir / "kopt.db";
  c.spool_dir = r.has("spool_dir") ? resolve(base, r.str("spool_dir", "")) : c.state_dir / "spool";

  if (r.has("gpus")) {
    const json& g = j.at("gpus");
    c.gpus.clear();
    if (g.is_number_integer()) {
      const auto n = g.get<std::int64_t>();
      if (n < 1 || n > 64) r.fail("gpus", "a count must be between 1 and 64");
      for (int i = 0; i < n; ++i) c.gpus.push_back(i);
    } else if (g.is_array() && !g.empty()) {
      std::set<int> seen;
      for (const auto& x : g) {
        if (!x.is_number_integer() || x.get<int>() < 0)
          r.fail("gpus", "must list GPU indexes (integers >= 0), has " + x.dump());
        if (!seen.insert(x.get<int>()).second) r.fail("gpus", "lists GPU " + x.dump() + " twice");
        c.gpus.push_back(x.get<int>());
      }
    } else {
      r.fail("gpus", "must be a count (e.g. 8) or a non-empty list of GPU indexes (e.g. [0, 1])");
    }
  }
  c.evaluator = r.str("evaluator", "worker");
  if (c.evaluator != "worker" && c.evaluator != "fake")
    r.fail("evaluator",
           "must be \"worker\" (GPU workers) or \"fake\" (tests only: no GPU, made-up times)");

  const reader w = r.sub("worker");
  w.only({"exe", "launch_prefix", "gpu", "cache_dir", "hello_timeout_s", "silence_timeout_s",
          "max_restarts", "seeds", "min_time_s", "max_time_s", "launch_timeout_ms", "peaks_file",
          "counters"});
  c.worker.exe = resolve(base, w.str("exe", "")).string();
  c.worker.launch_prefix = w.strings("launch_prefix");
  c.worker.gpu = w.str("gpu", "index");
  if (c.worker.gpu != "index" && c.worker.gpu != "auto")
    w.fail("gpu", "must be \"index\" (--gpu <slot>) or \"auto\" (the GPU Slurm gave the worker)");
  if (w.has("cache_dir"))
    c.worker.cache_dir = resolve(base, w.str("cache_dir", "")).string();
  else if (c.worker.launch_prefix.empty())
    c.worker.cache_dir = (c.state_dir / "cache").string();
  c.worker.hello_timeout_s = w.num("hello_timeout_s", 180, 1, 3600);
  c.worker.silence_timeout_s = w.num("silence_timeout_s", 600, 1, 86400);
  c.worker.max_restarts = static_cast<int>(w.integer("max_restarts", 8, 1, 1000));
  c.worker.seeds = static_cast<int>(w.integer("seeds", 3, 1, 100));
  c.worker.min_time_s = w.num("min_time_s", 0.1, 0, 60);
  c.worker.max_time_s = w.num("max_time_s", 1.0, 0, 600);
  c.worker.launch_timeout_ms = static_cast<int>(w.integer("launch_timeout_ms", 10000, 1, 3600000));
  c.worker.peaks_file = resolve(base, w.str("peaks_file", "")).string();
  c.worker.counters = w.str("counters", "default");
  if (c.worker.counters != "none" && c.worker.counters != "default" && c.worker.counters != "full")
    w.fail("counters", "must be \"none\", \"default\" or \"full\" (docs/counters.md)");

  const reader kbr = r.sub("knowledge_base");
  kbr.only({"directories"});
  for (const auto& d : kbr.strings("directories")) {
    if (d.empty()) kbr.fail("directories", "has an empty path");
    c.kb_directories.push_back(resolve(base, d));
  }
  c.prompts_dir = resolve(base, r.str("prompts_dir", ""));

  const reader f = r.sub("fake");
  f.only({"delay_ms", "noise_rsd"});
  c.fake.delay_ms = static_cast<int>(f.integer("delay_ms", 0, 0, 600000));
  c.fake.noise_rsd = f.num("noise_rsd", 0.01, 0, 1);

  if (r.has("providers")) {
    if (!j.at("providers").is_object())
      r.fail("providers", "must be an object of provider sections by name");
    for (const auto& [name, sec] : j.at("providers").items()) {
      static const std::set<std::string> known{"openai", "anthropic", "command", "replay"};
      if (!known.count(name))
        r.fail("providers." + name,
               "unknown provider (openai, anthropic, command, replay; autotune needs none)");
      json s = sec;
      if (!s.is_object()) r.fail("providers." + name, "must be an object (docs/providers.md)");
      if (!s.contains("provider")) s["provider"] = name;
      if (s.value("provider", "") != name)
        r.fail("providers." + name,
               "its \"provider\" must be \"" + name + "\" (sections are keyed by provider)");
      try {
        // The section may list several models (llm.models): each is checked,
        // and each one's key file is read at start.
        for (const auto& m : llm::parse_router_config(s, base).models)
          if (!m.cfg.api_key_file.empty()) c.api_key_files.emplace_back(m.cfg.api_key_file);
      } catch (const kopt::error& e) {
        r.fail("providers." + name, e.what());
      }
      c.providers[name] = s;
    }
  }

  const reader l = r.sub("limits");
  l.only({"max_active_campaigns", "max_step_failures", "backoff_initial_s", "backoff_max_s",
          "min_step_s", "min_step_iterations", "wal_checkpoint_s", "gc_interval_s", "gc_min_age_s",
          "spool_max_bytes", "spool_poll_ms", "shutdown_grace_s"});
  c.lim.max_active_campaigns = static_cast<int>(l.integer("max_active_campaigns", 0, 0, 4096));
  c.lim.max_step_failures = static_cast<int>(l.integer("max_step_failures", 5, 1, 1000));
  c.lim.backoff_initial_s = l.num("backoff_initial_s", 1, 0, 3600);
  c.lim.backoff_max_s = l.num("backoff_max_s", 300, 0, 86400);
  if (c.lim.backoff_max_s < c.lim.backoff_initial_s)
    l.fail("backoff_max_s", "is smaller than backoff_initial_s");
  c.lim.min_step_s = l.num("min_step_s", 2, 0, 86400);
  c.lim.min_step_iterations = static_cast<int>(l.integer("min_step_iterations", 1, 1, 100000));
  c.lim.wal_checkpoint_s = l.num("wal_checkpoint_s", 30, 0, 86400);
  c.lim.gc_interval_s = l.num("gc_interval_s", 0, 0, 30 * 86400);
  c.lim.gc_min_age_s = l.num("gc_min_age_s", 86400, 0, 3650 * 86400.0);
  c.lim.spool_max_bytes = l.integer("spool_max_bytes", 4 << 20, 1, std::int64_t{1} << 32);
  c.lim.spool_poll_ms = static_cast<int>(l.integer("spool_poll_ms", 1000, 10, 3600000));
  c.lim.shutdown_grace_s = l.num("shutdown_grace_s", 8, 0, 3600);

  const reader h = r.sub("http");
  h.only({"enabled", "address", "port", "slice_us"});
  c.http.enabled = h.boolean("enabled", true);
  c.http.address = h.str("address", "127.0.0.1");
  c.http.port = static_cast<int>(h.integer("port", 8719, 0, 65535));
  c.http.slice_us = static_cast<int>(h.integer("slice_us", 200, 0, 100000));

  const reader g = r.sub("log");
  g.only({"format", "level"});
  c.log.format = g.str("format", "text");
  if (c.log.format != "text" && c.log.format != "json")
    g.fail("format", "must be \"text\" or \"json\"");
  c.log.level = g.str("level", "info");
  static const std::set<std::string> levels{"trace", "debug", "info", "warn", "error"};
  if (!levels.count(c.log.level)) g.fail("level", "must be one of trace, debug, info, warn, error");
  return c;
}

daemon_config load_config(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw kopt::config_error("daemon config " + file.string() + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  return load_config_text(ss.str(), file);
}

daemon_config load_config_text(std::string_view text, const std::filesystem::path& file) {
  // The operator configs' scanner: syntax errors with line:column, every
  // duplicate key (nlohmann keeps the last one silently, so a second
  // "state_dir" would win unnoticed) and numbers no double holds.
  const config::detail::json_locator loc(text);
  if (!loc.problems().empty()) {
    std::string all;
    for (const auto& p : loc.problems())
      all += fmt::format("{}daemon config {}:{}:{}: {}", all.empty() ? "" : "\n", file.string(),
                         p.where.line, p.where.column, p.message);
    throw kopt::config_error(all);
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw kopt::config_error("daemon config " + file.string() + ": not valid JSON: " + e.what());
  }
  return parse_config(j, file);
}

namespace {

double secs(std::chrono::milliseconds ms) {
  return static_cast<double>(ms.count()) / 1000.0;
}

// A provider section with every default filled in, as parse_provider_config
// reads it (prices stay as written: they are a table, not defaults).
json provider_json(const json& section, const llm::provider_config& p) {
  json j = {{"provider", p.kind},
            {"model", p.model},
            {"base_url", p.base_url},
            {"api_key_env", p.api_key_env},
            {"api_key_file", p.api_key_file},
            {"anthropic_version", p.anthropic_version},
            {"stream", p.stream},
            {"max_tokens", p.max_tokens},
            {"temperature", p.temperature ? json(*p.temperature) : json(nullptr)},
            {"timeouts",
             {{"connect_s", secs(p.timeouts.connect)},
              {"first_byte_s", secs(p.timeouts.first_byte)},
              {"stall_s", secs(p.timeouts.stall)},
              {"total_s", secs(p.timeouts.total)}}},
            {"retry",
             {{"max_attempts", p.retry.max_attempts},
              {"initial_delay_s", secs(p.retry.initial_delay)},
              {"max_delay_s", secs(p.retry.max_delay)},
              {"max_retry_after_s", secs(p.retry.max_retry_after)},
              {"jitter", p.retry.jitter}}},
            {"limits",
             {{"concurrency", p.max_concurrency},
              {"requests_per_minute",
               p.rate.requests_per_minute ? json(*p.rate.requests_per_minute) : json(nullptr)},
              {"tokens_per_minute",
               p.rate.tokens_per_minute ? json(*p.rate.tokens_per_minute) : json(nullptr)}}},
            {"prices", section.contains("prices") ? section.at("prices") : json(nullptr)},
            {"max_response_bytes", p.max_response_bytes},
            {"ca_bundle", p.ca_bundle},
            {"command", p.command},
            {"command_timeout_s", secs(p.command_timeout)},
            {"max_output_bytes", p.max_output_bytes},
            {"transcript", p.transcript.string()}};
  return j;
}

bool loopback_address(const std::string& a) {
  return a == "localhost" || a == "::1" || a.rfind("127.", 0) == 0;
}

}  // namespace

std::vector<std::string> config_warnings(const daemon_config& c) {
  std::vector<std::string> out;
  if (c.http.enabled && !loopback_address(c.http.address))
    out.push_back(fmt::format(
        "http.address is \"{}\": the HTTP endpoint has NO authentication, and on an address "
        "other machines can reach, anyone who can connect to port {} reads every campaign, "
        "operator config and kernel source in the store. Keep it on 127.0.0.1 behind an "
        "authenticating reverse proxy, or set http.enabled to false",
        c.http.address, c.http.port));
  return out;
}

json daemon_config::limits_json() const {
  return {{"max_active_campaigns", active_limit()},
          {"max_step_failures", lim.max_step_failures},
          {"backoff_initial_s", lim.backoff_initial_s},
          {"backoff_max_s", lim.backoff_max_s},
          {"min_step_s", lim.min_step_s},
          {"min_step_iterations", lim.min_step_iterations},
          {"wal_checkpoint_s", lim.wal_checkpoint_s},
          {"gc_interval_s", lim.gc_interval_s},
          {"gc_min_age_s", lim.gc_min_age_s},
          {"spool_max_bytes", lim.spool_max_bytes},
          {"spool_poll_ms", lim.spool_poll_ms},
          {"shutdown_grace_s", lim.shutdown_grace_s}};
}

json daemon_config::to_json() const {
  json kb_dirs = json::array();
  for (const auto& d : kb_directories) kb_dirs.push_back(d.string());
  json prov = json::object();
  const auto base = file.empty() ? std::filesystem::current_path()
                                 : std::filesystem::absolute(file).parent_path();
  for (const auto& [k, v] : providers) {
    try {
      prov[k] = provider_json(v, llm::parse_provider_config(v, base));
    } catch (const kopt::error&) {
      prov[k] = v;  // checked at load; kept as written if it no longer parses
    }
  }
  return {{"file", file.string()},
          {"state_dir", state_dir.string()},
          {"database", db_path.string()},
          {"spool_dir", spool_dir.string()},
          {"gpus", gpus},
          {"evaluator", evaluator},
          {"worker",
           {{"exe", worker.exe},
            {"launch_prefix", worker.launch_prefix},
            {"gpu", worker.gpu},
            {"cache_dir", worker.cache_dir},
            {"hello_timeout_s", worker.hello_timeout_s},
            {"silence_timeout_s", worker.silence_timeout_s},
            {"max_restarts", worker.max_restarts},
            {"seeds", worker.seeds},
            {"min_time_s", worker.min_time_s},
            {"max_time_s", worker.max_time_s},
            {"launch_timeout_ms", worker.launch_timeout_ms},
            {"peaks_file", worker.peaks_file},
            {"counters", worker.counters}}},
          {"fake", {{"delay_ms", fake.delay_ms}, {"noise_rsd", fake.noise_rsd}}},
          {"providers", std::move(prov)},
          {"knowledge_base", {{"directories", kb_dirs}}},
          {"prompts_dir", prompts_dir.string()},
          {"limits", limits_json()},
          {"http",
           {{"enabled", http.enabled},
            {"address", http.address},
            {"port", http.port},
            {"slice_us", http.slice_us}}},
          {"log", {{"format", log.format}, {"level", log.level}}}};
}

}  // namespace kopt::daemon
