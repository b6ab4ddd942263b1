// Parsing of the provider section (see docs/providers.md for the format).
#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "llm/provider.hpp"

namespace kopt::llm {
namespace {

using nlohmann::json;

void check_keys(const json& j, const std::string& where, std::initializer_list<const char*> known) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; })) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      throw config_error(where + "." + it.key() + " is not a known field (known: " + list + ")");
    }
  }
}

std::string get_string(const json& j, const char* key, const std::string& where,
                       std::string fallback = {}) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_string()) throw config_error(where + "." + key + " must be a string");
  return it->get<std::string>();
}

double get_number(const json& j, const char* key, const std::string& where, double fallback,
                  double min = 0) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < min) {
    throw config_error(where + "." + key + " must be a number >= " + std::to_string(min));
  }
  return it->get<double>();
}

std::chrono::milliseconds seconds(const json& j, const char* key, const std::string& where,
                                  std::chrono::milliseconds fallback) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  const double s = get_number(j, key, where, 0, 0.001);
  return std::chrono::milliseconds{static_cast<std::int64_t>(s * 1000.0)};
}

}  // namespace

provider_config parse_provider_config(const json& j, const std::filesystem::path& base_dir) {
  const std::string w = "llm";
  if (!j.is_object()) throw config_error("llm must be an object");
  check_keys(j, w,
             {"provider", "model", "base_url", "api_key_env", "api_key_file", "anthropic_version",
              "stream", "max_tokens", "temperature", "timeouts", "retry", "limits", "prices",
              "max_response_bytes", "ca_bundle", "command", "command_timeout_s", "max_output_bytes",
              "transcript"});
  provider_config c;
  c.kind = get_string(j, "provider", w, "autotune");
  if (c.kind != "openai" && c.kind != "anthropic" && c.kind != "command" && c.kind != "replay" &&
      c.kind != "autotune") {
    throw config_error("llm.provider is \"" + c.kind +
                       "\"; expected openai, anthropic, command, replay or autotune");
  }
  c.model = get_string(j, "model", w);
  c.base_url = get_string(j, "base_url", w);
  if (!c.base_url.empty() && c.base_url.rfind("https://", 0) != 0 &&
      c.base_url.rfind("http://", 0) != 0) {
    throw config_error("llm.base_url must start with https:// or http://");
  }
  c.api_key_env = get_string(j, "api_key_env", w);
  c.api_key_file = get_string(j, "api_key_file", w);
  // "$CREDENTIALS_DIRECTORY/..." is expanded when the key is read (systemd).
  if (!c.api_key_file.empty() && std::filesystem::path(c.api_key_file).is_relative() &&
      c.api_key_file[0] != '$' && !base_dir.empty()) {
    c.api_key_file = (base_dir / c.api_key_file).string();
  }
  if (j.contains("api_key"))
    throw config_error("llm.api_key is not accepted: name a variable with api_key_env");
  c.anthropic_version = get_string(j, "anthropic_version", w, c.anthropic_version);
  if (const auto s = j.find("stream"); s != j.end()) {
    if (!s->is_boolean()) throw config_error("llm.stream must be true or false");
    c.stream = s->get<bool>();
  }
  c.max_tokens = static_cast<std::int64_t>(
      get_number(j, "max_tokens", w, static_cast<double>(c.max_tokens), 1));
  if (j.contains("temperature")) c.temperature = get_number(j, "temperature", w, 0, 0);
  c.max_response_bytes = static_cast<std::size_t>(
      get_number(j, "max_response_bytes", w, static_cast<double>(c.max_response_bytes), 1024));
  c.ca_bundle = get_string(j, "ca_bundle", w);

  if (const auto t = j.find("timeouts"); t != j.end()) {
    if (!t->is_object()) throw config_error("llm.timeouts must be an object");
    check_keys(*t, "llm.timeouts", {"connect_s", "first_byte_s", "stall_s", "total_s"});
    c.timeouts.connect = seconds(*t, "connect_s", "llm.timeouts", c.timeouts.connect);
    c.timeouts.first_byte = seconds(*t, "first_byte_s", "llm.timeouts", c.timeouts.first_byte);
    c.timeouts.stall = seconds(*t, "stall_s", "llm.timeouts", c.timeouts.stall);
    c.timeouts.total = seconds(*t, "total_s", "llm.timeouts", c.timeouts.total);
  }
  if (const auto r = j.find("retry"); r != j.end()) {
    if (!r->is_object()) throw config_error("llm.retry must be an object");
    check_keys(*r, "llm.retry",
               {"max_attempts", "initial_delay_s", "max_delay_s", "max_retry_after_s", "jitter"});
    c.retry.max_attempts =
        static_cast<int>(get_number(*r, "max_attempts", "llm.retry", c.retry.max_attempts, 1));
    c.retry.initial_delay = seconds(*r, "initial_delay_s", "llm.retry", c.retry.initial_delay);
    c.retry.max_delay = seconds(*r, "max_delay_s", "llm.retry", c.retry.max_delay);
    c.retry.max_retry_after =
        seconds(*r, "max_retry_after_s", "llm.retry", c.retry.max_retry_after);
    c.retry.jitter = std::min(1.0, get_number(*r, "jitter", "llm.retry", c.retry.jitter));
  }
  if (const auto l = j.find("limits"); l != j.end()) {
    if (!l->is_object()) throw config_error("llm.limits must be an object");
    check_keys(*l, "llm.limits", {"concurrency", "requests_per_minute", "tokens_per_minute"});
    c.max_concurrency =
        static_cast<int>(get_number(*l, "concurrency", "llm.limits", c.max_concurrency, 1));
    if (l->contains("requests_per_minute")) {
      c.rate.requests_per_minute =
          static_cast<std::int64_t>(get_number(*l, "requests_per_minute", "llm.limits", 0, 1));
    }
    if (l->contains("tokens_per_minute")) {
      c.rate.tokens_per_minute =
          static_cast<std::int64_t>(get_number(*l, "tokens_per_minute", "llm.limits", 0, 1));
    }
  }
  if (const auto p = j.find("prices"); p != j.end()) c.prices = price_table::from_json(*p);

  if (const auto cmd = j.find("command"); cmd != j.end()) {
    if (!cmd->is_array() || cmd->empty() ||
        !std::all_of(cmd->begin(), cmd->end(), [](const json& a) { return a.is_string(); })) {
      throw config_error(
          "llm.command must be a non-empty list of strings: program and arguments, run without a "
          "shell");
    }
    for (const json& a : *cmd) c.command.push_back(a.get<std::string>());
  }
  c.command_timeout = seconds(j, "command_timeout_s", w, c.command_timeout);
  c.max_output_bytes = static_cast<std::size_t>(
      get_number(j, "max_output_bytes", w, static_cast<double>(c.max_output_bytes), 1));
  if (const std::string t = get_string(j, "transcript", w); !t.empty()) {
    c.transcript = std::filesystem::path(t).is_relative() && !base_dir.empty()
                       ? base_dir / t
                       : std::filesystem::path(t);
  }

  if ((c.kind == "openai" || c.kind == "anthropic") && c.model.empty()) {
    throw config_error("llm.model is required for provider " + c.kind);
  }
  if (c.kind == "command" && c.command.empty())
    throw config_error("llm.command is required for provider command");
  if (c.kind == "replay" && c.transcript.empty())
    throw config_error("llm.transcript is required for provider replay");
  return c;
}

}  // namespace kopt::llm
