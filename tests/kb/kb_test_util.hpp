// Builds technique documents for the knowledge-base tests: a valid one by
// default, with any front-matter line or section replaced, so each test
// changes exactly the thing it checks.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kopt::kb::test {

struct doc_spec {
  std::vector<std::string> front = {
      "id: warp-reduce-demo",
      "title: Warp shuffle reduction demo",
      "bottlenecks: [synchronization-overhead, latency-bound]",
      "operators: [reduction, normalization]",
      "arch: [sm_80, sm_90]",
      "tags: [__shfl_xor_sync, butterfly, warp reduce]",
  };
  std::string helps = "- Row sums of up to 1024 elements: no shared memory, no barrier.";
  std::string hurts = "- Reductions across the whole grid need atomics anyway.";
  std::string counters = "- `smsp__average_warp_latency_issue_stalled_barrier` high.";
  std::string how = "1. Reduce in registers with `__shfl_xor_sync(0xffffffff, v, o)`.\n"
                    "2. One value per warp goes through shared memory.";
  std::string example_text = "Operator axes: rows, cols.";
  std::string cuda =
      "extern \"C\" __global__ void __launch_bounds__(BLOCK) row_sum(const float* x, float* y, int n) {\n"
      "  float v = 0.f;\n"
      "  for (int i = threadIdx.x; i < n; i += BLOCK) v += x[blockIdx.x * n + i];\n"
      "  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);\n"
      "  if (threadIdx.x == 0) y[blockIdx.x] = v;\n"
      "}\n";
  std::string plan =
      "{\"launches\": [{\"kernel\": \"row_sum\", \"grid\": [\"rows\"], \"block\": [\"BLOCK\"],\n"
      "  \"args\": [{\"tensor\": \"x\"}, {\"tensor\": \"y\"}, {\"int\": \"cols\", \"type\": \"int32\"}]}],\n"
      " \"parameters\": {\"BLOCK\": {\"values\": [32], \"default\": 32}}}\n";
  std::string pitfalls = "- A partial mask with __shfl_xor_sync deadlocks (see `other-doc`).";
  std::vector<std::string> section_order = {"When it helps", "When it hurts",
                                            "How to see it in the counters", "How", "Example",
                                            "Pitfalls"};

  std::string render() const {
    std::string s = "---\n";
    for (const auto& l : front) s += l + "\n";
    s += "---\n\n";
    for (const auto& name : section_order) {
      s += "## " + name + "\n";
      if (name == "When it helps") s += helps;
      else if (name == "When it hurts") s += hurts;
      else if (name == "How to see it in the counters") s += counters;
      else if (name == "How") s += how;
      else if (name == "Example")
        s += example_text + "\n\n```cuda\n" + cuda + "```\n\n```json\n" + plan + "```";
      else if (name == "Pitfalls") s += pitfalls;
      else s += "Some text.";
      s += "\n\n";
    }
    return s;
  }
};

}  // namespace kopt::kb::test
