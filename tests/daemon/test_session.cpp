// One campaign session, wherever it runs (issue: the daemon must run the
// real loop). In-process: `kopt run`'s settings and the daemon's settings
// give byte-identical prompts for the same stored state, knowledge-base
// snippets chosen from the parent's diagnosis included. As a real `kopt
// daemon` process with the fake evaluator: an `openai` campaign against a
// scripted loopback server sends the templated prompts (revise prompts with
// snippets and the parent's measurements) and links every LLM call to its
// iteration and every LLM candidate to its call, which `kopt show candidate`
// then prints; a replay campaign killed with -9 mid-way and restarted
// proposes exactly the candidates of an uninterrupted one.
#include <fmt/format.h>
#include <httplib.h>

#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "campaign/session.hpp"
#include "campaign/submission.hpp"
#include "daemon/daemon.hpp"
#include "support.hpp"
#ifdef KOPT_HAVE_WORKER
#include "cli/eval_support.hpp"
#endif

using namespace kopt;
using namespace kopt::test;
using json = nlohmann::json;

namespace {

// An LLM answer that the extractor and the config loader accept for the
// vadd operator: a ```cuda block and a ```json launch plan. `marker` makes
// each answer a distinct candidate ("// speed X" also sets its fake time).
std::string answer(const std::string& marker) {
  json k = kernel("vadd_llm", marker);
  const std::string src = k.at("source");
  k.erase("source");
  return "A faster version.\n\n```cuda\n" + src + "```\n\n```json\n" + k.dump(2) + "\n```\n";
}

std::string chat_completion(const std::string& text) {
  return json{
      {"id", "chatcmpl-test"},
      {"object", "chat.completion"},
      {"model", "gpt-test"},
      {"choices",
       {{{"index", 0},
         {"message", {{"role", "assistant"}, {"content", text}}},
         {"finish_reason", "stop"}}}},
      {"usage", {{"prompt_tokens", 1200}, {"completion_tokens", 300}, {"total_tokens", 1500}}}}
      .dump();
}

// A loopback Chat Completions server: records every request body, answers
// request N with a kernel of speed 0.95^N (each one a new candidate).
class chat_server {
 public:
  chat_server() {
    svr_.Post("/v1/chat/completions", [this](const httplib::Request& rq, httplib::Response& res) {
      std::size_t n;
      {
        std::lock_guard lk(mu_);
        bodies_.push_back(rq.body);
        n = bodies_.size();
      }
      res.set_content(
          chat_completion(answer(fmt::format("// speed {:.4f} answer {}", std::pow(0.95, n), n))),
          "application/json");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
  }
  ~chat_server() {
    svr_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::vector<json> requests() const {
    std::lock_guard lk(mu_);
    std::vector<json> out;
    for (const auto& b : bodies_) out.push_back(json::parse(b));
    return out;
  }

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::string> bodies_;
};

store::row_id submit(daemon_process& d, const json& op, const std::string& tag) {
  const auto file = d.state().parent_path() / (tag + ".json");
  spit(file, op.dump(2));
  auto [rc, out] = run_kopt({"--db", d.db_path().string(), "submit", file.string()},
                            d.state().parent_path(), tag);
  EXPECT_EQ(rc, 0) << slurp(d.state().parent_path() / (tag + ".err"));
  return std::stoll(out);
}

json llm_operator(const std::string& provider, int iterations, int k) {
  json op = campaign_operator("vadd", iterations);
  op["campaign"]["provider"] = provider;
  op["campaign"]["model"] = "gpt-test";
  op["campaign"]["candidates_per_iteration"] = k;
  return op;
}

// The proposals of each iteration, as candidate sources in the order the
// loop stored them.
std::map<std::int64_t, std::vector<std::string>> proposed_sources(daemon_process& d,
                                                                  store::row_id id) {
  auto db = d.reader();
  std::map<store::row_id, std::string> src;
  for (const auto& c : db.candidates_of(id)) src[c.id] = c.source;
  std::map<std::int64_t, std::vector<std::string>> out;
  for (const auto& e : db.events_of(id))
    if (e.kind == "proposals")
      for (auto cid : e.data.value("candidate_ids", std::vector<store::row_id>{}))
        out[e.data.value("iteration", std::int64_t{-1})].push_back(src[cid]);
  return out;
}

}  // namespace

#ifdef KOPT_HAVE_WORKER
// The same stored state through `kopt run`'s settings and the daemon's:
// byte-identical system and user prompts, with knowledge-base snippets that
// follow the parent's diagnosis.
TEST(CampaignSession, RunAndDaemonPathsRenderIdenticalPrompts) {
  temp_dir dir;
  auto db = store::store::open(dir.path() / "kopt.db");
  json opj = llm_operator("openai", 3, 2);
  opj["op_type"] = "elementwise";
  const auto op = load_op(opj);
  store::campaign_record rec;
  rec.operator_id = campaign::store_operator(db, op).operator_id;
  rec.provider = "openai";
  rec.model = "gpt-test";
  rec.settings = campaign::campaign_settings_json(op.campaign);
  const auto id = db.create_campaign(rec);

  const auto llm_file = dir.path() / "llm.json";
  const json section = {{"model", "gpt-test"},
                        {"base_url", "http://127.0.0.1:9/v1"},
                        {"api_key_env", "KOPT_TEST_KEY"}};
  spit(llm_file, json{{"llm", section}}.dump());
  setenv("KOPT_TEST_KEY", "sk-test-not-a-key", 1);

  cli::eval_options eo;
  auto run_opts = cli::run_session_options("", llm_file.string(), eo, "default");

  daemon::daemon_config dc =
      daemon::parse_config(json{{"state_dir", (dir.path() / "state").string()},
                                {"evaluator", "fake"},
                                {"providers", {{"openai", section}}}},
                           llm_file);
  auto daemon_opts = daemon::session_options_for(dc, "openai");
  ASSERT_TRUE(daemon_opts.has_value());

  const campaign::evaluator_factory fake = [](const config::operator_config&,
                                              const campaign::evaluator_spec&) {
    return std::unique_ptr<campaign::evaluator>(
        std::make_unique<campaign::fake_evaluator>(default_model()));
  };
  campaign::session via_run(db, id, op, run_opts, fake);
  campaign::session via_daemon(db, id, op, *daemon_opts, fake);
  ASSERT_NE(via_run.prompts(), nullptr);
  ASSERT_NE(via_daemon.prompts(), nullptr);

  // A parent measured slow, with a diagnosis the knowledge base has
  // documents for.
  campaign::prompt_context ctx;
  ctx.op = &op;
  ctx.iteration = 2;
  ctx.parent = op.seed->to_json();
  ctx.parent_id = 7;
  for (const auto& w : op.workloads) {
    campaign::workload_result r;
    r.status = "ok";
    r.median_ns = 12345;
    r.sol_fraction = 0.21;
    r.diagnosis = {{"findings",
                    {{{"class", "memory-bound-far-from-peak"},
                      {"severity", 0.9},
                      {"summary", "DRAM at 21 % of peak"}}}}};
    ctx.parent_results[w.id] = r;
  }
  const auto a = via_run.prompts()->render(ctx);
  const auto b = via_daemon.prompts()->render(ctx);
  EXPECT_EQ(a.template_name, "revise");
  EXPECT_EQ(a.system, b.system);
  EXPECT_EQ(a.user, b.user);
  EXPECT_NE(a.user.find("[kb:"), std::string::npos) << a.user;
  EXPECT_NE(a.user.find("DRAM at 21 % of peak"), std::string::npos);
  EXPECT_NE(a.user.find("12.3"), std::string::npos);  // the parent's median in us

  // The snippets follow the diagnosis: another bottleneck, other snippets.
  auto other = ctx;
  for (auto& [w, r] : other.parent_results)
    r.diagnosis = {
        {"findings", {{{"class", "latency-bound"}, {"severity", 0.9}, {"summary", "few waves"}}}}};
  const auto c = via_run.prompts()->render(other);
  EXPECT_NE(a.user, c.user);
  EXPECT_EQ(c.user, via_daemon.prompts()->render(other).user);

  // The daemon's knowledge_base.directories reaches retrieval.
  const auto kbdir = dir.path() / "team-kb";
  fs::create_directories(kbdir);
  {
    // A valid document (a bundled one under a new id), for a bottleneck
    // few bundled documents have.
    std::string doc = slurp(fs::path(KOPT_SOURCE_DIR) /
                            "knowledge_base/techniques/atomics-hierarchical-reduction.md");
    auto line = [&](const std::string& key, const std::string& value) {
      const auto p = doc.find("\n" + key + ": ");
      ASSERT_NE(p, std::string::npos) << key;
      doc.replace(p + 1, doc.find('\n', p + 1) - p - 1, key + ": " + value);
    };
    line("id", "team-vadd-trick");
    line("title", "The team's vector-add trick");
    line("bottlenecks", "[warp-divergence]");
    line("operators", "[elementwise]");
    spit(kbdir / "team-vadd-trick.md", doc);
  }
  dc.kb_directories = {kbdir};
  auto team = *daemon::session_options_for(dc, "openai");
  campaign::session with_team(db, id, op, team, fake);
  auto divergent = ctx;
  for (auto& [w, r] : divergent.parent_results)
    r.diagnosis = {{"findings",
                    {{{"class", "warp-divergence"}, {"severity", 0.9}, {"summary", "divergent"}}}}};
  const auto t = with_team.prompts()->snippets(divergent);
  bool found = false;
  for (const auto& s : t) found = found || s.id == "snippet:team-vadd-trick";
  EXPECT_TRUE(found) << "the team's document was not retrieved";
}
#endif

// The daemon with the fake evaluator and the openai provider against a
// loopback server: templated prompts, snippets and measurements in the
// revise prompts, every call linked to its iteration, every LLM candidate
// to its call; `kopt show candidate` prints that call's prompt and answer.
TEST(DaemonLlmCampaign, TemplatedPromptsAndEveryCallLinked) {
  chat_server srv;
  temp_dir dir;
  json cfg = {{"evaluator", "fake"},
              {"gpus", 1},
              {"fake", {{"delay_ms", 0}}},
              {"providers",
               {{"openai",
                 {{"model", "gpt-test"},
                  {"base_url", fmt::format("http://127.0.0.1:{}/v1", srv.port())},
                  {"api_key_env", "KOPT_TEST_KEY"}}}}}};
  daemon_process d(dir.path(), cfg);
  fs::create_directories(d.state());
  const auto id = submit(d, llm_operator("openai", 3, 2), "vadd");
  d.spawn({"KOPT_TEST_KEY=sk-test-not-a-key"});
  d.wait_ready();
  ASSERT_TRUE(eventually([&] { return d.campaign_state(id) == "done"; }, 120s)) << d.log();

  const auto reqs = srv.requests();
  ASSERT_GE(reqs.size(), 6u) << d.log();
  bool revise_seen = false;
  for (const auto& r : reqs) {
    ASSERT_TRUE(r.contains("messages"));
    const std::string sys = r["messages"][0].value("content", "");
    const std::string user = r["messages"].back().value("content", "");
    EXPECT_EQ(r["messages"][0]["role"], "system");
    EXPECT_EQ(sys.find("You write fast, correct CUDA kernels for NVIDIA GPUs.\n"),
              std::string::npos)
        << "the placeholder system prompt was sent";
    EXPECT_NE(user.find("## Operator"), std::string::npos) << user.substr(0, 400);
    if (user.find("Improve the current kernel") != std::string::npos) {
      revise_seen = true;
      EXPECT_NE(user.find("[kb:"), std::string::npos)
          << "no knowledge-base snippet in a revise prompt";
      EXPECT_NE(user.find("## Measurements of the current kernel"), std::string::npos);
      EXPECT_NE(user.find("| n1k |"), std::string::npos) << "the parent's measurements are missing";
    }
  }
  EXPECT_TRUE(revise_seen) << "no revise prompt was sent";

  // Every call linked to its iteration, every LLM candidate to its call.
  EXPECT_GE(d.scalar("SELECT count(*) FROM llm_calls WHERE campaign_id = " + std::to_string(id)),
            6);
  EXPECT_EQ(d.scalar("SELECT count(*) FROM llm_calls WHERE iteration_id IS NULL"), 0);
  EXPECT_GE(d.scalar("SELECT count(*) FROM candidates WHERE origin = 'llm'"), 1);
  EXPECT_EQ(
      d.scalar("SELECT count(*) FROM candidates WHERE origin = 'llm' AND llm_call_id IS NULL"), 0);
  // The call a candidate names belongs to that candidate's iteration.
  EXPECT_EQ(d.scalar("SELECT count(*) FROM candidates c JOIN llm_calls l ON l.id = c.llm_call_id "
                     "WHERE l.iteration_id IS NOT c.iteration_id"),
            0);

  const auto cand = d.scalar("SELECT min(id) FROM candidates WHERE origin = 'llm'");
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(30s).has_value());
  auto [rc, out] =
      run_kopt({"--db", d.db_path().string(), "show", "candidate", std::to_string(cand)},
               dir.path(), "show");
  ASSERT_EQ(rc, 0) << slurp(dir.path() / "show.err");
  EXPECT_NE(out.find("--- system"), std::string::npos) << out;
  EXPECT_NE(out.find("--- user"), std::string::npos) << out;
  EXPECT_NE(out.find("## Operator"), std::string::npos) << out;
  EXPECT_NE(out.find("--- answer"), std::string::npos) << out;
  EXPECT_NE(out.find("A faster version."), std::string::npos) << out;
  EXPECT_EQ(out.find("not linked to one candidate"), std::string::npos) << out;

  auto [lrc, log] = run_kopt({"--db", d.db_path().string(), "log", std::to_string(id), "--json"},
                             dir.path(), "log");
  ASSERT_EQ(lrc, 0) << slurp(dir.path() / "log.err");
  const json lj = json::parse(log);
  std::int64_t calls = 0;
  for (const auto& it : lj.at("iterations"))
    if (it.value("number", 0) > 0) {
      EXPECT_EQ(it.value("llm_calls", 0), 2) << it.dump();
      calls += it.value("llm_calls", 0);
    }
  EXPECT_EQ(calls, static_cast<std::int64_t>(reqs.size()));
}

// A replay campaign killed with -9 in the middle and restarted proposes
// exactly what an uninterrupted one does: the restarted process skips the
// transcript answers the campaign already used.
TEST(DaemonReplayCampaign, KilledAndRestartedProposesWhatAnUninterruptedOneDoes) {
  temp_dir dir;
  const auto transcript = dir.path() / "transcript.jsonl";
  {
    std::string lines;
    for (int i = 1; i <= 24; ++i)
      lines += json{{"response", answer(fmt::format("// speed {:.4f} line {}", 1.0 - 0.01 * i, i))}}
                   .dump() +
               "\n";
    spit(transcript, lines);
  }
  auto run_one = [&](const std::string& name, bool kill_midway) {
    const auto sub = dir.path() / name;
    fs::create_directories(sub);
    json cfg = {{"evaluator", "fake"},
                {"gpus", 1},
                {"fake", {{"delay_ms", kill_midway ? 40 : 0}}},
                {"providers", {{"replay", {{"transcript", transcript.string()}}}}}};
    daemon_process d(sub, cfg);
    fs::create_directories(d.state());
    json op = llm_operator("replay", 8, 3);
    const auto id = submit(d, op, "vadd");
    d.spawn();
    d.wait_ready();
    if (kill_midway) {
      EXPECT_TRUE(eventually([&] {
        return d.scalar("SELECT spent_iterations FROM campaigns WHERE id = " +
                        std::to_string(id)) >= 3;
      })) << d.log();
      d.kill9();
      d.spawn();
      d.wait_ready();
    }
    EXPECT_TRUE(eventually([&] { return d.campaign_state(id) == "done"; }, 120s)) << d.log();
    auto got = proposed_sources(d, id);
    d.signal(SIGTERM);
    d.wait_exit(30s);
    return got;
  };
  // The K calls of an iteration run in parallel, so which call gets which
  // transcript line varies from run to run: compare each iteration's set.
  auto sorted = [](std::map<std::int64_t, std::vector<std::string>> m) {
    for (auto& [n, v] : m) std::sort(v.begin(), v.end());
    return m;
  };
  const auto straight = sorted(run_one("straight", false));
  const auto killed = sorted(run_one("killed", true));
  ASSERT_GE(straight.size(), 8u);
  EXPECT_EQ(straight, killed);
  std::set<std::string> distinct;
  for (const auto& [n, v] : straight) distinct.insert(v.begin(), v.end());
  EXPECT_GE(distinct.size(), 20u) << "the transcript was not served in order";
}
