// kopt-worker: one process per GPU. Speaks the versioned JSON-lines protocol
// of docs/worker-protocol.md on stdin/stdout (stdout carries protocol only;
// diagnostics go to stderr), reading every request and writing its own
// answers through the types of protocol/protocol.hpp. Also the isolated
// NVRTC child (`kopt-worker compile`) and a device probe (`kopt-worker info`).
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cupti_target.h>
#include <fmt/format.h>
#include <nvrtc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "common/subprocess.hpp"
#include "compile/compiler.hpp"
#include "core/gpu_select.hpp"
#include "counters/metrics.hpp"
#include "protocol/protocol.hpp"
#include "runtime/device.hpp"
#include "runtime/evaluator.hpp"

namespace {

namespace protocol = kopt::protocol;
constexpr int exit_no_device = 77;  // as CTest's skip code: "cannot run here"

void emit(const nlohmann::json& j) {
  // One message per line; flushed at once so the control plane sees
  // progress (and knows which workload was running if we die).
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  std::cout.flush();
}
void emit(const protocol::message& m) {
  emit(nlohmann::json(m));
}

// The evaluator's messages pass here on their way out. Its errors are
// refusals of the request; one without a code gets `rejected`, so that
// every error on the wire carries one.
void emit_from_evaluator(const nlohmann::json& j) {
  if (j.is_object() && j.value("type", "") == "error" && !j.contains("code")) {
    nlohmann::json c = j;
    c["code"] = protocol::error_code::rejected;
    emit(c);
    return;
  }
  emit(j);
}

// Measured peaks, once per GPU (UUID) and driver: a copy kernel for DRAM
// bandwidth and an mma.sync loop for the bf16 tensor rate. Cached on disk
// because they do not change between worker starts; KOPT_WORKER_CALIBRATE=0
// skips them (tests that restart workers often).
nlohmann::json calibration_at_start(kopt::harness::evaluator& ev,
                                    const kopt::harness::device_info& dev) {
  if (const char* c = std::getenv("KOPT_WORKER_CALIBRATE"); c && std::string(c) == "0")
    return {{"skipped", "KOPT_WORKER_CALIBRATE=0"}};
  const auto dir = kopt::counters::default_cache_dir().parent_path() / "calibration";
  const auto file = dir / (dev.uuid + "-" + dev.driver_version + ".json");
  if (std::ifstream in(file); in) {
    try {
      auto j = nlohmann::json::parse(in);
      j["cached"] = true;
      return j;
    } catch (const std::exception&) {
      // damaged: measure again
    }
  }
  try {
    auto j = ev.calibrate();
    j["uuid"] = dev.uuid;
    j["driver_version"] = dev.driver_version;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const auto tmp = file.string() + ".tmp";
    {
      std::ofstream out(tmp);
      out << j.dump(2) << '\n';
    }
    std::filesystem::rename(tmp, file, ec);
    j["cached"] = false;
    return j;
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
}

// The launch floor of the default clock (docs/worker-protocol.md, "hello"),
// in one place per device and driver: the first worker measures it and
// stores it beside the calibration; every later worker (a restart after a
// crashing candidate, the next run) loads that value into its evaluator, so
// the hello and every timing of every worker on this GPU report the same
// floor. Measured again per worker, the floor differed by ~10 % between
// processes (576 ns in one hello, 640 ns in a restarted worker's timings on
// the H200), and a figure that changes with the process is no reference.
// A request on the other clock measures that clock's floor once in its
// worker (not stored). Delete the file to measure again.
nlohmann::json launch_floor_at_start(kopt::harness::evaluator& ev,
                                     const kopt::harness::device_info& dev) {
  const auto dir = kopt::counters::default_cache_dir().parent_path() / "calibration";
  const auto file = dir / (dev.uuid + "-" + dev.driver_version + "-launch-floor.json");
  // The stored floor, loaded into the evaluator; nullopt when absent or damaged.
  auto load = [&]() -> std::optional<nlohmann::json> {
    std::ifstream in(file);
    if (!in) return std::nullopt;
    try {
      auto j = nlohmann::json::parse(in);
      if (!ev.use_launch_floor(j)) return std::nullopt;
      j["cached"] = true;
      return j;
    } catch (const std::exception&) {
      return std::nullopt;  // damaged: measure again
    }
  };
  if (auto j = load()) return *j;
  try {
    auto j = ev.launch_floor();
    const double ns = j.value("median_ns", 0.0);
    if (ns > 0) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      const auto tmp = file.string() + "." + std::to_string(::getpid()) + ".tmp";
      {
        std::ofstream out(tmp);
        out << j.dump(2) << '\n';
      }
      // The first worker to store wins (link refuses an existing file), and
      // every worker then uses what is stored, so workers that started at
      // the same time agree too.
      (void)::link(tmp.c_str(), file.c_str());
      std::filesystem::remove(tmp, ec);
      if (auto stored = load()) {
        if (stored->value("median_ns", 0.0) == ns) (*stored)["cached"] = false;
        return *stored;
      }
    }
    j["cached"] = false;
    return j;
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
}

// `kopt-worker metrics`: the CUPTI host API needs no GPU, so metric lists can
// be checked (and pass counts known) anywhere.
int metrics_main(std::string chip, const std::string& tier, const std::string& list, bool all) {
  try {
    if (chip.empty()) {
      if (kopt::harness::device_count() == 0) {
        std::cerr << "kopt-worker metrics: no GPU here; name the chip with --chip (e.g. GH100)\n";
        return 2;
      }
      CUpti_Device_GetChipName_Params cp{};
      cp.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
      cp.deviceIndex = 0;
      if (cuptiDeviceGetChipName(&cp) != CUPTI_SUCCESS || !cp.pChipName) {
        std::cerr << "kopt-worker metrics: CUPTI cannot name this GPU's chip; pass --chip\n";
        return 2;
      }
      chip = cp.pChipName;
    }
    kopt::counters::metric_catalog cat(chip);
    if (all) {
      nlohmann::json j = {{"chip", chip}, {"base_metrics", cat.base_metrics()}};
      std::cout << j.dump(2) << '\n';
      return 0;
    }
    std::vector<std::string> names;
    if (!list.empty()) {
      std::stringstream ss(list);
      for (std::string n; std::getline(ss, n, ',');)
        if (!n.empty()) names.push_back(n);
    } else {
      names = kopt::counters::tier_metrics(kopt::counters::parse_tier(tier));
    }
    const auto infos = cat.describe(names);
    const auto cfg = cat.configure(names, {});
    nlohmann::json m = nlohmann::json::array();
    for (const auto& i : infos) m.push_back(i.to_json());
    std::cout << nlohmann::json{{"chip", chip},
                                {"tier", list.empty() ? tier : "custom"},
                                {"passes", cfg.passes},
                                {"config_image_bytes", cfg.image.size()},
                                {"metrics", m}}
                     .dump(2)
              << '\n';
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kopt-worker metrics: " << e.what() << '\n';
    return 1;
  }
}

// `kopt-worker versions`: what this worker was built with and what it finds,
// without needing a GPU (kopt doctor runs it). cudart is static, so its
// version is the toolkit's; the driver's is 0 when there is none.
int versions_main() {
  nlohmann::json j = {{"worker_version", KOPT_VERSION}, {"protocol", protocol::version}};
  j["cuda_toolkit"] = fmt::format("{}.{}", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
  int rt = 0, drv = 0;
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess) j["cuda_runtime"] = rt;
  if (cudaDriverGetVersion(&drv) == cudaSuccess) j["cuda_driver_api"] = drv;
  cudaGetLastError();
  int nmaj = 0, nmin = 0;
  if (nvrtcVersion(&nmaj, &nmin) == NVRTC_SUCCESS) j["nvrtc"] = fmt::format("{}.{}", nmaj, nmin);
  uint32_t cupti = 0;
  if (cuptiGetVersion(&cupti) == CUPTI_SUCCESS) j["cupti_api"] = cupti;
  const std::string inc = kopt::compile::cuda_include_dir();
  std::error_code ec;
  j["cuda_include_dir"] = inc;
  j["cuda_headers_found"] =
      std::filesystem::is_regular_file(std::filesystem::path(inc) / "cuda_runtime.h", ec);
  try {
    j["cache_dir"] = kopt::compile::default_cache_dir().string();
  } catch (const std::exception& e) {
    j["cache_dir_error"] = e.what();
  }
  const int n = kopt::harness::device_count();
  j["device_count"] = n;
  if (n == 0) j["no_device_reason"] = kopt::harness::no_device_reason();
  nlohmann::json devices = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    try {
      const auto d = kopt::harness::query_device(i);
      devices.push_back({{"ordinal", i},
                         {"name", d.name},
                         {"uuid", d.uuid},
                         {"arch", d.arch},
                         {"driver_version", d.driver_version}});
    } catch (const std::exception& e) {
      devices.push_back({{"ordinal", i}, {"error", e.what()}});
    }
  }
  j["devices"] = devices;
  std::cout << j.dump(2) << '\n';
  return 0;
}

// Ended from outside (as by SIGTERM): kopt reads 143 as "stopped from outside".
constexpr int exit_parent_gone = 143;

int serve(const std::string& gpu_spec, const std::string& cache_dir, bool profile_only) {
  // Before anything touches the GPU: a worker whose kopt was killed must not keep
  // running its request beside the next measurements (see exit_when_parent_dies).
  kopt::exit_when_parent_dies(exit_parent_gone);
  kopt::harness::gpu_choice choice;
  try {
    choice = kopt::harness::resolve_gpu(gpu_spec);
  } catch (const std::exception& e) {
    protocol::hello h;
    h.ok = false;
    h.error = e.what();
    emit(protocol::message{h});
    return 2;
  }
  const int gpu = choice.ordinal;
  std::cerr << "kopt-worker: GPU " << choice.how << '\n';
  kopt::harness::device_info dev;
  try {
    dev = kopt::harness::query_device(gpu);
  } catch (const std::exception& e) {
    protocol::hello h;
    h.ok = false;
    h.error = e.what();
    h.gpu_selection = choice.to_json();
    emit(protocol::message{h});
    return exit_no_device;
  }
  const kopt::compile::compiler comp(
      kopt::self_executable(),
      cache_dir.empty() ? kopt::compile::default_cache_dir() : std::filesystem::path(cache_dir));
  kopt::harness::evaluator ev(dev, comp, emit_from_evaluator, !profile_only);
  protocol::hello h;
  h.device = dev.to_json();
  h.calibration = profile_only ? nlohmann::json{{"skipped", "profile-only worker"}}
                               : calibration_at_start(ev, dev);
  h.launch_floor = profile_only ? ev.launch_floor() : launch_floor_at_start(ev, dev);
  h.gpu_selection = choice.to_json();
  h.worker_version = KOPT_VERSION;
  emit(protocol::message{h});
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      emit(protocol::message{protocol::error{"", protocol::error_code::bad_request,
                                             std::string("request is not JSON: ") + e.what()}});
      continue;
    }
    const std::string id = protocol::request_id(j);
    protocol::request req;
    try {
      req = protocol::parse_request(j);
    } catch (const protocol::protocol_error& e) {
      emit(protocol::message{protocol::error{id, e.code(), e.what()}});
      continue;
    }
    try {
      if (const auto* r = std::get_if<protocol::evaluate_request>(&req)) {
        // The evaluator reads the request as the protocol wrote it back:
        // every setting present, with the protocol's defaults.
        ev.evaluate(nlohmann::json(*r));
      } else if (std::holds_alternative<protocol::calibrate_request>(req)) {
        emit(protocol::message{protocol::calibrated{id, ev.calibrate()}});
      } else if (std::holds_alternative<protocol::ping_request>(req)) {
        emit(protocol::message{protocol::pong{id}});
      } else if (std::holds_alternative<protocol::shutdown_request>(req)) {
        emit(protocol::message{protocol::bye{id}});
        return 0;
      }
    } catch (const std::exception& e) {
      // Not a refusal of the request and not a candidate's outcome (those
      // are messages): the worker's own failure.
      emit(protocol::message{protocol::error{id, protocol::error_code::internal, e.what()}});
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kopt-worker: compiles, checks and times candidate kernels on one GPU.\n"
      "Started by kopt; speaks JSON lines on stdin/stdout (docs/worker-protocol.md)."};
  app.set_version_flag("--version", std::string(KOPT_VERSION));
  std::string gpu = "0";
  std::string cache_dir;
  app.add_option("--gpu", gpu,
                 "CUDA device ordinal, or 'auto': the GPU a resource manager gave this process "
                 "(CUDA_VISIBLE_DEVICES, else SLURM_STEP_GPUS, else 0)")
      ->capture_default_str();
  bool profile_only = false;
  app.add_flag(
      "--profile-only", profile_only,
      "counters worker: correctness and hardware counters, no timing (CUPTI Activity is never "
      "enabled; kopt runs timing in another worker process)");
  app.add_option("--cache-dir", cache_dir,
                 "cubin cache directory (default: $KOPT_CACHE_DIR/cubin or ~/.cache/kopt/cubin)");
  auto* compile_cmd =
      app.add_subcommand("compile", "internal: compile one request from stdin (isolated child)");
  std::string out_file;
  compile_cmd->add_option("--out", out_file, "where to write the cubin")->required();
  auto* info_cmd =
      app.add_subcommand("info", "print the device as JSON and exit (77 when there is none)");
  auto* versions_cmd = app.add_subcommand("versions",
                                          "print the CUDA toolkit, NVRTC, CUPTI and driver "
                                          "versions and the GPUs seen, as JSON (no GPU needed)");
  auto* metrics_cmd = app.add_subcommand(
      "metrics",
      "describe CUPTI metrics and their replay pass count for a chip (no GPU needed with --chip)");
  std::string chip, tier = "default", metric_list;
  bool list_all = false;
  metrics_cmd->add_option("--chip", chip,
                          "chip name as CUPTI spells it (GH100 for H100/H200); default: GPU 0's");
  metrics_cmd
      ->add_option("--tier", tier,
                   "default (cheap, ~2 passes on GH100) or full (speed-of-light set)")
      ->capture_default_str()
      ->check(CLI::IsMember({"default", "full"}));
  metrics_cmd->add_option("--metrics", metric_list,
                          "comma-separated metric names instead of a tier");
  metrics_cmd->add_flag("--list", list_all, "list every base metric of the chip");
  CLI11_PARSE(app, argc, argv);

  if (*metrics_cmd) return metrics_main(chip, tier, metric_list, list_all);

  if (*compile_cmd) return kopt::compile::compile_child_main(out_file);
  if (*versions_cmd) return versions_main();
  if (*info_cmd) {
    int ordinal = 0;
    try {
      ordinal = kopt::harness::resolve_gpu(gpu).ordinal;
    } catch (const std::exception& e) {
      std::cerr << "kopt-worker: " << e.what() << '\n';
      return 2;
    }
    if (kopt::harness::device_count() == 0) {
      std::cerr << "kopt-worker: " << kopt::harness::no_device_reason() << '\n';
      return exit_no_device;
    }
    try {
      std::cout << kopt::harness::query_device(ordinal).to_json().dump(2) << '\n';
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "kopt-worker: " << e.what() << '\n';
      return exit_no_device;
    }
  }
  return serve(gpu, cache_dir, profile_only);
}
