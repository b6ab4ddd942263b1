// Researcher commands: `kopt diff`, `kopt lineage`, `kopt export`,
// `kopt import flashinfer-trace`, `kopt report` (HTML, and results per
// model, hint and technique) and `kopt trace`. They read
// the store (read-only, one snapshot) through kopt::report, which also
// extends `kopt log` and `kopt show candidate` (inspect.cpp). Data goes to
// stdout or the -o file, messages to stderr.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/render.hpp"
#include "common/error.hpp"
#include "report/data.hpp"
#include "report/exchange.hpp"
#include "report/html.hpp"
#include "report/models.hpp"
#include "report/trace.hpp"
#include "report/views.hpp"

#ifndef KOPT_VERSION
#define KOPT_VERSION "unknown"
#endif

namespace kopt::cli {

namespace {

using nlohmann::json;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw kopt::error("cannot write " + path);
  f << text;
  f.close();
  if (!f) throw kopt::error("error writing " + path);
}

report::campaign_data load(const context& ctx, std::int64_t id) {
  store::store s = ctx.open_reader();
  return report::load_campaign(s, id);
}

std::string ratio_text(const json& v) {
  if (!v.is_number()) return "-";
  return fmt_double(1.0 / v.get<double>(), 2) + "x";
}

// --- diff ------------------------------------------------------------------------

struct diff_options {
  std::int64_t a = 0, b = 0;
  bool json = false;
};

void print_diff(const json& j) {
  std::cout << "candidate " << j["a"]["id"] << " (" << j["a"]["origin"].get<std::string>()
            << ") -> candidate " << j["b"]["id"] << " (" << j["b"]["origin"].get<std::string>()
            << ")\n";
  const auto& src = j["source_diff"].get_ref<const std::string&>();
  std::cout << "\nsource\n" << (src.empty() ? "  (identical)\n" : src);
  auto patch = [](const char* title, const json& p) {
    std::cout << "\n" << title << "\n";
    if (p.empty()) std::cout << "  (identical)\n";
    for (const auto& op : p)
      std::cout << "  " << op.value("op", "") << " " << op.value("path", "")
                << (op.contains("value") ? " = " + op["value"].dump() : std::string()) << '\n';
  };
  patch("launch plan", j["launch_plan_patch"]);
  patch("parameters", j["parameters_patch"]);
  std::cout << "\nmeasurements (b against a; speed-up > 1: b is faster)\n";
  text_table t({"WORKLOAD", "STAGE", "A", "B", "SPEEDUP", "A SOL%", "B SOL%", "DELTA SOL"});
  for (const auto& r : j["workloads"]) {
    auto side = [](const json& s, const char* what) -> std::string {
      if (s.is_null()) return "-";
      if (s.value("status", "") != "ok") return s.value("status", "");
      if (std::string(what) == "t")
        return fmt_ns(s["median_ns"].is_number()
                          ? std::optional<double>(s["median_ns"].get<double>())
                          : std::nullopt);
      return s["sol_fraction"].is_number() ? fmt_double(s["sol_fraction"].get<double>() * 100, 1)
                                           : "-";
    };
    std::string stage = !r["a"].is_null() ? r["a"].value("stage", "") : "";
    if (!r.value("same_stage", false) && !r["b"].is_null())
      stage += "/" + r["b"].value("stage", "");
    t.add({r.value("workload", ""), stage, side(r["a"], "t"), side(r["b"], "t"),
           r.contains("speedup") ? fmt_double(r["speedup"].get<double>(), 2) + "x" : "-",
           side(r["a"], "s"), side(r["b"], "s"),
           r.contains("sol_delta") ? fmt_double(r["sol_delta"].get<double>() * 100, 1) + " pp"
                                   : "-"});
  }
  t.print(std::cout);
  if (j["weighted_geomean_time_ratio"].is_number())
    std::cout << "\nweighted geomean speed-up of b over a: "
              << ratio_text(j["weighted_geomean_time_ratio"]) << '\n';
}

void register_diff(CLI::App& app, context& ctx) {
  auto o = std::make_shared<diff_options>();
  auto* cmd = app.add_subcommand(
      "diff", "Compare two candidates: source diff, plan changes, per-workload deltas");
  cmd->add_option("a", o->a, "first candidate id")->required()->check(CLI::PositiveNumber);
  cmd->add_option("b", o->b, "second candidate id")->required()->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "print JSON on stdout");
  cmd->footer(
      "Measurements are taken from the same stage for both (full, verify, screen, compare) where\n"
      "possible; SPEEDUP = median(a) / median(b).\nExample: kopt diff 12 40 --json");
  cmd->callback([o, &ctx] {
    store::store s = ctx.open_reader();
    const json j = report::diff_json(s, o->a, o->b);
    if (o->json) {
      print_json(j);
    } else {
      print_diff(j);
    }
  });
}

// --- lineage ------------------------------------------------------------------------

struct lineage_options {
  std::int64_t campaign = 0;
  bool json = false;
  bool all = false;
};

void print_tree(const json& nodes, const json& node,
                std::map<std::int64_t, std::vector<const json*>>& children,
                const std::string& indent, bool last, bool root) {
  const auto id = node["id"].get<std::int64_t>();
  std::string line = root ? "" : indent + (last ? "`-- " : "|-- ");
  line += std::to_string(id) + " " + node.value("origin", "");
  if (node["iteration"].is_number())
    line += " it" + std::to_string(node["iteration"].get<std::int64_t>());
  line += " " + node.value("outcome", "");
  if (node["sol_fraction"].is_number())
    line += " " + fmt_double(node["sol_fraction"].get<double>() * 100, 1) + "%";
  if (node.value("on_best_path", false)) line += " *";
  std::cout << line << '\n';
  auto& ch = children[id];
  for (std::size_t i = 0; i < ch.size(); ++i)
    print_tree(nodes, *ch[i], children, root ? "" : indent + (last ? "    " : "|   "),
               i + 1 == ch.size(), false);
}

void register_lineage(CLI::App& app, context& ctx) {
  auto o = std::make_shared<lineage_options>();
  auto* cmd = app.add_subcommand("lineage", "The tree of candidates from the start to the best");
  cmd->add_option("campaign", o->campaign, "campaign id")->required()->check(CLI::PositiveNumber);
  cmd->add_flag("--all", o->all, "print the whole tree, not only the path to the best");
  cmd->add_flag("--json", o->json, "print JSON on stdout (every node, and the best path)");
  cmd->footer(
      "'*' marks the path to the best.\nExamples:\n  kopt lineage 3\n  kopt lineage 3 --all");
  cmd->callback([o, &ctx] {
    const auto d = load(ctx, o->campaign);
    const json j = report::lineage_json(d);
    if (o->json) {
      print_json(j);
      return;
    }
    if (!o->all) {
      if (j["best_path"].empty()) {
        std::cerr << "kopt: campaign " << o->campaign
                  << " has no best candidate yet; --all shows the tree\n";
        return;
      }
      text_table t({"STEP", "CANDIDATE", "ORIGIN", "ITER", "SOL%", "VS PARENT"});
      int step = 0;
      for (const auto& n : j["best_path"])
        t.add(
            {std::to_string(step++), std::to_string(n["id"].get<std::int64_t>()),
             n.value("origin", ""),
             n["iteration"].is_number() ? std::to_string(n["iteration"].get<std::int64_t>()) : "-",
             n["sol_fraction"].is_number() ? fmt_double(n["sol_fraction"].get<double>() * 100, 1)
                                           : "-",
             ratio_text(n["time_ratio_vs_parent"])});
      t.print(std::cout);
      return;
    }
    std::map<std::int64_t, std::vector<const json*>> children;
    std::vector<const json*> roots;
    std::set<std::int64_t> ids;
    for (const auto& n : j["nodes"]) ids.insert(n["id"].get<std::int64_t>());
    for (const auto& n : j["nodes"]) {
      if (n["parent_id"].is_number() && ids.count(n["parent_id"].get<std::int64_t>()))
        children[n["parent_id"].get<std::int64_t>()].push_back(&n);
      else
        roots.push_back(&n);
    }
    for (const auto* r : roots) print_tree(j["nodes"], *r, children, "", true, true);
  });
}

// --- export / import -------------------------------------------------------------------

struct export_options {
  std::int64_t campaign = 0;
  std::string format = "jsonl";
  std::string output;
  bool with_source = false;
  std::size_t top = 1;
  std::string author;
};

void register_export(CLI::App& app, context& ctx) {
  auto o = std::make_shared<export_options>();
  auto* cmd =
      app.add_subcommand("export", "Export a campaign: JSON lines, CSV or FlashInfer-Trace");
  cmd->add_option("campaign", o->campaign, "campaign id")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--format", o->format,
                  "jsonl (one line per candidate), csv (one row per evaluation), "
                  "flashinfer-trace (definition, workloads, solutions, traces)")
      ->check(CLI::IsMember({"jsonl", "csv", "flashinfer-trace"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", o->output,
                  "file (jsonl, csv; default stdout) or directory (flashinfer-trace, required)");
  cmd->add_flag("--with-source", o->with_source, "jsonl: include every candidate's source");
  cmd->add_option("--top", o->top, "flashinfer-trace: how many candidates, best first")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--author", o->author,
                  "flashinfer-trace: solution author (default kopt-PROVIDER-MODEL)");
  cmd->footer(
      "Examples:\n  kopt export 3 --format csv -o c3.csv\n  kopt export 3 --format jsonl "
      "--with-source > c3.jsonl\n"
      "  kopt export 3 --format flashinfer-trace -o fib/ --top 3\nSee docs/researchers.md for the "
      "fields.");
  cmd->callback([o, &ctx] {
    const auto d = load(ctx, o->campaign);
    if (o->format == "flashinfer-trace") {
      if (o->output.empty())
        throw CLI::ValidationError("--output", "flashinfer-trace needs -o DIR");
      report::flashinfer_export_options fo;
      fo.top = o->top;
      fo.author = o->author;
      const auto files = report::write_flashinfer_trace(d, o->output, fo);
      for (const auto& f : files)
        std::cout << (std::filesystem::path(o->output) / f).string() << '\n';
      return;
    }
    std::ostringstream os;
    if (o->format == "jsonl") {
      report::write_jsonl(d, os, o->with_source);
    } else {
      report::write_csv(d, os);
    }
    if (o->output.empty() || o->output == "-") {
      std::cout << os.str();
    } else {
      write_file(o->output, os.str());
      std::cerr << "kopt: wrote " << o->output << '\n';
    }
  });
}

struct import_options {
  std::string dir;
  std::string out = ".";
  std::string reference_dir;
  std::size_t max_workloads = 32;
  bool all = false;
  std::string provider = "anthropic";
  std::string model;
  bool json = false;
};

void register_import(CLI::App& app, context& /*ctx*/, exit_status& status) {
  auto* group = app.add_subcommand("import", "Import operator definitions from other formats");
  group->require_subcommand(1);
  group->footer(
      "Examples:\n  kopt import flashinfer-trace fib/ -o configs/fib --reference-dir refs/\n"
      "  kopt import sol-execbench SOL-ExecBench/examples -o configs/sol\n"
      "Run 'kopt import flashinfer-trace --help' for the options.");
  auto o = std::make_shared<import_options>();
  auto* cmd = group->add_subcommand(
      "flashinfer-trace",
      "FlashInfer-Trace or SOL-ExecBench definitions and workloads -> kopt operator configs");
  cmd->alias("sol-execbench");
  cmd->add_option("dir", o->dir,
                  "data set directory (definitions/, workloads/, traces/), or SOL-ExecBench "
                  "folders (definition.json beside workload.jsonl)")
      ->required();
  cmd->add_option("-o,--output", o->out, "where to write the configs")->capture_default_str();
  cmd->add_option("--reference-dir", o->reference_dir,
                  "directory with DEFINITION.json: the reference in kopt's candidate format");
  cmd->add_option("--max-workloads", o->max_workloads,
                  "distinct workloads kept per definition, spread over the size range")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--all", o->all, "keep every distinct workload (no --max-workloads cut)");
  cmd->add_option("--provider", o->provider, "campaign.provider of the configs written")
      ->check(CLI::IsMember({"openai", "anthropic", "command", "replay", "autotune"}))
      ->capture_default_str();
  cmd->add_option("--model", o->model, "campaign.model of the configs written");
  cmd->add_flag("--json", o->json, "print the per-definition result as JSON");
  cmd->footer(
      "Their references are PyTorch; kopt needs CUDA device code and a launch plan, so a\n"
      "definition becomes a config (NAME.json) only with --reference-dir (or when it was\n"
      "exported by kopt, whose extension carries the reference); otherwise NAME.draft.json is\n"
      "written with what is missing listed. Exit 1 when any definition is a draft.\n"
      "Examples:\n"
      "  kopt import flashinfer-trace flashinfer-trace/ -o configs/fib --reference-dir refs/\n"
      "  kopt import sol-execbench SOL-ExecBench/examples -o configs/sol --all\n"
      "  kopt import flashinfer-trace gemm/ -o cfg --max-workloads 16 --provider openai "
      "--model gpt-5\n"
      "See docs/researchers.md for what maps and what does not.");
  cmd->callback([o, &status] {
    std::error_code ec;
    std::filesystem::create_directories(o->out, ec);
    if (ec) throw kopt::error("cannot create " + o->out + ": " + ec.message());
    report::import_options io;
    io.out_dir = o->out;
    io.reference_dir = o->reference_dir;
    io.max_workloads = o->max_workloads;
    io.all_workloads = o->all;
    io.provider = o->provider;
    io.model = o->model;
    const auto res = report::import_flashinfer_trace(o->dir, io);
    bool all_ok = true;
    json arr = json::array();
    for (const auto& r : res) {
      all_ok = all_ok && r.status == "imported";
      arr.push_back(r.to_json());
    }
    if (o->json) {
      print_json(arr);
    } else {
      for (const auto& r : res) {
        std::cout << r.status << "  " << r.name << "  " << r.file.string() << "  (" << r.workloads
                  << " workloads)\n";
        for (const auto& p : r.problems) std::cout << "  problem: " << p << '\n';
        for (const auto& n : r.notes) std::cout << "  note: " << n << '\n';
      }
    }
    if (!all_ok) status.code = exit_invalid;
  });
}

// --- report / trace ------------------------------------------------------------------------

struct file_options {
  std::int64_t campaign = 0;
  std::string output;
};

struct report_options {
  std::int64_t campaign = 0;
  std::string output;
  bool json = false;
};

std::string usd(double v) {
  return "$" + fmt_double(v, 3);
}
std::string percent(double v) {
  return fmt_double(100 * v, 1) + " %";
}

// The text form of `kopt report`: results per model, per strategy hint and
// per dropout item, from the same JSON that --json prints.
void print_attribution(const json& j) {
  auto rows = [](const json& list, const char* first, bool with_model) {
    std::vector<std::string> head{first};
    if (with_model) head.push_back("PROVIDER/MODEL");
    for (const char* h : {"CALLS", "FAILED", "TOKENS", "COST", "CANDS", "CORRECT", "FASTER", "WINS",
                          "GAIN", "BEST GAIN", "GAIN/$", "BEST SOL%"})
      head.push_back(h);
    text_table t(head);
    for (const auto& r : list) {
      std::vector<std::string> row{r.value("label", "") +
                                   (r.value("has_campaign_best", false) ? " *" : "")};
      if (with_model) {
        const std::string m = r.value("model", "");
        row.push_back(r.value("provider", "") + (m.empty() ? "" : "/" + m));
      }
      row.push_back(std::to_string(r.value("calls", 0)));
      row.push_back(std::to_string(r.value("failed_calls", 0)));
      row.push_back(std::to_string(r.value("tokens", 0)));
      row.push_back(usd(r.value("cost_usd", 0.0)));
      row.push_back(std::to_string(r.value("candidates", 0)));
      row.push_back(std::to_string(r.value("correct", 0)));
      row.push_back(std::to_string(r.value("faster", 0)));
      row.push_back(std::to_string(r.value("wins", 0)));
      row.push_back(percent(r.value("gain", 0.0)));
      row.push_back(percent(r.value("best_gain", 0.0)));
      row.push_back(r["gain_per_usd"].is_number() ? fmt_double(r["gain_per_usd"].get<double>(), 2)
                                                  : "-");
      row.push_back(r["best_sol_fraction"].is_number()
                        ? fmt_double(r["best_sol_fraction"].get<double>() * 100, 1)
                        : "-");
      t.add(std::move(row));
    }
    return t;
  };
  std::cout << "campaign " << j["campaign"] << "\n\nmodels";
  if (j["models"].empty()) {
    std::cout << ": none (no LLM call recorded)\n";
  } else {
    std::cout << " (* the campaign's best)\n";
    rows(j["models"], "MODEL", true).print(std::cout);
  }
  if (!j["hints"].empty()) {
    std::cout << "\nstrategy hints (calls 2..K of an iteration; none: call 1)\n";
    rows(j["hints"], "HINT", false).print(std::cout);
  }
  std::cout << "\ntechnique attribution (dropout: mean gain of the LLM calls that kept / dropped "
               "each item; an iteration without recorded calls counts once)\n";
  if (j["items"].empty()) {
    std::cout << "  no dropout decisions recorded\n";
  } else {
    text_table t({"ITEM", "KIND", "KEPT", "DROPPED", "GAIN KEPT", "GAIN DROPPED", "EFFECT"});
    for (const auto& a : j["items"])
      t.add({a.value("item_id", ""), a.value("kind", ""), std::to_string(a.value("kept", 0)),
             std::to_string(a.value("dropped", 0)), percent(a.value("mean_gain_kept", 0.0)),
             percent(a.value("mean_gain_dropped", 0.0)),
             fmt_double(100 * a.value("effect", 0.0), 1) + " pp"});
    t.print(std::cout);
  }
}

void register_report(CLI::App& app, context& ctx) {
  auto o = std::make_shared<report_options>();
  auto* cmd = app.add_subcommand(
      "report", "Results per model, hint and technique; -o writes a self-contained HTML report");
  cmd->add_option("campaign", o->campaign, "campaign id")->required()->check(CLI::PositiveNumber);
  cmd->add_option("-o,--output", o->output, "HTML file to write");
  cmd->add_flag("--json", o->json,
                "print the per-model, per-hint and per-item attribution as JSON");
  cmd->footer(
      "Without -o: the attribution tables on stdout (--json: as JSON): per model (the label of\n"
      "llm.models, else provider/model) its calls, failures, tokens, cost, candidates, correct\n"
      "and faster ones, wins (promotions), their gains and gain per dollar; the same per strategy\n"
      "hint; and dropout's mean gain with and without each prompt item, per LLM call (each call's\n"
      "own draw; a call is credited with the gain when the promoted candidate is its answer).\n"
      "With -o: one HTML file, inline CSS and SVG, no script and no network access needed:\n"
      "progress against iteration and wall time, per-workload bars, outcomes per iteration,\n"
      "technique attribution, models, tokens and cost, lineage, the winning kernel.\n"
      "Examples:\n  kopt report 3\n  kopt report 3 --json\n  kopt report 3 -o report.html");
  cmd->callback([o, &ctx] {
    const auto d = load(ctx, o->campaign);
    if (!o->output.empty()) {
      report::html_options ho;
      ho.generated_by = std::string("kopt ") + KOPT_VERSION;
      ho.database = ctx.database().path.string();
      write_file(o->output, report::html_report(d, ho));
      std::cerr << "kopt: wrote " << o->output << '\n';
    }
    if (o->json) {
      print_json(report::attribution_json(d));
    } else if (o->output.empty()) {
      print_attribution(report::attribution_json(d));
    }
  });
}

void register_trace(CLI::App& app, context& ctx) {
  auto o = std::make_shared<file_options>();
  auto* cmd = app.add_subcommand(
      "trace", "Write a Chrome trace-event file of a campaign (opens in Perfetto)");
  cmd->add_option("campaign", o->campaign, "campaign id")->required()->check(CLI::PositiveNumber);
  cmd->add_option("-o,--output", o->output, "JSON file to write (- for stdout)")->required();
  cmd->footer(
      "Tracks: iterations, LLM calls, and per worker compilations and evaluation batches; "
      "promotions\n"
      "and escalations as instants; spend and best fraction of speed of light as counters.\n"
      "Open it at https://ui.perfetto.dev or chrome://tracing.\nExample: kopt trace 3 -o "
      "trace.json");
  cmd->callback([o, &ctx] {
    const auto d = load(ctx, o->campaign);
    const std::string text = report::chrome_trace(d).dump() + "\n";
    if (o->output == "-") {
      std::cout << text;
    } else {
      write_file(o->output, text);
      std::cerr << "kopt: wrote " << o->output << '\n';
    }
  });
}

}  // namespace

void register_research(CLI::App& app, context& ctx, exit_status& status) {
  register_diff(app, ctx);
  register_lineage(app, ctx);
  register_export(app, ctx);
  register_import(app, ctx, status);
  register_report(app, ctx);
  register_trace(app, ctx);
}

}  // namespace kopt::cli
