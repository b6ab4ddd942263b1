// `kopt kb search|show|lint`: the knowledge base from the command line. The
// same load + index + retrieve path as a campaign's prompt builder, so
// `kopt kb search --bottleneck X --operator Y --budget N` shows exactly the
// snippets a prompt for that diagnosis would get.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "campaign/session.hpp"
#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/render.hpp"
#include "cli/shared.hpp"
#include "common/error.hpp"
#include "config/operator.hpp"
#include "kb/index.hpp"
#include "kb/library.hpp"

#ifdef KOPT_HAVE_WORKER
#include "cli/eval_support.hpp"
#include "config/operator.hpp"
#include "kb/compile_check.hpp"
#include "runner/worker_client.hpp"
#endif

namespace kopt::cli {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct kb_options {
  std::vector<std::string> dirs;
  bool no_builtin = false;
  // search
  std::vector<std::string> text;
  std::vector<std::string> bottlenecks;
  std::string op;
  std::string arch;
  std::string kind;
  std::size_t budget = 1500;
  std::size_t limit = 5;
  bool json_out = false;
  bool snippets = false;
  // show
  std::string id;
  // lint
  bool compile = false;
  bool run = false;
  int gpu = 0;
  std::string compile_arch = "sm_90a";
  std::string worker;
  // --run: which references (empty: all), and how they are evaluated. A
  // correctness check with a speed-of-light figure, not a benchmark: short
  // timing by default, so the whole knowledge base fits in a few minutes.
  std::vector<std::string> only;
  std::string peaks;
  int seeds = 2;
  double max_time_s = 0.2;
};

json diagnostic_json(const kb::diagnostic& d) {
  return json{{"level", d.level == kb::diagnostic::severity::error ? "error" : "warning"},
              {"file", d.file},
              {"line", d.line},
              {"message", d.message},
              {"text", d.to_string()}};
}

kb::load_result load(const kb_options& o) {
  return load_knowledge_base(o.dirs, o.no_builtin);
}

// For search and show a broken document is skipped, not fatal: say so.
void report_skipped(const kb::load_result& r) {
  for (const auto& d : r.diagnostics)
    if (d.level == kb::diagnostic::severity::error)
      std::cerr << "kopt: " << d.to_string() << " (document skipped; see kopt kb lint)\n";
}

json document_json(const kb::document& d) {
  return kb_document_json(d);
}

void add_search(CLI::App& group, const std::shared_ptr<kb_options>& o) {
  CLI::App* cmd = group.add_subcommand(
      "search", "Rank technique and reference documents for a diagnosis or text");
  cmd->add_option("text", o->text, "free text: words and identifiers (cp.async, ldmatrix)");
  cmd->add_option("-b,--bottleneck", o->bottlenecks,
                  "diagnosis class, most important first (repeatable)")
      ->type_name("CLASS");
  cmd->add_option("-o,--operator", o->op, "operator class (gemm, normalization, ...)")
      ->type_name("CLASS");
  cmd->add_option("--arch", o->arch, "target architecture: drop documents that do not apply")
      ->type_name("SM");
  cmd->add_option("--kind", o->kind, "only techniques or only reference kernels (default: both)")
      ->check(CLI::IsMember({"technique", "reference"}))
      ->type_name("KIND");
  cmd->add_option("--budget", o->budget, "token budget of all snippets (4 chars per token)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--limit", o->limit, "at most this many documents")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--json", o->json_out, "print the retrieval (with snippet texts) as JSON");
  cmd->add_flag("--snippets", o->snippets, "print the snippet texts as a prompt would get them");
  cmd->footer(
      "Ranking: bottleneck match (the first --bottleneck weighs most), then exact operator\n"
      "match, then BM25 of the text. Classes: see docs/knowledge-base.md.\n"
      "Example: kopt kb search --bottleneck latency-bound --operator gemm cp.async --budget 800");
  cmd->callback([o] {
    const kb::load_result lr = load(*o);
    report_skipped(lr);
    const kb::index idx(lr.documents);
    kb::query q;
    q.bottlenecks = o->bottlenecks;
    q.operator_class = o->op;
    q.arch = o->arch;
    q.kind = o->kind;
    for (const auto& t : o->text) q.text += (q.text.empty() ? "" : " ") + t;
    q.budget_tokens = o->budget;
    q.max_documents = o->limit;
    if (o->json_out) {
      print_json(kb_search_json(idx, q));
      return;
    }
    const kb::retrieval r = idx.retrieve(q);
    if (r.snippets.empty()) {
      std::cerr << "kopt: no document matches\n";
      return;
    }
    if (o->snippets) {
      for (const auto& s : r.snippets) std::cout << s.text << '\n';
      return;
    }
    text_table t({"#", "ID", "BOTTLENECKS", "OP", "TEXT", "TOKENS", "TITLE"});
    int rank = 0;
    for (const auto& s : r.snippets) {
      std::string b;
      for (const auto& m : s.matched_bottlenecks) b += (b.empty() ? "" : ",") + m;
      t.add({std::to_string(++rank), s.id, b.empty() ? "-" : b,
             s.operator_exact ? "exact" : (q.operator_class.empty() ? "-" : "any"),
             s.text_score > 0 ? fmt_double(s.text_score, 2) : "-",
             std::to_string(s.tokens) + (s.truncated ? "*" : ""), s.title});
    }
    t.print(std::cout);
    std::cout << r.tokens << " of " << r.budget_tokens << " tokens, " << r.snippets.size() << " of "
              << r.candidates << " matching documents (* cut to fit)\n";
  });
}

void add_show(CLI::App& group, const std::shared_ptr<kb_options>& o) {
  CLI::App* cmd = group.add_subcommand("show", "Print one knowledge-base document");
  cmd->add_option("id", o->id, "document id (file name without .md)")->required();
  cmd->add_flag("--json", o->json_out, "print the parsed document as JSON");
  cmd->footer(
      "Ids are file names without .md; 'kopt kb search' lists them.\n"
      "Examples:\n  kopt kb search -o gemm cp.async\n  kopt kb show <id>\n"
      "  kopt kb show <id> --json");
  cmd->callback([o] {
    const kb::load_result lr = load(*o);
    report_skipped(lr);
    const kb::document* d = nullptr;
    for (const auto& doc : lr.documents)
      if (doc.id == o->id) d = &doc;
    if (d == nullptr)
      throw kopt::not_found_error("no knowledge-base document with id '" + o->id + "'");
    if (o->json_out) {
      print_json(document_json(*d));
      return;
    }
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
      return s;
    };
    std::cout << d->title << " [" << d->id << "]\n"
              << "kind:        " << kb::kind_name(d->kind) << '\n'
              << "file:        " << d->file << '\n';
    if (d->is_reference()) std::cout << "config:      " << d->config_path << '\n';
    std::cout << "bottlenecks: " << list(d->bottlenecks) << '\n'
              << "operators:   " << list(d->operators) << '\n'
              << "arch:        " << list(d->arch) << '\n'
              << "tags:        " << list(d->tags) << "\n\n";
    for (const auto& s : d->sections) std::cout << "## " << s.name << "\n\n" << s.text << '\n';
  });
}

#ifdef KOPT_HAVE_WORKER
// A reference document's kernels are its operator config's baseline (and
// seed, if any), checked like any candidate: compiled for the target
// architecture by --compile; with --run, evaluated on the GPU against the
// config's naive reference on every workload (2 seeds, short timing: this is
// a correctness check with a speed-of-light figure, not a benchmark).
struct reference_check {
  std::string id, file, config;
  bool ok = false;
  std::string problem;  // first failure, empty when ok
  json detail = json::object();
};

reference_check check_reference(const kb::document& d, const kb_options& o, bool run) {
  reference_check rc;
  rc.id = d.id;
  rc.file = d.file;
  rc.config = d.config_path;
  auto loaded = config::load_operator_file(d.config_path);
  if (!loaded.ok()) {
    std::string msg;
    for (const auto& x : loaded.diagnostics) msg += x.to_string() + "; ";
    rc.problem = "its config does not validate: " + msg;
    return rc;
  }
  const config::operator_config& op = *loaded.op;
  const auto subjects = config_subjects(op);
  if (subjects.empty()) {
    rc.problem = "its config has no baseline or seed kernel to check";
    return rc;
  }
  eval_options eo;
  eo.arch = o.compile_arch;
  eo.worker = o.worker;
  eo.gpu = o.gpu;
  auto record_compile = [&rc](const std::vector<compile_check>& checks) {
    json cj = json::array();
    for (const auto& c : checks) {
      cj.push_back({{"role", c.role}, {"status", c.status}});
      if (c.status != "ok" && rc.problem.empty())
        rc.problem = c.role + " kernel: " + c.status + ": " + c.log.substr(0, 1500);
    }
    rc.detail["compile"] = cj;
    rc.ok = rc.problem.empty();
  };
  if (!run) {
    record_compile(compile_check_all(op, subjects, eo));
    return rc;
  }
  eo.seeds = o.seeds;
  eo.min_time_s = std::min(0.02, o.max_time_s);
  eo.max_time_s = o.max_time_s;
  eo.peaks_file = o.peaks;
  std::vector<std::string> wl;
  for (const auto& w : op.workloads) wl.push_back(w.id);
  eval_outcome out;
  try {
    out = run_evaluation(op, subjects, wl, eo, nullptr, "lint");
  } catch (const kopt::error& e) {
    // A worker or device error is this reference's failure, not the lint's end.
    rc.problem = std::string("evaluation failed: ") + e.what();
    return rc;
  }
  if (!out.gpu) {
    // Nothing ran; what could be checked without a GPU was (compile).
    record_compile(out.compile_checks);
    rc.detail["needs_gpu"] = out.no_gpu_reason;
    return rc;
  }
  json roles = json::object();
  for (const auto& [role, sum] : out.summaries) {
    roles[role] = {{"status", sum.overall_status},
                   {"workloads", sum.rows.size()},
                   {"ok", sum.ok},
                   {"weighted_sol_fraction", sum.weighted_sol_fraction}};
    if (sum.overall_status != protocol::outcome::ok && rc.problem.empty()) {
      rc.problem = role + " kernel: " + std::string(protocol::to_string(sum.overall_status));
      for (const auto& r : sum.rows)
        if (r.status != protocol::outcome::ok) {
          rc.problem +=
              " on " + r.workload + (r.message.empty() ? "" : ": " + r.message.substr(0, 500));
          break;
        }
    }
  }
  rc.detail["roles"] = roles;
  rc.detail["gpu"] = out.report.device.value("name", "");
  rc.ok = rc.problem.empty();
  return rc;
}
#endif

void add_lint(CLI::App& group, const std::shared_ptr<kb_options>& o, exit_status& status) {
  CLI::App* cmd = group.add_subcommand(
      "lint", "Validate every knowledge-base document (techniques and references)");
  cmd->add_flag("--json", o->json_out, "print the diagnostics as JSON on stdout");
  cmd->add_flag("--compile", o->compile,
                "also compile each Example with NVRTC (default parameter values; worker build)");
  cmd->add_flag(
      "--run", o->run,
      "on a GPU: also evaluate every reference document's kernels against its config's naive "
      "reference on all workloads (implies --compile; exit code 5 without a GPU)");
  cmd->add_option("--gpu", o->gpu, "CUDA device ordinal for --run")->capture_default_str();
  cmd->add_option("--arch", o->compile_arch, "architecture of --compile")->capture_default_str();
  cmd->add_option("--worker", o->worker,
                  "kopt-worker used as the isolated compiler (default: $KOPT_WORKER, then beside "
                  "kopt; in-process NVRTC when absent)");
  cmd->add_option("--only", o->only,
                  "with --compile / --run: compile or run only these documents (ids, repeatable); "
                  "every document is still linted");
  cmd->add_option("--peaks", o->peaks,
                  "GPU peak table for --run (default: configs/hardware/gpus.json)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--seeds", o->seeds, "input seeds per workload for --run")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd->add_option("--max-time", o->max_time_s,
                  "seconds of timing per workload and kernel for --run")
      ->check(CLI::Range(0.001, 60.0))
      ->capture_default_str();
  cmd->footer(
      "--compile compiles each technique's Example and each reference's kernels (its config's\n"
      "baseline and seed, plus the naive reference) for --arch; --run evaluates the references on "
      "the GPU,\n"
      "one line per reference on stderr as it finishes (also with --json), with its duration.\n"
      "Exit code 0 when every document is valid (warnings allowed), 1 when any is not,\n"
      "5 when --compile is asked of a build without the worker or --run finds no GPU.\n"
      "Examples: kopt kb lint --compile --kb-dir ~/my-techniques\n"
      "          kopt kb lint --run --json > kb-check.json\n"
      "          kopt kb lint --run --only topk-filter --only rms-norm");
  cmd->callback([o, &status, cmd] {
    // These narrow or tune --compile / --run; alone they would be silently ignored.
    for (const char* opt : {"--only", "--seeds", "--max-time", "--peaks"})
      if (cmd->count(opt) > 0 && !o->compile && !o->run)
        throw CLI::ValidationError(opt, "applies to --compile / --run; add one of them");
    if ((cmd->count("--seeds") > 0 || cmd->count("--max-time") > 0 || cmd->count("--peaks") > 0) &&
        !o->run)
      throw CLI::ValidationError("--seeds / --max-time / --peaks", "apply to --run only");
    const kb::load_result lr = load(*o);
    std::size_t errors = 0, warnings = 0;
    json diags = json::array();
    for (const auto& d : lr.diagnostics) {
      (d.level == kb::diagnostic::severity::error ? errors : warnings) += 1;
      if (o->json_out)
        diags.push_back(diagnostic_json(d));
      else
        std::cerr << d.to_string() << '\n';
    }
    json compiled = json::array();
    json refs = json::array();
    std::size_t compile_failures = 0, reference_failures = 0;
    bool no_gpu = false;
    if (o->run) o->compile = true;
    // An --only id that names no document is a typo: say so before any GPU time is spent. A
    // document that failed to parse is not a typo: its errors are reported like any other.
    for (const auto& id : o->only) {
      const bool parsed = std::any_of(lr.documents.begin(), lr.documents.end(),
                                      [&](const kb::document& d) { return d.id == id; });
      const bool broken =
          std::any_of(lr.diagnostics.begin(), lr.diagnostics.end(), [&](const kb::diagnostic& g) {
            return g.level == kb::diagnostic::severity::error && fs::path(g.file).stem() == id;
          });
      if (!parsed && !broken)
        throw kopt::not_found_error(
            "--only " + id +
            ": no knowledge-base document with that id (kopt kb search lists them)");
    }
    auto selected = [&](const kb::document& d) {
      return o->only.empty() || std::find(o->only.begin(), o->only.end(), d.id) != o->only.end();
    };
    std::size_t selected_refs = 0;
    for (const auto& d : lr.documents)
      if (d.is_reference() && selected(d)) ++selected_refs;
    std::size_t ref_no = 0, refs_evaluated = 0;
    if (o->compile) {
#ifdef KOPT_HAVE_WORKER
      const std::string worker = o->worker.empty() ? runner::default_worker_exe() : o->worker;
      std::unique_ptr<compile::compiler> comp;
      if (fs::exists(worker)) {
        comp = std::make_unique<compile::compiler>(worker, compile::default_cache_dir());
      } else {
        std::cerr << "kopt: " << worker << " not found; compiling in this process\n";
      }
      for (const auto& d : lr.documents) {
        if (!selected(d)) continue;
        // A reference's kernels live in its operator config, which `kopt eval`
        // compile-checks (and checks on a GPU); it has no Example to compile.
        if (d.is_reference()) {
          ++ref_no;
          const auto t0 = std::chrono::steady_clock::now();
          // After the first "no GPU", the rest are compile-checked only.
          const bool on_gpu = o->run && !no_gpu;
          reference_check rc = check_reference(d, *o, on_gpu);
          const double secs =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          rc.detail["seconds"] = secs;
          // Progress for long --run checks, on stderr in either output mode.
          if (on_gpu && !rc.detail.contains("needs_gpu")) ++refs_evaluated;
          if (on_gpu && !rc.detail.contains("needs_gpu"))
            std::cerr << fmt::format("kopt: kb lint --run [{}/{}] {}: {} ({:.0f} s)\n", ref_no,
                                     selected_refs, d.id, rc.ok ? "ok" : "FAILED", secs);
          if (rc.detail.contains("needs_gpu")) {
            if (!no_gpu)
              std::cerr << "kopt: kb lint --run: no GPU ("
                        << rc.detail["needs_gpu"].get<std::string>()
                        << "); references are compile-checked only\n";
            no_gpu = true;
          }
          if (!rc.ok) ++reference_failures;
          if (o->json_out) {
            refs.push_back(json{{"id", rc.id},
                                {"file", rc.file},
                                {"config", rc.config},
                                {"ok", rc.ok},
                                {"problem", rc.problem},
                                {"detail", rc.detail}});
          } else if (!rc.ok) {
            std::cerr << rc.file << ": error: reference " << (o->run ? "check" : "compile")
                      << " failed: " << rc.problem << '\n';
          } else if (o->run && rc.detail.contains("roles")) {
            std::string sol;
            for (const auto& [role, v] : rc.detail.at("roles").items())
              sol += fmt::format(" {} {:.1f}% SOL", role,
                                 100.0 * v.value("weighted_sol_fraction", 0.0));
            std::cerr << rc.file << ": reference correct on "
                      << rc.detail.at("roles").begin()->value("workloads", 0) << " workloads on "
                      << rc.detail.value("gpu", "") << ";" << sol << '\n';
          } else {
            std::cerr << rc.file << ": reference kernels compile for " << o->compile_arch << '\n';
          }
          continue;
        }
        const kb::compile_outcome c = kb::compile_example(d, o->compile_arch, comp.get());
        if (!c.ok) ++compile_failures;
        const int line = d.ex ? d.ex->source_line : 0;
        if (o->json_out) {
          compiled.push_back(json{{"id", d.id},
                                  {"file", d.file},
                                  {"line", line},
                                  {"ok", c.ok},
                                  {"compiled", c.compiled},
                                  {"status", c.status},
                                  {"problems", c.problems},
                                  {"log", c.compiled ? "" : c.log},
                                  {"defines", d.ex ? json(d.ex->defaults) : json::object()},
                                  {"duration_ms", c.result.duration_ms},
                                  {"cached", c.result.cached}});
        } else if (!c.ok) {
          for (const auto& p : c.problems)
            std::cerr << d.file << ':' << line << ": error: " << p << '\n';
          if (!c.compiled && !c.log.empty()) std::cerr << c.log << '\n';
        } else if (!o->json_out) {
          std::cerr << d.file << ": example compiles for " << o->compile_arch
                    << (c.result.cached ? " (cached)" : "") << '\n';
        }
      }
#else
      std::cerr
          << "kopt: kb lint --compile needs a build with the worker (KOPT_ENABLE_WORKER=ON)\n";
      status.code = exit_no_gpu;
      return;
#endif
    }
    const bool valid = errors == 0 && compile_failures == 0 && reference_failures == 0;
    if (o->json_out) {
      json j{{"valid", valid},   {"files", lr.files},    {"documents", lr.documents.size()},
             {"errors", errors}, {"warnings", warnings}, {"diagnostics", diags}};
      if (o->compile) {
        j["compile"] = compiled;
        j["compile_failures"] = compile_failures;
        j["references"] = refs;
        j["reference_failures"] = reference_failures;
        // True only when a reference was evaluated on a GPU (not when --only named none).
        j["references_run"] = refs_evaluated > 0;
        j["references_evaluated"] = refs_evaluated;
      }
      print_json(j);
    } else {
      std::cout << lr.files << " documents: " << lr.documents.size() << " valid, " << errors
                << " error" << (errors == 1 ? "" : "s") << ", " << warnings << " warning"
                << (warnings == 1 ? "" : "s");
      if (o->compile)
        std::cout << ", " << compile_failures << " example" << (compile_failures == 1 ? "" : "s")
                  << " failing to compile, " << reference_failures << " reference"
                  << (reference_failures == 1 ? "" : "s")
                  << (o->run && !no_gpu ? " failing on the GPU" : " failing to compile");
      std::cout << '\n';
    }
    status.code = !valid ? exit_invalid : no_gpu ? exit_no_gpu : exit_ok;
  });
}

}  // namespace

kb::load_result load_knowledge_base(const std::vector<std::string>& dirs, bool no_builtin) {
  std::vector<fs::path> extra(dirs.begin(), dirs.end());
  const auto found = kb::directories(extra, !no_builtin);
  if (found.empty())
    throw kopt::not_found_error(
        "no knowledge-base directory: kopt's own techniques were not found (set $KOPT_DATA_DIR) "
        "and no --kb-dir was given");
  return kb::load_directories(found);
}

json kb_document_json(const kb::document& d) {
  json sections = json::array();
  for (const auto& s : d.sections)
    sections.push_back(json{{"name", s.name}, {"line", s.line}, {"text", s.text}});
  json refs = json::array();
  for (const auto& r : d.references) refs.push_back(r.target);
  json j{{"id", d.id},
         {"kind", kb::kind_name(d.kind)},
         {"title", d.title},
         {"bottlenecks", d.bottlenecks},
         {"operators", d.operators},
         {"arch", d.arch},
         {"tags", d.tags},
         {"file", d.file},
         {"content_hash", d.content_hash},
         {"references", refs},
         {"sections", sections}};
  if (d.is_reference()) {
    j["config"] = d.config;
    j["config_path"] = d.config_path;
  }
  if (d.ex)
    j["example"] = json{{"source", d.ex->source},
                        {"plan", d.ex->plan},
                        {"defaults", d.ex->defaults},
                        {"kernels", d.ex->kernels}};
  return j;
}

json kb_search_json(const kb::index& idx, const kb::query& q) {
  json j = idx.retrieve(q).to_json();
  j["query"] = json{{"bottlenecks", q.bottlenecks},
                    {"operator", q.operator_class},
                    {"arch", q.arch},
                    {"text", q.text}};
  return j;
}

// One place for the mapping: the campaign session's.
std::string kb_operator_class(const config::operator_config& op) {
  return campaign::kb_operator_class(op);
}

void register_kb(CLI::App& app, context& /*ctx*/, exit_status& status) {
  auto o = std::make_shared<kb_options>();
  CLI::App* group =
      app.add_subcommand("kb", "Knowledge base: search, show and lint technique documents");
  group->require_subcommand(1);
  group->fallthrough();
  group
      ->add_option("--kb-dir", o->dirs,
                   "extra directory of documents (repeatable; added to kopt's own)")
      ->type_name("DIR");
  group->add_flag("--no-builtin", o->no_builtin,
                  "leave out kopt's own documents (techniques and references)");
  group->footer(
      "Examples:\n  kopt kb search --bottleneck latency-bound --operator gemm cp.async\n"
      "  kopt kb show <id>\n  kopt kb lint --kb-dir my-techniques/\n"
      "Operator classes and how a config's op_type maps to one: docs/knowledge-base.md.");
  add_search(*group, o);
  add_show(*group, o);
  add_lint(*group, o, status);
}

}  // namespace kopt::cli
