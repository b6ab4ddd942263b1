#include "runner/sanitize.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/error.hpp"

namespace kopt::runner {

using json = nlohmann::json;
namespace fs = std::filesystem;

json sanitize_tool_result::to_json() const {
  return {{"tool", tool}, {"status", status}, {"errors", errors}, {"message", message}};
}

json sanitize_report::to_json() const {
  json t = json::array();
  for (const auto& r : tools) t.push_back(r.to_json());
  return {{"status", status}, {"reason", reason}, {"sanitizer", sanitizer}, {"tools", t}};
}

std::optional<std::string> find_compute_sanitizer() {
  auto executable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (const char* e = std::getenv("KOPT_COMPUTE_SANITIZER"); e && *e)
    return executable(e) ? std::optional<std::string>(e) : std::nullopt;
  if (const char* path = std::getenv("PATH")) {
    std::istringstream in(path);
    std::string dir;
    while (std::getline(in, dir, ':'))
      if (!dir.empty() && executable(fs::path(dir) / "compute-sanitizer"))
        return (fs::path(dir) / "compute-sanitizer").string();
  }
  for (const char* p : {"/usr/local/cuda/bin/compute-sanitizer",
                        "/usr/local/cuda/compute-sanitizer/compute-sanitizer"})
    if (executable(p)) return std::string(p);
  return std::nullopt;
}

std::optional<sanitizer_log_summary> parse_sanitizer_log(const std::string& log) {
  static const std::regex summary(R"(ERROR SUMMARY:\s*(\d+)\s+error)");
  static const std::regex race(R"(RACECHECK SUMMARY:.*\((\d+)\s+errors?)");
  std::smatch m;
  sanitizer_log_summary s;
  bool found = false;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), summary);
       it != std::sregex_iterator(); ++it) {
    s.errors += std::stoi((*it)[1]);
    found = true;
  }
  if (std::regex_search(log, m, race)) {
    s.errors = std::max(s.errors, std::stoi(m[1]));
    found = true;
  }
  if (!found) return std::nullopt;
  // The first reports: lines that are neither the banner nor a summary.
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line) && s.first_reports.size() < 1500) {
    if (line.find("COMPUTE-SANITIZER") != std::string::npos ||
        line.find("SUMMARY") != std::string::npos)
      continue;
    if (line.find("=========") == std::string::npos) continue;
    s.first_reports += line + "\n";
  }
  return s;
}

sanitize_report sanitize(const worker_options& base, json request,
                         const std::vector<std::string>& tools) {
  sanitize_report rep;
  const auto tool = find_compute_sanitizer();
  if (!tool) {
    rep.status = "skipped";
    rep.reason = "compute-sanitizer not found (set KOPT_COMPUTE_SANITIZER, or put it on PATH)";
    return rep;
  }
  rep.sanitizer = *tool;
  // One log per run: the daemon sanitizes on several GPUs at once.
  static std::atomic<unsigned> next_log{0};
  // Checks only, one input set, no re-check: the sanitizer slows kernels by
  // orders of magnitude, and what it looks for needs one honest call.
  request["settings"] = {{"seeds", 1},
                         {"recheck", false},
                         {"checks_only", true},
                         {"counters", "none"},
                         {"launch_timeout_ms", 600000}};
  rep.status = "ok";
  for (const auto& t : tools) {
    sanitize_tool_result r;
    r.tool = t;
    std::error_code ec;
    const fs::path log =
        fs::temp_directory_path(ec) /
        fmt::format("kopt-sanitize-{}-{}-{}.log", ::getpid(), next_log.fetch_add(1), t);
    fs::remove(log, ec);
    worker_options o = base;
    // Under the caller's own launch prefix (srun on a cluster, where the
    // worker must run on the node that holds the GPU), then the tool.
    for (const char* a : {tool->c_str(), "--tool", t.c_str(), "--log-file", log.c_str(),
                          "--target-processes", "application-only"})
      o.launch_prefix.emplace_back(a);
    if (t == "racecheck") {
      o.launch_prefix.push_back("--racecheck-report");
      o.launch_prefix.push_back("hazard");
    }
    o.extra_args.push_back("--profile-only");
    o.max_restarts = 0;
    o.hello_timeout = std::chrono::seconds(600);
    std::string run_error;
    evaluation_report er;
    try {
      worker_client w(o);
      w.start();
      er = w.evaluate(request);
      w.stop();
    } catch (const std::exception& e) {
      run_error = e.what();
    }
    std::string text;
    {
      std::ifstream in(log);
      std::ostringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    fs::remove(log, ec);
    const auto summary = parse_sanitizer_log(text);
    if (summary && summary->errors > 0) {
      r.status = "errors";
      r.errors = summary->errors;
      r.message = summary->first_reports;
    } else if (!run_error.empty() || !summary) {
      r.status = "failed";
      r.message = !run_error.empty() ? run_error : "compute-sanitizer wrote no summary";
    } else {
      r.status = "ok";
    }
    // A subject that crashed or hung under the tool is reported by the run.
    for (const auto& [wl, roles] : er.results)
      for (const auto& [role, res] : roles)
        if (res.status == protocol::outcome::crashed || res.status == protocol::outcome::timeout)
          r.message += fmt::format("{}{} on {}: {}: {}", r.message.empty() ? "" : "\n", role, wl,
                                   protocol::to_string(res.status), res.message);
    rep.tools.push_back(r);
  }
  for (const auto& r : rep.tools) {
    if (r.status == "errors" && rep.status != "rejected_integrity") {
      rep.status = "rejected_integrity";
      rep.reason = fmt::format("compute-sanitizer {} found {} error(s): {}", r.tool, r.errors,
                               r.message.substr(0, 600));
    }
  }
  if (rep.status == "ok")
    for (const auto& r : rep.tools)
      if (r.status == "failed") {
        rep.status = "failed";
        rep.reason = fmt::format("compute-sanitizer {} did not complete: {}", r.tool,
                                 r.message.substr(0, 400));
        break;
      }
  return rep;
}

}  // namespace kopt::runner
