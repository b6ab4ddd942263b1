// Several models in one campaign, end to end (issue 20): a campaign session
// (what `kopt run` and the daemon both run) with `llm.models` of three
// models behind a loopback OpenAI Chat Completions server, the real loop,
// the fake evaluator and the store. The server answers by the request's
// `model`: "fake-cheap" ($) writes wrong kernels, "fake-mid" ($$) makes its
// parent 5 % faster until, after its eighth call, it runs out of ideas,
// "fake-strong" ($$$$, tier 1) makes it 7 % faster every time. The test
// checks that every call and candidate is stored with the model that
// answered it, that the bandit learns from the promotions (most calls go
// to the model with the best gain per dollar, not to the strongest), that
// stagnation escalates to the strong model and a gain brings the campaign
// back, and that `kopt report` breaks the results down per model the way
// the router counted them. A control prices the strong model like the mid
// one; a campaign split over many sessions (as the daemon's steps) makes
// the same choices as one run straight through; and a real `kopt daemon`
// interleaving two campaigns keeps each one's router across its steps.
#include <fmt/format.h>
#include <httplib.h>

#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <regex>

#include "campaign/session.hpp"
#include "campaign/sources.hpp"
#include "campaign/submission.hpp"
#include "llm/router.hpp"
#include "report/data.hpp"
#include "report/models.hpp"
#include "support.hpp"

using namespace kopt;
using namespace kopt::test;
using json = nlohmann::json;

namespace {

constexpr int mid_ideas = 8;  // fake-mid's calls that still improve its parent

struct served {
  std::string model;
  double parent_speed = 0;
  int markers = 0;  // "// speed" markers in the prompt
  double speed = 0;
  std::string tag;
};

// Answers request N for model M with a kernel "// speed X // M answer N",
// X = the parent's speed times the model's factor. The parent's speed is
// the last "// speed" marker in the prompt: the parent kernel is the only
// source with one (snippets, history and the answer format carry none),
// and the test checks that every prompt had exactly one.
class model_server {
 public:
  model_server() {
    svr_.Post("/v1/chat/completions", [this](const httplib::Request& rq, httplib::Response& res) {
      const json body = json::parse(rq.body, nullptr, false);
      if (!body.is_object()) {
        res.status = 400;
        return;
      }
      const std::string model = body.value("model", "");
      std::string user;
      for (const auto& m : body.value("messages", json::array()))
        if (m.value("role", "") == "user") user = m.value("content", "");
      served s;
      s.model = model;
      for (auto at = user.find("// speed "); at != std::string::npos;
           at = user.find("// speed ", at + 1))
        ++s.markers;
      const auto p = user.rfind("// speed ");
      s.parent_speed = p == std::string::npos ? 0 : std::stod(user.substr(p + 9));
      std::string marker;
      {
        std::lock_guard lk(mu_);
        const int n = ++calls_[model];
        s.tag = fmt::format("{} answer {}", model, n);
        if (model == "fake-cheap") {
          s.speed = 0.9 * s.parent_speed;
          marker = fmt::format("// speed {:.6f} // broken // {}", s.speed, s.tag);
        } else {
          const double factor = model == "fake-strong" ? 0.93 : n <= mid_ideas ? 0.95 : 1.25;
          s.speed = factor * s.parent_speed;
          marker = fmt::format("// speed {:.6f} // {}", s.speed, s.tag);
        }
        served_.push_back(s);
      }
      json k = kernel("vadd_llm", marker);
      const std::string src = k.at("source");
      k.erase("source");
      const std::string text =
          "Here it is.\n\n```cuda\n" + src + "```\n\n```json\n" + k.dump(2) + "\n```\n";
      res.set_content(
          json{{"id", "chatcmpl-" + s.tag},
               {"object", "chat.completion"},
               {"model", model},
               {"choices",
                {{{"index", 0},
                  {"message", {{"role", "assistant"}, {"content", text}}},
                  {"finish_reason", "stop"}}}},
               {"usage",
                {{"prompt_tokens", 1200}, {"completion_tokens", 300}, {"total_tokens", 1500}}}}
              .dump(),
          "application/json");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~model_server() {
    svr_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::vector<served> served_answers() const {
    std::lock_guard lk(mu_);
    return served_;
  }

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<std::string, int> calls_;
  std::vector<served> served_;
};

// USD per million tokens: a call (1200 + 300 tokens) costs $0.0015, $0.015
// and, at the default strong_price, $0.75.
json llm_section(int port, double strong_price = 500) {
  return json::parse(fmt::format(R"({{
    "provider": "openai", "base_url": "http://127.0.0.1:{}/v1", "api_key_env": "KOPT_TEST_KEY",
    "max_tokens": 2000,
    "prices": {{"fake-cheap": {{"input": 1, "output": 1}},
               "fake-mid": {{"input": 10, "output": 10}},
               "fake-strong": {{"input": {}, "output": {}}}}},
    "models": [
      {{"name": "cheap", "model": "fake-cheap"}},
      {{"name": "mid", "model": "fake-mid"}},
      {{"name": "strong", "model": "fake-strong", "tier": 1}}],
    "selection": {{"policy": "bandit", "exploration": 0.2}},
    "escalation": {{"after_stagnant_iterations": 2, "follow_campaign": true}}
  }})",
                                 port, strong_price, strong_price));
}

const std::map<std::string, std::string> label_of_model = {
    {"fake-cheap", "cheap"}, {"fake-mid", "mid"}, {"fake-strong", "strong"}};

// A 14-iteration vadd campaign, K = 2, whose LLM is the llm.models section.
struct multi_model_campaign {
  temp_dir dir;
  store::store db;
  config::operator_config op;
  store::row_id id = 0;
  std::unique_ptr<campaign::session> session;

  campaign::session_options so;

  explicit multi_model_campaign(const json& section)
      : db(store::store::open(dir.path() / "kopt.db")) {
    setenv("KOPT_TEST_KEY", "sk-test-not-a-key", 1);
    json opj = campaign_operator("vadd", 14);
    opj["campaign"]["provider"] = "openai";
    opj["campaign"]["model"] = "fake-mid";
    opj["campaign"]["candidates_per_iteration"] = 2;
    // A seed without tunable parameters: its time is its "// speed 1.0",
    // so that the first promotion gains what the model's factor says and
    // not also the seed's parameter penalty.
    opj["seed"] = kernel("seed", "// speed 1.0");
    op = load_op(opj);
    store::campaign_record rec;
    rec.operator_id = campaign::store_operator(db, op).operator_id;
    rec.provider = "openai";
    rec.model = "fake-mid";
    rec.settings = campaign::campaign_settings_json(op.campaign);
    rec.budget.iterations = 14;
    id = db.create_campaign(rec);
    so.llm_section = section;
    new_session();
  }
  // A new session on the stored campaign, as the daemon builds one per step.
  void new_session() {
    const campaign::evaluator_factory fake = [](const config::operator_config&,
                                                const campaign::evaluator_spec&) {
      return std::unique_ptr<campaign::evaluator>(
          std::make_unique<campaign::fake_evaluator>(default_model()));
    };
    session.reset();
    session = std::make_unique<campaign::session>(db, id, op, so, fake);
  }
  // Iteration number -> the labels of its calls (meta.model).
  std::map<std::int64_t, std::vector<std::string>> labels_per_iteration() {
    std::map<store::row_id, std::int64_t> number;
    for (const auto& it : db.iterations_of(id)) number[it.id] = it.number;
    std::map<std::int64_t, std::vector<std::string>> out;
    for (const auto& c : db.llm_calls_of(id))
      if (c.iteration_id)
        out[number.at(*c.iteration_id)].push_back(c.request.at("meta").value("model", ""));
    return out;
  }
};

}  // namespace

TEST(MultiModelCampaign, BanditEscalationAndPerModelRecordsThroughTheSession) {
  model_server srv;
  multi_model_campaign mc(llm_section(srv.port()));
  auto& db = mc.db;
  const auto id = mc.id;
  auto& s = *mc.session;
  const auto& dir = mc.dir;
  auto* src = dynamic_cast<campaign::llm_source*>(&s.source());
  ASSERT_NE(src, nullptr);
  ASSERT_EQ(src->models().size(), 3u);
  EXPECT_EQ(src->models().policy(), llm::selection_policy::bandit);
  std::vector<std::int64_t> progressed;
  campaign::loop_hooks hooks;
  hooks.on_progress = [&](const campaign::progress& p) { progressed.push_back(p.iteration); };
  const auto result = s.run(hooks);
  EXPECT_TRUE(result.finished) << result.stop_reason;
  EXPECT_FALSE(result.stopped_on_error) << result.stop_reason;
  // The caller's progress hook still runs (the session chains the router's after it).
  EXPECT_GE(progressed.size(), 10u);

  const auto answers = srv.served_answers();
  for (const auto& a : answers) {
    EXPECT_GT(a.parent_speed, 0) << "no parent kernel in the prompt";
    EXPECT_EQ(a.markers, 1) << "the parent is not the only kernel with a speed marker";
  }

  // --- each call and candidate stored with its model -------------------------------
  const auto calls = db.llm_calls_of(id);
  ASSERT_EQ(calls.size(), answers.size());
  std::map<std::string, int> served_per_model, stored_per_model;
  for (const auto& a : answers) ++served_per_model[a.model];
  std::map<store::row_id, const store::llm_call_record*> call_by_id;
  std::map<store::row_id, std::int64_t> iteration_number;
  for (const auto& it : db.iterations_of(id)) iteration_number[it.id] = it.number;
  // iteration number -> labels of its calls
  std::map<std::int64_t, std::vector<std::string>> labels_of_iteration;
  for (const auto& c : calls) {
    call_by_id[c.id] = &c;
    ++stored_per_model[c.model];
    EXPECT_EQ(c.provider, "openai");
    EXPECT_EQ(c.status, "ok");
    ASSERT_TRUE(label_of_model.count(c.model)) << c.model;
    const json& meta = c.request.at("meta");
    EXPECT_EQ(meta.value("model", ""), label_of_model.at(c.model)) << meta.dump();
    ASSERT_TRUE(c.iteration_id.has_value());
    labels_of_iteration[iteration_number.at(*c.iteration_id)].push_back(meta.value("model", ""));
  }
  EXPECT_EQ(stored_per_model, served_per_model);
  EXPECT_EQ(stored_per_model.size(), 3u) << "not every model was tried";
  std::int64_t llm_candidates = 0;
  for (const auto& c : db.candidates_of(id)) {
    if (c.origin != store::candidate_origin::llm) continue;
    ++llm_candidates;
    ASSERT_TRUE(c.llm_call_id.has_value()) << c.id;
    const auto* call = call_by_id.at(*c.llm_call_id);
    // The answer the server wrote for this model is the candidate's source.
    EXPECT_NE(c.source.find("// " + call->model + " answer "), std::string::npos) << c.source;
    EXPECT_EQ(c.model.value_or(""), call->model);
    EXPECT_EQ(c.provider.value_or(""), "openai");
    EXPECT_EQ(c.iteration_id, call->iteration_id);
    ASSERT_TRUE(c.note.has_value());
    EXPECT_EQ(c.note->rfind(label_of_model.at(call->model) + " call ", 0), 0u) << *c.note;
  }
  EXPECT_EQ(llm_candidates, static_cast<std::int64_t>(calls.size()));

  // --- the bandit: exploration, then gain per dollar decides ------------------------
  // Untried models go first: the first two iterations call all three.
  std::set<std::string> first_two(labels_of_iteration[1].begin(), labels_of_iteration[1].end());
  first_two.insert(labels_of_iteration[2].begin(), labels_of_iteration[2].end());
  EXPECT_EQ(first_two, (std::set<std::string>{"cheap", "mid", "strong"}));
  // Promotions per iteration, and which model's candidate won.
  std::map<std::int64_t, std::string> winner;
  std::map<std::string, double> gain_of;
  for (const auto& e : db.events_of(id)) {
    if (e.kind != "promoted") continue;
    const auto ch = db.find_candidate(e.data.at("challenger").get<store::row_id>());
    ASSERT_TRUE(ch.has_value());
    const std::string label = label_of_model.at(ch->model.value_or(""));
    winner[e.data.value("iteration", std::int64_t{0})] = label;
    gain_of[label] += e.data.at("decision").value("gain", 0.0);
  }
  std::string trajectory;  // printed with any failure below
  for (const auto& [n, labels] : labels_of_iteration)
    trajectory += fmt::format("{}: {} -> {}\n", n, fmt::join(labels, " "),
                              winner.count(n) ? winner[n] : std::string("-"));
  SCOPED_TRACE(trajectory);
  std::cout << "iteration: models called -> whose candidate was promoted\n" << trajectory;
  EXPECT_EQ(gain_of.count("cheap"), 0u) << "a wrong kernel was promoted";
  EXPECT_GT(gain_of["mid"], 0);
  EXPECT_GT(gain_of["strong"], 0);
  // Once every model was tried, the cheap-and-good model gets the calls
  // while it still improves: the strong one brings more per promotion
  // but 50 times less per dollar, the cheap one nothing.
  std::map<std::string, int> while_mid_improves;
  int mid_calls = 0;
  for (std::int64_t n = 3; n < 100 && labels_of_iteration.count(n); ++n) {
    int mid_here = 0;
    for (const auto& l : labels_of_iteration[n]) mid_here += l == "mid";
    // Count only iterations that start while fake-mid has ideas left.
    if (mid_calls + 1 > mid_ideas) break;
    for (const auto& l : labels_of_iteration[n]) ++while_mid_improves[l];
    mid_calls += mid_here;
  }
  EXPECT_GE(while_mid_improves["mid"], 4)
      << "mid " << while_mid_improves["mid"] << ", strong " << while_mid_improves["strong"]
      << ", cheap " << while_mid_improves["cheap"];
  EXPECT_GT(while_mid_improves["mid"],
            2 * (while_mid_improves["strong"] + while_mid_improves["cheap"]));

  // --- escalation: two iterations without a gain move to the strong model, a
  // gain moves back ------------------------------------------------------------------
  int stagnant = 0;
  int escalated_iterations = 0, returns = 0;
  bool was_escalated = false;
  for (const auto& [n, labels] : labels_of_iteration) {
    const bool all_strong =
        std::all_of(labels.begin(), labels.end(), [](const auto& l) { return l == "strong"; });
    if (stagnant >= 2) {
      EXPECT_TRUE(all_strong) << "iteration " << n << " after " << stagnant
                              << " iterations without gain called "
                              << fmt::format("{}", fmt::join(labels, " "));
      ++escalated_iterations;
    }
    if (was_escalated && !all_strong) ++returns;
    was_escalated = stagnant >= 2;
    if (winner.count(n)) {
      stagnant = 0;
    } else {
      ++stagnant;
    }
  }
  EXPECT_GE(escalated_iterations, 1) << "fake-mid's stall never escalated";
  EXPECT_GE(returns, 1) << "a gain did not bring the campaign back to the cheaper models";

  // --- the router's statistics are what the store says --------------------------------
  const auto stats = src->models().stats();
  std::map<std::string, llm::arm_stats> by_label;
  for (const auto& st : stats) by_label[st.label] = st;
  for (const auto& [model, label] : label_of_model) {
    EXPECT_EQ(by_label[label].calls, stored_per_model[model]) << label;
    EXPECT_EQ(by_label[label].model, model);
    EXPECT_NEAR(by_label[label].gain, gain_of[label], 1e-9) << label;
  }
  EXPECT_EQ(by_label["cheap"].promotions, 0);
  EXPECT_NEAR(by_label["strong"].cost_usd, 0.75 * stored_per_model["fake-strong"], 1e-9);

  // --- the report: per model, as the router counted -----------------------------------
  const auto d = report::load_campaign(db, id);
  const auto rows = report::model_breakdown(d);
  ASSERT_EQ(rows.size(), 3u);
  std::int64_t wins = 0;
  for (const auto& r : rows) {
    SCOPED_TRACE(r.label);
    const auto& st = by_label.at(r.label);
    EXPECT_EQ(r.model, st.model);
    EXPECT_EQ(r.calls, st.calls);
    EXPECT_EQ(r.failed_calls, 0);
    EXPECT_EQ(r.tokens(), 1500 * st.calls);
    EXPECT_NEAR(r.cost_usd, st.cost_usd, 1e-9);
    EXPECT_EQ(r.candidates, st.calls);  // one answer, one candidate per call
    EXPECT_EQ(r.wins, st.promotions);
    EXPECT_NEAR(r.gain, st.gain, 1e-9);
    EXPECT_EQ(r.compiled, r.candidates);
    wins += r.wins;
  }
  EXPECT_EQ(wins, static_cast<std::int64_t>(winner.size()));
  std::map<std::string, const report::model_row*> row_of;
  for (const auto& r : rows) row_of[r.label] = &r;
  EXPECT_EQ(row_of.at("cheap")->correct, 0);
  EXPECT_EQ(row_of.at("cheap")->faster, 0);
  EXPECT_EQ(row_of.at("mid")->correct, row_of.at("mid")->candidates);
  EXPECT_GT(*row_of.at("mid")->gain_per_usd(), 10 * *row_of.at("strong")->gain_per_usd());
  const bool strong_best = row_of.at("strong")->has_best, mid_best = row_of.at("mid")->has_best;
  EXPECT_TRUE(strong_best != mid_best) << "exactly one model wrote the campaign's best";

  // Per strategy hint: call 1 of each iteration has none, calls 2..K one.
  const auto hint_rows = report::hint_breakdown(d);
  std::int64_t hinted_calls = 0, none_calls = 0;
  for (const auto& h : hint_rows) {
    hinted_calls += h.calls;
    if (h.label == "none") none_calls = h.calls;
  }
  EXPECT_EQ(hinted_calls, static_cast<std::int64_t>(calls.size()));
  EXPECT_EQ(none_calls, static_cast<std::int64_t>(labels_of_iteration.size()));
  EXPECT_GE(hint_rows.size(), 2u);

  // `kopt report --json` prints the same breakdown; the text form names each model.
  auto [rc, out] =
      run_kopt({"--db", (dir.path() / "kopt.db").string(), "report", std::to_string(id), "--json"},
               dir.path(), "report");
  ASSERT_EQ(rc, 0) << slurp(dir.path() / "report.err");
  const json rj = json::parse(out);
  EXPECT_EQ(rj.at("models"), report::attribution_json(d).at("models"));
  EXPECT_FALSE(rj.at("hints").empty());
  // `kopt log --json`: the models each iteration called.
  auto [lrc, log] =
      run_kopt({"--db", (dir.path() / "kopt.db").string(), "log", std::to_string(id), "--json"},
               dir.path(), "log");
  ASSERT_EQ(lrc, 0) << slurp(dir.path() / "log.err");
  const json log_json = json::parse(log);  // range-for over .at() of a temporary would dangle
  for (const auto& it : log_json.at("iterations")) {
    const auto n = it.value("number", std::int64_t{0});
    if (n == 0) continue;
    std::map<std::string, int> expected;
    for (const auto& l : labels_of_iteration[n]) ++expected[l];
    EXPECT_EQ(it.at("models"), json(expected)) << "iteration " << n;
  }
  auto [trc, text] =
      run_kopt({"--db", (dir.path() / "kopt.db").string(), "report", std::to_string(id)},
               dir.path(), "report-text");
  ASSERT_EQ(trc, 0) << slurp(dir.path() / "report-text.err");
  for (const char* l : {"cheap", "mid", "strong", "openai/fake-strong", "MODEL", "WINS"})
    EXPECT_NE(text.find(l), std::string::npos) << l << "\n" << text;
}

// The control: the same models with the strong one priced like the mid
// one. Its larger gains now also make it the best per dollar, and the
// bandit sends it the calls: what decided above was the price.
TEST(MultiModelCampaign, PricedLikeTheMidModelTheStrongOneGetsTheCalls) {
  model_server srv;
  multi_model_campaign mc(llm_section(srv.port(), 10));
  const auto result = mc.session->run({});
  EXPECT_TRUE(result.finished) << result.stop_reason;
  const auto labels = mc.labels_per_iteration();
  std::map<std::string, int> count;
  std::string trajectory;
  for (const auto& [n, ls] : labels) {
    trajectory += fmt::format("{}: {}\n", n, fmt::join(ls, " "));
    if (n >= 3 && n <= 5)
      for (const auto& l : ls) ++count[l];
  }
  EXPECT_GE(count["strong"], 5) << trajectory;
  EXPECT_LE(count["mid"], 1) << trajectory;
}

// The daemon builds a new session for every step of a campaign, `kopt run`
// one per invocation: the router must start from what the store says the
// earlier ones learnt. A campaign run in two sessions, split after
// iteration 7 (fake-mid has stalled twice: the next iteration escalates),
// calls the same models in every iteration as one run straight through.
TEST(MultiModelCampaign, ANewSessionResumesTheRoutersStatisticsAndEscalation) {
  std::map<std::int64_t, std::vector<std::string>> straight, split;
  std::vector<llm::arm_stats> straight_stats;
  {
    model_server srv;
    multi_model_campaign mc(llm_section(srv.port()));
    ASSERT_TRUE(mc.session->run({}).finished);
    straight = mc.labels_per_iteration();
    straight_stats = dynamic_cast<campaign::llm_source&>(mc.session->source()).models().stats();
  }
  model_server srv;
  multi_model_campaign mc(llm_section(srv.port()));
  campaign::run_limits first;
  first.max_iterations = 7;
  const auto r1 = mc.session->run({}, first);
  EXPECT_FALSE(r1.finished);
  EXPECT_EQ(r1.iterations_run, 7);
  mc.new_session();
  auto& models = dynamic_cast<campaign::llm_source&>(mc.session->source()).models();
  // Restored before any call of the new session.
  EXPECT_EQ(models.escalation_level(), 1);
  std::int64_t restored_calls = 0;
  for (const auto& st : models.stats()) restored_calls += st.calls;
  EXPECT_EQ(restored_calls, static_cast<std::int64_t>(mc.db.llm_calls_of(mc.id).size()));
  // Then one session per iteration, as the daemon's steps when campaigns
  // take turns.
  campaign::run_limits one;
  one.max_iterations = 1;
  for (int step = 0; step < 20; ++step) {
    if (mc.session->run({}, one).finished) break;
    mc.new_session();
  }
  EXPECT_EQ(mc.db.find_campaign(mc.id)->state, store::campaign_state::done);
  split = mc.labels_per_iteration();
  auto show = [](const std::map<std::int64_t, std::vector<std::string>>& m) {
    std::string out;
    for (const auto& [n, ls] : m) out += fmt::format("{}: {}\n", n, fmt::join(ls, " "));
    return out;
  };
  // The K calls of an iteration run in parallel and are stored as they end:
  // compare each iteration's models as a sorted list.
  for (auto* m : {&straight, &split})
    for (auto& [n, ls] : *m) std::sort(ls.begin(), ls.end());
  EXPECT_EQ(straight, split) << "straight:\n" << show(straight) << "split:\n" << show(split);
  const auto split_stats =
      dynamic_cast<campaign::llm_source&>(mc.session->source()).models().stats();
  ASSERT_EQ(split_stats.size(), straight_stats.size());
  for (std::size_t i = 0; i < split_stats.size(); ++i) {
    EXPECT_EQ(split_stats[i].calls, straight_stats[i].calls) << split_stats[i].label;
    EXPECT_EQ(split_stats[i].promotions, straight_stats[i].promotions) << split_stats[i].label;
    EXPECT_NEAR(split_stats[i].gain, straight_stats[i].gain, 1e-9) << split_stats[i].label;
    EXPECT_NEAR(split_stats[i].cost_usd, straight_stats[i].cost_usd, 1e-9) << split_stats[i].label;
  }
}

// The same models under a real `kopt daemon` with its fake evaluator (its
// own timing model: gains are not the server's factors), two campaigns and
// one active at a time: every iteration of one is a step that yields to the
// other, so each step builds a new session. The routers keep what they
// learnt: the cheap model is called once per campaign, when untried, and
// an escalation after two iterations without gain holds across steps.
TEST(MultiModelDaemon, InterleavedCampaignsKeepTheirRoutersAcrossSteps) {
  model_server srv;
  temp_dir dir;
  json cfg = {{"evaluator", "fake"},
              {"gpus", 1},
              {"fake", {{"delay_ms", 0}}},
              // One campaign at a time: a step yields after each
              // iteration to the other, waiting one.
              {"limits", {{"min_step_s", 0}, {"max_active_campaigns", 1}}},
              {"providers", {{"openai", llm_section(srv.port())}}}};
  daemon_process d(dir.path(), cfg);
  fs::create_directories(d.state());
  std::vector<store::row_id> ids;
  for (const std::string name : {"vadd_a", "vadd_b"}) {
    json op = campaign_operator(name, 8);
    op["seed"] = kernel("seed", "// speed 1.0");
    op["campaign"]["provider"] = "openai";
    op["campaign"]["model"] = "fake-mid";
    op["campaign"]["candidates_per_iteration"] = 2;
    const auto file = dir.path() / (name + ".json");
    spit(file, op.dump(2));
    auto [rc, out] =
        run_kopt({"--db", d.db_path().string(), "submit", file.string()}, dir.path(), name);
    ASSERT_EQ(rc, 0) << slurp(dir.path() / (name + ".err"));
    ids.push_back(std::stoll(out));
  }
  d.spawn({"KOPT_TEST_KEY=sk-test-not-a-key"});
  d.wait_ready();
  ASSERT_TRUE(eventually(
      [&] { return d.campaign_state(ids[0]) == "done" && d.campaign_state(ids[1]) == "done"; },
      180s))
      << d.log();
  auto db = d.reader();
  // The steps interleaved: each campaign ran iterations while the other
  // had unfinished ones.
  auto span = [&](store::row_id id) {
    std::int64_t first = std::numeric_limits<std::int64_t>::max(), last = 0;
    for (const auto& it : db.iterations_of(id)) {
      if (it.number == 0) continue;
      first = std::min(first, it.started_at);
      last = std::max(last, it.finished_at.value_or(0));
    }
    return std::pair{first, last};
  };
  const auto a = span(ids[0]), b = span(ids[1]);
  EXPECT_TRUE(a.first < b.second && b.first < a.second) << "the campaigns did not interleave";
  for (const auto id : ids) {
    std::map<std::string, int> per_label;
    std::map<store::row_id, std::int64_t> number;
    std::map<std::int64_t, std::string> strategy;
    std::map<std::int64_t, std::vector<std::string>> labels;
    std::map<std::int64_t, std::string> calls_of;  // printed with a failure
    for (const auto& it : db.iterations_of(id)) {
      number[it.id] = it.number;
      strategy[it.number] = it.strategy;
      calls_of[it.number] = it.strategy + ":";
    }
    for (const auto& c : db.llm_calls_of(id)) {
      const std::string label = c.request.at("meta").value("model", "");
      ++per_label[label];
      const auto n = number[c.iteration_id.value_or(0)];
      labels[n].push_back(label);
      calls_of[n] += " " + label;
    }
    std::set<std::int64_t> promoted;
    for (const auto& e : db.events_of(id)) {
      if (e.kind != "promoted") continue;
      promoted.insert(e.data.value("iteration", std::int64_t{0}));
      calls_of[e.data.value("iteration", std::int64_t{0})] += " -> promoted";
    }
    std::string trajectory;
    for (const auto& [n, ls] : calls_of) trajectory += fmt::format("{}:{}\n", n, ls);
    SCOPED_TRACE(trajectory);
    EXPECT_EQ(per_label["mid"] + per_label["strong"] + per_label["cheap"], 16);
    // Explored once, when untried; a router rebuilt empty at every step
    // would try it again at each of them.
    EXPECT_EQ(per_label["cheap"], 1) << "the cheap model was explored again";
    // Escalation outlives the steps: after two iterations without a
    // promotion (two steps), only the strong model is called, although the
    // loop itself did not escalate to a restart or a new algorithm.
    int escalated = 0;
    for (std::int64_t n = 3; n <= 8; ++n) {
      const bool stalled_loop = strategy[n] == "restart_elite" || strategy[n] == "new_algorithm";
      if (promoted.count(n - 1) || promoted.count(n - 2) || stalled_loop) continue;
      EXPECT_EQ(labels[n], (std::vector<std::string>{"strong", "strong"})) << "iteration " << n;
      ++escalated;
    }
    EXPECT_GE(escalated, 1) << "no two iterations in a row without a promotion";
  }
  // The progress hook runs for every iteration, also for those after which
  // the step yielded (the loop reports progress before its after_iteration
  // hook, where the daemon yields): the daemon logs each one.
  const std::string log = d.log();
  for (const auto id : ids)
    for (int n = 1; n <= 8; ++n)
      EXPECT_NE(log.find(fmt::format("campaign {}: iteration {} best", id, n)), std::string::npos)
          << "campaign " << id << " iteration " << n;
  d.signal(SIGTERM);
  EXPECT_TRUE(d.wait_exit(30s).has_value());
}
