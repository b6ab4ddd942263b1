// Which CUDA device ordinal a kopt-worker uses: `--gpu N`, or `--gpu auto`
// for workers started by a resource manager. Under Slurm a job step with
// `--gres=gpu:1` gets SLURM_STEP_GPUS (the node's GPU index) and
// CUDA_VISIBLE_DEVICES (which the CUDA runtime applies, so the allocated GPU
// is device 0 of the process); a batch job gets SLURM_JOB_GPUS. Plain C++ so it is unit-tested
// without a GPU; the worker reports the choice in its hello ("gpu_selection").
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kopt::harness {

struct gpu_choice {
  int ordinal = 0;
  std::string spec;                  // as given: "auto" or "N"
  std::string how;                   // in words, naming the variable that decided
  std::string slurm_step_gpus;       // as found ("" when unset)
  std::string slurm_job_gpus;        // as found (batch jobs have this one)
  std::string cuda_visible_devices;  // as found ("" when unset)
  nlohmann::json to_json() const;
};

using env_reader = std::function<std::optional<std::string>(const char*)>;
env_reader process_env_reader();

// `auto`: CUDA_VISIBLE_DEVICES set -> 0; else the first index of
// SLURM_STEP_GPUS, else of SLURM_JOB_GPUS; else 0. Throws
// std::invalid_argument for a spec that is neither "auto" nor a
// non-negative integer, or a Slurm list that names no index.
gpu_choice resolve_gpu(const std::string& spec, const env_reader& env = process_env_reader());

}  // namespace kopt::harness
