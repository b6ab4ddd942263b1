// Host-side element conversions for every dtype the worker handles, so that
// correctness checks compare decoded values exactly as the GPU wrote them.
// Pure bit manipulation, no CUDA headers: unit-tested on the CPU in CI.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "config/operator.hpp"

namespace kopt::harness {

inline float bits_to_f32(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline float bf16_to_f32(std::uint16_t h) { return bits_to_f32(std::uint32_t{h} << 16); }

inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = (std::uint32_t{h} & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t man = h & 0x3FFu;
  if (exp == 0) {
    // zero or subnormal: value = man * 2^-24
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_f32(sign | 0x7F800000u | (man << 13));
  return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

// OCP FP8 E4M3 ("fn": no infinities, 0x7F/0xFF are NaN, max 448).
inline float f8e4m3_to_f32(std::uint8_t v) {
  const bool neg = (v & 0x80u) != 0;
  const int exp = (v >> 3) & 0xF;
  const int man = v & 0x7;
  float r;
  if (exp == 0xF && man == 0x7) return std::nanf("");
  if (exp == 0) r = std::ldexp(static_cast<float>(man), -9);  // subnormal: man/8 * 2^-6
  else r = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return neg ? -r : r;
}

// OCP FP8 E5M2 (IEEE-like: infinities and NaNs, max 57344).
inline float f8e5m2_to_f32(std::uint8_t v) {
  const bool neg = (v & 0x80u) != 0;
  const int exp = (v >> 2) & 0x1F;
  const int man = v & 0x3;
  float r;
  if (exp == 0x1F) r = man == 0 ? INFINITY : std::nanf("");
  else if (exp == 0) r = std::ldexp(static_cast<float>(man), -16);  // man/4 * 2^-14
  else r = std::ldexp(1.0f + static_cast<float>(man) / 4.0f, exp - 15);
  return neg ? -r : r;
}

// Decode element i of a buffer of dtype t to double (integers exactly up to 2^53).
inline double decode_element(const void* data, std::size_t i, config::dtype t) {
  const auto* p = static_cast<const unsigned char*>(data);
  switch (t) {
    case config::dtype::float64: { double v; std::memcpy(&v, p + 8 * i, 8); return v; }
    case config::dtype::float32: { float v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case config::dtype::float16: { std::uint16_t v; std::memcpy(&v, p + 2 * i, 2); return f16_to_f32(v); }
    case config::dtype::bfloat16: { std::uint16_t v; std::memcpy(&v, p + 2 * i, 2); return bf16_to_f32(v); }
    case config::dtype::float8_e4m3fn: return f8e4m3_to_f32(p[i]);
    case config::dtype::float8_e5m2: return f8e5m2_to_f32(p[i]);
    case config::dtype::int64: { std::int64_t v; std::memcpy(&v, p + 8 * i, 8); return static_cast<double>(v); }
    case config::dtype::int32: { std::int32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case config::dtype::int16: { std::int16_t v; std::memcpy(&v, p + 2 * i, 2); return v; }
    case config::dtype::int8: { std::int8_t v; std::memcpy(&v, p + i, 1); return v; }
    case config::dtype::uint8: return p[i];
    case config::dtype::boolean: return p[i] != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

// Raw integer value (for exact comparison of 64-bit integers beyond 2^53).
inline std::int64_t decode_integer(const void* data, std::size_t i, config::dtype t) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (t == config::dtype::int64) { std::int64_t v; std::memcpy(&v, p + 8 * i, 8); return v; }
  return static_cast<std::int64_t>(decode_element(data, i, t));
}

}  // namespace kopt::harness
