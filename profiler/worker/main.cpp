// kopt-worker: one process per GPU. Speaks the versioned JSON-lines protocol
// of docs/worker-protocol.md on stdin/stdout (stdout carries protocol only;
// diagnostics go to stderr). Also the isolated NVRTC child
// (`kopt-worker compile`) and a device probe (`kopt-worker info`).
#include <cstdio>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/subprocess.hpp"
#include "compile/compiler.hpp"
#include "runtime/device.hpp"
#include "runtime/evaluator.hpp"

namespace {

constexpr int protocol_version = 1;
constexpr int exit_no_device = 77;  // as CTest's skip code: "cannot run here"

void emit(const nlohmann::json& j) {
  // One message per line; flushed at once so the control plane sees
  // progress (and knows which workload was running if we die).
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  std::cout.flush();
}

int serve(int gpu, const std::string& cache_dir) {
  kopt::harness::device_info dev;
  try {
    dev = kopt::harness::query_device(gpu);
  } catch (const std::exception& e) {
    emit({{"type", "hello"}, {"protocol", protocol_version}, {"ok", false}, {"error", e.what()}});
    return exit_no_device;
  }
  const kopt::compile::compiler comp(kopt::self_executable(),
                                     cache_dir.empty() ? kopt::compile::default_cache_dir() : std::filesystem::path(cache_dir));
  kopt::harness::evaluator ev(dev, comp, emit);
  emit({{"type", "hello"}, {"protocol", protocol_version}, {"ok", true}, {"device", dev.to_json()},
        {"worker_version", KOPT_VERSION}});
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::json req;
    try {
      req = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      emit({{"type", "error"}, {"message", std::string("request is not JSON: ") + e.what()}});
      continue;
    }
    const std::string type = req.value("type", "");
    const std::string id = req.value("id", "");
    try {
      if (type == "evaluate") {
        ev.evaluate(req);
      } else if (type == "calibrate") {
        emit({{"type", "calibrated"}, {"id", id}, {"result", ev.calibrate()}});
      } else if (type == "ping") {
        emit({{"type", "pong"}, {"id", id}});
      } else if (type == "shutdown") {
        emit({{"type", "bye"}, {"id", id}});
        return 0;
      } else {
        emit({{"type", "error"}, {"id", id}, {"message", "unknown request type '" + type + "'"}});
      }
    } catch (const std::exception& e) {
      emit({{"type", "error"}, {"id", id}, {"message", e.what()}});
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kopt-worker: compiles, checks and times candidate kernels on one GPU.\n"
               "Started by kopt; speaks JSON lines on stdin/stdout (docs/worker-protocol.md)."};
  app.set_version_flag("--version", std::string(KOPT_VERSION));
  int gpu = 0;
  std::string cache_dir;
  app.add_option("--gpu", gpu, "CUDA device ordinal")->capture_default_str();
  app.add_option("--cache-dir", cache_dir, "cubin cache directory (default: $KOPT_CACHE_DIR/cubin or ~/.cache/kopt/cubin)");
  auto* compile_cmd = app.add_subcommand("compile", "internal: compile one request from stdin (isolated child)");
  std::string out_file;
  compile_cmd->add_option("--out", out_file, "where to write the cubin")->required();
  auto* info_cmd = app.add_subcommand("info", "print the device as JSON and exit (77 when there is none)");
  CLI11_PARSE(app, argc, argv);

  if (*compile_cmd) return kopt::compile::compile_child_main(out_file);
  if (*info_cmd) {
    if (kopt::harness::device_count() == 0) {
      std::cerr << "kopt-worker: " << kopt::harness::no_device_reason() << '\n';
      return exit_no_device;
    }
    try {
      std::cout << kopt::harness::query_device(gpu).to_json().dump(2) << '\n';
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "kopt-worker: " << e.what() << '\n';
      return exit_no_device;
    }
  }
  return serve(gpu, cache_dir);
}
