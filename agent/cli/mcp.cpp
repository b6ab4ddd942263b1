// `kopt mcp`: kopt as a Model Context Protocol server over stdio, the
// harness for coding agents (Claude Code, Codex, ...; docs/agents.md), and
// `kopt propose CAMPAIGN FILE`, the shell way to hand an agent campaign a
// candidate. Every tool is a thin layer over what a CLI command does, through
// the shared functions of cli/shared.hpp and cli/eval_support.hpp, so a tool
// and its command never disagree. Rules the tools keep:
// - no candidate code runs in this process: compiles are `kopt-worker
//   compile` children, evaluations and profiles a kopt-worker;
// - failures are tool results with isError and a status from the store's
//   vocabulary (compile_error, incorrect, rejected_integrity, needs_gpu, ...)
//   plus invalid_input, not_found, store_error, internal_error;
// - stdout carries only the protocol (fd 1 is pointed at stderr while the
//   server runs, so a stray print cannot corrupt it), and every result passes
//   a redactor that knows the API keys in the environment.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <variant>

#include "campaign/agent_source.hpp"
#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/render.hpp"
#include "cli/shared.hpp"
#include "common/error.hpp"
#include "config/operator.hpp"
#include "llm/secrets.hpp"
#include "mcp/server.hpp"
#include "report/views.hpp"
#include "store/agent_submissions.hpp"
#ifdef KOPT_HAVE_WORKER
#include "cli/eval_support.hpp"
#endif

#ifndef KOPT_VERSION
#define KOPT_VERSION "unknown"
#endif

extern char** environ;

namespace kopt::cli {

namespace {

using json = nlohmann::json;
using mcp::tool_result;

// --- schemas -------------------------------------------------------------------

json str(const std::string& d) {
  return {{"type", "string"}, {"description", d}};
}
json integer(const std::string& d) {
  return {{"type", "integer"}, {"description", d}};
}

json object_schema(json props, std::vector<std::string> required = {}) {
  json s = {{"type", "object"}, {"properties", std::move(props)}};
  if (!required.empty()) s["required"] = required;
  return s;
}

// The vocabulary of every result's "status".
const std::vector<std::string>& statuses() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> out = {
        "ok",       "valid",     "invalid",     "pending",        "invalid_input", "not_found",
        "rejected", "needs_gpu", "store_error", "internal_error", "failed"};
    for (auto s : store::eval_status_names()) out.emplace_back(s);
    return out;
  }();
  return v;
}

// Every output schema: "status" (always) and "message" (on errors), plus the
// tool's own fields, all optional, so that an error result validates too.
json output_schema(json props) {
  props["status"] = {{"type", "string"},
                     {"enum", statuses()},
                     {"description", "outcome, in kopt's status vocabulary"}};
  props["message"] = str("what happened, in words (errors)");
  return object_schema(std::move(props), {"status"});
}

json config_props() {
  return {{"config", str("path of an operator config file (JSON)")},
          {"config_text", str("the operator config itself (JSON text), instead of a path")}};
}

json candidate_props() {
  return {{"candidate",
           {{"type", {"object", "string"}},
            {"description",
             "the candidate: an object (or JSON text) in kopt's candidate format: "
             "source, launches, parameters, compile_options"}}},
          {"candidate_file", str("path of a candidate file (JSON), instead of candidate")}};
}

json merge(json a, const json& b) {
  for (const auto& [k, v] : b.items()) a[k] = v;
  return a;
}

// --- results ----------------------------------------------------------------------

tool_result ok(json j, std::string text = {}) {
  if (!j.contains("status")) j["status"] = "ok";
  return {std::move(j), std::move(text), false};
}

tool_result fail(const std::string& status, const std::string& message,
                 json extra = json::object()) {
  extra["status"] = status;
  extra["message"] = message;
  return {std::move(extra), {}, true};
}

// Runs a tool body, turning kopt's exceptions into tool errors.
template <typename F>
tool_result guarded(F&& f) {
  try {
    return f();
  } catch (const kopt::not_found_error& e) {
    return fail("not_found", e.what());
  } catch (const kopt::config_error& e) {
    return fail("invalid_input", e.what());
  } catch (const kopt::store_error& e) {
    return fail("store_error", e.what());
  } catch (const json::exception& e) {
    return fail("invalid_input", std::string("bad JSON: ") + e.what());
  } catch (const kopt::error& e) {
    // kopt's own failures (a worker that cannot start, a broken install).
    return fail("failed", e.what());
  }
}

// --- inputs -------------------------------------------------------------------------

struct loaded_config {
  config::load_result r;
  std::string label;
};

// The operator of a call's config/config_text, or a tool error.
std::variant<loaded_config, tool_result> load_config(const json& a) {
  const std::string path = a.value("config", "");
  const std::string text = a.value("config_text", "");
  if (path.empty() == text.empty())
    return fail("invalid_input", "give exactly one of config (a path) and config_text");
  loaded_config out;
  if (!path.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      return fail("not_found", "no such config file: " + path);
    out.r = config::load_operator_file(path);
    out.label = path;
  } else {
    out.r = config::load_operator_text(text, "config_text", std::filesystem::current_path());
    out.label = "config_text";
  }
  return out;
}

json diagnostics_json(const std::vector<config::diagnostic>& ds) {
  json arr = json::array();
  for (const auto& d : ds) arr.push_back(diagnostic_json(d));
  return arr;
}

// The operator or a tool error naming its diagnostics.
std::variant<config::operator_config, tool_result> need_operator(const json& a) {
  auto lc = load_config(a);
  if (auto* e = std::get_if<tool_result>(&lc)) return *e;
  auto& c = std::get<loaded_config>(lc);
  if (!c.r.ok())
    return fail("invalid_input",
                c.label + " is not a valid operator config (see diagnostics; operator_validate)",
                {{"diagnostics", diagnostics_json(c.r.diagnostics)}});
  return *c.r.op;
}

// The candidate of a call (candidate or candidate_file), validated against op.
std::variant<config::candidate, tool_result> need_candidate(const json& a,
                                                            const config::operator_config& op,
                                                            bool required) {
  const bool has_c = a.contains("candidate"), has_f = a.contains("candidate_file");
  if (has_c && has_f)
    return fail("invalid_input", "give one of candidate and candidate_file, not both");
  if (!has_c && !has_f) {
    if (required)
      return fail("invalid_input", "a candidate is required (candidate or candidate_file)");
    return fail("not_found", "");  // the caller's cue to use the config's kernels
  }
  config::candidate_result r;
  if (has_f) {
    const std::string f = a["candidate_file"].get<std::string>();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(f, ec))
      return fail("not_found", "no such candidate file: " + f);
    r = config::load_candidate_file(f, op);
  } else {
    const json& c = a["candidate"];
    r = config::load_candidate_text(c.is_string() ? c.get<std::string>() : c.dump(), "candidate",
                                    std::filesystem::current_path(), op);
  }
  if (!r.ok())
    return fail("invalid_input", "the candidate does not validate against operator " + op.name,
                {{"diagnostics", diagnostics_json(r.diagnostics)}});
  return *r.cand;
}

std::string candidate_text_of(const json& a) {
  if (a.contains("candidate_file")) {
    std::ifstream in(a["candidate_file"].get<std::string>(), std::ios::binary);
    if (!in) throw kopt::not_found_error("cannot read " + a["candidate_file"].get<std::string>());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  const json& c = a.at("candidate");
  return c.is_string() ? c.get<std::string>() : c.dump();
}

// --- the tools ------------------------------------------------------------------------

struct tool_env {
  const context* ctx = nullptr;
  std::string client_name;  // from initialize's clientInfo, the default agent name
};

tool_result operator_validate(const json& a) {
  auto lc = load_config(a);
  if (auto* e = std::get_if<tool_result>(&lc)) return *e;
  auto& c = std::get<loaded_config>(lc);
  json j = validation_json(c.label, c.r);
  j["status"] = c.r.ok() ? "valid" : "invalid";
  std::string text;
  for (const auto& d : c.r.diagnostics) text += d.to_string() + "\n";
  text += c.r.ok() ? fmt::format("{}: valid (operator {}, {} workloads)", c.label, c.r.op->name,
                                 c.r.op->workloads.size())
                   : fmt::format("{}: invalid", c.label);
  // An invalid config is a finding, not a failed call.
  return ok(j, text + "\n\n" + j.dump(2));
}

tool_result operator_brief(const json& a, const tool_env& env) {
  if (a.contains("campaign_id")) {
    // The brief an agent campaign is waiting on: what its loop composed for
    // the current iteration (the prompt an LLM would have been sent).
    store::store db = env.ctx->open_reader();
    const auto id = a["campaign_id"].get<store::row_id>();
    const auto camp = db.find_campaign(id);
    if (!camp) return fail("not_found", fmt::format("no campaign {}", id));
    const auto b = campaign::latest_agent_brief(db, id);
    if (!b)
      return fail(
          "not_found",
          fmt::format("campaign {} has no brief yet (provider {}, state {}): a brief is written "
                      "when an agent campaign's iteration starts waiting",
                      id, camp->provider, store::to_string(camp->state)));
    json j = b->to_json();
    j["campaign_id"] = id;
    j["waiting"] = store::campaign_waiting(db, id).has_value();
    j["answer_with"] = "candidate_submit (campaign_id, candidate, brief_hash)";
    return ok(j, "===== system =====\n" + b->system + "\n===== user =====\n" + b->user +
                     fmt::format("\n\n(brief_hash {} — pass it to candidate_submit)", b->hash));
  }
  auto opv = need_operator(a);
  if (auto* e = std::get_if<tool_result>(&opv)) return *e;
  const auto& op = std::get<config::operator_config>(opv);
  prompt_request rq;
  rq.config_file = a.value("config", "config_text");
  rq.config_text = a.value("config_text", "");
  rq.template_name = a.value("template", "");
  rq.parent = a.value("parent", "");
  rq.candidate_id = a.value("candidate_id", std::int64_t{0});
  rq.gpu = a.value("gpu", "H200");
  rq.with_snippets = a.value("snippets", true);
  const rendered_prompt r = render_prompt(rq, *env.ctx);
  json j = r.to_json();
  json wl = json::array();
  for (const auto& w : op.workloads) {
    if (w.is_private) continue;  // never shown to a model (docs/integrity.md)
    json axes = json::object();
    for (const auto& [k, v] : w.axes) axes[k] = v;
    wl.push_back({{"id", w.id}, {"weight", w.weight}, {"axes", axes}});
  }
  j["workloads"] = wl;
  j["roofline"] = {{"flops", op.roof.flops},
                   {"flop_unit", op.roof.flop_unit},
                   {"bytes", op.roof.bytes ? json(*op.roof.bytes) : json(nullptr)}};
  json sn = json::array();
  for (const auto& id : r.present_items)
    if (id.rfind("snippet:", 0) == 0) sn.push_back(id.substr(8));
  j["snippets"] = sn;
  return ok(j, "===== system =====\n" + r.system + "\n===== user (" + r.template_name +
                   ") =====\n" + r.user);
}

tool_result kb_search(const json& a) {
  const auto lr = load_knowledge_base({}, false);
  const kb::index idx(lr.documents);
  kb::query q;
  q.text = a.value("text", "");
  q.bottlenecks = a.value("bottlenecks", std::vector<std::string>{});
  q.operator_class = a.value("operator", "");
  q.arch = a.value("arch", "");
  q.kind = a.value("kind", "");
  q.budget_tokens = a.value("budget", std::size_t{1500});
  q.max_documents = a.value("limit", std::size_t{5});
  json j = kb_search_json(idx, q);
  std::string text;
  for (const auto& s : j.value("snippets", json::array()))
    text += "## " + s.value("title", "") + " [" + s.value("id", "") + "]\n" + s.value("text", "") +
            "\n\n";
  if (text.empty()) text = "no document matches\n";
  json out = {{"status", "ok"}, {"retrieval", j}};
  return ok(out, text);
}

tool_result kb_show(const json& a) {
  const auto lr = load_knowledge_base({}, false);
  const std::string id = a.at("id").get<std::string>();
  for (const auto& d : lr.documents)
    if (d.id == id) {
      std::string text = d.title + " [" + d.id + "]\n\n";
      for (const auto& s : d.sections) text += "## " + s.name + "\n\n" + s.text + "\n";
      return ok({{"document", kb_document_json(d)}}, text);
    }
  return fail("not_found", "no knowledge-base document with id '" + id + "' (kb_search lists ids)");
}

tool_result campaign_status(const json& a, const tool_env& env) {
  store::store db = env.ctx->open_reader();
  if (!a.contains("campaign_id")) {
    json arr = json::array();
    const auto waiting = store::waiting_campaigns(db);
    for (const auto& c :
         db.list_campaigns(std::nullopt, std::nullopt, a.value("limit", std::int64_t{20}))) {
      json j = to_json(c);
      const auto w = waiting.find(c.id);
      j["waiting_for"] = w == waiting.end() ? json(nullptr) : json(w->second);
      arr.push_back(std::move(j));
    }
    return ok({{"campaigns", arr}});
  }
  json j = campaign_status_json(db, a["campaign_id"].get<store::row_id>());
  return ok({{"campaign", j}});
}

tool_result campaign_log(const json& a, const tool_env& env) {
  store::store db = env.ctx->open_reader();
  return ok({{"log", campaign_log_json(db, a.at("campaign_id").get<store::row_id>())}});
}

tool_result candidate_show(const json& a, const tool_env& env) {
  store::store db = env.ctx->open_reader();
  json j = candidate_show_json(db, a.at("candidate_id").get<store::row_id>());
  std::string text;
  if (j.contains("source")) text = "```cuda\n" + j.value("source", "") + "\n```\n\n";
  return ok({{"candidate", j}}, text + j.dump(2));
}

tool_result candidate_diff(const json& a, const tool_env& env) {
  store::store db = env.ctx->open_reader();
  json j = report::diff_json(db, a.at("a").get<store::row_id>(), a.at("b").get<store::row_id>());
  return ok({{"diff", j}}, j.value("source_diff", j.dump(2)));
}

tool_result candidate_submit(const json& a, const tool_env& env) {
  const std::string agent =
      a.value("agent", env.client_name.empty() ? std::string("mcp-client") : env.client_name);
  const std::string text = candidate_text_of(a);
  store::store db = env.ctx->open_writer();
  const auto r = campaign::submit_agent_candidate(
      db, a.at("campaign_id").get<store::row_id>(), text, "candidate", agent,
      a.contains("note") ? std::optional<std::string>(a["note"].get<std::string>()) : std::nullopt,
      a.contains("brief_hash") ? std::optional<std::string>(a["brief_hash"].get<std::string>())
                               : std::nullopt);
  json j = {{"campaign_id", a["campaign_id"]},
            {"agent", agent},
            {"diagnostics", diagnostics_json(r.diagnostics)}};
  if (!r.ok()) return fail(r.status, r.message, j);
  j["submission_id"] = *r.submission_id;
  j["status"] = "pending";
  j["message"] = r.message;
  return ok(j, r.message);
}

#ifdef KOPT_HAVE_WORKER
// The subjects of kernel_*: the call's candidate, else the config's baseline
// and seed (else the reference alone, timed).
std::variant<std::vector<runner::subject_spec>, tool_result> subjects_of(
    const json& a, const config::operator_config& op, eval_options& o) {
  std::vector<runner::subject_spec> subjects;
  if (a.contains("candidate") || a.contains("candidate_file")) {
    auto cv = need_candidate(a, op, true);
    if (auto* e = std::get_if<tool_result>(&cv)) return *e;
    subjects.push_back({"candidate",
                        store::candidate_origin::llm,
                        std::get<config::candidate>(cv).to_json(),
                        {},
                        {},
                        {},
                        a.value("candidate_file", "")});
  } else {
    subjects = config_subjects(op);
    if (subjects.empty()) o.time_reference = true;
  }
  return subjects;
}

tool_result kernel_compile(const json& a, mcp::call_context& cx) {
  auto opv = need_operator(a);
  if (auto* e = std::get_if<tool_result>(&opv)) return *e;
  const auto& op = std::get<config::operator_config>(opv);
  eval_options o;
  o.arch = a.value("arch", "sm_90a");
  auto sv = subjects_of(a, op, o);
  if (auto* e = std::get_if<tool_result>(&sv)) return *e;
  auto& subjects = std::get<std::vector<runner::subject_spec>>(sv);
  cx.progress(0, 1, "compiling");
  const auto checks = compile_check_all(op, subjects, o);
  cx.progress(1, 1, "compiled");
  json arr = json::array();
  std::string worst = "ok", text;
  for (const auto& c : checks) {
    json k = {{"role", c.role}, {"status", c.status}, {"log", c.log.substr(0, 20000)}};
    for (const char* f :
         {"kernels", "integrity_problems", "duration_ms", "cached", "nvrtc_version", "cubin_hash"})
      if (c.meta.contains(f)) k[f] = c.meta[f];
    k["arch"] = o.arch;
    k["options"] = c.meta.value("options", json::array());
    arr.push_back(std::move(k));
    // The reference is kopt's; the verdict is about the candidate(s).
    if (c.role != "reference" && c.status != "ok" && worst == "ok") worst = c.status;
    text += fmt::format("{:<10} {}", c.role, c.status);
    const json kernels = c.meta.value("kernels", json::object());
    for (const auto& [kn, kv] : kernels.items())
      text += fmt::format("  [{}: {} registers, {} B shared, {} B spills]", kn,
                          kv.value("registers", -1), kv.value("shared_static_bytes", 0),
                          kv.value("spill_store_bytes", 0) + kv.value("spill_load_bytes", 0));
    text += "\n";
    if (c.status != "ok") text += c.log.substr(0, 4000) + "\n";
  }
  json j = {{"status", worst}, {"arch", o.arch}, {"compiles", arr}};
  if (worst != "ok") return {j, text, true};
  return ok(j, text);
}

// kernel_evaluate and kernel_profile: `kopt eval --json` / `kopt profile
// --json` through a kopt-worker child.
tool_result kernel_run(const json& a, mcp::call_context& cx, const tool_env& env, bool profile) {
  auto opv = need_operator(a);
  if (auto* e = std::get_if<tool_result>(&opv)) return *e;
  const auto& op = std::get<config::operator_config>(opv);
  eval_options o;
  if (profile) {
    o.seeds = 1;
    o.min_time_s = 0.05;
    o.max_time_s = 0.5;
    o.counters = a.value("full", false) ? "full" : "default";
  }
  o.seeds = a.value("seeds", o.seeds);
  o.gpu = a.value("gpu", 0);
  o.arch = a.value("arch", o.arch);
  auto sv = subjects_of(a, op, o);
  if (auto* e = std::get_if<tool_result>(&sv)) return *e;
  auto& subjects = std::get<std::vector<runner::subject_spec>>(sv);
  // A model never measures a private workload (workloads[].private,
  // integrity.private_fraction): by default the public ones; naming a
  // private one is refused, so its shape cannot be probed either.
  std::vector<std::string> wanted = a.value("workloads", std::vector<std::string>{});
  for (const auto& w : wanted)
    if (const auto* x = op.find_workload(w); x && x->is_private)
      return fail("invalid_input",
                  fmt::format("workload \"{}\" is private: it is measured only when a "
                              "campaign verifies its winner",
                              w));
  if (wanted.empty())
    for (const auto& w : op.workloads)
      if (!w.is_private) wanted.push_back(w.id);
  const auto wl = resolve_workloads(op, wanted, "the config");
  double done = 0;
  const double total = static_cast<double>(wl.size());
  o.on_workload_done = [&](const std::string& w) {
    cx.progress(++done, total, "workload " + w + " done");
  };
  cx.progress(0, total, "starting the worker");
  if (cx.cancelled()) return fail("failed", "cancelled");
  const bool store_it = a.value("store", false);
  const eval_outcome out =
      run_evaluation(op, subjects, wl, o, store_it ? env.ctx : nullptr, "full");
  json j = out.to_json();
  std::string text = out.render();
  if (!out.gpu) {
    j["status"] = "needs_gpu";
    j["message"] = "correctness and timing need a GPU: " + out.no_gpu_reason +
                   " (compile checks are included)";
    return {j, text, true};
  }
  std::string overall = "ok";
  for (const auto& [r, s] : out.summaries)
    if (s.overall_status != protocol::outcome::ok && overall == "ok")
      overall = std::string(protocol::to_string(s.overall_status));
  j["status"] = overall;
  if (overall != "ok") return {j, text, true};
  return ok(j, text);
}
#endif

[[maybe_unused]] tool_result no_worker() {
  return fail(
      "needs_gpu",
      "this kopt was built without kopt-worker (KOPT_ENABLE_WORKER=OFF): it cannot compile or "
      "run kernels");
}

std::vector<mcp::tool> build_tools(const std::shared_ptr<tool_env>& env) {
  std::vector<mcp::tool> t;
  const json ro = {{"readOnlyHint", true}, {"destructiveHint", false}, {"openWorldHint", false}};
  auto add = [&](std::string name, std::string title, std::string desc, json in, json out, json ann,
                 std::function<tool_result(const json&, mcp::call_context&)> run) {
    t.push_back({std::move(name), std::move(title), std::move(desc), std::move(in), std::move(out),
                 std::move(ann), [run](const json& a, mcp::call_context& cx) {
                   return guarded([&] { return run(a, cx); });
                 }});
  };
  add("operator_validate", "Validate an operator config",
      "Check an operator config (a path or the JSON text) the way `kopt validate` does: every "
      "problem with "
      "file, line, column and field path.",
      object_schema(config_props()),
      output_schema({{"valid", {{"type", "boolean"}}},
                     {"errors", {{"type", "integer"}}},
                     {"warnings", {{"type", "integer"}}},
                     {"diagnostics", {{"type", "array"}}},
                     {"operator", {{"type", "string"}}}}),
      ro, [](const json& a, mcp::call_context&) { return operator_validate(a); });
  add("operator_brief", "What kopt would tell a model",
      "The brief for writing a kernel: the operator's spec, workloads with weights, roofline, the "
      "parent kernel "
      "with its stored measurements and diagnosis, knowledge-base snippets and the answer format "
      "(the prompt of "
      "`kopt prompt render`). With campaign_id: the brief an agent campaign is waiting on, with "
      "its brief_hash "
      "for candidate_submit.",
      object_schema(merge(
          config_props(),
          {{"campaign_id", integer("an agent campaign: its current brief instead of a config's")},
           {"template",
            {{"type", "string"},
             {"enum", {"first", "revise", "fix_compile", "fix_wrong", "broaden"}}}},
           {"parent", {{"type", "string"}, {"enum", {"seed", "baseline", "reference"}}}},
           {"candidate_id", integer("a stored candidate as the parent")},
           {"gpu", str("GPU of the peak table (default H200)")},
           {"snippets",
            {{"type", "boolean"},
             {"description", "include knowledge-base snippets (default true)"}}}})),
      output_schema({{"system", {{"type", "string"}}},
                     {"user", {{"type", "string"}}},
                     {"brief_hash", {{"type", "string"}}},
                     {"workloads", {{"type", "array"}}},
                     {"snippets", {{"type", "array"}}}}),
      ro, [env](const json& a, mcp::call_context&) { return operator_brief(a, *env); });
  add("kernel_compile", "Compile a kernel (no GPU needed)",
      "Compile the candidate (or the config's kernels) with NVRTC in an isolated child for the "
      "target "
      "architecture: registers, shared memory, spills, the compile log and static integrity "
      "findings.",
      object_schema(merge(merge(config_props(), candidate_props()),
                          {{"arch", str("target, default sm_90a")}})),
      output_schema({{"arch", {{"type", "string"}}}, {"compiles", {{"type", "array"}}}}), ro,
#ifdef KOPT_HAVE_WORKER
      [](const json& a, mcp::call_context& cx) { return kernel_compile(a, cx); }
#else
      [](const json&, mcp::call_context&) { return no_worker(); }
#endif
  );
  const json run_props = merge(
      merge(config_props(), candidate_props()),
      {{"workloads",
        {{"type", "array"},
         {"items", {{"type", "string"}}},
         {"description", "only these workload ids"}}},
       {"seeds", {{"type", "integer"}, {"minimum", 1}, {"maximum", 16}}},
       {"gpu", integer("CUDA device ordinal")},
       {"store",
        {{"type", "boolean"}, {"description", "record the result in the store (default false)"}}}});
  const json run_out = output_schema({{"gpu", {{"type", "boolean"}}},
                                      {"results", {{"type", "object"}}},
                                      {"compile_checks", {{"type", "array"}}},
                                      {"needs_gpu", {{"type", "string"}}},
                                      {"device", {{"type", "object"}}}});
  add("kernel_evaluate", "Evaluate a kernel on the GPU",
      "Correctness on every workload with fresh input seeds, timing, fraction of speed of light "
      "and speed-up vs "
      "the baseline, in a kopt-worker process (the table of `kopt eval --json`). Without a GPU: "
      "status needs_gpu "
      "with the compile checks.",
      object_schema(run_props), run_out,
      json{{"readOnlyHint", false}, {"destructiveHint", false}, {"openWorldHint", false}},
#ifdef KOPT_HAVE_WORKER
      [env](const json& a, mcp::call_context& cx) { return kernel_run(a, cx, *env, false); }
#else
      [](const json&, mcp::call_context&) { return no_worker(); }
#endif
  );
  add("kernel_profile", "Profile a kernel (hardware counters)",
      "Hardware counters (CUPTI, a separate pass after timing) and the bottleneck diagnosis per "
      "workload, as "
      "`kopt profile --json`. Without a GPU: status needs_gpu.",
      object_schema(merge(run_props, {{"full",
                                       {{"type", "boolean"},
                                        {"description", "the full speed-of-light metric set"}}}})),
      run_out, json{{"readOnlyHint", false}, {"destructiveHint", false}, {"openWorldHint", false}},
#ifdef KOPT_HAVE_WORKER
      [env](const json& a, mcp::call_context& cx) { return kernel_run(a, cx, *env, true); }
#else
      [](const json&, mcp::call_context&) { return no_worker(); }
#endif
  );
  add("kb_search", "Search the knowledge base",
      "Rank technique and reference documents for a diagnosis (bottleneck classes) and/or text, as "
      "`kopt kb search`.",
      object_schema({{"text", str("free text: words and identifiers (cp.async, ldmatrix)")},
                     {"bottlenecks", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                     {"operator", str("operator class (gemm, normalization, ...)")},
                     {"arch", str("target architecture")},
                     {"kind", {{"type", "string"}, {"enum", {"technique", "reference", ""}}}},
                     {"budget", {{"type", "integer"}, {"minimum", 1}}},
                     {"limit", {{"type", "integer"}, {"minimum", 1}}}}),
      output_schema({{"retrieval", {{"type", "object"}}}}), ro,
      [](const json& a, mcp::call_context&) { return kb_search(a); });
  add("kb_show", "Show a knowledge-base document", "One document in full (`kopt kb show`).",
      object_schema({{"id", str("document id (kb_search lists them)")}}, {"id"}),
      output_schema({{"document", {{"type", "object"}}}}), ro,
      [](const json& a, mcp::call_context&) { return kb_show(a); });
  add("campaign_status", "Campaign status",
      "One campaign (`kopt status ID --json`: budgets, spend, best candidate, waiting for an "
      "agent, agent "
      "submissions), or without campaign_id the newest campaigns.",
      object_schema({{"campaign_id", integer("campaign id")},
                     {"limit", {{"type", "integer"}, {"minimum", 1}}}}),
      output_schema({{"campaign", {{"type", "object"}}}, {"campaigns", {{"type", "array"}}}}), ro,
      [env](const json& a, mcp::call_context&) { return campaign_status(a, *env); });
  add("campaign_log", "Campaign iterations",
      "The iteration table of a campaign (`kopt log ID --json`).",
      object_schema({{"campaign_id", integer("campaign id")}}, {"campaign_id"}),
      output_schema({{"log", {{"type", "object"}}}}), ro,
      [env](const json& a, mcp::call_context&) { return campaign_log(a, *env); });
  add("candidate_show", "Show a stored candidate",
      "A stored candidate with source, compilations, evaluations and its part in the campaign "
      "(`kopt show "
      "candidate ID --json`).",
      object_schema({{"candidate_id", integer("candidate id")}}, {"candidate_id"}),
      output_schema({{"candidate", {{"type", "object"}}}}), ro,
      [env](const json& a, mcp::call_context&) { return candidate_show(a, *env); });
  add("candidate_diff", "Diff two stored candidates",
      "Source diff, launch-plan changes and per-workload measurement changes from candidate a to b "
      "(`kopt diff`).",
      object_schema({{"a", integer("candidate id")}, {"b", integer("candidate id")}}, {"a", "b"}),
      output_schema({{"diff", {{"type", "object"}}}}), ro,
      [env](const json& a, mcp::call_context&) { return candidate_diff(a, *env); });
  add("candidate_submit", "Submit a candidate to an agent campaign",
      "Hand an agent campaign (provider \"agent\") a candidate. It is validated now and then goes "
      "through the "
      "campaign's stages like an LLM's (screen, full sweep, head-to-head, promotion, "
      "verification), recorded with "
      "the agent's name and the brief it answered. Returns the pending submission's id; follow it "
      "with "
      "campaign_status.",
      object_schema(
          merge(candidate_props(),
                {{"campaign_id", integer("the agent campaign")},
                 {"agent", str("who proposes (default: the MCP client's name)")},
                 {"note", str("what the candidate tries, in a line")},
                 {"brief_hash",
                  str("brief_hash of the brief answered (operator_brief with campaign_id)")}}),
          {"campaign_id"}),
      output_schema({{"submission_id", {{"type", "integer"}}},
                     {"campaign_id", {{"type", "integer"}}},
                     {"agent", {{"type", "string"}}},
                     {"diagnostics", {{"type", "array"}}}}),
      json{{"readOnlyHint", false},
           {"destructiveHint", false},
           {"idempotentHint", false},
           {"openWorldHint", false}},
      [env](const json& a, mcp::call_context&) { return candidate_submit(a, *env); });
  return t;
}

// Values of the environment's secrets (API keys, tokens): never in a result.
std::vector<std::string> environment_secrets() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string name = kv.substr(0, eq);
    for (auto& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    const std::string value = kv.substr(eq + 1);
    if (value.size() < 8) continue;
    for (const char* w : {"KEY", "TOKEN", "SECRET", "PASSWORD"})
      if (name.find(w) != std::string::npos) {
        out.push_back(value);
        break;
      }
  }
  return out;
}

}  // namespace

// For tests of the tool layer (and `kopt mcp`): the server with every tool.
std::unique_ptr<mcp::server> make_mcp_server(const context& ctx) {
  auto env = std::make_shared<tool_env>();
  env->ctx = &ctx;
  mcp::server_info info;
  info.name = "kopt";
  info.title = "kopt: profile-guided GPU kernel optimization";
  info.version = KOPT_VERSION;
  info.instructions =
      "kopt compiles, checks, times and profiles CUDA kernels for an operator config, and refuses "
      "what is not "
      "honest. Start with operator_validate and operator_brief (the spec, workloads, roofline and "
      "answer format), "
      "then kernel_compile and kernel_evaluate your candidate. In an agent campaign, read "
      "operator_brief with "
      "campaign_id and answer with candidate_submit; campaign_status shows what became of it.";
  auto secrets = environment_secrets();
  auto srv = std::make_unique<mcp::server>(
      info, build_tools(env), [secrets](std::string s) { return llm::redact(s, secrets); });
  srv->on_initialize([env](const json& params) {
    env->client_name = params.value("clientInfo", json::object()).value("name", "");
  });
  return srv;
}

void register_agent(CLI::App& app, context& ctx, exit_status& status) {
  CLI::App* mcp_cmd = app.add_subcommand(
      "mcp", "Serve kopt's tools to a coding agent (Model Context Protocol, stdio)");
  mcp_cmd->footer(
      R"(Speaks MCP 2025-11-25 (JSON-RPC 2.0, one message per line) on stdin/stdout; logs go to stderr.
Tools: operator_validate operator_brief kernel_compile kernel_evaluate kernel_profile kb_search
kb_show campaign_status campaign_log candidate_show candidate_diff candidate_submit.
Claude Code:  claude mcp add kopt -- kopt mcp --db ~/.local/state/kopt/kopt.db
Codex:        [mcp_servers.kopt] command = "kopt", args = ["mcp"] in ~/.codex/config.toml
See docs/agents.md.)");
  mcp_cmd->callback([&ctx, &status] {
    // The protocol gets a private copy of stdout; fd 1 then points at
    // stderr, so that nothing else (a library, a child that inherits it) can
    // write into the protocol stream.
    const int proto = ::dup(STDOUT_FILENO);
    if (proto < 0) throw kopt::error("kopt mcp: cannot duplicate stdout");
    std::cout.flush();
    if (::dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
      throw kopt::error("kopt mcp: cannot redirect stdout");
    auto srv = make_mcp_server(ctx);
    spdlog::info("kopt mcp: serving on stdio (database {})", ctx.database().path.string());
    status.code = srv->serve(STDIN_FILENO, proto);
    ::close(proto);
  });

  struct propose_opts {
    std::int64_t campaign = 0;
    std::string file, agent, note, brief_hash;
    bool json = false;
  };
  auto o = std::make_shared<propose_opts>();
  CLI::App* p =
      app.add_subcommand("propose", "Hand a candidate to an agent campaign (provider \"agent\")");
  p->add_option("campaign", o->campaign, "campaign id")->required()->check(CLI::PositiveNumber);
  p->add_option("file", o->file, "candidate file (JSON in the candidate format)")
      ->required()
      ->check(CLI::ExistingFile);
  p->add_option("--agent", o->agent, "who proposes (recorded with the candidate; default: $USER)");
  p->add_option("--note", o->note, "what the candidate tries, in a line");
  p->add_option("--brief-hash", o->brief_hash,
                "hash of the brief answered (kopt status ID --json, event agent_brief)");
  p->add_flag("--json", o->json, "print the result as JSON on stdout");
  p->footer(
      R"(The candidate is validated against the campaign's operator now; the campaign's next iteration
takes it through screen, full sweep, head-to-head and promotion like an LLM's candidate.
Exit codes: 0 pending, 1 invalid candidate or not an agent campaign, 3 no such campaign.
Example: kopt propose 7 my_kernel.json --agent alice --note "two rows per warp")");
  p->callback([o, &ctx, &status] {
    std::ifstream in(o->file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string agent = o->agent;
    if (agent.empty()) agent = ctx.env("USER").value_or("cli");
    store::store db = ctx.open_writer();
    const auto r = campaign::submit_agent_candidate(
        db, o->campaign, ss.str(), o->file, agent,
        o->note.empty() ? std::nullopt : std::optional(o->note),
        o->brief_hash.empty() ? std::nullopt : std::optional(o->brief_hash));
    if (o->json) {
      json j = {{"status", r.status},
                {"message", r.message},
                {"campaign_id", o->campaign},
                {"agent", agent},
                {"diagnostics", diagnostics_json(r.diagnostics)}};
      if (r.submission_id) j["submission_id"] = *r.submission_id;
      print_json(j);
    } else {
      for (const auto& d : r.diagnostics) std::cerr << d.to_string() << '\n';
      (r.ok() ? std::cout : std::cerr) << (r.ok() ? "" : "kopt: ") << r.message << '\n';
    }
    status.code = r.ok() ? exit_ok : (r.status == "not_found" ? exit_not_found : exit_invalid);
  });
}

}  // namespace kopt::cli
