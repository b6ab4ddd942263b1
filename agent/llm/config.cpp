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

// Every number of the section ends up as an int, an int64 or a count of
// milliseconds: the upper bound keeps those conversions defined (found by
// fuzzing the daemon config: "connect_s": 1e300 was undefined behaviour in
// the cast to milliseconds). No setting needs more than 1e9.
constexpr double max_setting = 1e9;

double get_number(const json& j, const char* key, const std::string& where, double fallback,
                  double min = 0) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < min ||
      it->get<double>() > max_setting) {
    throw config_error(where + "." + key + " must be a number between " + std::to_string(min) +
                       " and 1e9");
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

// The fields for reasoning models, caching and gateways (docs/providers.md).
void parse_reasoning_fields(const json& j, provider_config& c) {
  const bool openai = c.kind == "openai";
  const bool anthropic = c.kind == "anthropic";
  c.api = get_string(j, "api", "llm", c.api);
  if (c.api != "chat" && c.api != "responses")
    throw config_error("llm.api is \"" + c.api + "\"; expected chat or responses");
  if (c.api == "responses" && !openai && j.contains("api"))
    throw config_error("llm.api \"responses\" is OpenAI's Responses API: it needs provider openai");
  c.max_tokens_field = get_string(j, "max_tokens_field", "llm", c.max_tokens_field);
  if (c.max_tokens_field != "auto" && c.max_tokens_field != "max_tokens" &&
      c.max_tokens_field != "max_completion_tokens") {
    throw config_error("llm.max_tokens_field is \"" + c.max_tokens_field +
                       "\"; expected auto, max_tokens or max_completion_tokens");
  }
  c.reasoning_effort = get_string(j, "reasoning_effort", "llm");
  if (!c.reasoning_effort.empty()) {
    static const char* known[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
    if (std::none_of(std::begin(known), std::end(known),
                     [&](const char* k) { return c.reasoning_effort == k; })) {
      throw config_error("llm.reasoning_effort is \"" + c.reasoning_effort +
                         "\"; expected none, minimal, low, medium, high or xhigh");
    }
    if (!openai)
      throw config_error(
          "llm.reasoning_effort is an OpenAI field; for provider anthropic use "
          "llm.thinking.budget_tokens");
  }
  if (const auto e = j.find("extra_body"); e != j.end()) {
    if (!e->is_object())
      throw config_error("llm.extra_body must be an object (merged into each request body)");
    // Fields whose answer kopt parses or that it sets per call: a gateway
    // field must not change the shape of the response.
    for (const char* owned :
         {"model", "messages", "input", "instructions", "system", "stream", "stream_options", "n",
          "max_tokens", "max_completion_tokens", "max_output_tokens"}) {
      if (e->contains(owned)) {
        throw config_error(std::string("llm.extra_body.") + owned +
                           " is set by kopt itself; use the llm field for it (max_tokens, "
                           "stream, n, model) or leave it out");
      }
    }
    c.extra_body = *e;
  }
  if (const auto n = j.find("n"); n != j.end()) {
    if (!n->is_number_integer() || n->get<std::int64_t>() < 1 || n->get<std::int64_t>() > 16)
      throw config_error("llm.n must be an integer from 1 to 16 (answers per call)");
    c.n = n->get<int>();
    if (c.n > 1 && (!openai || c.api != "chat"))
      throw config_error(
          "llm.n > 1 needs provider openai with api chat (the Responses and "
          "Anthropic APIs give one answer per call)");
  }
  if (const auto t = j.find("thinking"); t != j.end()) {
    if (!anthropic)
      throw config_error(
          "llm.thinking is Anthropic's extended thinking; for OpenAI models use "
          "llm.reasoning_effort (or extra_body for other servers)");
    if (t->is_boolean() && !t->get<bool>()) {
      c.thinking_budget_tokens = 0;
    } else {
      if (!t->is_object())
        throw config_error("llm.thinking must be {\"budget_tokens\": N} (or false)");
      check_keys(*t, "llm.thinking", {"type", "budget_tokens"});
      const std::string type = get_string(*t, "type", "llm.thinking", "enabled");
      if (type != "enabled" && type != "disabled")
        throw config_error("llm.thinking.type must be enabled or disabled");
      if (type == "enabled") {
        if (!t->contains("budget_tokens"))
          throw config_error("llm.thinking.budget_tokens is required (at least 1024)");
        c.thinking_budget_tokens =
            static_cast<std::int64_t>(get_number(*t, "budget_tokens", "llm.thinking", 0, 1024));
      }
    }
  }
  if (const auto pc = j.find("prompt_cache"); pc != j.end()) {
    if (!pc->is_boolean()) throw config_error("llm.prompt_cache must be true or false");
    c.prompt_cache = pc->get<bool>();
  }
  c.cache_ttl = get_string(j, "cache_ttl", "llm");
  if (!c.cache_ttl.empty() && c.cache_ttl != "5m" && c.cache_ttl != "1h")
    throw config_error("llm.cache_ttl must be \"5m\" or \"1h\"");
  if (c.cache_ttl == "5m") c.cache_ttl.clear();  // the API's default: send nothing
}

}  // namespace

provider_config parse_provider_config(const json& j, const std::filesystem::path& base_dir) {
  const std::string w = "llm";
  if (!j.is_object()) throw config_error("llm must be an object");
  check_keys(j, w,
             {"provider", "model", "base_url", "api_key_env", "api_key_file", "anthropic_version",
              "stream", "max_tokens", "temperature", "timeouts", "retry", "limits", "prices",
              "max_response_bytes", "ca_bundle", "command", "command_timeout_s", "max_output_bytes",
              "transcript", "api", "max_tokens_field", "reasoning_effort", "extra_body", "n",
              "thinking", "prompt_cache", "cache_ttl",
              // read by parse_router_config (router.hpp), not here:
              "models", "selection", "escalation", "diversity"});
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

  parse_reasoning_fields(j, c);

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
