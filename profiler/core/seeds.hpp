// How the worker derives the seed of every generated input from the
// request's base seed, the workload id, the input-set index and the tensor
// name. Fixed, documented functions (no std::hash, whose values differ
// between standard libraries), so that a run is reproducible anywhere and a
// test can reason about exactly which data a candidate saw.
#pragma once

#include <cstdint>
#include <string_view>

namespace kopt::harness {

constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr std::uint64_t fnv1a64(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Seed of input set k of a workload.
constexpr std::uint64_t input_set_seed(std::uint64_t base, std::string_view workload, std::uint64_t k) {
  return mix64(mix64(base ^ fnv1a64(workload)) ^ mix64(k + 1));
}

// Seed of one tensor within an input set.
constexpr std::uint64_t tensor_seed(std::uint64_t set_seed, std::string_view tensor) {
  return mix64(set_seed ^ mix64(fnv1a64(tensor)));
}

}  // namespace kopt::harness
