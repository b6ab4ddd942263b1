// The fixed prompt context shared by the golden and secrets tests: the
// rmsnorm example operator, the H200 entry of the peak table, its seed as
// the parent, and made-up measurements, findings, history and snippets.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "config/operator.hpp"
#include "prompts/context.hpp"

namespace kopt::prompts::testing {

inline const std::filesystem::path source_dir{KOPT_SOURCE_DIR};

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline config::operator_config load_rmsnorm() {
  auto r = config::load_operator_file(source_dir / "configs" / "examples" / "rmsnorm.json");
  if (!r.ok()) {
    std::string all;
    for (const auto& d : r.diagnostics) all += d.to_string() + "\n";
    throw std::runtime_error("rmsnorm.json does not load:\n" + all);
  }
  return *r.op;
}

inline gpu_facts h200() {
  const auto table =
      nlohmann::json::parse(read_text(source_dir / "configs" / "hardware" / "gpus.json"));
  return gpu_facts_from_table(table, "H200");
}

// Everything filled, so that every template section renders.
inline prompt_inputs full_inputs(const config::operator_config& op) {
  prompt_inputs in;
  in.op = &op;
  in.gpu = h200();
  in.parent = *op.seed;
  in.parent_label = "seed";
  in.measurements = {
      {"t1_h4096", "ok", 2.10, 0.005, std::nullopt},
      {"t16_h4096", "ok", 2.35, 0.011, std::nullopt},
      {"t2048_h4096", "ok", 14.80, 0.472, std::nullopt},
      {"t8192_h8192", "ok", 98.30, 0.569, std::nullopt},
      {"t3_h1001", "ok", 2.05, std::nullopt, std::nullopt},
  };
  in.diagnosis = {
      {"launch_bound", "t1_h4096 runs 1 block on 132 SMs; 2.10 us against 0.01 us of DRAM time"},
      {"two_pass_reads", "the row is read twice; dram_bytes 1.9x the roofline bytes on t8192_h8192"},
  };
  in.history = {
      {"c7", "one warp per row with 16-byte loads", "correct, 0.31 of SOL"},
      {"c9", "cached the row in shared memory", "wrong result on t3_h1001 (tail not covered)"},
  };
  in.snippets = {
      {"coalesced-access", "Coalesced access",
       "Adjacent threads should read adjacent 16-byte chunks so that a warp touches whole "
       "128-byte lines."},
      {"vector-alignment-tails", "Vector loads and tails",
       "Use the vector path only when the pointer is aligned; finish the tail with scalar loads."},
  };
  in.feedback = "Fuse the two passes over the row: keep the row in registers when hidden <= 8192.";
  in.compile_log =
      "kernel.cu(12): error: identifier \"VECC\" is undefined\n"
      "kernel.cu(40): error: expected a \";\"\n"
      "2 errors detected in the compilation of \"kernel.cu\".\n";
  in.failure =
      "output out, workload t3_h1001: 6 of 3003 elements outside tolerance\n"
      "first failing: [0,1000] got 0.0 expected 1.2421875\n";
  return in;
}

}  // namespace kopt::prompts::testing
