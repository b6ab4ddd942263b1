#include "report/trace.hpp"

#include <algorithm>
#include <map>

namespace kopt::report {

using nlohmann::json;

namespace {

// Assigns spans to the first lane whose previous span ended before this one
// starts, so that spans on one track never overlap (trace viewers need
// complete events on a thread to nest).
class lanes {
 public:
  std::size_t take(std::int64_t start_us, std::int64_t end_us) {
    for (std::size_t i = 0; i < ends_.size(); ++i)
      if (ends_[i] <= start_us) {
        ends_[i] = end_us;
        return i;
      }
    ends_.push_back(end_us);
    return ends_.size() - 1;
  }
  std::size_t count() const { return ends_.size(); }

 private:
  std::vector<std::int64_t> ends_;
};

std::string worker_name(const json& device) {
  if (!device.is_object() || device.empty()) return "worker";
  std::string s = device.value("name", std::string("GPU"));
  const std::string uuid = device.value("uuid", std::string());
  if (!uuid.empty()) s += " " + uuid.substr(0, std::min<std::size_t>(uuid.size(), 12));
  return s;
}

}  // namespace

json chrome_trace(const campaign_data& d) {
  json ev = json::array();
  const int pid = static_cast<int>(d.campaign.id);
  const std::int64_t t0 = d.started_ms.value_or(d.campaign.created_at);
  auto us = [&](std::int64_t ms) { return (ms - t0) * 1000; };
  std::map<std::string, int> tids;
  auto tid_of = [&](const std::string& name, int sort) {
    auto it = tids.find(name);
    if (it != tids.end()) return it->second;
    const int tid = static_cast<int>(tids.size()) + 1;
    tids[name] = tid;
    ev.push_back({{"ph", "M"},
                  {"pid", pid},
                  {"tid", tid},
                  {"name", "thread_name"},
                  {"args", {{"name", name}}}});
    ev.push_back({{"ph", "M"},
                  {"pid", pid},
                  {"tid", tid},
                  {"name", "thread_sort_index"},
                  {"args", {{"sort_index", sort}}}});
    return tid;
  };
  ev.push_back({{"ph", "M"},
                {"pid", pid},
                {"name", "process_name"},
                {"args",
                 {{"name", "kopt campaign " + std::to_string(d.campaign.id) +
                               (d.op ? " (" + d.op->name + ")" : std::string())}}}});

  // Iterations.
  const int it_tid = tid_of("iterations", 0);
  for (const auto& iv : d.iterations) {
    const auto& it = iv.sum->iteration;
    if (!it.finished_at) continue;
    ev.push_back({{"ph", "X"},
                  {"pid", pid},
                  {"tid", it_tid},
                  {"cat", "iteration"},
                  {"name", "iteration " + std::to_string(iv.number) +
                               (it.strategy.empty() ? "" : " " + it.strategy)},
                  {"ts", us(it.started_at)},
                  {"dur", std::max<std::int64_t>(1, (*it.finished_at - it.started_at) * 1000)},
                  {"args",
                   {{"candidates", iv.candidates.size()},
                    {"parent", iv.sum->iteration.parent_candidate_id
                                   ? json(*iv.sum->iteration.parent_candidate_id)
                                   : json(nullptr)},
                    {"best_sol_fraction", iv.best_score ? json(*iv.best_score) : json(nullptr)},
                    {"promoted", iv.promoted},
                    {"note", it.note.value_or("")}}}});
  }

  // LLM calls.
  lanes llm;
  for (const auto& c : d.llm_calls) {
    const double lat = c.latency_ms.value_or(0.0);
    if (!(lat > 0)) continue;
    const std::int64_t end = us(c.created_at);
    const std::int64_t start = end - static_cast<std::int64_t>(lat * 1000.0);
    const std::size_t lane = llm.take(start, end);
    ev.push_back({{"ph", "X"},
                  {"pid", pid},
                  {"tid", tid_of("LLM " + std::to_string(lane + 1), 10 + static_cast<int>(lane))},
                  {"cat", "llm"},
                  {"name", c.model.empty() ? c.provider : c.model},
                  {"ts", start},
                  {"dur", end - start},
                  {"args",
                   {{"call_id", c.id},
                    {"status", c.status},
                    {"prompt_tokens", c.prompt_tokens},
                    {"completion_tokens", c.completion_tokens},
                    {"cost_usd", c.cost_usd},
                    {"attempts", c.attempts}}}});
  }

  // Compilations, on the worker that measured them.
  std::map<row_id, std::string> compile_worker;
  for (const auto& [cid, es] : d.evaluations)
    for (const auto& e : es)
      if (e.compilation_id) compile_worker.emplace(*e.compilation_id, worker_name(e.device));
  std::map<std::string, lanes> compile_lanes;
  for (const auto& [cid, ks] : d.compilations)
    for (const auto& k : ks) {
      const double dur = k.duration_ms.value_or(0.0);
      if (!(dur > 0)) continue;
      const std::string w = compile_worker.count(k.id) ? compile_worker.at(k.id) : "worker";
      const std::int64_t end = us(k.created_at);
      const std::int64_t start = end - static_cast<std::int64_t>(dur * 1000.0);
      const std::size_t lane = compile_lanes[w].take(start, end);
      ev.push_back(
          {{"ph", "X"},
           {"pid", pid},
           {"tid", tid_of(w + " compile" + (lane ? " " + std::to_string(lane + 1) : ""), 30)},
           {"cat", "compile"},
           {"name", "compile " + std::to_string(cid)},
           {"ts", start},
           {"dur", end - start},
           {"args",
            {{"candidate_id", cid},
             {"status", k.status},
             {"parameters", k.parameter_values},
             {"registers", k.registers ? json(*k.registers) : json(nullptr)}}}});
    }

  // Evaluation batches, from the journal.
  std::map<row_id, std::int64_t> iteration_start;
  for (const auto& iv : d.iterations)
    iteration_start[iv.sum->iteration.id] = iv.sum->iteration.started_at;
  std::optional<std::int64_t> prev;
  std::map<std::string, lanes> eval_lanes;
  for (const auto& e : d.events) {
    if (e.kind == "evaluated" && e.data.is_object()) {
      std::int64_t start = prev.value_or(e.created_at);
      if (e.data.contains("iteration_id") && e.data["iteration_id"].is_number_integer()) {
        auto it = iteration_start.find(e.data["iteration_id"].get<row_id>());
        if (it != iteration_start.end()) start = std::max(start, it->second);
      }
      const std::string w = worker_name(e.data.value("device", json::object()));
      json ids = json::array();
      for (const auto& s : e.data.value("subjects", json::array()))
        ids.push_back(s.value("candidate_id", json(nullptr)));
      const std::int64_t s_us = us(start), e_us = std::max(us(e.created_at), s_us + 1);
      const std::size_t lane = eval_lanes[w].take(s_us, e_us);
      ev.push_back(
          {{"ph", "X"},
           {"pid", pid},
           {"tid", tid_of(w + " evaluate" + (lane ? " " + std::to_string(lane + 1) : ""), 20)},
           {"cat", "evaluate"},
           {"name",
            e.data.value("stage", std::string("evaluate")) + " x" + std::to_string(ids.size())},
           {"ts", s_us},
           {"dur", e_us - s_us},
           {"args",
            {{"candidates", ids},
             {"workloads", e.data.value("workloads", json::array())},
             {"reconstructed_start", true}}}});
    }
    if (e.kind == "promoted" || e.kind == "escalation" || e.kind == "escalation_reset" ||
        e.kind == "finished" || e.kind == "resumed") {
      ev.push_back({{"ph", "i"},
                    {"pid", pid},
                    {"tid", it_tid},
                    {"s", "p"},
                    {"cat", "event"},
                    {"name", e.kind},
                    {"ts", us(e.created_at)},
                    {"args", {{"message", e.message}}}});
    }
    prev = e.created_at;
  }

  // Counters.
  for (const auto& p : d.spend)
    ev.push_back({{"ph", "C"},
                  {"pid", pid},
                  {"name", "spend"},
                  {"ts", us(p.at_ms)},
                  {"args", {{"tokens", p.tokens}, {"cost_usd", p.cost_usd}}}});
  for (const auto& iv : d.iterations)
    if (iv.incumbent_score && iv.sum->iteration.finished_at)
      ev.push_back({{"ph", "C"},
                    {"pid", pid},
                    {"name", "best fraction of speed of light"},
                    {"ts", us(*iv.sum->iteration.finished_at)},
                    {"args", {{"sol", *iv.incumbent_score}}}});

  return {{"traceEvents", ev},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"campaign_id", d.campaign.id},
            {"operator", d.op ? d.op->name : std::string()},
            {"time_origin", store::format_time(t0)},
            {"note",
             "evaluation spans start at the loop's previous journal entry (the store keeps no "
             "start time)"}}}};
}

}  // namespace kopt::report
