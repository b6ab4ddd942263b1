// Host-side decoding of every element type the worker checks: known bit
// patterns of bf16, f16, fp8 e4m3fn and e5m2 (normals, subnormals, limits,
// infinities, NaNs, signed zero) and decode_element / decode_integer for
// each dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/numeric.hpp"

using kopt::config::dtype;
using namespace kopt::harness;

TEST(Bf16, KnownPatterns) {
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xBF80), -1.0f);
  EXPECT_EQ(bf16_to_f32(0x4000), 2.0f);
  EXPECT_EQ(bf16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  EXPECT_EQ(bf16_to_f32(0x3F00), 0.5f);
  EXPECT_EQ(bf16_to_f32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(bf16_to_f32(0x8000)));
  EXPECT_EQ(bf16_to_f32(0x7F7F), 3.38953139e38f);  // largest finite bf16
  EXPECT_EQ(bf16_to_f32(0x0080), std::ldexp(1.0f, -126));  // smallest normal
  EXPECT_EQ(bf16_to_f32(0x0001), std::ldexp(1.0f, -133));  // smallest subnormal
  EXPECT_TRUE(std::isinf(bf16_to_f32(0x7F80)));
  EXPECT_GT(bf16_to_f32(0x7F80), 0.0f);
  EXPECT_TRUE(std::isinf(bf16_to_f32(0xFF80)));
  EXPECT_LT(bf16_to_f32(0xFF80), 0.0f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7FC0)));
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7F81)));
}

TEST(F16, KnownPatterns) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xBC00), -1.0f);
  EXPECT_EQ(f16_to_f32(0x4000), 2.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x3800), 0.5f);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);            // largest finite
  EXPECT_EQ(f16_to_f32(0xFBFF), -65504.0f);
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(f16_to_f32(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x0000), 0.0f);
  EXPECT_FALSE(std::signbit(f16_to_f32(0x0000)));
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(f16_to_f32(0x8000), 0.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7C00)));
  EXPECT_GT(f16_to_f32(0x7C00), 0.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0xFC00)));
  EXPECT_LT(f16_to_f32(0xFC00), 0.0f);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7C01)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0xFE00)));
}

TEST(F16, EveryFiniteValueRoundTripsThroughFloat) {
  // Any finite f16 is exactly representable in float; converting back by the
  // IEEE rule (checked bit by bit) must give the same pattern.
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto v = static_cast<std::uint16_t>(h);
    if ((v & 0x7C00u) == 0x7C00u) continue;  // inf / nan
    const float f = f16_to_f32(v);
    ASSERT_TRUE(std::isfinite(f)) << std::hex << h;
    // Reconstruct: sign * mantissa * 2^exp
    const bool neg = (v & 0x8000u) != 0;
    const int e = (v >> 10) & 0x1F;
    const int m = v & 0x3FF;
    const double expect = (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25)) * (neg ? -1 : 1);
    ASSERT_EQ(static_cast<double>(f), expect) << std::hex << h;
  }
}

TEST(Fp8E4M3, KnownPatterns) {
  EXPECT_EQ(f8e4m3_to_f32(0x7E), 448.0f);   // max finite
  EXPECT_EQ(f8e4m3_to_f32(0xFE), -448.0f);
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0xFF)));
  EXPECT_EQ(f8e4m3_to_f32(0x78), 256.0f);   // exponent 15, mantissa 0 is finite ("fn")
  EXPECT_EQ(f8e4m3_to_f32(0x7D), 416.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(f8e4m3_to_f32(0xB8), -1.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x40), 2.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x3C), 1.5f);
  EXPECT_EQ(f8e4m3_to_f32(0x30), 0.5f);
  EXPECT_EQ(f8e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(f8e4m3_to_f32(0x04), std::ldexp(1.0f, -7));
  EXPECT_EQ(f8e4m3_to_f32(0x07), std::ldexp(7.0f, -9));  // largest subnormal
  EXPECT_EQ(f8e4m3_to_f32(0x81), -std::ldexp(1.0f, -9));
  EXPECT_EQ(f8e4m3_to_f32(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(f8e4m3_to_f32(0x80)));
  // No infinities in e4m3fn.
  for (unsigned v = 0; v < 256; ++v) EXPECT_FALSE(std::isinf(f8e4m3_to_f32(static_cast<std::uint8_t>(v)))) << v;
  // Exactly two NaN patterns.
  int nans = 0;
  for (unsigned v = 0; v < 256; ++v) nans += std::isnan(f8e4m3_to_f32(static_cast<std::uint8_t>(v))) ? 1 : 0;
  EXPECT_EQ(nans, 2);
}

TEST(Fp8E4M3, MonotonicOverPositiveCodes) {
  float prev = -1.0f;
  for (unsigned v = 0; v < 0x7F; ++v) {
    const float f = f8e4m3_to_f32(static_cast<std::uint8_t>(v));
    EXPECT_GT(f, prev) << v;
    prev = f;
  }
}

TEST(Fp8E5M2, KnownPatterns) {
  EXPECT_EQ(f8e5m2_to_f32(0x7B), 57344.0f);  // max finite
  EXPECT_EQ(f8e5m2_to_f32(0xFB), -57344.0f);
  EXPECT_TRUE(std::isinf(f8e5m2_to_f32(0x7C)));
  EXPECT_GT(f8e5m2_to_f32(0x7C), 0.0f);
  EXPECT_TRUE(std::isinf(f8e5m2_to_f32(0xFC)));
  EXPECT_LT(f8e5m2_to_f32(0xFC), 0.0f);
  EXPECT_TRUE(std::isnan(f8e5m2_to_f32(0x7D)));
  EXPECT_TRUE(std::isnan(f8e5m2_to_f32(0x7E)));
  EXPECT_TRUE(std::isnan(f8e5m2_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(f8e5m2_to_f32(0xFF)));
  EXPECT_EQ(f8e5m2_to_f32(0x3C), 1.0f);
  EXPECT_EQ(f8e5m2_to_f32(0xBC), -1.0f);
  EXPECT_EQ(f8e5m2_to_f32(0x3E), 1.5f);
  EXPECT_EQ(f8e5m2_to_f32(0x40), 2.0f);
  EXPECT_EQ(f8e5m2_to_f32(0x04), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(f8e5m2_to_f32(0x01), std::ldexp(1.0f, -16));  // smallest subnormal
  EXPECT_EQ(f8e5m2_to_f32(0x03), std::ldexp(3.0f, -16));  // largest subnormal
  EXPECT_EQ(f8e5m2_to_f32(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(f8e5m2_to_f32(0x80)));
}

TEST(Fp8E5M2, AgreesWithF16HighByte) {
  // e5m2 is the upper byte of an IEEE half: decoding must agree for all codes.
  for (unsigned v = 0; v < 256; ++v) {
    const float a = f8e5m2_to_f32(static_cast<std::uint8_t>(v));
    const float b = f16_to_f32(static_cast<std::uint16_t>(v << 8));
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(a)) << v;
    } else {
      EXPECT_EQ(a, b) << v;
      EXPECT_EQ(std::signbit(a), std::signbit(b)) << v;
    }
  }
}

template <typename T>
std::vector<unsigned char> bytes_of(const std::vector<T>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(DecodeElement, EveryDtype) {
  const auto f64 = bytes_of<double>({1.5, -2.25, 1e300});
  EXPECT_EQ(decode_element(f64.data(), 2, dtype::float64), 1e300);
  EXPECT_EQ(decode_element(f64.data(), 1, dtype::float64), -2.25);

  const auto f32 = bytes_of<float>({0.1f, -3.0f});
  EXPECT_EQ(decode_element(f32.data(), 0, dtype::float32), static_cast<double>(0.1f));
  EXPECT_EQ(decode_element(f32.data(), 1, dtype::float32), -3.0);

  const auto f16 = bytes_of<std::uint16_t>({0x3C00, 0xC000, 0x7C00});
  EXPECT_EQ(decode_element(f16.data(), 0, dtype::float16), 1.0);
  EXPECT_EQ(decode_element(f16.data(), 1, dtype::float16), -2.0);
  EXPECT_TRUE(std::isinf(decode_element(f16.data(), 2, dtype::float16)));

  const auto bf16 = bytes_of<std::uint16_t>({0x3F80, 0x4049});
  EXPECT_EQ(decode_element(bf16.data(), 0, dtype::bfloat16), 1.0);
  EXPECT_EQ(decode_element(bf16.data(), 1, dtype::bfloat16), 3.140625);

  const std::vector<unsigned char> e4m3 = {0x38, 0x7E, 0x7F};
  EXPECT_EQ(decode_element(e4m3.data(), 0, dtype::float8_e4m3fn), 1.0);
  EXPECT_EQ(decode_element(e4m3.data(), 1, dtype::float8_e4m3fn), 448.0);
  EXPECT_TRUE(std::isnan(decode_element(e4m3.data(), 2, dtype::float8_e4m3fn)));

  const std::vector<unsigned char> e5m2 = {0x3C, 0x7B, 0x7C};
  EXPECT_EQ(decode_element(e5m2.data(), 1, dtype::float8_e5m2), 57344.0);
  EXPECT_TRUE(std::isinf(decode_element(e5m2.data(), 2, dtype::float8_e5m2)));

  const auto i64 = bytes_of<std::int64_t>({-5, std::int64_t{1} << 40});
  EXPECT_EQ(decode_element(i64.data(), 0, dtype::int64), -5.0);
  EXPECT_EQ(decode_element(i64.data(), 1, dtype::int64), std::ldexp(1.0, 40));

  const auto i32 = bytes_of<std::int32_t>({-7, 2147483647});
  EXPECT_EQ(decode_element(i32.data(), 0, dtype::int32), -7.0);
  EXPECT_EQ(decode_element(i32.data(), 1, dtype::int32), 2147483647.0);

  const auto i16 = bytes_of<std::int16_t>({-32768, 123});
  EXPECT_EQ(decode_element(i16.data(), 0, dtype::int16), -32768.0);
  EXPECT_EQ(decode_element(i16.data(), 1, dtype::int16), 123.0);

  const std::vector<unsigned char> i8 = {0xFF, 0x7F};
  EXPECT_EQ(decode_element(i8.data(), 0, dtype::int8), -1.0);
  EXPECT_EQ(decode_element(i8.data(), 1, dtype::int8), 127.0);
  EXPECT_EQ(decode_element(i8.data(), 0, dtype::uint8), 255.0);

  const std::vector<unsigned char> b = {0, 1, 2};
  EXPECT_EQ(decode_element(b.data(), 0, dtype::boolean), 0.0);
  EXPECT_EQ(decode_element(b.data(), 1, dtype::boolean), 1.0);
  EXPECT_EQ(decode_element(b.data(), 2, dtype::boolean), 1.0);  // any non-zero byte is true
}

TEST(DecodeInteger, Int64BeyondDoublePrecisionIsExact) {
  const std::int64_t big = (std::int64_t{1} << 53) + 1;
  const auto v = bytes_of<std::int64_t>({big, big - 1, std::numeric_limits<std::int64_t>::min()});
  EXPECT_EQ(decode_integer(v.data(), 0, dtype::int64), big);
  EXPECT_EQ(decode_integer(v.data(), 1, dtype::int64), big - 1);
  EXPECT_NE(decode_integer(v.data(), 0, dtype::int64), decode_integer(v.data(), 1, dtype::int64));
  EXPECT_EQ(decode_integer(v.data(), 2, dtype::int64), std::numeric_limits<std::int64_t>::min());
  const auto i32 = bytes_of<std::int32_t>({-2147483647 - 1});
  EXPECT_EQ(decode_integer(i32.data(), 0, dtype::int32), -2147483648LL);
  const std::vector<unsigned char> u8 = {200};
  EXPECT_EQ(decode_integer(u8.data(), 0, dtype::uint8), 200);
  EXPECT_EQ(decode_integer(u8.data(), 0, dtype::int8), -56);
}
