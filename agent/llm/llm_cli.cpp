#include "llm/llm_cli.hpp"

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/error.hpp"
#include "llm/client.hpp"

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
};

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

int run_check(const check_options& o, const std::function<call_recorder*()>& recorder) {
  provider_config cfg;
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
    cfg = parse_provider_config(section, base);
    if (cfg.kind != "openai" && cfg.kind != "anthropic" && cfg.kind != "command") {
      throw config_error(
          "llm check talks to a provider; use --provider openai, anthropic or command (got " +
          cfg.kind + ")");
    }
    if (cfg.kind == "command")
      cfg.command_timeout =
          std::min(cfg.command_timeout,
                   std::chrono::milliseconds{static_cast<std::int64_t>(o.timeout_s * 1000)});
    const auto t = std::chrono::milliseconds{static_cast<std::int64_t>(o.timeout_s * 1000)};
    cfg.timeouts.total = std::min(cfg.timeouts.total, t);
    cfg.timeouts.first_byte = std::min(cfg.timeouts.first_byte, t);
    cfg.retry.max_attempts = std::min(cfg.retry.max_attempts, 2);
    cfg.retry.max_retry_after =
        std::min(cfg.retry.max_retry_after, std::chrono::milliseconds{5000});
  } catch (const kopt::error& e) {
    std::fprintf(stderr, "kopt llm check: configuration problem: %s\n", e.what());
    return check_exit_config;
  }

  std::unique_ptr<provider> p;
  try {
    p = make_provider(cfg);
  } catch (const kopt::error& e) {
    std::fprintf(stderr, "kopt llm check: configuration problem: %s\n", e.what());
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
  r.messages.push_back({"user", "Reply with the single word: ok"});
  r.max_tokens = 256;
  r.tag = "llm check";
  const completion c = client.call(r);
  const std::string h = hint(c, cfg);

  if (o.json_out) {
    nlohmann::json j = {{"ok", c.ok()},
                        {"provider", cfg.kind},
                        {"endpoint", endpoint},
                        {"model", c.model.empty() ? cfg.model : c.model},
                        {"status", call_status_name(c.status)},
                        {"http_status", c.http_status},
                        {"attempts", c.attempts},
                        {"latency_ms", c.latency.count()},
                        {"usage",
                         {{"prompt", c.tokens.prompt},
                          {"completion", c.tokens.completion},
                          {"cached", c.tokens.cached},
                          {"reasoning", c.tokens.reasoning},
                          {"reported", c.tokens.reported}}},
                        {"cost_usd", c.cost_usd},
                        {"answer", c.text.substr(0, 200)},
                        {"error", c.error},
                        {"hint", h}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf(
        "provider   %s\nendpoint   %s\nmodel      %s\nstatus     %s (HTTP %d, %d "
        "attempt%s)\nlatency    %lld ms\n",
        cfg.kind.c_str(), endpoint.c_str(), (c.model.empty() ? cfg.model : c.model).c_str(),
        call_status_name(c.status), c.http_status, c.attempts, c.attempts == 1 ? "" : "s",
        static_cast<long long>(c.latency.count()));
    std::printf("usage      prompt %lld, completion %lld (cached %lld, reasoning %lld)%s\n",
                static_cast<long long>(c.tokens.prompt),
                static_cast<long long>(c.tokens.completion),
                static_cast<long long>(c.tokens.cached), static_cast<long long>(c.tokens.reasoning),
                c.tokens.reported ? "" : " [estimated: the API reported none]");
    if (c.ok()) std::printf("answer     %s\n", c.text.substr(0, 200).c_str());
    if (!c.error.empty()) std::fprintf(stderr, "error: %s\n", c.error.c_str());
    if (!h.empty()) std::fprintf(stderr, "hint: %s\n", h.c_str());
  }
  return c.ok() ? check_exit_ok : check_exit_call_failed;
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
      llm->add_subcommand("check", "Send one tiny request to the configured provider and report");
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
