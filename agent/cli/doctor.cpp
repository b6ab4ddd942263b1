// `kopt doctor [--json] [--config daemon.json]`: what this kopt found and
// where, and every problem with a hint. It is the first thing to run when
// something is off, so it never needs a GPU, a driver or a database, and it
// never links or loads libcuda: the driver and the GPUs are seen through the
// worker (`kopt-worker versions`, which loads the driver through the CUDA
// runtime), /proc/driver/nvidia and /dev/nvidia*.
//
// Exit codes: 0 when nothing stops kopt from working here (warnings, e.g.
// "no GPU", allowed), 1 when a problem does (missing data, no worker).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "common/data_paths.hpp"
#include "common/error.hpp"
#include "common/subprocess.hpp"
#include "daemon/config.hpp"
#include "runner/worker_client.hpp"

#ifndef KOPT_VERSION
#define KOPT_VERSION "unknown"
#endif

namespace kopt::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct doctor_options {
  bool json = false;
  std::string config;  // a daemon config to check as well
  std::string worker;  // the worker executable (default: as kopt eval finds it)
};

struct findings {
  json report = json::object();
  json problems = json::array();
  void problem(const std::string& severity, const std::string& what, const std::string& hint) {
    problems.push_back({{"severity", severity}, {"what", what}, {"hint", hint}});
  }
};

json data_section(findings& f) {
  json out = json::object();
  for (auto k : {data::kind::prompts, data::kind::techniques, data::kind::references,
                 data::kind::hardware, data::kind::bench, data::kind::examples}) {
    const data::lookup l = data::find(k);
    json tried = json::array();
    for (const auto& t : l.tried)
      tried.push_back({{"path", t.dir.string()},
                       {"how", std::string(data::name(t.how))},
                       {"detail", t.detail}});
    json e = {{"tried", tried}};
    if (l.found && l.problem.empty()) {
      e["path"] = l.found->dir.string();
      e["how"] = std::string(data::name(l.found->how));
      e["detail"] = l.found->detail;
    } else {
      e["path"] = nullptr;
      e["how"] = nullptr;
    }
    const std::string n(data::name(k));
    out[n] = e;
    // The examples and the bench suite are conveniences; the rest is needed.
    const bool needed = k != data::kind::bench && k != data::kind::examples;
    if (!l.problem.empty())
      f.problem("error", l.problem, "unset it or point it at a directory of templates");
    else if (!l.found)
      f.problem(needed ? "error" : "warning",
                "no " + n + " directory (looked in: " + l.looked_in() + ")",
                "reinstall kopt (they belong in <prefix>/share/kopt), or set KOPT_DATA_DIR to a "
                "directory "
                "laid out as share/kopt");
  }
  const std::string peaks = data::peaks_file();
  out["peaks_file"] = peaks.empty() ? json(nullptr) : json(peaks);
  if (peaks.empty() && out["hardware"]["path"].is_string())
    f.problem("error", "the hardware directory has no gpus.json",
              "reinstall kopt or pass --peaks to eval/run");
  return out;
}

json database_section(const context& ctx, findings& f) {
  try {
    const db_location loc = ctx.database();
    std::error_code ec;
    const bool exists = fs::exists(loc.path, ec);
    json j = {{"path", loc.path.string()}, {"how", loc.source}, {"exists", exists}};
    if (!exists) {
      // Not a problem: the first writing command creates it. Say where.
      fs::path dir = loc.path.parent_path();
      while (!dir.empty() && !fs::exists(dir, ec) && dir != dir.parent_path())
        dir = dir.parent_path();
      j["nearest_existing_directory"] = dir.string();
    }
    return j;
  } catch (const kopt::error& e) {
    f.problem("error", e.what(), "pass --db PATH or set KOPT_DB");
    return {{"path", nullptr}, {"error", e.what()}};
  }
}

std::string read_small(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.substr(0, 2000);
}

json driver_section(const json& worker_versions, findings& f) {
  json j = json::object();
  const std::string proc = read_small("/proc/driver/nvidia/version");
  j["proc_driver_nvidia_version"] = proc.empty() ? json(nullptr) : json(proc);
  json nodes = json::array();
  std::error_code ec;
  for (fs::directory_iterator it("/dev", ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind("nvidia", 0) == 0)
      nodes.push_back(it->path().string());
  std::sort(nodes.begin(), nodes.end());
  j["device_nodes"] = nodes;
  const int api = worker_versions.value("cuda_driver_api", 0);
  j["cuda_driver_api"] = api;
  j["loaded"] = api > 0 || !proc.empty();
  if (api > 0) j["cuda_driver"] = fmt::format("{}.{}", api / 1000, (api % 1000) / 10);
  if (!j["loaded"].get<bool>())
    f.problem("warning",
              "no NVIDIA driver here (no /proc/driver/nvidia, and the CUDA runtime found none)",
              "fine for compile checks, validation and the CPU commands; evaluations need a "
              "machine with a GPU "
              "and its driver (or workers on other nodes through a launch prefix, docs/daemon.md)");
  return j;
}

json worker_section(const doctor_options& o, findings& f, json* versions) {
  json j = json::object();
  std::string exe = o.worker;
  std::string how = "--worker";
  if (exe.empty()) {
    const char* e = std::getenv("KOPT_WORKER");
    how = e != nullptr && *e != '\0' ? "$KOPT_WORKER" : "beside kopt";
    try {
      exe = runner::default_worker_exe();
    } catch (const std::exception& ex) {
      f.problem("error", std::string("cannot locate kopt-worker: ") + ex.what(),
                "pass --worker PATH");
      return j;
    }
  }
  j["executable"] = exe;
  j["how"] = how;
  std::error_code ec;
  if (!fs::is_regular_file(exe, ec) || ::access(exe.c_str(), X_OK) != 0) {
    j["found"] = false;
    f.problem("error", "no kopt-worker at " + exe,
              "install the kopt package (it ships kopt-worker beside kopt), or set KOPT_WORKER; "
              "without it kopt cannot compile or measure");
    return j;
  }
  j["found"] = true;
  const run_result r =
      run_capture({exe, "versions"}, scrubbed_environment(), "", std::chrono::seconds(60), 1 << 20);
  if (!r.status.exited || r.status.code != 0) {
    j["error"] = "kopt-worker versions " + r.status.describe() + ": " + r.err.substr(0, 500);
    f.problem("error", j["error"].get<std::string>(),
              "the worker cannot start: check that the CUDA 13 toolkit libraries (libnvrtc, "
              "libcupti) are "
              "installed and on the loader path (ldconfig -p | grep nvrtc)");
    return j;
  }
  try {
    *versions = json::parse(r.out);
  } catch (const json::exception& e) {
    f.problem("error", std::string("kopt-worker versions printed no JSON: ") + e.what(),
              "a kopt-worker from another kopt version? reinstall kopt");
    return j;
  }
  j["version"] = versions->value("worker_version", "");
  if (j["version"] != KOPT_VERSION)
    f.problem("warning",
              fmt::format("kopt is {} but kopt-worker is {}", KOPT_VERSION,
                          j["version"].get<std::string>()),
              "install both from the same build or package");
  if (!versions->value("cuda_headers_found", true))
    f.problem(
        "error",
        "NVRTC's CUDA headers are not at " + versions->value("cuda_include_dir", std::string("?")),
        "install the CUDA 13 toolkit there, or set KOPT_WORKER_CUDA_INCLUDE to its include "
        "directory");
  return j;
}

void print_text(const json& r) {
  std::cout << "kopt " << r["kopt"]["version"].get<std::string>() << " ("
            << r["kopt"]["executable"].get<std::string>() << ")\n\nData:\n";
  for (const auto& [name, e] : r["data"].items()) {
    if (name == "peaks_file") continue;
    if (e["path"].is_string())
      std::cout << fmt::format("  {:<26} {}  [{}: {}]\n", name, e["path"].get<std::string>(),
                               e["how"].get<std::string>(), e["detail"].get<std::string>());
    else
      std::cout << fmt::format("  {:<26} NOT FOUND\n", name);
  }
  std::cout << fmt::format("  {:<26} {}\n", "peak table",
                           r["data"]["peaks_file"].is_string()
                               ? r["data"]["peaks_file"].get<std::string>()
                               : "NOT FOUND");
  const auto& db = r["database"];
  std::cout << "\nDatabase: "
            << (db["path"].is_string()
                    ? db["path"].get<std::string>() + " [" + db.value("how", "") + "]" +
                          (db.value("exists", false) ? "" : " (not created yet)")
                    : "none")
            << '\n';
  if (r.contains("daemon")) {
    const auto& d = r["daemon"];
    std::cout << "Daemon config: " << d.value("file", "") << (d.contains("error") ? " INVALID" : "")
              << '\n';
    if (d.contains("database"))
      std::cout << "  database " << d["database"].get<std::string>() << '\n';
  }
  const auto& w = r["worker"];
  std::cout << "\nWorker: " << w.value("executable", "?") << " [" << w.value("how", "?") << "]"
            << (w.value("found", false) ? "" : " NOT FOUND") << '\n';
  const auto& v = r["versions"];
  auto or_unknown = [&](const char* k) {
    const std::string s = v.value(k, std::string());
    return s.empty() ? std::string("unknown (no worker)") : s;
  };
  std::cout << "Versions: kopt " << v.value("kopt", "?") << ", CUDA toolkit "
            << or_unknown("cuda_toolkit") << ", NVRTC " << or_unknown("nvrtc") << ", CUPTI API "
            << (v.value("cupti_api", 0) > 0 ? std::to_string(v.value("cupti_api", 0)) : "unknown")
            << '\n';
  const auto& drv = r["driver"];
  std::cout << "Driver: "
            << (drv.value("loaded", false)
                    ? (drv.contains("cuda_driver") ? "CUDA " + drv["cuda_driver"].get<std::string>()
                                                   : "present")
                    : "none")
            << "; device nodes: "
            << (drv["device_nodes"].empty() ? "none" : drv["device_nodes"].dump()) << '\n';
  std::cout << "GPUs: ";
  if (r["gpus"].empty())
    std::cout << "none seen"
              << (r.contains("no_gpu_reason") ? " (" + r["no_gpu_reason"].get<std::string>() + ")"
                                              : "")
              << '\n';
  else
    for (const auto& g : r["gpus"]) std::cout << "\n  " << g.dump();
  std::cout << (r["gpus"].empty() ? "" : "\n");
  std::cout << "\nProblems: " << (r["problems"].empty() ? "none\n" : "\n");
  for (const auto& p : r["problems"])
    std::cout << "  " << p["severity"].get<std::string>() << ": " << p["what"].get<std::string>()
              << "\n    hint: " << p["hint"].get<std::string>() << '\n';
}

}  // namespace

void register_doctor(CLI::App& app, context& ctx, exit_status& status) {
  auto o = std::make_shared<doctor_options>();
  auto* cmd =
      app.add_subcommand("doctor",
                         "show what this kopt found and where (data directories and how each was "
                         "chosen, database, worker, "
                         "CUDA/NVRTC/CUPTI versions, driver, GPUs) and every problem with a hint");
  cmd->add_flag("--json", o->json, "one JSON object on stdout");
  cmd->add_option("--config", o->config, "also check this daemon config (kopt daemon --config)");
  cmd->add_option("--worker", o->worker,
                  "worker executable (default: $KOPT_WORKER, else beside kopt)");
  cmd->footer(
      "Exit codes: 0 nothing stops kopt here (warnings such as \"no GPU\" allowed), 1 a problem "
      "does.\n"
      "Data lookup order: $KOPT_PROMPTS_DIR (templates), $KOPT_DATA_DIR, beside the binary "
      "(bin/../share/kopt), the build tree (build-tree binaries only), the install prefix.");
  cmd->callback([o, &ctx, &status] {
    findings f;
    json& r = f.report;
    std::string self;
    try {
      self = self_executable();
    } catch (const std::exception& e) {
      self = std::string("unknown: ") + e.what();
    }
    r["kopt"] = {{"version", KOPT_VERSION}, {"executable", self}};
    r["data"] = data_section(f);
    r["database"] = database_section(ctx, f);
    if (!o->config.empty()) {
      json d = {{"file", o->config}};
      try {
        const auto cfg = daemon::load_config(o->config);
        d["database"] = cfg.db_path.string();
        d["state_dir"] = cfg.state_dir.string();
        d["evaluator"] = cfg.evaluator;
        d["worker_exe"] = cfg.worker.exe;
        d["launch_prefix"] = cfg.worker.launch_prefix;
        if (!cfg.worker.exe.empty() && o->worker.empty()) o->worker = cfg.worker.exe;
      } catch (const std::exception& e) {
        d["error"] = e.what();
        f.problem("error", e.what(),
                  "kopt daemon --config FILE --check shows the whole configuration");
      }
      r["daemon"] = d;
    }
    json versions = json::object();
    r["worker"] = worker_section(*o, f, &versions);
    r["versions"] = {{"kopt", KOPT_VERSION},
                     {"worker", versions.value("worker_version", "")},
                     {"cuda_toolkit", versions.value("cuda_toolkit", "")},
                     {"cuda_runtime", versions.value("cuda_runtime", 0)},
                     {"nvrtc", versions.value("nvrtc", "")},
                     {"cupti_api", versions.value("cupti_api", 0)},
                     {"protocol", versions.value("protocol", 0)}};
    if (versions.contains("cuda_include_dir")) r["cuda_include_dir"] = versions["cuda_include_dir"];
    r["driver"] = driver_section(versions, f);
    r["gpus"] = versions.value("devices", json::array());
    if (versions.contains("no_device_reason")) r["no_gpu_reason"] = versions["no_device_reason"];
    if (r["gpus"].empty() && r["driver"].value("loaded", false))
      f.problem(
          "warning",
          "the driver is loaded but no GPU is usable" +
              (r.contains("no_gpu_reason") ? ": " + r["no_gpu_reason"].get<std::string>() : ""),
          "check CUDA_VISIBLE_DEVICES and the /dev/nvidia* permissions (under systemd: "
          "DeviceAllow)");
    r["problems"] = f.problems;
    bool ok = true;
    for (const auto& p : f.problems) ok = ok && p["severity"] != "error";
    r["ok"] = ok;
    if (o->json)
      std::cout << r.dump(2) << '\n';
    else
      print_text(r);
    if (!ok) status.code = exit_invalid;
  });
}

}  // namespace kopt::cli
