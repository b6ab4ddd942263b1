// The expression language: syntax, precedence, evaluation, every error kind
// with its column, overflow in every operator, limits.
#include <gtest/gtest.h>

#include <limits>

#include "config/expr.hpp"

namespace kx = kopt::expr;

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

std::int64_t ev(std::string_view text, const std::map<std::string, std::int64_t, std::less<>>& m = {}) {
  return kx::evaluate(text, kx::map_resolver(m));
}

// Column and reason of the error thrown by parse or eval.
struct failure {
  std::size_t column;
  std::string reason;
};
failure fail(std::string_view text, const std::map<std::string, std::int64_t, std::less<>>& m = {}) {
  try {
    ev(text, m);
  } catch (const kx::expr_error& e) {
    return {e.column(), e.reason()};
  }
  ADD_FAILURE() << "no error for \"" << text << "\"";
  return {0, ""};
}

}  // namespace

TEST(Expr, Literals) {
  EXPECT_EQ(ev("0"), 0);
  EXPECT_EQ(ev("42"), 42);
  EXPECT_EQ(ev("9223372036854775807"), kMax);
  EXPECT_EQ(ev("007"), 7);
}

TEST(Expr, Precedence) {
  EXPECT_EQ(ev("1 + 2 * 3"), 7);
  EXPECT_EQ(ev("(1 + 2) * 3"), 9);
  EXPECT_EQ(ev("10 - 4 / 2"), 8);
  EXPECT_EQ(ev("10 % 4 + 1"), 3);
  EXPECT_EQ(ev("1 + 10 % 4"), 3);
  EXPECT_EQ(ev("2 * 3 % 4"), 2);  // (2*3)%4, same level, left to right
  EXPECT_EQ(ev("-2 * 3"), -6);
  EXPECT_EQ(ev("2 * -3"), -6);
  EXPECT_EQ(ev("1 - -1"), 2);
}

TEST(Expr, LeftAssociativity) {
  EXPECT_EQ(ev("10 - 3 - 2"), 5);
  EXPECT_EQ(ev("100 / 10 / 5"), 2);
  EXPECT_EQ(ev("100 % 7 % 3"), 2);
  EXPECT_EQ(ev("2 * 3 / 4"), 1);
  EXPECT_EQ(ev("2 / 4 * 3"), 0);
}

TEST(Expr, UnaryMinus) {
  EXPECT_EQ(ev("-5"), -5);
  EXPECT_EQ(ev("--5"), 5);
  EXPECT_EQ(ev("- - -5"), -5);
  EXPECT_EQ(ev("-(2 + 3)"), -5);
  EXPECT_EQ(ev("-x", {{"x", 4}}), -4);
  EXPECT_EQ(ev("-9223372036854775807 - 1"), kMin);
}

TEST(Expr, DivisionTruncatesTowardZero) {
  EXPECT_EQ(ev("7 / 2"), 3);
  EXPECT_EQ(ev("-7 / 2"), -3);
  EXPECT_EQ(ev("7 / -2"), -3);
  EXPECT_EQ(ev("-7 % 3"), -1);
  EXPECT_EQ(ev("7 % -3"), 1);
}

TEST(Expr, Functions) {
  EXPECT_EQ(ev("min(3, 1, 2)"), 1);
  EXPECT_EQ(ev("max(3, 1, 2)"), 3);
  EXPECT_EQ(ev("min(-1, 1)"), -1);
  EXPECT_EQ(ev("max(min(4, 9), 2) * 2"), 8);
  EXPECT_EQ(ev("ceil_div(n, 256)", {{"n", 1000}}), 4);
  EXPECT_EQ(ev("ceil_div ( 10 , 5 )"), 2);
}

TEST(Expr, CeilDivEdges) {
  EXPECT_EQ(ev("ceil_div(0, 7)"), 0);
  EXPECT_EQ(ev("ceil_div(1, 7)"), 1);
  EXPECT_EQ(ev("ceil_div(7, 7)"), 1);
  EXPECT_EQ(ev("ceil_div(8, 7)"), 2);
  EXPECT_EQ(ev("ceil_div(1, 1)"), 1);
  // No a + b - 1 overflow near the top of the range.
  EXPECT_EQ(ev("ceil_div(9223372036854775807, 2)"), 4611686018427387904);
  EXPECT_EQ(ev("ceil_div(9223372036854775807, 9223372036854775807)"), 1);
  EXPECT_EQ(ev("ceil_div(9223372036854775806, 9223372036854775807)"), 1);
  // Negative dividend: true ceiling.
  EXPECT_EQ(ev("ceil_div(-7, 2)"), -3);
  EXPECT_EQ(ev("ceil_div(-9223372036854775807 - 1, 2)"), -4611686018427387904);
  auto f = fail("ceil_div(4, 0)");
  EXPECT_EQ(f.column, 1u);
  EXPECT_NE(f.reason.find("division by zero"), std::string::npos);
  f = fail("1 + ceil_div(4, -2)");
  EXPECT_EQ(f.column, 5u);
  EXPECT_NE(f.reason.find("positive divisor"), std::string::npos);
}

TEST(Expr, Whitespace) {
  EXPECT_EQ(ev("  1+2  "), 3);
  EXPECT_EQ(ev("\t1\n*\r\n3"), 3);
  EXPECT_EQ(ev("max(1,2)"), 2);
  EXPECT_EQ(ev("( ( 4 ) )"), 4);
}

TEST(Expr, Names) {
  const std::map<std::string, std::int64_t, std::less<>> m{{"tokens", 16}, {"hidden", 4096}, {"BLOCK", 256}};
  EXPECT_EQ(ev("tokens * hidden", m), 65536);
  EXPECT_EQ(ev("ceil_div(hidden, BLOCK) + tokens", m), 32);
  auto e = kx::expression::parse("b + a * ceil_div(b, c) - max(a, _d1)");
  EXPECT_EQ(e.names(), (std::vector<std::string>{"_d1", "a", "b", "c"}));
  EXPECT_EQ(e.text(), "b + a * ceil_div(b, c) - max(a, _d1)");
  EXPECT_TRUE(kx::expression::parse("min(1, 2)").names().empty());
}

TEST(Expr, ConstantValue) {
  EXPECT_EQ(kx::expression::parse("2 * (3 + 4)").constant_value(), 14);
  EXPECT_EQ(kx::expression::parse("n + 1").constant_value(), std::nullopt);
  EXPECT_THROW((void)kx::expression::parse("1 / 0").constant_value(), kx::expr_error);
}

TEST(Expr, ParseOnceEvalMany) {
  auto e = kx::expression::parse("n * 2");
  for (std::int64_t n = 0; n < 5; ++n) {
    std::map<std::string, std::int64_t, std::less<>> m{{"n", n}};
    EXPECT_EQ(e.eval(kx::map_resolver(m)), 2 * n);
  }
  // A custom resolver.
  EXPECT_EQ(e.eval([](std::string_view) { return std::optional<std::int64_t>(21); }), 42);
}

TEST(Expr, SyntaxErrorsWithColumns) {
  struct c {
    const char* text;
    std::size_t column;
    const char* reason_part;
  };
  const c cases[] = {
      {"", 1, "empty expression"},
      {"   ", 1, "empty expression"},
      {"1 +", 4, "at end of expression"},
      {"1 + * 2", 5, "found '*'"},
      {"(1 + 2", 7, "missing ')'"},
      {"1 + 2)", 6, "unbalanced ')'"},
      {")", 1, "unexpected ')'"},
      {"1 2", 3, "after a complete expression"},
      {"a b", 3, "after a complete expression"},
      {"1.5", 2, "only integers"},
      {"12abc", 3, "malformed number"},
      {"2 ^ 3", 3, "unexpected '^'"},
      {"foo(1)", 1, "unknown function \"foo\""},
      {"min", 4, "is a function"},
      {"min + 1", 5, "is a function"},
      {"ceil_div(1)", 1, "exactly 2 arguments, got 1"},
      {"ceil_div(1, 2, 3)", 1, "exactly 2 arguments, got 3"},
      {"ceil_div()", 1, "exactly 2 arguments, got 0"},
      {"1 + min(1)", 5, "at least 2 arguments, got 1"},
      {"max()", 1, "at least 2 arguments, got 0"},
      {"min(1, 2", 9, "missing ')'"},
      {"min(1; 2)", 6, "expected ',' or ')'"},
      {"min(1,)", 7, "unexpected ')'"},
      {"+1", 1, "found '+'"},
      {"9223372036854775808", 1, "does not fit in int64"},
      {"1 + 99999999999999999999", 5, "does not fit in int64"},
      {"x $ y", 3, "unexpected '$'"},
      {"(2", 3, "missing ')'"},
      {"(2 3)", 4, "expected ')'"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.text);
    try {
      (void)kx::expression::parse(k.text);
      ADD_FAILURE() << "parsed";
    } catch (const kx::expr_error& e) {
      EXPECT_EQ(e.column(), k.column) << e.what();
      EXPECT_NE(e.reason().find(k.reason_part), std::string::npos) << e.reason();
      EXPECT_NE(std::string(e.what()).find("column " + std::to_string(k.column)), std::string::npos);
    }
  }
}

TEST(Expr, NonAsciiByteIsReported) {
  try {
    (void)kx::expression::parse("n \xc3\x97 2");
    ADD_FAILURE();
  } catch (const kx::expr_error& e) {
    EXPECT_EQ(e.column(), 3u);
    EXPECT_NE(e.reason().find("byte 0xc3"), std::string::npos);
  }
}

TEST(Expr, UnknownNameHasColumn) {
  auto f = fail("tokens * hiden", {{"tokens", 1}, {"hidden", 2}});
  EXPECT_EQ(f.column, 10u);
  EXPECT_EQ(f.reason, "unknown name \"hiden\"");
  // A name evaluated without any resolver.
  EXPECT_THROW((void)kx::expression::parse("n").eval(kx::resolver{}), kx::expr_error);
}

TEST(Expr, DivisionAndModuloByZero) {
  auto f = fail("10 / (n - 4)", {{"n", 4}});
  EXPECT_EQ(f.column, 4u);
  EXPECT_EQ(f.reason, "division by zero");
  f = fail("10 % 0");
  EXPECT_EQ(f.column, 4u);
  EXPECT_EQ(f.reason, "modulo by zero");
}

TEST(Expr, OverflowInEveryOperator) {
  struct c {
    const char* text;
    std::size_t column;
    const char* op;
  };
  const c cases[] = {
      {"9223372036854775807 + 1", 21, "'+'"},
      {"-9223372036854775807 - 2", 22, "'-'"},
      {"4611686018427387904 * 2", 21, "'*'"},
      {"-4611686018427387905 * 2", 22, "'*'"},
      {"(-9223372036854775807 - 1) / -1", 28, "INT64_MIN / -1"},
      {"-(-9223372036854775807 - 1)", 1, "unary '-'"},
      {"x * x", 3, "'*'"},
  };
  const std::map<std::string, std::int64_t, std::less<>> m{{"x", 3037000500}};
  for (const auto& k : cases) {
    SCOPED_TRACE(k.text);
    auto f = fail(k.text, m);
    EXPECT_EQ(f.column, k.column);
    EXPECT_NE(f.reason.find("overflow"), std::string::npos) << f.reason;
    EXPECT_NE(f.reason.find(k.op), std::string::npos) << f.reason;
  }
  // INT64_MIN % -1 is 0, not a trap.
  EXPECT_EQ(ev("(-9223372036854775807 - 1) % -1"), 0);
  // Just inside the range.
  EXPECT_EQ(ev("3037000499 * 3037000499"), 9223372030926249001);
  EXPECT_EQ(ev("9223372036854775806 + 1"), kMax);
}

TEST(Expr, Limits) {
  std::string deep(64, '(');
  deep += "1" + std::string(64, ')');
  EXPECT_EQ(ev(deep), 1);
  std::string too_deep(65, '(');
  too_deep += "1" + std::string(65, ')');
  auto f = fail(too_deep);
  EXPECT_NE(f.reason.find("nested too deeply"), std::string::npos);
  EXPECT_EQ(f.column, 65u);
  std::string minus(65, '-');
  minus += "1";
  EXPECT_NE(fail(minus).reason.find("nested too deeply"), std::string::npos);
  // Length limit.
  std::string long_text = "1";
  while (long_text.size() < 1024) long_text += "+1";
  long_text.resize(1023);  // ends in "+1" or "1+"? keep it valid:
  if (long_text.back() == '+') long_text.pop_back();
  EXPECT_GT(ev(long_text), 0);
  std::string too_long(1025, '1');
  f = fail(too_long);
  EXPECT_NE(f.reason.find("longer than 1024"), std::string::npos);
}

TEST(Expr, Helpers) {
  EXPECT_TRUE(kx::is_function_name("ceil_div"));
  EXPECT_TRUE(kx::is_function_name("min"));
  EXPECT_FALSE(kx::is_function_name("mean"));
  EXPECT_TRUE(kx::is_identifier("_a1"));
  EXPECT_FALSE(kx::is_identifier("1a"));
  EXPECT_FALSE(kx::is_identifier(""));
  EXPECT_FALSE(kx::is_identifier("a-b"));
}

// `//`: Python's floor division (SOL-ExecBench's expr axes), next to C++'s '/'.
TEST(Expr, FloorDivision) {
  const kopt::expr::resolver none = [](std::string_view) { return std::nullopt; };
  EXPECT_EQ(kopt::expr::evaluate("7 // 2", none), 3);
  EXPECT_EQ(kopt::expr::evaluate("-7 // 2", none), -4);
  EXPECT_EQ(kopt::expr::evaluate("-7 / 2", none), -3);
  EXPECT_EQ(kopt::expr::evaluate("7 // -2", none), -4);
  EXPECT_EQ(kopt::expr::evaluate("128 // 2 * 3", none), 192);
  EXPECT_THROW(kopt::expr::evaluate("1 // 0", none), kopt::expr::expr_error);
}

TEST(Condition, ComparisonsAndClauses) {
  using kopt::expr::condition;
  std::map<std::string, std::int64_t, std::less<>> v{
      {"hidden", 4096}, {"g", 128}, {"b", 3}, {"len", 4}};
  const auto r = kopt::expr::map_resolver(v);
  EXPECT_TRUE(condition::parse("hidden % g == 0").holds(r));
  EXPECT_TRUE(condition::parse("len == b + 1").holds(r));
  EXPECT_FALSE(condition::parse("len != b + 1").holds(r));
  EXPECT_TRUE(condition::parse("b < len and len <= 4 and hidden >= g and g > 1").holds(r));
  EXPECT_FALSE(condition::parse("b < len and len < 4").holds(r));
  EXPECT_TRUE(condition::parse("hidden % g").holds(r) == false);  // bare: 0 is false
  EXPECT_TRUE(condition::parse("min(b, len) == 3").holds(r));
  const auto c = condition::parse("len == b + 1");
  EXPECT_EQ(c.names(), (std::vector<std::string>{"b", "len"}));
  EXPECT_THROW(condition::parse("a = b"), kopt::expr::expr_error);
  EXPECT_THROW(condition::parse("a < b < c"), kopt::expr::expr_error);
  EXPECT_THROW(condition::parse("a == "), kopt::expr::expr_error);
  try {
    condition::parse("b == len +");
    FAIL();
  } catch (const kopt::expr::expr_error& e) {
    EXPECT_GT(e.column(), 5u);  // the column is in the whole text
  }
  EXPECT_THROW(condition::parse("q == 1").holds(r), kopt::expr::expr_error);  // unknown name
}
