#include "core/gpu_select.hpp"

#include <cctype>
#include <cstdlib>
#include <stdexcept>

namespace kopt::harness {

namespace {

std::optional<int> parse_index(const std::string& s) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  for (char c : s)
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return std::nullopt;
  return std::stoi(s);
}

}  // namespace

env_reader process_env_reader() {
  return [](const char* n) -> std::optional<std::string> {
    const char* v = std::getenv(n);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

nlohmann::json gpu_choice::to_json() const {
  return {{"spec", spec},
          {"ordinal", ordinal},
          {"how", how},
          {"slurm_step_gpus", slurm_step_gpus},
          {"slurm_job_gpus", slurm_job_gpus},
          {"cuda_visible_devices", cuda_visible_devices}};
}

gpu_choice resolve_gpu(const std::string& spec, const env_reader& env) {
  gpu_choice c;
  c.spec = spec;
  c.slurm_step_gpus = env("SLURM_STEP_GPUS").value_or("");
  c.slurm_job_gpus = env("SLURM_JOB_GPUS").value_or("");
  c.cuda_visible_devices = env("CUDA_VISIBLE_DEVICES").value_or("");
  if (spec != "auto") {
    const auto n = parse_index(spec);
    if (!n)
      throw std::invalid_argument("--gpu must be a device index or 'auto', not '" + spec + "'");
    c.ordinal = *n;
    c.how = "--gpu " + spec;
    return c;
  }
  const std::string var = !c.slurm_step_gpus.empty() ? "SLURM_STEP_GPUS" : "SLURM_JOB_GPUS";
  const std::string list = !c.slurm_step_gpus.empty() ? c.slurm_step_gpus : c.slurm_job_gpus;
  const std::string slurm = list.empty() ? "" : " (" + var + "=" + list + ")";
  if (!c.cuda_visible_devices.empty()) {
    // The runtime renumbers the visible devices from 0, whatever the node's
    // index: the first visible one is the one we were given.
    c.ordinal = 0;
    c.how =
        "CUDA_VISIBLE_DEVICES=" + c.cuda_visible_devices + slurm + ": its first device, ordinal 0";
    return c;
  }
  if (!list.empty()) {
    // Slurm allocated GPUs but did not restrict visibility: use the node
    // index it names.
    const std::string first = list.substr(0, list.find(','));
    const auto n = parse_index(first);
    if (!n) throw std::invalid_argument(var + "=" + list + " names no GPU index");
    c.ordinal = *n;
    c.how = var + "=" + list + ": node GPU " + first;
    return c;
  }
  c.ordinal = 0;
  c.how = "neither CUDA_VISIBLE_DEVICES nor SLURM_STEP_GPUS/SLURM_JOB_GPUS is set: device 0";
  return c;
}

}  // namespace kopt::harness
