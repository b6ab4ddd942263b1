// Benchmark (not a CI test): how much of each prompt of a recorded campaign
// a provider's prompt cache can serve. It replays the rmsnorm replay corpus
// (tests/data/replay: 27 recorded LLM answers, 9 iterations of 3 calls)
// through the real campaign loop, the real llm_source and prompt templates
// (--templates: the directory to render with), with a fake evaluator whose
// verdict per answer comes from the corpus manifest (status, and a speed
// from its category) so that promotions, history and parents change the
// prompts as in the GPU run. Every request is captured and measured:
//   prefix share: the longest prefix of the request (system + user) that
//     some request of an EARLIER iteration began with (the K calls of one
//     iteration run in parallel and cannot read each other's cache), rounded
//     as OpenAI's automatic caching counts it (nothing below 1024 tokens,
//     then whole 128-token steps);
//   breakpoint share: Anthropic's explicit caching: the longest marked
//     prefix (system prompt; user text up to a {% cache_breakpoint %}) that
//     an earlier iteration's request also marked, if at least 1024 tokens.
// Tokens are kopt's estimate (4 bytes a token); the shares are ratios of
// bytes, so the estimate cancels except in the 1024-token thresholds.
// Prints one JSON object: per-call figures and a summary.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <map>

#include "campaign/fake_evaluator.hpp"
#include "campaign/loop.hpp"
#include "campaign/sources.hpp"
#include "campaign/submission.hpp"
#include "common/hash.hpp"
#include "config/operator.hpp"
#include "llm/client.hpp"
#include "llm/provider.hpp"
#include "store/store.hpp"

using namespace kopt;
using nlohmann::json;

namespace {

struct captured {
  std::int64_t iteration = 0;
  std::string system, user;
  std::vector<std::size_t> breaks;
};

// Serves the transcript in order (the replay provider) and keeps each request.
class capturing_provider final : public llm::provider {
 public:
  capturing_provider(std::unique_ptr<llm::provider> inner, std::vector<captured>& out,
                     std::mutex& mu)
      : provider(inner->name(), inner->model()), inner_(std::move(inner)), out_(out), mu_(mu) {}
  llm::capabilities caps() const override { return inner_->caps(); }
  llm::completion complete(const llm::request& r) override {
    {
      std::lock_guard lock(mu_);
      captured c;
      c.iteration = r.meta.value("iteration", std::int64_t{0});
      c.system = r.system;
      c.user = r.messages.at(0).content;
      c.breaks = r.messages.at(0).cache_breaks;
      out_.push_back(std::move(c));
    }
    return inner_->complete(r);
  }

 private:
  std::unique_ptr<llm::provider> inner_;
  std::vector<captured>& out_;
  std::mutex& mu_;
};

std::size_t common_prefix(const std::string& a, const std::string& b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

std::int64_t tokens(std::size_t bytes) {
  return llm::estimate_tokens(bytes);
}

// OpenAI: cached prefixes from 1024 tokens on, in 128-token increments.
std::int64_t openai_cacheable(std::int64_t prefix_tokens) {
  if (prefix_tokens < 1024) return 0;
  return 1024 + (prefix_tokens - 1024) / 128 * 128;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("prompt cache benchmark on the recorded rmsnorm campaign");
  std::string op_file = "configs/examples/replay/rmsnorm.json";
  std::string transcript = "tests/data/replay/rmsnorm/transcript.jsonl";
  std::string manifest_file = "tests/data/replay/rmsnorm/expected.json";
  std::string templates = "prompts/templates";
  std::string label = "run";
  bool hints = false;
  double call_dropout = 0;
  app.add_option("--operator", op_file, "operator config");
  app.add_option("--transcript", transcript, "replay transcript (JSONL)");
  app.add_option("--manifest", manifest_file, "the corpus manifest (expected.json)");
  app.add_option("--templates", templates, "prompt template directory to render with");
  app.add_option("--label", label, "name of this configuration in the output");
  app.add_flag("--hints", hints, "a strategy hint per call (calls 1..K-1)");
  app.add_option("--call-dropout", call_dropout, "per-call dropout probability");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);

  try {
    const auto lr = config::load_operator_file(op_file);
    if (!lr.ok()) {
      for (const auto& d : lr.diagnostics) std::cerr << d.to_string() << "\n";
      return 2;
    }
    const config::operator_config& op = *lr.op;
    std::ifstream mf(manifest_file);
    const json manifest = json::parse(mf);
    // Verdict per answer, by the SHA-256 of its kernel source.
    std::map<std::string, std::pair<std::string, double>> verdict;
    for (const auto& a : manifest.at("answers")) {
      if (!a.contains("source_sha256")) continue;
      const std::string cat = a.value("category", "");
      const double speed = cat == "fast"                 ? 0.85
                           : cat == "slow"               ? 1.3
                           : cat == "harmless_deviation" ? 0.97
                                                         : 1.0;
      verdict[a["source_sha256"].get<std::string>()] = {a.value("status", "ok"), speed};
    }
    const auto dir =
        std::filesystem::temp_directory_path() / ("kopt-cache-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    auto db = store::store::open(dir / "kopt.db");
    const auto put = campaign::store_operator(db, op);
    store::campaign_record c;
    c.operator_id = put.operator_id;
    c.provider = "replay";
    c.settings = {{"candidates_per_iteration", 3},
                  {"dropout_p", 0.3},
                  {"seed", 1},
                  {"target_sol_fraction", 1.0}};
    const auto cid = db.create_campaign(c);

    std::size_t matched = 0;
    campaign::fake_evaluator ev(
        [&](const campaign::eval_subject& s, const std::string&) {
          campaign::fake_truth t;
          t.time_ns = 10000;
          t.sol_time_ns = 4500;
          const auto it = verdict.find(sha256_hex(s.candidate.value("source", "")));
          if (it != verdict.end()) {
            ++matched;
            const std::string& st = it->second.first;
            if (st == "compile_error")
              t.compile_status = "compile_error";
            else if (st != "ok")
              t.status = "incorrect";
            t.time_ns *= it->second.second;
          }
          return t;
        },
        0.002);

    std::vector<captured> requests;
    std::mutex mu;
    llm::provider_config pc;
    pc.kind = "replay";
    pc.model = "replay-corpus";
    pc.transcript = transcript;
    auto inner = llm::make_provider(pc);
    llm::llm_client client(std::make_unique<capturing_provider>(std::move(inner), requests, mu),
                           llm::client_options{nullptr, nullptr, {}, 1});
    campaign::prompt_setup setup;
    setup.gpu.name = "NVIDIA H200";
    setup.gpu.arch = "sm_90a";
    setup.gpu.sm_count = 132;
    setup.gpu.l2_bytes = 60ll << 20;
    setup.gpu.dram_bytes_per_s = 4.8e12;
    setup.gpu.flops_per_s = {{"fp32", 67e12}, {"bf16_tensor", 989.5e12}};
    setup.template_dir = templates;
    llm::diversity_options d;
    d.hints = hints;
    d.call_dropout_p = call_dropout;
    campaign::llm_source src(client, 8192, setup, d);
    auto settings = campaign::loop_settings::from_campaign(*db.find_campaign(cid));
    campaign::campaign_loop loop(db, cid, op, src, ev, settings, {});
    campaign::run_limits lim;
    lim.max_iterations = 9;
    const auto rr = loop.run(lim);

    // Measure.
    json calls = json::array();
    std::int64_t total = 0, prefix_cached = 0, bp_cached = 0;
    double share_prefix_sum = 0, share_bp_sum = 0;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const captured& q = requests[i];
      const std::string full = q.system + "\n" + q.user;
      std::size_t best = 0;
      // Marked prefixes of this request: the system prompt, then system + user up to each break.
      std::vector<std::string> marks = {q.system + "\n"};
      for (const std::size_t b : q.breaks) marks.push_back(q.system + "\n" + q.user.substr(0, b));
      std::size_t best_mark = 0;
      for (std::size_t j = 0; j < i; ++j) {
        const captured& e = requests[j];
        if (e.iteration >= q.iteration) continue;
        best = std::max(best, common_prefix(full, e.system + "\n" + e.user));
        std::vector<std::string> em = {e.system + "\n"};
        for (const std::size_t b : e.breaks) em.push_back(e.system + "\n" + e.user.substr(0, b));
        for (const auto& m : marks)
          if (std::find(em.begin(), em.end(), m) != em.end())
            best_mark = std::max(best_mark, m.size());
      }
      const std::int64_t t = tokens(full.size());
      const std::int64_t pc_tokens = openai_cacheable(tokens(best));
      const std::int64_t bp_tokens = tokens(best_mark) >= 1024 ? tokens(best_mark) : 0;
      total += t;
      prefix_cached += pc_tokens;
      bp_cached += bp_tokens;
      share_prefix_sum += static_cast<double>(pc_tokens) / static_cast<double>(t);
      share_bp_sum += static_cast<double>(bp_tokens) / static_cast<double>(t);
      calls.push_back({{"iteration", q.iteration},
                       {"input_tokens", t},
                       {"shared_prefix_tokens", tokens(best)},
                       {"openai_cached_tokens", pc_tokens},
                       {"anthropic_cached_tokens", bp_tokens},
                       {"breakpoints", q.breaks.size()}});
    }
    std::set<std::string> distinct;
    std::map<std::int64_t, std::set<std::string>> per_iteration;
    for (const auto& q : requests) per_iteration[q.iteration].insert(q.system + "\n" + q.user);
    std::size_t identical_iterations = 0;
    for (const auto& [it, s] : per_iteration) identical_iterations += s.size() == 1;
    const double n = static_cast<double>(std::max<std::size_t>(requests.size(), 1));
    const json out = {{"label", label},
                      {"templates", templates},
                      {"hints", hints},
                      {"call_dropout_p", call_dropout},
                      {"iterations", rr.iterations_run},
                      {"calls", requests.size()},
                      {"evaluations_with_manifest_verdict", matched},
                      {"iterations_with_identical_prompts", identical_iterations},
                      {"input_tokens", total},
                      {"mean_input_tokens_per_call", static_cast<double>(total) / n},
                      {"openai_cached_tokens", prefix_cached},
                      {"openai_cached_share",
                       total ? static_cast<double>(prefix_cached) / static_cast<double>(total) : 0},
                      {"openai_mean_share_per_call", share_prefix_sum / n},
                      {"anthropic_cached_tokens", bp_cached},
                      {"anthropic_cached_share",
                       total ? static_cast<double>(bp_cached) / static_cast<double>(total) : 0},
                      {"anthropic_mean_share_per_call", share_bp_sum / n},
                      {"per_call", calls}};
    std::cout << out.dump(1) << "\n";
    std::filesystem::remove_all(dir);
  } catch (const std::exception& e) {
    std::cerr << "prompt_cache_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
