#include "config/expr.hpp"

#include <algorithm>
#include <limits>

namespace kopt::expr {

// The syntax tree. Every node remembers the column it came from so that
// evaluation errors (overflow, division by zero, unknown name) can say where.
struct node {
  enum class kind { number, name, neg, add, sub, mul, div, floor_div, mod, ceil_div, min, max };
  kind k = kind::number;
  std::size_t column = 0;
  std::int64_t value = 0;
  std::string name;
  std::vector<std::shared_ptr<const node>> kids;
};

namespace {

using node_ptr = std::shared_ptr<const node>;

bool is_name_start(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) noexcept { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string describe(char c) {
  if (c >= 0x21 && c <= 0x7e) return std::string("'") + c + "'";
  if (c == ' ') return "' '";
  return "byte 0x" + [&] {
    const char* hex = "0123456789abcdef";
    const auto u = static_cast<unsigned char>(c);
    return std::string{hex[u >> 4], hex[u & 15]};
  }();
}

// Recursive descent over:
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/' | '//' | '%') unary)*
//   unary   := '-' unary | primary
//   primary := NUMBER | NAME | FUNC '(' expr (',' expr)* ')' | '(' expr ')'
class parser {
 public:
  explicit parser(std::string_view text) : text_(text) {}

  node_ptr parse_all() {
    skip_space();
    if (at_end()) throw expr_error("empty expression", 1);
    node_ptr root = parse_expr();
    skip_space();
    if (!at_end()) {
      const char c = text_[pos_];
      if (c == ')') throw expr_error("unbalanced ')'", column());
      throw expr_error("unexpected " + describe(c) + " after a complete expression", column());
    }
    return root;
  }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t depth_ = 0;

  bool at_end() const noexcept { return pos_ >= text_.size(); }
  std::size_t column() const noexcept { return pos_ + 1; }
  void skip_space() {
    while (!at_end() && is_space(text_[pos_])) ++pos_;
  }

  struct depth_guard {
    parser& p;
    explicit depth_guard(parser& pp, std::size_t col) : p(pp) {
      if (++p.depth_ > max_expression_depth)
        throw expr_error("expression nested too deeply (limit " +
                             std::to_string(max_expression_depth) + ")",
                         col);
    }
    ~depth_guard() { --p.depth_; }
    depth_guard(const depth_guard&) = delete;
    depth_guard& operator=(const depth_guard&) = delete;
  };

  static node_ptr binary(node::kind k, std::size_t col, node_ptr a, node_ptr b) {
    auto n = std::make_shared<node>();
    n->k = k;
    n->column = col;
    n->kids = {std::move(a), std::move(b)};
    return n;
  }

  node_ptr parse_expr() {
    node_ptr left = parse_term();
    for (;;) {
      skip_space();
      if (at_end()) return left;
      const char c = text_[pos_];
      if (c != '+' && c != '-') return left;
      const std::size_t col = column();
      ++pos_;
      node_ptr right = parse_term();
      left = binary(c == '+' ? node::kind::add : node::kind::sub, col, left, right);
    }
  }

  node_ptr parse_term() {
    node_ptr left = parse_unary();
    for (;;) {
      skip_space();
      if (at_end()) return left;
      const char c = text_[pos_];
      node::kind k;
      if (c == '*') k = node::kind::mul;
      else if (c == '/') k = node::kind::div;
      else if (c == '%') k = node::kind::mod;
      else return left;
      const std::size_t col = column();
      ++pos_;
      // '//' is Python's floor division, as SOL-ExecBench's expr axes write it.
      if (k == node::kind::div && !at_end() && text_[pos_] == '/') {
        k = node::kind::floor_div;
        ++pos_;
      }
      node_ptr right = parse_unary();
      left = binary(k, col, left, right);
    }
  }

  node_ptr parse_unary() {
    skip_space();
    if (!at_end() && text_[pos_] == '-') {
      const std::size_t col = column();
      depth_guard g(*this, col);
      ++pos_;
      auto n = std::make_shared<node>();
      n->k = node::kind::neg;
      n->column = col;
      n->kids = {parse_unary()};
      return n;
    }
    return parse_primary();
  }

  [[noreturn]] void expected_operand() {
    if (at_end()) throw expr_error("expected a number, name, '(' or '-' at end of expression",
                                   column());
    throw expr_error("expected a number, name, '(' or '-', found " + describe(text_[pos_]),
                     column());
  }

  node_ptr parse_primary() {
    skip_space();
    if (at_end()) expected_operand();
    const char c = text_[pos_];
    const std::size_t col = column();
    if (is_digit(c)) {
      std::int64_t v = 0;
      while (!at_end() && is_digit(text_[pos_])) {
        const auto d = static_cast<std::int64_t>(text_[pos_] - '0');
        if (__builtin_mul_overflow(v, std::int64_t{10}, &v) ||
            __builtin_add_overflow(v, d, &v))
          throw expr_error("integer literal does not fit in int64", col);
        ++pos_;
      }
      if (!at_end() && (is_name_start(text_[pos_]) || text_[pos_] == '.'))
        throw expr_error(text_[pos_] == '.' ? "only integers are allowed (no '.')"
                                            : "malformed number",
                         column());
      auto n = std::make_shared<node>();
      n->k = node::kind::number;
      n->column = col;
      n->value = v;
      return n;
    }
    if (is_name_start(c)) {
      const std::size_t start = pos_;
      while (!at_end() && is_name_char(text_[pos_])) ++pos_;
      std::string name(text_.substr(start, pos_ - start));
      if (is_function_name(name)) return parse_call(std::move(name), col);
      skip_space();
      if (!at_end() && text_[pos_] == '(')
        throw expr_error("unknown function \"" + name + "\" (functions: ceil_div, min, max)", col);
      auto n = std::make_shared<node>();
      n->k = node::kind::name;
      n->column = col;
      n->name = std::move(name);
      return n;
    }
    if (c == '(') {
      depth_guard g(*this, col);
      ++pos_;
      node_ptr inner = parse_expr();
      skip_space();
      if (at_end()) throw expr_error("missing ')' (the '(' at column " + std::to_string(col) +
                                         " is not closed)",
                                     column());
      if (text_[pos_] != ')')
        throw expr_error("expected ')', found " + describe(text_[pos_]), column());
      ++pos_;
      return inner;
    }
    if (c == ')') throw expr_error("unexpected ')'", col);
    expected_operand();
  }

  node_ptr parse_call(std::string name, std::size_t col) {
    depth_guard g(*this, col);
    skip_space();
    if (at_end() || text_[pos_] != '(')
      throw expr_error("\"" + name + "\" is a function; expected '(' after it", column());
    ++pos_;
    auto n = std::make_shared<node>();
    n->column = col;
    n->name = name;
    n->k = name == "ceil_div" ? node::kind::ceil_div
           : name == "min"    ? node::kind::min
                              : node::kind::max;
    skip_space();
    if (!at_end() && text_[pos_] == ')') {
      ++pos_;
    } else {
      for (;;) {
        n->kids.push_back(parse_expr());
        skip_space();
        if (at_end())
          throw expr_error("missing ')' (the call of " + name + " at column " +
                               std::to_string(col) + " is not closed)",
                           column());
        if (text_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (text_[pos_] == ')') {
          ++pos_;
          break;
        }
        throw expr_error("expected ',' or ')' in arguments of " + name + ", found " +
                             describe(text_[pos_]),
                         column());
      }
    }
    const std::size_t argc = n->kids.size();
    if (n->k == node::kind::ceil_div && argc != 2)
      throw expr_error("ceil_div takes exactly 2 arguments, got " + std::to_string(argc), col);
    if (n->k != node::kind::ceil_div && argc < 2)
      throw expr_error(name + " takes at least 2 arguments, got " + std::to_string(argc), col);
    return n;
  }
};

[[noreturn]] void overflow(const node& n, const char* op) {
  throw expr_error(std::string("integer overflow in ") + op, n.column);
}

std::int64_t eval_node(const node& n, const resolver& names) {
  switch (n.k) {
    case node::kind::number:
      return n.value;
    case node::kind::name: {
      std::optional<std::int64_t> v = names ? names(n.name) : std::nullopt;
      if (!v) throw expr_error("unknown name \"" + n.name + "\"", n.column);
      return *v;
    }
    case node::kind::neg: {
      const std::int64_t a = eval_node(*n.kids[0], names);
      std::int64_t r = 0;
      if (__builtin_sub_overflow(std::int64_t{0}, a, &r)) overflow(n, "unary '-'");
      return r;
    }
    case node::kind::min:
    case node::kind::max: {
      std::int64_t r = eval_node(*n.kids[0], names);
      for (std::size_t i = 1; i < n.kids.size(); ++i) {
        const std::int64_t v = eval_node(*n.kids[i], names);
        r = n.k == node::kind::min ? std::min(r, v) : std::max(r, v);
      }
      return r;
    }
    default:
      break;
  }
  const std::int64_t a = eval_node(*n.kids[0], names);
  const std::int64_t b = eval_node(*n.kids[1], names);
  std::int64_t r = 0;
  constexpr std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  switch (n.k) {
    case node::kind::add:
      if (__builtin_add_overflow(a, b, &r)) overflow(n, "'+'");
      return r;
    case node::kind::sub:
      if (__builtin_sub_overflow(a, b, &r)) overflow(n, "'-'");
      return r;
    case node::kind::mul:
      if (__builtin_mul_overflow(a, b, &r)) overflow(n, "'*'");
      return r;
    case node::kind::div:
      if (b == 0) throw expr_error("division by zero", n.column);
      if (a == lowest && b == -1) overflow(n, "'/' (INT64_MIN / -1)");
      return a / b;
    case node::kind::floor_div: {
      if (b == 0) throw expr_error("division by zero", n.column);
      if (a == lowest && b == -1) overflow(n, "'//' (INT64_MIN // -1)");
      const std::int64_t q = a / b;
      return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
    }
    case node::kind::mod:
      if (b == 0) throw expr_error("modulo by zero", n.column);
      // INT64_MIN % -1 is 0 mathematically but traps on x86.
      if (b == -1) return 0;
      return a % b;
    case node::kind::ceil_div: {
      if (b == 0) throw expr_error("division by zero in ceil_div", n.column);
      if (b < 0) throw expr_error("ceil_div needs a positive divisor, got " + std::to_string(b),
                                  n.column);
      // q*b + m == a with |m| < b; rounding up only when m > 0 cannot overflow
      // because then q < a/b <= INT64_MAX.
      const std::int64_t q = a / b;
      return a % b > 0 ? q + 1 : q;
    }
    default:
      break;
  }
  throw expr_error("internal error: bad expression node", n.column);
}

void collect_names(const node& n, std::vector<std::string>& out) {
  if (n.k == node::kind::name) out.push_back(n.name);
  for (const auto& k : n.kids) collect_names(*k, out);
}

}  // namespace

bool is_function_name(std::string_view name) noexcept {
  return name == "ceil_div" || name == "min" || name == "max";
}

bool is_identifier(std::string_view name) noexcept {
  if (name.empty() || !is_name_start(name.front())) return false;
  return std::all_of(name.begin(), name.end(), is_name_char);
}

resolver map_resolver(const std::map<std::string, std::int64_t, std::less<>>& values) {
  return [&values](std::string_view name) -> std::optional<std::int64_t> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

expression expression::parse(std::string_view text) {
  if (text.size() > max_expression_length)
    throw expr_error("expression longer than " + std::to_string(max_expression_length) +
                         " characters",
                     max_expression_length + 1);
  expression e;
  e.text_ = std::string(text);
  parser p(e.text_);
  e.root_ = p.parse_all();
  collect_names(*e.root_, e.names_);
  std::sort(e.names_.begin(), e.names_.end());
  e.names_.erase(std::unique(e.names_.begin(), e.names_.end()), e.names_.end());
  return e;
}

std::int64_t expression::eval(const resolver& names) const {
  if (!root_) throw expr_error("empty expression", 1);
  return eval_node(*root_, names);
}

std::optional<std::int64_t> expression::constant_value() const {
  if (!names_.empty()) return std::nullopt;
  return eval(resolver{});
}

std::int64_t evaluate(std::string_view text, const resolver& names) {
  return expression::parse(text).eval(names);
}

namespace {

expr_error shifted(const expr_error& e, std::size_t offset) {
  return expr_error(e.reason(), e.column() == 0 ? 0 : e.column() + offset);
}

}  // namespace

condition condition::parse(std::string_view text) {
  if (text.size() > max_expression_length)
    throw expr_error(
        "constraint longer than " + std::to_string(max_expression_length) + " characters", 0);
  condition c;
  c.text_ = std::string(text);
  // Split on the word `and` outside parentheses, then each part on its one
  // comparison operator outside parentheses.
  std::vector<std::pair<std::size_t, std::size_t>> parts;  // [begin, end)
  {
    int depth = 0;
    std::size_t begin = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const char ch = text[i];
      if (ch == '(') ++depth;
      if (ch == ')') --depth;
      const bool word_start = i == 0 || !is_name_char(text[i - 1]);
      if (depth == 0 && word_start && text.substr(i, 3) == "and" &&
          (i + 3 == text.size() || !is_name_char(text[i + 3]))) {
        parts.emplace_back(begin, i);
        begin = i + 3;
        i += 2;
      }
    }
    parts.emplace_back(begin, text.size());
  }
  for (const auto& [b, e] : parts) {
    const std::string_view part = text.substr(b, e - b);
    int depth = 0;
    std::size_t at = std::string_view::npos, len = 0;
    for (std::size_t i = 0; i < part.size(); ++i) {
      const char ch = part[i];
      if (ch == '(') ++depth;
      if (ch == ')') --depth;
      if (depth != 0) continue;
      std::size_t l = 0;
      if ((ch == '=' || ch == '!' || ch == '<' || ch == '>') && i + 1 < part.size() &&
          part[i + 1] == '=')
        l = 2;
      else if (ch == '<' || ch == '>')
        l = 1;
      else if (ch == '=' || ch == '!')
        throw expr_error(std::string("unexpected '") + ch + "' (comparisons are == != < <= > >=)",
                         b + i + 1);
      if (l == 0) continue;
      if (at != std::string_view::npos)
        throw expr_error("more than one comparison in a clause (join clauses with 'and')",
                         b + i + 1);
      at = i;
      len = l;
      i += l - 1;
    }
    clause cl;
    cl.lhs_offset = b;
    const std::string_view lhs = at == std::string_view::npos ? part : part.substr(0, at);
    try {
      cl.lhs = expression::parse(lhs);
    } catch (const expr_error& x) {
      throw shifted(x, cl.lhs_offset);
    }
    if (at != std::string_view::npos) {
      cl.op = std::string(part.substr(at, len));
      cl.rhs_offset = b + at + len;
      try {
        cl.rhs = expression::parse(part.substr(at + len));
      } catch (const expr_error& x) {
        throw shifted(x, cl.rhs_offset);
      }
    }
    for (const auto& n : cl.lhs.names()) c.names_.push_back(n);
    if (cl.rhs)
      for (const auto& n : cl.rhs->names()) c.names_.push_back(n);
    c.clauses_.push_back(std::move(cl));
  }
  std::sort(c.names_.begin(), c.names_.end());
  c.names_.erase(std::unique(c.names_.begin(), c.names_.end()), c.names_.end());
  return c;
}

bool condition::holds(const resolver& names) const {
  for (const auto& cl : clauses_) {
    std::int64_t a = 0, b = 0;
    try {
      a = cl.lhs.eval(names);
    } catch (const expr_error& x) {
      throw shifted(x, cl.lhs_offset);
    }
    if (!cl.rhs) {
      if (a == 0) return false;
      continue;
    }
    try {
      b = cl.rhs->eval(names);
    } catch (const expr_error& x) {
      throw shifted(x, cl.rhs_offset);
    }
    bool ok = false;
    if (cl.op == "==")
      ok = a == b;
    else if (cl.op == "!=")
      ok = a != b;
    else if (cl.op == "<")
      ok = a < b;
    else if (cl.op == "<=")
      ok = a <= b;
    else if (cl.op == ">")
      ok = a > b;
    else if (cl.op == ">=")
      ok = a >= b;
    if (!ok) return false;
  }
  return true;
}

}  // namespace kopt::expr
