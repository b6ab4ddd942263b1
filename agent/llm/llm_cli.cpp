#include "llm/llm_cli.hpp"

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/error.hpp"
#include "llm/client.hpp"
#include "llm/router.hpp"

namespace kopt::llm {
namespace {

struct check_options {
  std::string config_file;
  std::string provider;
  std::string model;
  std::string base_url;
  std::string api_key_env;
  std::string command;  // the command provider's argv, split on spaces
  bool stream = false;
  bool stream_set = false;
  double timeout_s = 60;
  bool json_out = false;
  // The fields for reasoning models, caching and gateways (docs/providers.md).
  std::string api;
  std::string reasoning_effort;
  std::string max_tokens_field;
  std::int64_t thinking_budget = -1;
  bool prompt_cache = true;
  bool prompt_cache_set = false;
  std::string extra_body;
  int n = 0;
  bool cache_probe = false;
  std::int64_t max_tokens = 256;
};

// A prompt prefix long enough for every vendor's minimum cacheable length
// (Anthropic: 1024 to 4096 tokens depending on the model; OpenAI: 1024),
// identical on both probe calls.
std::string cache_probe_prefix() {
  std::string s =
      "kopt llm check --cache-probe: the lines below only make the prompt long enough to be "
      "cached; they carry no instruction.\n";
  for (int i = 1; i <= 150; ++i)
    s += "Line " + std::to_string(i) +
         " of the cache probe: the quick brown fox jumps over the lazy dog.\n";
  return s;
}

std::string hint(const completion& c, const provider_config& cfg) {
  if (cfg.kind == "command") {
    if (!c.ok()) return "the command failed: run it by hand with the prompt on stdin to see why";
    if (!c.tokens.reported)
      return "the command reported no usage: tokens are estimated and cost is $0 (claude -p "
             "--output-format json "
             "and codex exec --json report theirs)";
    return {};
  }
  const std::string env =
      cfg.api_key_env.empty() ? std::string("the key variable") : cfg.api_key_env;
  switch (c.http_status) {
    case 401:
      return "the key was rejected: check that " + env + " holds a valid key for this provider";
    case 403:
      return "the key lacks permission for this model or endpoint";
    case 404:
      return "not found: check --model and --base-url (posted to " + endpoint_url(cfg) + ")";
    case 429:
      return "rate limited or out of quota: check your plan and billing";
    default:
      break;
  }
  if (c.http_status == 0 && c.status != call_status::ok) {
    return "no HTTP answer: check that something listens at " + endpoint_url(cfg) +
           " and that proxies (https_proxy, no_proxy) are right";
  }
  if (c.ok() && c.text.empty())
    return "the model answered with empty text (a reasoning model may need a larger max_tokens)";
  return {};
}

nlohmann::json usage_json(const usage& u) {
  return {{"prompt", u.prompt},           {"completion", u.completion}, {"cached", u.cached},
          {"cache_write", u.cache_write}, {"reasoning", u.reasoning},   {"reported", u.reported}};
}

// One model of the section: its calls and the report's lines (or JSON).
int check_model(const check_options& o, const model_entry& m,
                const std::function<call_recorder*()>& recorder, nlohmann::json& report) {
  const provider_config& cfg = m.cfg;
  std::unique_ptr<provider> p;
  try {
    p = make_provider(cfg);
  } catch (const kopt::error& e) {
    std::fprintf(stderr, "kopt llm check: configuration problem (%s): %s\n", m.label.c_str(),
                 e.what());
    return check_exit_config;
  }
  client_options co;
  co.prices = cfg.prices;
  co.recorder = recorder ? recorder() : nullptr;
  co.max_concurrency = 1;
  std::string endpoint;
  if (cfg.kind == "command") {
    for (const auto& a : cfg.command) endpoint += (endpoint.empty() ? "" : " ") + a;
  } else {
    endpoint = endpoint_url(cfg);
  }
  llm_client client(std::move(p), co);
  request r;
  if (o.cache_probe) {
    // The stable part goes where a campaign puts it: the system prompt
    // (Anthropic breakpoint) and the start of the user message.
    r.system = cache_probe_prefix();
    message msg{"user", cache_probe_prefix() + "\nReply with the single word: ok"};
    msg.cache_breaks = {cache_probe_prefix().size()};
    r.messages.push_back(std::move(msg));
  } else {
    r.messages.push_back({"user", "Reply with the single word: ok"});
  }
  r.max_tokens = o.max_tokens;
  r.tag = "llm check";
  const completion c = client.call(r);
  std::optional<completion> again;
  if (o.cache_probe && c.ok()) again = client.call(r);
  const completion& last = again ? *again : c;
  const bool ok = c.ok() && (!again || again->ok());
  const std::string h = hint(last, cfg);
  const std::string model_name = c.model.empty() ? cfg.model : c.model;

  nlohmann::json j = {{"ok", ok},
                      {"label", m.label},
                      {"provider", cfg.kind},
                      {"api", cfg.kind == "openai" ? cfg.api : std::string("messages")},
                      {"endpoint", endpoint},
                      {"model", model_name},
                      {"status", call_status_name(last.status)},
                      {"http_status", last.http_status},
                      {"attempts", c.attempts},
                      {"latency_ms", c.latency.count()},
                      {"usage", usage_json(c.tokens)},
                      {"cost_usd", c.cost_usd + (again ? again->cost_usd : 0.0)},
                      {"answer", c.text.substr(0, 200)},
                      {"answers", std::max<std::size_t>(c.texts.size(), c.ok() ? 1 : 0)},
                      {"reasoning_chars", c.reasoning.size()},
                      {"stop_reason", c.stop_reason},
                      {"error", last.error},
                      {"hint", h}};
  if (again) {
    j["cache_probe"] = {
        {"second_call_usage", usage_json(again->tokens)},
        {"cached_share", again->tokens.prompt > 0 ? static_cast<double>(again->tokens.cached) /
                                                        static_cast<double>(again->tokens.prompt)
                                                  : 0.0}};
  }
  if (o.json_out) {
    report.push_back(j);
  } else {
    std::printf(
        "model      %s\nprovider   %s (%s)\nendpoint   %s\nmodel id   %s\nstatus     %s (HTTP %d, "
        "%d "
        "attempt%s)\nlatency    %lld ms\n",
        m.label.c_str(), cfg.kind.c_str(), j["api"].get<std::string>().c_str(), endpoint.c_str(),
        model_name.c_str(), call_status_name(last.status), last.http_status, c.attempts,
        c.attempts == 1 ? "" : "s", static_cast<long long>(c.latency.count()));
    std::printf(
        "usage      prompt %lld, completion %lld (cached %lld, cache write %lld, reasoning "
        "%lld)%s\n",
        static_cast<long long>(c.tokens.prompt), static_cast<long long>(c.tokens.completion),
        static_cast<long long>(c.tokens.cached), static_cast<long long>(c.tokens.cache_write),
        static_cast<long long>(c.tokens.reasoning),
        c.tokens.reported ? "" : " [estimated: the API reported none]");
    if (c.ok()) {
      std::printf("answer     %s\n", c.text.substr(0, 200).c_str());
      if (c.texts.size() > 1) std::printf("answers    %zu (n)\n", c.texts.size());
      if (!c.reasoning.empty())
        std::printf("reasoning  %zu characters (kept apart from the answer)\n", c.reasoning.size());
    }
    if (again) {
      std::printf(
          "cache      second call: %lld of %lld input tokens read from the cache, %lld written\n",
          static_cast<long long>(again->tokens.cached),
          static_cast<long long>(again->tokens.prompt),
          static_cast<long long>(again->tokens.cache_write));
    }
    if (!last.error.empty()) std::fprintf(stderr, "error: %s\n", last.error.c_str());
    if (!h.empty()) std::fprintf(stderr, "hint: %s\n", h.c_str());
  }
  return ok ? check_exit_ok : check_exit_call_failed;
}

int run_check(const check_options& o, const std::function<call_recorder*()>& recorder) {
  router_config rc;
  try {
    nlohmann::json section = nlohmann::json::object();
    std::filesystem::path base;
    if (!o.config_file.empty()) {
      std::ifstream in(o.config_file);
      if (!in) throw config_error("cannot open " + o.config_file);
      const nlohmann::json j = nlohmann::json::parse(in, nullptr, false, true);
      if (j.is_discarded() || !j.is_object())
        throw config_error(o.config_file + " is not a JSON object");
      section = j.contains("llm") ? j["llm"] : j;
      base = std::filesystem::path(o.config_file).parent_path();
    }
    // Options apply to the section, hence to every model of llm.models
    // that does not set the field itself.
    if (!o.provider.empty()) section["provider"] = o.provider;
    if (!o.model.empty()) section["model"] = o.model;
    if (!o.base_url.empty()) section["base_url"] = o.base_url;
    if (!o.api_key_env.empty()) section["api_key_env"] = o.api_key_env;
    if (!o.command.empty()) {
      nlohmann::json argv = nlohmann::json::array();
      std::istringstream words(o.command);
      for (std::string w; words >> w;) argv.push_back(w);
      section["command"] = argv;
      if (o.provider.empty() && !section.contains("provider")) section["provider"] = "command";
    }
    if (o.stream_set) section["stream"] = o.stream;
    if (!o.api.empty()) section["api"] = o.api;
    if (!o.reasoning_effort.empty()) section["reasoning_effort"] = o.reasoning_effort;
    if (!o.max_tokens_field.empty()) section["max_tokens_field"] = o.max_tokens_field;
    if (o.thinking_budget == 0) section["thinking"] = false;
    if (o.thinking_budget > 0) section["thinking"] = {{"budget_tokens", o.thinking_budget}};
    if (o.prompt_cache_set) section["prompt_cache"] = o.prompt_cache;
    if (o.n > 0) section["n"] = o.n;
    if (!o.extra_body.empty()) {
      const nlohmann::json e = nlohmann::json::parse(o.extra_body, nullptr, false);
      if (e.is_discarded() || !e.is_object())
        throw config_error("--extra-body must be a JSON object");
      section["extra_body"] = e;
    }
    rc = parse_router_config(section, base);
    const auto t = std::chrono::milliseconds{static_cast<std::int64_t>(o.timeout_s * 1000)};
    for (model_entry& m : rc.models) {
      provider_config& cfg = m.cfg;
      if (cfg.kind != "openai" && cfg.kind != "anthropic" && cfg.kind != "command") {
        throw config_error(
            "llm check talks to a provider; use --provider openai, anthropic or command (" +
            m.label + " is " + cfg.kind + ")");
      }
      if (cfg.kind == "command") cfg.command_timeout = std::min(cfg.command_timeout, t);
      cfg.timeouts.total = std::min(cfg.timeouts.total, t);
      cfg.timeouts.first_byte = std::min(cfg.timeouts.first_byte, t);
      cfg.retry.max_attempts = std::min(cfg.retry.max_attempts, 2);
      cfg.retry.max_retry_after =
          std::min(cfg.retry.max_retry_after, std::chrono::milliseconds{5000});
    }
  } catch (const kopt::error& e) {
    std::fprintf(stderr, "kopt llm check: configuration problem: %s\n", e.what());
    return check_exit_config;
  }
  nlohmann::json report = nlohmann::json::array();
  int rc_all = check_exit_ok;
  for (std::size_t i = 0; i < rc.models.size(); ++i) {
    if (i > 0 && !o.json_out) std::printf("\n");
    const int one = check_model(o, rc.models[i], recorder, report);
    rc_all = std::max(rc_all, one);
  }
  if (o.json_out) {
    // One model: its object, as before; several: {"ok", "models": [...]}.
    const nlohmann::json out =
        report.size() == 1 ? report[0]
                           : nlohmann::json{{"ok", rc_all == check_exit_ok}, {"models", report}};
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  return rc_all;
}

}  // namespace

void register_llm_cli(CLI::App& app, std::function<call_recorder*()> recorder) {
  CLI::App* llm = app.add_subcommand("llm", "LLM provider tools");
  llm->require_subcommand(1);
  llm->footer(
      "Examples:\n  kopt llm check --provider openai --model gpt-4.1 --api-key-env OPENAI_API_KEY\n"
      "Run 'kopt llm check --help' for its options. See docs/providers.md.");
  auto opts = std::make_shared<check_options>();
  CLI::App* check =
      llm->add_subcommand("check", "Send one tiny request to each configured model and report");
  check->add_option("--config", opts->config_file,
                    "JSON file with an \"llm\" section (or the section itself)");
  check->add_option("--provider", opts->provider, "openai, anthropic or command");
  check->add_option(
      "--command", opts->command,
      "the command provider's program and arguments, split on spaces (no shell), e.g. "
      "\"claude -p --output-format json\"");
  check->add_option("--model", opts->model, "model name");
  check->add_option("--base-url", opts->base_url, "base URL (vLLM, llama.cpp, Ollama, gateways)");
  check->add_option("--api-key-env", opts->api_key_env, "environment variable that holds the key");
  check->add_flag("--stream,!--no-stream", opts->stream, "use streaming")
      ->each([opts](const std::string&) { opts->stream_set = true; });
  check->add_option("--timeout", opts->timeout_s, "seconds before giving up")
      ->check(CLI::PositiveNumber);
  check
      ->add_option("--api", opts->api,
                   "openai: chat (Chat Completions) or responses (Responses API)")
      ->check(CLI::IsMember({"chat", "responses"}));
  check->add_option("--reasoning-effort", opts->reasoning_effort,
                    "openai reasoning models: none, minimal, low, medium, high or xhigh");
  check->add_option("--max-tokens-field", opts->max_tokens_field,
                    "openai chat: auto, max_tokens or max_completion_tokens");
  check
      ->add_option("--thinking-budget", opts->thinking_budget,
                   "anthropic: extended thinking budget in tokens (at least 1024; 0 turns it off)")
      ->check(CLI::NonNegativeNumber);
  check
      ->add_flag("--prompt-cache,!--no-prompt-cache", opts->prompt_cache,
                 "anthropic: cache_control breakpoints (on by default)")
      ->each([opts](const std::string&) { opts->prompt_cache_set = true; });
  check->add_option("--extra-body", opts->extra_body,
                    "JSON object merged into the request body (gateway or vendor fields)");
  check->add_option("--n", opts->n, "openai chat: answers per call")->check(CLI::Range(1, 16));
  check
      ->add_option("--max-tokens", opts->max_tokens,
                   "output cap of the check's request (default 256)")
      ->check(CLI::PositiveNumber);
  check->add_flag(
      "--cache-probe", opts->cache_probe,
      "send a long identical prompt twice and report how much of the second was read from the "
      "provider's cache (about 12k input tokens in all)");
  check->add_flag("--json", opts->json_out, "print the report as JSON");
  check->footer(
      "Examples:\n"
      "  kopt llm check --provider openai --model gpt-4.1 --api-key-env OPENAI_API_KEY\n"
      "  kopt llm check --provider anthropic --model claude-sonnet-4-5\n"
      "  kopt llm check --config campaign.json --json   # its \"llm\" section\n"
      "  kopt llm check --provider openai --base-url http://localhost:8000/v1 --model m\n"
      "Exit codes: 0 the provider answered, 1 invalid configuration (missing key, bad field),\n"
      "6 the call failed (network, HTTP error, quota). See docs/providers.md.");
  check->callback([opts, recorder] {
    const int rc = run_check(*opts, recorder);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kopt::llm
