#include "compile/compiler.hpp"

#include <fmt/format.h>
#include <nvrtc.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <regex>
#include <sstream>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/subprocess.hpp"
#include "core/cubin_inspect.hpp"
#include "core/cubin_rules.hpp"

#ifndef KOPT_CUDA_INCLUDE_DIR
#define KOPT_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

namespace kopt::compile {

std::string cuda_include_dir() {
  if (const char* e = std::getenv("KOPT_WORKER_CUDA_INCLUDE"); e && *e) return e;
  return KOPT_CUDA_INCLUDE_DIR;
}

namespace {

std::string nvrtc_version_string() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return fmt::format("{}.{}", major, minor);
}


std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw kopt::error("cannot read " + p.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file_atomic(const std::filesystem::path& p, const std::string& data) {
  const auto tmp = p.string() + fmt::format(".tmp.{}", getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw kopt::error("cannot write " + tmp);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) throw kopt::error("write failed: " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, p, ec);
  if (ec) throw kopt::error(fmt::format("rename {} -> {}: {}", tmp, p.string(), ec.message()));
}

}  // namespace

const char* status_name(result::status s) noexcept {
  switch (s) {
    case result::status::ok: return "ok";
    case result::status::error: return "compile_error";
    case result::status::timeout: return "timeout";
    case result::status::crashed: return "crashed";
  }
  return "?";
}

nlohmann::json request::to_json() const {
  return {{"source", source}, {"arch", arch}, {"defines", defines}, {"options", options},
          {"name", name}, {"timeout_ms", timeout.count()}};
}

request request::from_json(const nlohmann::json& j) {
  request r;
  r.source = j.at("source").get<std::string>();
  r.arch = j.value("arch", r.arch);
  r.defines = j.value("defines", r.defines);
  r.options = j.value("options", r.options);
  r.name = j.value("name", r.name);
  r.timeout = std::chrono::milliseconds(j.value("timeout_ms", std::int64_t{60000}));
  return r;
}

nlohmann::json kernel_info::to_json() const {
  nlohmann::json j = {{"registers", registers},
                      {"stack_bytes", stack_bytes},
                      {"spill_store_bytes", spill_store_bytes},
                      {"spill_load_bytes", spill_load_bytes},
                      {"shared_static_bytes", shared_static_bytes}};
  if (!performance_advisories.empty()) j["performance_advisories"] = performance_advisories;
  return j;
}

nlohmann::json result::to_json() const {
  nlohmann::json k = nlohmann::json::object();
  for (const auto& [name, info] : kernels) k[name] = info.to_json();
  return {{"status", status_name(st)},
          {"log", log},
          {"cubin_hash", cubin_hash},
          {"key", key},
          {"kernels", k},
          {"integrity_problems", integrity_problems},
          {"clock_reads", clock_reads},
          {"duration_ms", duration_ms},
          {"cached", cached},
          {"nvrtc_version", nvrtc_version},
          {"cubin_bytes", cubin.size()}};
}

result result::from_json(const nlohmann::json& j) {
  result r;
  const auto s = j.value("status", std::string("compile_error"));
  r.st = s == "ok" ? status::ok : s == "timeout" ? status::timeout : s == "crashed" ? status::crashed : status::error;
  r.log = j.value("log", "");
  r.cubin_hash = j.value("cubin_hash", "");
  r.key = j.value("key", "");
  r.duration_ms = j.value("duration_ms", 0.0);
  r.cached = j.value("cached", false);
  r.nvrtc_version = j.value("nvrtc_version", "");
  r.integrity_problems = j.value("integrity_problems", std::vector<std::string>{});
  r.clock_reads = j.value("clock_reads", std::vector<std::string>{});
  if (j.contains("kernels"))
    for (const auto& [name, kj] : j.at("kernels").items()) {
      kernel_info k;
      k.registers = kj.value("registers", -1);
      k.stack_bytes = kj.value("stack_bytes", std::int64_t{0});
      k.spill_store_bytes = kj.value("spill_store_bytes", std::int64_t{0});
      k.spill_load_bytes = kj.value("spill_load_bytes", std::int64_t{0});
      k.shared_static_bytes = kj.value("shared_static_bytes", std::int64_t{0});
      k.performance_advisories = kj.value("performance_advisories", std::vector<std::string>{});
      r.kernels[name] = k;
    }
  return r;
}

std::vector<std::string> integrity_problems(const result& r, bool allow_clock_reads) {
  std::vector<std::string> p = r.integrity_problems;
  if (!allow_clock_reads && !r.clock_reads.empty())
    p.push_back(harness::clock_read_problem(r.clock_reads));
  return p;
}

std::vector<std::string> effective_options(const request& r) {
  // CUDA 13 keeps cooperative_groups and cuda/* (CCCL) under include/cccl.
  std::vector<std::string> o = {"--gpu-architecture=" + r.arch, "-std=c++17", "--ptxas-options=-v",
                                "-default-device", "-I" + cuda_include_dir(), "-I" + cuda_include_dir() + "/cccl"};
  for (const auto& [name, value] : r.defines) o.push_back(fmt::format("-D{}={}", name, value));
  for (const auto& opt : r.options) o.push_back(opt);
  return o;
}

std::string cache_key(const request& r) {
  nlohmann::json k = {{"source", r.source},
                      {"options", effective_options(r)},
                      {"nvrtc", nvrtc_version_string()},
                      {"format", 3}};  // 3: kernels carry ptxas performance advisories
  return sha256_hex(k.dump());
}

std::map<std::string, kernel_info> parse_ptxas_report(const std::string& log) {
  std::map<std::string, kernel_info> out;
  static const std::regex fn_re(R"(Function properties for ([A-Za-z_$][\w$]*))");
  static const std::regex entry_re(R"(Compiling entry function '([^']+)')");
  static const std::regex frame_re(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex regs_re(R"(Used (\d+) registers)");
  static const std::regex smem_re(R"((\d+) bytes smem)");
  // ptxas prints these before the function blocks, naming the function.
  static const std::regex advisory_re(
      R"(\((C\d+)\) Potential Performance Loss: (.*?)(?: in the function '([^']+)')?\s*$)");
  std::istringstream in(log);
  std::string line, current;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, advisory_re)) {
      const std::string fn = m[3].matched ? std::string(m[3]) : current;
      if (!fn.empty())
        out[fn].performance_advisories.push_back(
            fmt::format("({}) {}", std::string(m[1]), std::string(m[2])));
      continue;
    }
    if (std::regex_search(line, m, entry_re) || std::regex_search(line, m, fn_re)) {
      current = m[1];
      out[current];
      continue;
    }
    if (current.empty()) continue;
    auto& k = out[current];
    if (std::regex_search(line, m, frame_re)) {
      k.stack_bytes = std::stoll(m[1]);
      k.spill_store_bytes = std::stoll(m[2]);
      k.spill_load_bytes = std::stoll(m[3]);
    }
    if (std::regex_search(line, m, regs_re)) {
      k.registers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem_re)) k.shared_static_bytes = std::stoll(m[1]);
    }
  }
  return out;
}

result compile_in_process(const request& r) {
  const auto t0 = std::chrono::steady_clock::now();
  result res;
  res.key = cache_key(r);
  res.nvrtc_version = nvrtc_version_string();
  nvrtcProgram prog = nullptr;
  nvrtcResult rc = nvrtcCreateProgram(&prog, r.source.c_str(), r.name.c_str(), 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS)
    throw kopt::error(fmt::format("nvrtcCreateProgram: {}", nvrtcGetErrorString(rc)));
  const auto opts = effective_options(r);
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  rc = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  std::size_t log_size = 0;
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    res.log.resize(log_size);
    if (nvrtcGetProgramLog(prog, res.log.data()) != NVRTC_SUCCESS) res.log.clear();
    while (!res.log.empty() && res.log.back() == '\0') res.log.pop_back();
  }
  if (rc == NVRTC_SUCCESS) {
    std::size_t size = 0;
    if (nvrtcGetCUBINSize(prog, &size) != NVRTC_SUCCESS || size == 0) {
      res.st = result::status::error;
      res.log += "\nkopt: NVRTC produced no cubin (is the architecture a real one, e.g. sm_90a?)";
    } else {
      res.cubin.resize(size);
      if (nvrtcGetCUBIN(prog, res.cubin.data()) != NVRTC_SUCCESS)
        throw kopt::error("nvrtcGetCUBIN failed");
      res.st = result::status::ok;
      res.cubin_hash = sha256_hex(res.cubin);
      res.kernels = parse_ptxas_report(res.log);
      const auto facts = harness::inspect_cubin(res.cubin);
      res.integrity_problems = facts.problems();
      // Clock reads from the PTX (what the source asked for) and the SASS
      // (what runs); refused or allowed by the worker's integrity setting.
      res.clock_reads = facts.clock_reads;
      std::size_t ptx_size = 0;
      if (nvrtcGetPTXSize(prog, &ptx_size) == NVRTC_SUCCESS && ptx_size > 1) {
        std::string ptx(ptx_size, '\0');
        if (nvrtcGetPTX(prog, ptx.data()) == NVRTC_SUCCESS)
          for (auto& c : harness::find_clock_reads_ptx(ptx))
            res.clock_reads.push_back(std::move(c));
      }
    }
  } else {
    res.st = result::status::error;
    if (res.log.empty()) res.log = nvrtcGetErrorString(rc);
  }
  nvrtcDestroyProgram(&prog);
  res.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::filesystem::path default_cache_dir() {
  if (const char* e = std::getenv("KOPT_CACHE_DIR"); e && *e) return std::filesystem::path(e) / "cubin";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "kopt" / "cubin";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "kopt" / "cubin";
  return std::filesystem::temp_directory_path() / "kopt-cubin";
}

compiler::compiler(std::string worker_exe, std::filesystem::path cache_dir)
    : worker_exe_(std::move(worker_exe)), cache_dir_(std::move(cache_dir)) {
  if (!cache_dir_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cache_dir_, ec);
    if (ec) cache_dir_.clear();  // an unusable cache only costs time
  }
}

std::optional<result> compiler::load_cached(const std::string& key) const {
  if (cache_dir_.empty()) return std::nullopt;
  const auto meta = cache_dir_ / (key + ".json");
  const auto bin = cache_dir_ / (key + ".cubin");
  std::error_code ec;
  if (!std::filesystem::exists(meta, ec) || !std::filesystem::exists(bin, ec)) return std::nullopt;
  try {
    result r = result::from_json(nlohmann::json::parse(read_file(meta)));
    r.cubin = read_file(bin);
    if (sha256_hex(r.cubin) != r.cubin_hash) return std::nullopt;  // torn or tampered entry
    r.cached = true;
    return r;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void compiler::store_cached(const result& r) const {
  if (cache_dir_.empty() || !r.ok()) return;
  try {
    write_file_atomic(cache_dir_ / (r.key + ".cubin"), r.cubin);
    write_file_atomic(cache_dir_ / (r.key + ".json"), r.to_json().dump());
  } catch (const std::exception&) {
    // A full disk or a read-only cache only costs a recompile next time.
  }
}

result compiler::compile(const request& r) const {
  const std::string key = cache_key(r);
  if (r.use_cache)
    if (auto hit = load_cached(key)) return *hit;

  const auto t0 = std::chrono::steady_clock::now();
  const auto dir = cache_dir_.empty() ? std::filesystem::temp_directory_path() : cache_dir_;
  const auto out_file = dir / fmt::format("{}.child.{}.{}", key, getpid(),
                                          std::chrono::steady_clock::now().time_since_epoch().count());
  const auto run = run_capture({worker_exe_, "compile", "--out", out_file.string()},
                               scrubbed_environment(), r.to_json().dump(), r.timeout);
  result res;
  res.key = key;
  auto elapsed = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  std::error_code ec;
  if (run.status.timed_out) {
    res.st = result::status::timeout;
    res.log = fmt::format("kopt: the compiler did not finish within {} ms and was killed", r.timeout.count());
  } else if (!run.status.exited || run.status.code != 0) {
    res.st = result::status::crashed;
    res.log = fmt::format("kopt: the compiler process {}\n{}", run.status.describe(), run.err);
  } else {
    try {
      res = result::from_json(nlohmann::json::parse(run.out));
      if (res.ok()) {
        res.cubin = read_file(out_file);
        if (sha256_hex(res.cubin) != res.cubin_hash) throw kopt::error("cubin hash mismatch");
      }
    } catch (const std::exception& e) {
      res.st = result::status::crashed;
      res.log = fmt::format("kopt: unreadable answer from the compiler process: {}", e.what());
    }
  }
  std::filesystem::remove(out_file, ec);
  res.duration_ms = elapsed();
  store_cached(res);
  return res;
}

int compile_child_main(const std::string& out_file) {
  try {
    const std::string input(std::istreambuf_iterator<char>(std::cin), {});
    const request r = request::from_json(nlohmann::json::parse(input));
    const result res = compile_in_process(r);
    if (res.ok()) write_file_atomic(out_file, res.cubin);
    std::cout << res.to_json().dump() << '\n';
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kopt-worker compile: " << e.what() << '\n';
    return 3;
  }
}

}  // namespace kopt::compile
