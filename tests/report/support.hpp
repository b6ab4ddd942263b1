// A realistic campaign store for the report and CLI tests, made without a GPU
// or an LLM: the campaign loop with the fake evaluator (tests/campaign) and a
// scripted source whose candidates compile or not, are wrong, cheat, or are
// slower or faster than their parent, by markers in their source. What an
// LLM source and the GPU worker would add is written the way they write it:
// an llm_calls row per iteration (prompt, response, tokens, latency) linked
// from the first candidate, a compiler log for failed compilations, compile
// durations, and counters with a diagnosis on the best candidate. The fake
// evaluator runs in microseconds, so every timestamp is stretched around the
// campaign's start (order kept) to look like a run of a few minutes.
#pragma once

#include <string>
#include <vector>

#include "../campaign/support.hpp"

namespace kopt::test {

// Per iteration, the markers of its proposals: a speed factor ("0.8": 20 %
// faster than the seed's source), or "nocompile", "broken" (wrong results),
// "cheat" (integrity rejection), each with its own speed.
inline std::vector<std::vector<std::string>> research_script() {
  // Promotions in 1, 4, 5 and 7; 2 and 3 gain nothing, so with a stagnation
  // window of 2 the first escalation step fires after iteration 3.
  return {{"0.85", "nocompile", "broken"},
          {"0.9", "cheat", "1.3"},
          {"1.1", "1.2"},
          {"0.7", "nocompile"},
          {"0.75", "0.6"},
          {"0.95", "broken", "1.4"},
          {"0.55"},
          {"0.8", "cheat"}};
}

inline campaign::fake_evaluator::model research_model() {
  auto base = default_model();
  return [base](const campaign::eval_subject& s, const std::string& w) {
    auto t = base(s, w);
    if (s.candidate.value("source", "").find("// cheat") != std::string::npos)
      t.status = "rejected_integrity";
    return t;
  };
}

struct research_store {
  fixture f;
  store::row_id best = 0;
  store::row_id seed = 0;
  std::vector<store::row_id> llm_call_ids;

  research_store()
      : f(operator_json(), {{"loop", {{"explore_p", 0.0}, {"stagnation_window", 2}}}},
          {8, {}, {}, {}}) {
    const auto script = research_script();
    campaign::scripted_source src([script](const campaign::prompt_context& ctx) {
      campaign::source_answer a;
      const auto i = static_cast<std::size_t>(ctx.iteration - 1);
      if (i >= script.size()) return a;
      int k = 0;
      for (const auto& m : script[i]) {
        std::string marker = "// speed ";
        if (m == "nocompile" || m == "broken" || m == "cheat")
          marker += "0.9 // " + m;
        else
          marker += m;
        marker += "\n  // it" + std::to_string(ctx.iteration) + "_" + std::to_string(k++);
        // Sources that differ in more than the marker, for the diff view.
        json c = kernel("cand",
                        marker +
                            "\n  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
                            "  if (i < n) out[i] = a[i] + b[i];");
        a.proposals.push_back(
            {c, store::candidate_origin::llm, "scripted answer " + std::to_string(k)});
      }
      a.tokens = 2400 + 300 * ctx.iteration;
      a.cost_usd = 0.012 * static_cast<double>(a.proposals.size());
      return a;
    });
    campaign::fake_evaluator ev(research_model(), 0.01);
    campaign::loop_hooks hooks;
    hooks.at = [this](std::string_view point, std::int64_t n) {
      if (point != "after_proposals") return;
      for (const auto& it : f.db.iterations_of(f.campaign_id)) {
        if (it.number != n) continue;
        store::llm_call_record call;
        call.campaign_id = f.campaign_id;
        call.iteration_id = it.id;
        call.provider = "openai";
        call.model = "test-model";
        call.request = {{"temperature", 0.7}, {"max_tokens", 8192}};
        call.prompt = "Improve this kernel (iteration " + std::to_string(n) + ").";
        call.response = "```cuda\n// an improved kernel\n```";
        call.prompt_tokens = 2000 + 100 * n;
        call.completion_tokens = 400 + 200 * n;
        call.cost_usd = 0.012;
        call.latency_ms = 4000.0 + 500.0 * static_cast<double>(n);
        const auto id = f.db.add_llm_call(call);
        llm_call_ids.push_back(id);
        auto st = f.db.db().prepare(
            "UPDATE candidates SET llm_call_id = ? WHERE id = (SELECT min(id) FROM candidates "
            "WHERE iteration_id = ?)");
        st.bind_all(id, it.id).run();
      }
    };
    campaign::campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings(), hooks);
    loop.run();
    const auto c = f.db.find_campaign(f.campaign_id);
    best = c->best_candidate_id.value_or(0);
    for (const auto& cand : f.db.candidates_of(f.campaign_id))
      if (cand.origin == store::candidate_origin::seed) seed = cand.id;

    auto& db = f.db.db();
    db.prepare(
          "UPDATE compilations SET log = 'kernel.cu(2): error: identifier \"undefined_thing\" is "
          "undefined' "
          "WHERE status = 'error'")
        .run();
    db.prepare("UPDATE compilations SET duration_ms = 250 + (id % 7) * 40").run();
    auto counters = db.prepare(
        "UPDATE evaluations SET counters_json = ? WHERE candidate_id = ? AND stage = 'full'");
    counters
        .bind_all(json{{"metrics",
                        {{"dram__throughput.avg.pct_of_peak_sustained_elapsed", 61.5},
                         {"sm__throughput.avg.pct_of_peak_sustained_elapsed", 18.25}}},
                       {"diagnosis",
                        {{"bottleneck", "memory-bound-far-from-peak"},
                         {"notes", json::array({"loads are not vectorized"})}}}},
                  best)
        .run();
    // Stretch time: x -> t0 + (x - t0) * k, for every timestamp of the campaign.
    const std::int64_t t0 = f.db.iterations_of(f.campaign_id).front().started_at;
    const std::int64_t k = 4000;
    const std::string stretch = "{c} = " + std::to_string(t0) + " + ({c} - " + std::to_string(t0) +
                                ") * " + std::to_string(k);
    auto upd = [&](const std::string& table, std::vector<std::string> cols) {
      std::string sql = "UPDATE " + table + " SET ";
      for (std::size_t i = 0; i < cols.size(); ++i) {
        std::string s = stretch;
        for (std::size_t p; (p = s.find("{c}")) != std::string::npos;) s.replace(p, 3, cols[i]);
        sql += (i ? ", " : "") + s;
      }
      db.prepare(sql).run();
    };
    upd("iterations", {"started_at", "finished_at"});
    upd("events", {"created_at"});
    upd("llm_calls", {"created_at"});
    upd("candidates", {"created_at"});
    upd("compilations", {"created_at"});
    upd("evaluations", {"created_at"});
    upd("campaigns", {"started_at", "finished_at", "updated_at"});
  }
  std::filesystem::path db_path() const { return f.dir / "kopt.db"; }
};

}  // namespace kopt::test
