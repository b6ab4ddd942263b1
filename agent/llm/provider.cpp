#include "llm/provider.hpp"

#include <spdlog/spdlog.h>

#include <fstream>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "llm/recorder.hpp"

namespace kopt::llm {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

std::string strip_slashes(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string describe(const api_error& e) {
  std::string out;
  if (!e.type.empty()) out += e.type;
  if (!e.code.empty() && e.code != e.type) out += (out.empty() ? "" : "/") + e.code;
  if (!e.message.empty()) out += (out.empty() ? "" : ": ") + e.message.substr(0, 2000);
  return out;
}

call_status status_for(failure_kind k, transport_error t) {
  switch (k) {
    case failure_kind::fatal:
      return call_status::permanent;
    case failure_kind::invalid_request:
      return call_status::invalid_request;
    case failure_kind::give_up:
    case failure_kind::retryable:
      if (t == transport_error::timeout_first_byte || t == transport_error::timeout_stall ||
          t == transport_error::timeout_total || t == transport_error::connect) {
        return t == transport_error::connect ? call_status::transient : call_status::timeout;
      }
      return call_status::transient;
  }
  return call_status::transient;
}

// One attempt's verdict.
struct attempt_outcome {
  bool ok = false;
  failure_kind kind = failure_kind::retryable;
  transport_error transport = transport_error::none;
  bool bad_response = false;
  std::string error;
  parsed_answer answer;
  bool usage_reported = false;
  usage billed;  // what this attempt may have cost even if it failed
};

}  // namespace

std::int64_t estimate_tokens(std::size_t bytes) noexcept {
  return static_cast<std::int64_t>((bytes + 3) / 4);
}

std::int64_t worst_case_prompt_tokens(const request& r) noexcept {
  std::size_t bytes = r.system.size() + 16;
  for (const message& m : r.messages) bytes += m.content.size() + 16;
  return static_cast<std::int64_t>(bytes);
}

std::string endpoint_url(const provider_config& cfg) {
  if (cfg.kind == "openai") {
    const std::string base =
        strip_slashes(cfg.base_url.empty() ? "https://api.openai.com/v1" : cfg.base_url);
    const std::string path = cfg.api == "responses" ? "/responses" : "/chat/completions";
    return ends_with(base, path) ? base : base + path;
  }
  if (cfg.kind == "anthropic") {
    std::string base =
        strip_slashes(cfg.base_url.empty() ? "https://api.anthropic.com" : cfg.base_url);
    if (ends_with(base, "/v1/messages")) return base;
    if (ends_with(base, "/v1")) return base + "/messages";
    return base + "/v1/messages";
  }
  return {};
}

// ---------------------------------------------------------------- http_provider

http_provider::http_provider(std::string name, const provider_config& cfg, std::string endpoint,
                             std::string key, http_transport& transport, time_source& time)
    : provider(std::move(name), cfg.model),
      cfg_(cfg),
      endpoint_(std::move(endpoint)),
      key_(std::move(key)),
      transport_(transport),
      time_(time),
      limiter_(cfg.rate, time) {
  redact_.add(key_);
}

capabilities http_provider::caps() const {
  return {true, true, true, true, false};
}

std::vector<std::string> http_provider::secrets() const {
  if (key_.empty()) return {};
  return {key_};
}

completion http_provider::complete(const request& r) {
  completion out;
  const auto started = time_.now();
  const auto real_start = std::chrono::steady_clock::now();
  http_request hr;
  hr.url = endpoint_;
  hr.headers = headers();
  hr.body = body(r).dump(-1, ' ', false, json::error_handler_t::replace);
  hr.timeouts = cfg_.timeouts;
  if (cfg_.stream) hr.timeouts.first_byte = std::min(hr.timeouts.first_byte, hr.timeouts.stall);
  hr.max_response_bytes = cfg_.max_response_bytes;
  hr.ca_bundle = cfg_.ca_bundle;
  const std::int64_t prompt_estimate = estimate_tokens(hr.body.size());
  const int max_attempts = std::max(1, cfg_.retry.max_attempts);

  for (int attempt = 1;; ++attempt) {
    limiter_.acquire(prompt_estimate + worst_case_output_tokens(r));
    out.attempts = attempt;

    attempt_outcome a;
    sse_parser sse(cfg_.max_response_bytes);
    std::unique_ptr<stream_accumulator> acc = cfg_.stream ? make_accumulator() : nullptr;
    std::string raw;  // the streamed bytes, in case the server ignored stream:true
    std::vector<sse_event> events;
    body_consumer consumer;
    if (cfg_.stream) {
      consumer = [&](std::string_view bytes) {
        raw.append(bytes);
        events.clear();
        if (!sse.feed(bytes, events)) return false;
        for (const sse_event& e : events) acc->on_event(e);
        return true;
      };
    }
    const http_response resp = transport_.post(hr, consumer);
    out.http_status = resp.status;
    const bool success_status = resp.status >= 200 && resp.status < 300;
    const bool json_body =
        resp.headers.count("content-type") != 0 &&
        resp.headers.at("content-type").find("application/json") != std::string::npos;

    if (resp.error == transport_error::tls) {
      a.kind = failure_kind::fatal;
      a.transport = resp.error;
      a.error =
          "TLS failure talking to " + endpoint_ + ": " + resp.error_text +
          " (kopt always verifies certificates; set ca_bundle if your gateway uses a private CA)";
    } else if (resp.error == transport_error::too_large) {
      a.kind = failure_kind::give_up;
      a.bad_response = true;
      a.error = "response too large: more than " + std::to_string(cfg_.max_response_bytes) +
                " bytes (max_response_bytes)";
    } else if (resp.error != transport_error::none &&
               !(success_status && cfg_.stream && acc->failed())) {
      a.kind = failure_kind::retryable;
      a.transport = resp.error;
      a.error = std::string(transport_error_name(resp.error)) + ": " + resp.error_text;
      if (cfg_.stream && success_status) {
        a.error = "stream cut before its end (" + a.error + ")";
        if (acc->usage_seen()) a.billed = acc->answer().tokens;
        a.billed.completion =
            std::max(a.billed.completion, estimate_tokens(acc->answer().text.size()));
      }
    } else if (!success_status) {
      const api_error err = parse_api_error(resp.body);
      a.kind = classify_http_failure(resp.status, resp.headers, err);
      a.error = "HTTP " + std::to_string(resp.status);
      if (!err.empty())
        a.error += ": " + describe(err);
      else if (!resp.body.empty())
        a.error += ": " + resp.body.substr(0, 500);
      if (resp.status >= 300 && resp.status < 400 && resp.headers.count("location") != 0) {
        a.error +=
            " (redirect to " + resp.headers.at("location") + "; set base_url to the final address)";
      }
    } else {
      parse_result pr;
      bool streamed_ok = false;
      if (cfg_.stream && !json_body) {
        if (acc->failed()) {
          if (!acc->error().empty()) {
            a.kind = classify_stream_error(acc->error());
            a.error = "error event in a 200 stream: " + describe(acc->error());
          } else {
            a.kind = failure_kind::retryable;
            a.bad_response = true;
            a.error = "malformed stream: " + acc->problem();
          }
          if (acc->usage_seen()) a.billed = acc->answer().tokens;
        } else if (!acc->done()) {
          a.kind = failure_kind::retryable;
          a.error = "stream ended before its final event";
          if (acc->usage_seen()) a.billed = acc->answer().tokens;
          a.billed.completion =
              std::max(a.billed.completion, estimate_tokens(acc->answer().text.size()));
        } else {
          streamed_ok = true;
          pr.ok = true;
          pr.answer = acc->answer();
          a.usage_reported = acc->usage_seen();
        }
      } else {
        pr = parse(cfg_.stream ? std::string_view(raw) : std::string_view(resp.body));
        if (!pr.ok && !pr.error.empty()) {
          a.kind = classify_stream_error(pr.error);
          a.error = "error in a 200 response: " + describe(pr.error);
        } else if (!pr.ok) {
          a.kind = failure_kind::retryable;
          a.bad_response = true;
          a.error = "malformed response: " + pr.problem;
        } else {
          a.usage_reported = pr.answer.tokens.reported;
        }
      }
      if (pr.ok || streamed_ok) {
        a.ok = true;
        a.answer = std::move(pr.answer);
      }
    }

    if (a.ok) {
      out.status = call_status::ok;
      out.text = std::move(a.answer.text);
      out.texts = std::move(a.answer.texts);
      out.reasoning = std::move(a.answer.reasoning);
      out.stop_reason = std::move(a.answer.stop_reason);
      out.model = a.answer.model.empty() ? model() : std::move(a.answer.model);
      usage u = a.answer.tokens;
      if (!a.usage_reported) {
        // The API gave no usage (a stream without include_usage support):
        // estimate, so that the budget still moves.
        u.prompt = prompt_estimate;
        std::size_t answer_bytes = out.text.size() + out.reasoning.size();
        for (std::size_t i = 1; i < out.texts.size(); ++i) answer_bytes += out.texts[i].size();
        u.completion = estimate_tokens(answer_bytes);
        u.reported = false;
      }
      out.tokens += u;
      out.error.clear();
      break;
    }

    out.tokens += a.billed;
    out.error = redact_.apply(a.error);
    const bool retry = a.kind == failure_kind::retryable && attempt < max_attempts;
    if (!retry) {
      out.status = a.bad_response && a.kind != failure_kind::fatal
                       ? call_status::bad_response
                       : status_for(a.kind, a.transport);
      if (a.kind == failure_kind::retryable && max_attempts > 1) {
        out.error += " (gave up after " + std::to_string(attempt) + " attempts)";
      }
      break;
    }
    double unit = 0;
    {
      std::lock_guard lock(rng_mu_);
      unit = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    }
    const milliseconds delay =
        retry_delay(cfg_.retry, attempt, unit, resp.headers, time_.wall_now());
    spdlog::warn("llm {}: attempt {}/{} failed ({}); retrying in {} ms", name(), attempt,
                 max_attempts, out.error, delay.count());
    time_.sleep_for(delay);
  }
  // Latency: real time, plus the waits when they went through a simulated clock.
  out.latency =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - real_start);
  if (&time_ != &default_time())
    out.latency += std::chrono::duration_cast<milliseconds>(time_.now() - started);
  return out;
}

// ---------------------------------------------------------------- openai

openai_provider::openai_provider(const provider_config& cfg, std::string key,
                                 http_transport& transport, time_source& time)
    : http_provider("openai", cfg, endpoint_url(cfg), std::move(key), transport, time) {}

std::vector<std::string> openai_provider::headers() const {
  std::vector<std::string> h = {"Content-Type: application/json",
                                "Accept: application/json, text/event-stream",
                                "User-Agent: kopt/0.1"};
  if (!key().empty()) h.push_back("Authorization: Bearer " + key());
  return h;
}

openai_options openai_provider::options_for(const provider_config& cfg) {
  openai_options o;
  const bool reasoning = is_openai_reasoning_model(cfg.model) || !cfg.reasoning_effort.empty();
  o.max_tokens_field = cfg.max_tokens_field == "auto"
                           ? (reasoning ? "max_completion_tokens" : "max_tokens")
                           : cfg.max_tokens_field;
  o.reasoning_effort = cfg.reasoning_effort;
  // OpenAI's reasoning models answer 400 to any temperature; a model behind
  // another server with reasoning_effort set may take one, so only the
  // model family decides.
  o.send_temperature = !is_openai_reasoning_model(cfg.model);
  o.extra_body = cfg.extra_body;
  return o;
}

int openai_provider::answers_per_call() const {
  return config().api == "responses" ? 1 : std::max(1, config().n);
}

std::int64_t openai_provider::worst_case_output_tokens(const request& r) const {
  const int n = config().api == "responses" ? 1 : std::max(1, r.n > 0 ? r.n : config().n);
  return r.max_tokens * n;
}

json openai_provider::body(const request& r) const {
  request q = r;
  if (!q.temperature) q.temperature = config().temperature;
  if (q.n <= 0) q.n = config().n;
  if (config().api == "responses") {
    q.n = 1;  // the Responses API has no n
    return responses_request_body(q, model(), config().stream, options_for(config()));
  }
  return openai_request_body(q, model(), config().stream, options_for(config()));
}

parse_result openai_provider::parse(std::string_view b) const {
  return config().api == "responses" ? parse_responses_response(b) : parse_openai_response(b);
}

std::unique_ptr<stream_accumulator> openai_provider::make_accumulator() const {
  if (config().api == "responses") return std::make_unique<responses_stream_accumulator>();
  return std::make_unique<openai_stream_accumulator>();
}

// ---------------------------------------------------------------- anthropic

anthropic_provider::anthropic_provider(const provider_config& cfg, std::string key,
                                       http_transport& transport, time_source& time)
    : http_provider("anthropic", cfg, endpoint_url(cfg), std::move(key), transport, time) {}

std::vector<std::string> anthropic_provider::headers() const {
  std::vector<std::string> h = {
      "Content-Type: application/json", "Accept: application/json, text/event-stream",
      "User-Agent: kopt/0.1", "anthropic-version: " + config().anthropic_version};
  if (!key().empty()) h.push_back("x-api-key: " + key());
  return h;
}

anthropic_options anthropic_provider::options_for(const provider_config& cfg) {
  anthropic_options o;
  o.thinking_budget_tokens = cfg.thinking_budget_tokens;
  o.prompt_cache = cfg.prompt_cache;
  o.cache_ttl = cfg.cache_ttl;
  o.extra_body = cfg.extra_body;
  return o;
}

std::int64_t anthropic_provider::worst_case_output_tokens(const request& r) const {
  return r.max_tokens + config().thinking_budget_tokens;
}

json anthropic_provider::body(const request& r) const {
  request q = r;
  if (!q.temperature) q.temperature = config().temperature;
  return anthropic_request_body(q, model(), config().stream, options_for(config()));
}

parse_result anthropic_provider::parse(std::string_view b) const {
  return parse_anthropic_response(b);
}

std::unique_ptr<stream_accumulator> anthropic_provider::make_accumulator() const {
  return std::make_unique<anthropic_stream_accumulator>();
}

// ---------------------------------------------------------------- replay

replay_provider::replay_provider(const provider_config& cfg) : provider("replay", cfg.model) {
  std::ifstream in(cfg.transcript);
  if (!in) throw config_error("cannot open replay transcript " + cfg.transcript.string());
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("response") ||
        !j["response"].is_string()) {
      throw config_error(cfg.transcript.string() + ":" + std::to_string(n) +
                         ": each line must be a JSON object with a string \"response\"");
    }
    if (j.contains("prompt_sha256") && j["prompt_sha256"].is_string() &&
        !j["prompt_sha256"].get<std::string>().empty()) {
      by_prompt_[j["prompt_sha256"].get<std::string>()].push_back(std::move(j));
    } else {
      in_order_.push_back(std::move(j));
    }
  }
}

completion replay_provider::complete(const request& r) {
  const std::string hash =
      sha256_hex(prompt_json(r).dump(-1, ' ', false, json::error_handler_t::replace));
  json entry;
  {
    std::lock_guard lock(mu_);
    if (const auto it = by_prompt_.find(hash); it != by_prompt_.end()) {
      std::size_t& next = next_by_prompt_[hash];
      entry =
          it->second[std::min(next, it->second.size() - 1)];  // repeat the last when asked again
      ++next;
    } else if (next_ < in_order_.size()) {
      entry = in_order_[next_++];
    }
  }
  completion out;
  out.attempts = 1;
  out.model = model();
  if (entry.is_null()) {
    out.status = call_status::bad_response;
    out.error = "the replay transcript has no answer for this prompt (sha256 " + hash +
                ") and no unmatched lines left";
    return out;
  }
  out.text = entry["response"].get<std::string>();
  if (entry.contains("reasoning") && entry["reasoning"].is_string())
    out.reasoning = entry["reasoning"];
  if (entry.contains("stop_reason") && entry["stop_reason"].is_string())
    out.stop_reason = entry["stop_reason"];
  if (entry.contains("model") && entry["model"].is_string() &&
      !entry["model"].get<std::string>().empty()) {
    out.model = entry["model"];
  }
  if (entry.contains("status") && entry["status"].is_string() && entry["status"] != "ok") {
    const std::string s = entry["status"];
    out.status = s == "permanent" ? call_status::permanent
                 : s == "timeout" ? call_status::timeout
                                  : call_status::transient;
    out.error = entry.value("error", std::string("replayed failure"));
  }
  if (const auto u = entry.find("usage"); u != entry.end() && u->is_object()) {
    out.tokens.prompt = u->value("prompt", std::int64_t{0});
    out.tokens.completion = u->value("completion", std::int64_t{0});
    out.tokens.cached = u->value("cached", std::int64_t{0});
    out.tokens.cache_write = u->value("cache_write", std::int64_t{0});
    out.tokens.reasoning = u->value("reasoning", std::int64_t{0});
    out.tokens.reported = true;
  }
  return out;
}

// ---------------------------------------------------------------- autotune

completion autotune_provider::complete(const request&) {
  completion out;
  out.status = call_status::no_llm;
  out.error = "the autotune provider calls no LLM; it only searches the seed's tunable parameters";
  return out;
}

// ---------------------------------------------------------------- factory

std::unique_ptr<provider> make_provider(const provider_config& cfg, http_transport* transport,
                                        time_source* time) {
  static curl_transport* shared = nullptr;
  static std::once_flag once;
  if (transport == nullptr && (cfg.kind == "openai" || cfg.kind == "anthropic")) {
    std::call_once(once, [] { shared = new curl_transport(); });  // lives for the process
    transport = shared;
  }
  if (time == nullptr) time = &default_time();
  if (cfg.kind == "openai" || cfg.kind == "anthropic") {
    if (cfg.model.empty()) throw config_error("llm.model is required for provider " + cfg.kind);
    std::string key;
    const bool vendor_url = cfg.base_url.empty();
    std::string env = cfg.api_key_env;
    if (env.empty() && cfg.api_key_file.empty() && vendor_url) {
      env = cfg.kind == "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY";
    }
    // A local server (vLLM, llama.cpp, Ollama) needs no key: only read one when named.
    if (!env.empty() || !cfg.api_key_file.empty()) key = load_api_key(env, cfg.api_key_file);
    if (cfg.kind == "openai")
      return std::make_unique<openai_provider>(cfg, std::move(key), *transport, *time);
    return std::make_unique<anthropic_provider>(cfg, std::move(key), *transport, *time);
  }
  if (cfg.kind == "command") return std::make_unique<command_provider>(cfg);
  if (cfg.kind == "replay") return std::make_unique<replay_provider>(cfg);
  if (cfg.kind == "autotune") return std::make_unique<autotune_provider>();
  throw config_error("unknown llm provider \"" + cfg.kind +
                     "\" (expected openai, anthropic, command, replay, autotune)");
}

}  // namespace kopt::llm
