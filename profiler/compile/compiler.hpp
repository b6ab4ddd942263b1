// Compiling candidates with NVRTC for the worker's exact architecture.
//
// compile_in_process() is the NVRTC call itself; it runs inside a short-lived
// child process (`kopt-worker compile`), started by compile_isolated(), with
// a time limit and a scrubbed environment, because a generated kernel can
// make the compiler loop, blow up memory or crash, and none of that may touch
// the worker's CUDA context or the daemon. Results are cached on disk by the
// SHA-256 of everything that determines the binary (source, options,
// defines, architecture, NVRTC version), so a resumed campaign or a repeated
// parameter point never compiles twice. None of this needs a GPU: CI
// compile-checks every reference kernel.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kopt::compile {

struct request {
  std::string source;
  std::string arch = "sm_90a";                       // e.g. sm_90a, sm_80
  std::map<std::string, std::int64_t> defines;       // tunable parameters -> -DNAME=value
  std::vector<std::string> options;                  // allow-listed user options
  std::string name = "candidate.cu";
  std::chrono::milliseconds timeout{60000};
  // false: compile even when the cache holds this binary (the result is still
  // stored). Not part of the key or of to_json: it changes how, not what.
  bool use_cache = true;
  nlohmann::json to_json() const;
  static request from_json(const nlohmann::json& j);
};

struct kernel_info {
  int registers = -1;
  std::int64_t stack_bytes = 0, spill_store_bytes = 0, spill_load_bytes = 0, shared_static_bytes = 0;
  // ptxas "Potential Performance Loss" advisories for this function, e.g.
  // "(C7520) wgmma.mma_async instructions are serialized due to ...": a
  // kernel that compiles and is correct can still lose most of its speed to
  // them, and ptxas says so only in its -v report.
  std::vector<std::string> performance_advisories;
  nlohmann::json to_json() const;
};

struct result {
  enum class status { ok, error, timeout, crashed };
  status st = status::error;
  std::string log;          // NVRTC log, including ptxas -v output
  std::string cubin;        // binary (empty unless ok)
  std::string cubin_hash;   // SHA-256 of cubin
  std::string key;          // cache key
  std::map<std::string, kernel_info> kernels;  // from the ptxas report
  std::vector<std::string> integrity_problems;  // from the cubin's sections and symbols
  // Clock reads in the PTX or SASS ("PTX: %clock64", ...): refused as
  // rejected_integrity unless the request allows them (allow_clock_reads).
  std::vector<std::string> clock_reads;
  double duration_ms = 0.0;
  bool cached = false;
  std::string nvrtc_version;
  bool ok() const noexcept { return st == status::ok; }
  // Metadata only (no cubin bytes).
  nlohmann::json to_json() const;
  static result from_json(const nlohmann::json& j);
};

const char* status_name(result::status s) noexcept;

// Every integrity problem of a compiled result under the operator's rules:
// the cubin's own (writable data, device malloc, printf, ...) and, unless
// allow_clock_reads (operator config integrity.allow_clock_reads), one for
// its clock reads. The one decision used by the worker and `kopt eval`'s
// compile check alike.
std::vector<std::string> integrity_problems(const result& r, bool allow_clock_reads);

// The NVRTC options kopt passes, in order (for the store and the bundle).
std::vector<std::string> effective_options(const request& r);

// Key of the on-disk cache for this request.
std::string cache_key(const request& r);

// Runs NVRTC in this process. Never throws for a compile error (status
// error + log); throws kopt::error only when NVRTC itself is unusable.
result compile_in_process(const request& r);

// Parses ptxas -v output ("Function properties for k", "Used N registers").
std::map<std::string, kernel_info> parse_ptxas_report(const std::string& log);

// The CUDA headers NVRTC compiles against: $KOPT_WORKER_CUDA_INCLUDE, else
// the toolkit's include directory found at build time.
std::string cuda_include_dir();

// Where compiled cubins are cached: $KOPT_CACHE_DIR, else
// $XDG_CACHE_HOME/kopt/cubin, else ~/.cache/kopt/cubin.
std::filesystem::path default_cache_dir();

class compiler {
 public:
  // `worker_exe` is the kopt-worker binary used as the isolated compile
  // child; cache_dir may be empty to disable the cache.
  compiler(std::string worker_exe, std::filesystem::path cache_dir);

  // Cache lookup, else a child process with the request's time limit.
  result compile(const request& r) const;

 private:
  std::optional<result> load_cached(const std::string& key) const;
  void store_cached(const result& r) const;
  std::string worker_exe_;
  std::filesystem::path cache_dir_;
};

// Entry point of `kopt-worker compile`: reads a request JSON on stdin,
// compiles, writes the cubin to `out_file` and the metadata JSON on stdout.
int compile_child_main(const std::string& out_file);

}  // namespace kopt::compile
