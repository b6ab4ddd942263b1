// Parsing and validation of the operator config: every problem is reported
// (not only the first), each at the line:column of the offending key or
// value. Structure and types are checked field by field while the model is
// built; afterwards every shape, generator bound, roofline count and launch
// plan is evaluated for every workload with default parameter values, so a
// config that loads cannot fail later on an expression.
#include "config/detail/validate.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "config/detail/context.hpp"

namespace kopt::config::detail {

namespace {

std::vector<std::string> names_of(const std::vector<axis>& axes) {
  std::vector<std::string> out;
  for (const auto& a : axes) out.push_back(a.name);
  return out;
}

std::vector<std::string> dtype_strings() {
  std::vector<std::string> out;
  for (auto n : dtype_names()) out.emplace_back(n);
  return out;
}

std::optional<dtype> read_dtype(context& ctx, const object_reader& r, std::string_view key,
                                bool required) {
  auto s = r.string(key, required);
  if (!s) return std::nullopt;
  auto t = parse_dtype(*s);
  if (!t) {
    std::string msg = "unknown dtype " + quote(*s) + did_you_mean(*s, dtype_strings());
    if (msg.find("did you mean") == std::string::npos) {
      std::string all;
      for (auto n : dtype_names()) all += (all.empty() ? "" : ", ") + std::string(n);
      msg += " (one of: " + all + ")";
    }
    ctx.error(r.path(key), msg);
  }
  return t;
}

bool valid_identifier_name(context& ctx, const jpath& p, const std::string& name,
                           const std::string& what) {
  if (!expr::is_identifier(name)) {
    ctx.error(p, what + " name " + quote(name) + " must be an identifier ([A-Za-z_][A-Za-z0-9_]*)",
              true);
    return false;
  }
  if (expr::is_function_name(name)) {
    ctx.error(
        p, what + " name " + quote(name) + " is reserved (a function of the expression language)",
        true);
    return false;
  }
  return true;
}

// Names across axes, scalars and tensors must be unique: kernels and
// expressions refer to them without qualification.
struct name_registry {
  std::map<std::string, std::string, std::less<>> kinds;
  bool claim(context& ctx, const jpath& p, const std::string& name, const std::string& kind) {
    auto [it, inserted] = kinds.emplace(name, kind);
    if (!inserted) {
      ctx.error(p, kind + " " + quote(name) + " has the same name as " + it->second, true);
      return false;
    }
    return true;
  }
};

std::optional<tolerance> parse_tolerance(context& ctx, const json& j, const jpath& p,
                                         const tolerance& base) {
  object_reader r(ctx, j, p, {"atol", "rtol", "matched_ratio", "form"});
  if (!r.valid()) return std::nullopt;
  tolerance t = base;
  bool ok = true;
  for (const char* key : {"atol", "rtol"}) {
    if (!r.has(key)) continue;
    auto v = r.number(key);
    if (!v) {
      ok = false;
    } else if (*v < 0) {
      ctx.error(r.path(key), std::string(key) + " must be >= 0, got " + r.get(key)->dump());
      ok = false;
    } else {
      (std::string_view(key) == "atol" ? t.atol : t.rtol) = *v;
    }
  }
  if (r.has("matched_ratio")) {
    auto v = r.number("matched_ratio");
    if (!v) {
      ok = false;
    } else if (!(*v > 0.0 && *v <= 1.0)) {
      ctx.error(r.path("matched_ratio"),
                "matched_ratio must be in (0, 1], got " + r.get("matched_ratio")->dump());
      ok = false;
    } else {
      t.matched_ratio = *v;
    }
  }
  if (auto f = r.string("form")) {
    if (*f == "max_of")
      t.form = tolerance_form::max_of;
    else if (*f == "sum")
      t.form = tolerance_form::sum;
    else {
      ctx.error(r.path("form"),
                "form must be \"max_of\" (|d| <= max(atol, rtol*|ref|)) or \"sum\" "
                "(|d| <= atol + rtol*|ref|, as torch.allclose), got " +
                    r.get("form")->dump());
      ok = false;
    }
  } else if (r.has("form")) {
    ok = false;
  }
  if (!ok) return std::nullopt;
  return t;
}

std::optional<std::string> read_source(context& ctx, const object_reader& r,
                                       const std::filesystem::path& base_dir) {
  const bool has_src = r.has("source"), has_file = r.has("source_file");
  if (has_src && has_file) {
    ctx.error(r.path("source_file"), "give either \"source\" or \"source_file\", not both", true);
    return std::nullopt;
  }
  if (!has_src && !has_file) {
    ctx.error(r.path(), "missing required field \"source\" or \"source_file\"");
    return std::nullopt;
  }
  if (has_src) return r.string("source");
  auto f = r.string("source_file");
  if (!f) return std::nullopt;
  return read_source_file(ctx, r.path("source_file"), *f, base_dir);
}

std::optional<generator> parse_generator(context& ctx, const json& j, const jpath& p, dtype type,
                                         const std::vector<std::string>& axes,
                                         const std::filesystem::path& base_dir) {
  static const std::vector<std::string> kinds = {"normal",      "uniform",  "int_range",
                                                 "permutation", "constant", "kernel"};
  if (!j.is_object()) {
    ctx.error(p, "expected an object such as {\"kind\": \"normal\"}, got " + json_type_name(j));
    return std::nullopt;
  }
  auto kit = j.find("kind");
  if (kit == j.end()) {
    object_reader(ctx, j, p,
                  {"kind", "mean", "stddev", "scale", "low", "high", "n", "disjoint", "value",
                   "source", "source_file", "kernel"});
    ctx.error(p,
              "missing required field \"kind\" (one of normal, uniform, int_range, "
              "permutation, constant, kernel)");
    return std::nullopt;
  }
  if (!kit->is_string()) {
    ctx.error(p / "kind", "expected a string, got " + json_type_name(*kit));
    return std::nullopt;
  }
  const std::string kind = kit->get<std::string>();
  generator g;
  std::vector<std::string> allowed{"kind"};
  if (kind == "normal") {
    g.k = generator::kind::normal;
    allowed.insert(allowed.end(), {"mean", "stddev", "scale"});
  } else if (kind == "uniform") {
    g.k = generator::kind::uniform;
    allowed.insert(allowed.end(), {"low", "high", "scale"});
  } else if (kind == "int_range") {
    g.k = generator::kind::int_range;
    allowed.insert(allowed.end(), {"low", "high"});
  } else if (kind == "permutation") {
    g.k = generator::kind::permutation;
    allowed.insert(allowed.end(), {"n", "disjoint"});
  } else if (kind == "constant") {
    g.k = generator::kind::constant;
    allowed.insert(allowed.end(), {"value"});
  } else if (kind == "kernel") {
    g.k = generator::kind::kernel;
    allowed.insert(allowed.end(), {"source", "source_file", "kernel"});
  } else {
    ctx.error(p / "kind",
              "unknown generator kind " + quote(kind) + did_you_mean(kind, kinds) +
                  " (one of normal, uniform, int_range, permutation, constant, kernel)");
    return std::nullopt;
  }
  object_reader r(ctx, j, p, allowed);
  bool ok = true;
  const bool float_kind = g.k == generator::kind::normal || g.k == generator::kind::uniform;
  const bool int_kind = g.k == generator::kind::int_range || g.k == generator::kind::permutation;
  if (float_kind && !dtype_is_float(type)) {
    ctx.error(p / "kind", "generator " + quote(kind) + " needs a floating-point tensor, not " +
                              std::string(dtype_name(type)) +
                              " (use int_range, permutation or constant)");
    ok = false;
  }
  if (int_kind && !dtype_is_integer(type)) {
    ctx.error(p / "kind", "generator " + quote(kind) + " needs an integer tensor, not " +
                              std::string(dtype_name(type)) + " (use normal or uniform)");
    ok = false;
  }
  auto num = [&](const char* key, double& out) {
    if (!r.has(key)) return;
    if (auto v = r.number(key))
      out = *v;
    else
      ok = false;
  };
  switch (g.k) {
    case generator::kind::normal:
      num("mean", g.mean);
      num("stddev", g.stddev);
      num("scale", g.scale);
      if (r.has("stddev") && r.number("stddev") && g.stddev <= 0) {
        ctx.error(r.path("stddev"), "stddev must be > 0, got " + r.get("stddev")->dump());
        ok = false;
      }
      break;
    case generator::kind::uniform:
      num("low", g.low);
      num("high", g.high);
      num("scale", g.scale);
      if (ok && !(g.low < g.high)) {
        ctx.error(r.has("high") ? r.path("high") : p, "uniform needs low < high, got low " +
                                                          json(g.low).dump() + " and high " +
                                                          json(g.high).dump());
        ok = false;
      }
      break;
    case generator::kind::int_range:
    case generator::kind::permutation: {
      const char* low_key = "low";
      const char* high_key = g.k == generator::kind::int_range ? "high" : "n";
      if (g.k == generator::kind::int_range && r.has(low_key)) {
        if (auto e = as_expression(ctx, *r.get(low_key), r.path(low_key))) {
          if (!check_expression_names(ctx, r.path(low_key), *e, axes, "axis")) ok = false;
          g.int_low = *e;
        } else {
          ok = false;
        }
      }
      const json* hj = g.k == generator::kind::int_range ? r.require(high_key) : r.get(high_key);
      if (hj) {
        if (auto e = as_expression(ctx, *hj, r.path(high_key))) {
          if (!check_expression_names(ctx, r.path(high_key), *e, axes, "axis")) ok = false;
          g.int_high = *e;
        } else {
          ok = false;
        }
      } else if (g.k == generator::kind::int_range) {
        ok = false;
      }
      if (g.k == generator::kind::permutation && r.has("disjoint")) {
        if (auto z = r.boolean("disjoint"))
          g.disjoint_rows = *z;
        else
          ok = false;
      }
      break;
    }
    case generator::kind::constant:
      if (const json* v = r.require("value")) {
        if (auto d = as_number(ctx, *v, r.path("value"))) {
          g.value = *d;
          if (dtype_is_integer(type) && std::trunc(*d) != *d) {
            ctx.error(r.path("value"),
                      "constant for an integer tensor must be an integer, got " + v->dump());
            ok = false;
          }
        } else {
          ok = false;
        }
      } else {
        ok = false;
      }
      break;
    case generator::kind::kernel: {
      if (auto src = read_source(ctx, r, base_dir))
        g.kernel_source = *src;
      else
        ok = false;
      if (auto k = r.string("kernel", true)) {
        g.kernel_name = *k;
        if (!g.kernel_source.empty() && g.kernel_source.find(*k) == std::string::npos)
          ctx.warning(r.path("kernel"),
                      "kernel " + quote(*k) + " not found in the generator source");
      } else {
        ok = false;
      }
      break;
    }
  }
  if (g.k == generator::kind::normal || g.k == generator::kind::uniform) {
    if (r.has("scale") && r.number("scale") && !(g.scale > 0)) {
      ctx.error(r.path("scale"), "scale must be > 0, got " + r.get("scale")->dump());
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return g;
}

std::optional<tensor> parse_tensor(context& ctx, const json& j, const jpath& p,
                                   const std::string& name, bool is_input,
                                   const std::vector<std::string>& axes, const tolerance& op_tol,
                                   const std::filesystem::path& base_dir) {
  std::vector<std::string> allowed{"shape", "dtype", "description", "tolerance"};
  if (is_input) allowed.insert(allowed.end(), {"generator", "in_place"});
  if (!is_input && j.is_object()) {
    for (const char* k : {"generator", "in_place"}) {
      if (j.contains(k)) {
        ctx.error(p / k, std::string("\"") + k + "\" is only allowed on inputs", true);
        allowed.emplace_back(k);  // reported here, not again as unknown
      }
    }
  }
  object_reader r(ctx, j, p, allowed);
  if (!r.valid()) return std::nullopt;
  tensor t;
  t.name = name;
  bool ok = true;
  if (auto d = r.string("description")) t.description = *d;
  auto type = read_dtype(ctx, r, "dtype", true);
  if (type)
    t.type = *type;
  else
    ok = false;
  if (const json* s = r.require("shape")) {
    const jpath sp = r.path("shape");
    if (!s->is_array()) {
      ctx.error(sp,
                "expected an array of axis names or expressions ([] for a single element), got " +
                    json_type_name(*s));
      ok = false;
    } else {
      for (std::size_t i = 0; i < s->size(); ++i) {
        auto e = as_expression(ctx, (*s)[i], sp[i]);
        if (!e) {
          ok = false;
          continue;
        }
        if (!check_expression_names(ctx, sp[i], *e, axes, "axis")) ok = false;
        t.shape.push_back(*e);
      }
    }
  } else {
    ok = false;
  }
  if (is_input) {
    if (auto ip = r.boolean("in_place")) t.in_place = *ip;
  }
  if (const json* tj = r.get("tolerance")) {
    if (is_input && !t.in_place) {
      ctx.error(r.path("tolerance"),
                "a tolerance applies to outputs and in-place inputs only (set \"in_place\": true "
                "if the operator updates this input)",
                true);
      ok = false;
    } else if (auto tol = parse_tolerance(ctx, *tj, r.path("tolerance"), op_tol)) {
      t.tol = *tol;
    } else {
      ok = false;
    }
  }
  if (is_input) {
    if (const json* gj = r.get("generator")) {
      if (type) {
        t.gen = parse_generator(ctx, *gj, r.path("generator"), *type, axes, base_dir);
        if (!t.gen) ok = false;
      }
    } else if (type && dtype_is_float(*type)) {
      t.gen = generator{};  // normal(0, 1)
    } else if (type) {
      ctx.error(p,
                "integer input " + quote(name) +
                    " needs a \"generator\" (int_range, "
                    "permutation, constant or kernel): random integers are rarely valid indices");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return t;
}

void parse_tensors(context& ctx, const object_reader& top, const char* key, bool is_input,
                   operator_config& op, name_registry& reg, const std::filesystem::path& base_dir,
                   bool& ok) {
  const json* tj = top.require(key);
  if (!tj) {
    ok = false;
    return;
  }
  const jpath tp = top.path(key);
  if (!tj->is_object()) {
    ctx.error(
        tp, "expected an object (tensor name -> {shape, dtype, ...}), got " + json_type_name(*tj));
    ok = false;
    return;
  }
  if (tj->empty()) {
    ctx.error(tp, std::string("needs at least one ") + (is_input ? "input" : "output"));
    ok = false;
  }
  const auto axes = names_of(op.axes);
  for (const auto& [name, j] : tj->items()) {
    const jpath p = tp / name;
    if (!valid_identifier_name(ctx, p, name, is_input ? "input" : "output") ||
        !reg.claim(ctx, p, name, is_input ? "input" : "output")) {
      ok = false;
    }
    auto t = parse_tensor(ctx, j, p, name, is_input, axes, op.tol, base_dir);
    if (!t) {
      ctx.mark_broken(name);
      ok = false;
      continue;
    }
    (is_input ? op.inputs : op.outputs).push_back(std::move(*t));
  }
}

void parse_axes(context& ctx, const object_reader& top, operator_config& op, name_registry& reg,
                bool& ok) {
  const json* aj = top.require("axes");
  if (!aj) {
    ok = false;
    return;
  }
  const jpath ap = top.path("axes");
  if (!aj->is_object()) {
    ctx.error(ap, "expected an object (axis name -> {type, value}), got " + json_type_name(*aj));
    ok = false;
    return;
  }
  for (const auto& [name, j] : aj->items()) {
    const jpath p = ap / name;
    if (!valid_identifier_name(ctx, p, name, "axis") || !reg.claim(ctx, p, name, "an axis"))
      ok = false;
    object_reader r(ctx, j, p, {"type", "value", "description", "expression"});
    if (!r.valid()) {
      ctx.mark_broken(name);
      ok = false;
      continue;
    }
    axis a;
    a.name = name;
    if (auto d = r.string("description")) a.description = *d;
    auto type = r.string("type", true);
    if (!type) {
      ctx.mark_broken(name);
      ok = false;
      continue;
    }
    if (*type == "const") {
      a.is_const = true;
      auto v = r.integer("value", true);
      if (!v) {
        ctx.mark_broken(name);
        ok = false;
        continue;
      }
      if (*v < 1) {
        ctx.error(r.path("value"), "const axis value must be >= 1, got " + std::to_string(*v));
        ok = false;
      }
      a.value = *v;
    } else if (*type == "var") {
      if (r.has("value")) {
        ctx.error(r.path("value"),
                  "a var axis takes its value from each workload; use \"type\": \"const\" for a "
                  "fixed value",
                  true);
        ok = false;
      }
    } else if (*type == "expr") {
      // Its names are checked once every axis is known (below).
      auto e = r.string("expression", true);
      if (!e) {
        ctx.mark_broken(name);
        ok = false;
        continue;
      }
      if (!as_expression(ctx, json(*e), r.path("expression"))) {
        ctx.mark_broken(name);
        ok = false;
        continue;
      }
      a.expression = *e;
    } else {
      ctx.error(r.path("type"), "axis type must be \"var\", \"const\" or \"expr\", got " +
                                    quote(*type) + did_you_mean(*type, {"var", "const", "expr"}));
      ctx.mark_broken(name);
      ok = false;
      continue;
    }
    op.axes.push_back(std::move(a));
  }
  if (aj->empty()) {
    ctx.error(ap, "needs at least one axis");
    ok = false;
  }
  const auto all = names_of(op.axes);
  for (const auto& a : op.axes) {
    if (!a.is_expr()) continue;
    const jpath ep = ap / a.name / "expression";
    std::vector<std::string> others;
    for (const auto& n : all)
      if (n != a.name) others.push_back(n);
    if (!check_expression_names(ctx, ep, a.expression, others, "axis")) ok = false;
  }
}

// `constraints`: an array of conditions over axes and integer scalars.
void parse_constraints(context& ctx, const object_reader& top, operator_config& op, bool& ok) {
  const json* cj = top.get("constraints");
  if (!cj) return;
  const jpath cp = top.path("constraints");
  if (!cj->is_array()) {
    ctx.error(cp, "expected an array of conditions (e.g. \"hidden % 128 == 0\"), got " +
                      json_type_name(*cj));
    ok = false;
    return;
  }
  std::vector<std::string> known = names_of(op.axes);
  for (const auto& s : op.scalars)
    if (!dtype_is_float(s.type)) known.push_back(s.name);
  for (std::size_t i = 0; i < cj->size(); ++i) {
    auto text = as_string(ctx, (*cj)[i], cp[i]);
    if (!text) {
      ok = false;
      continue;
    }
    try {
      const auto c = expr::condition::parse(*text);
      bool names_ok = true;
      for (const auto& n : c.names())
        if (std::find(known.begin(), known.end(), n) == known.end()) {
          const scalar* s = op.find_scalar(n);
          ctx.error(cp[i], s ? "constraint " + quote(*text) + ": scalar " + quote(n) +
                                   " is a float; constraints compare integers (axes and integer "
                                   "scalars)"
                             : "constraint " + quote(*text) + ": unknown name " + quote(n) +
                                   did_you_mean(n, known));
          names_ok = false;
        }
      if (names_ok)
        op.constraints.push_back(*text);
      else
        ok = false;
    } catch (const expr::expr_error& e) {
      ctx.error(cp[i], "constraint " + quote(*text) + ": " + e.what());
      ok = false;
    }
  }
}

void parse_scalars(context& ctx, const object_reader& top, operator_config& op, name_registry& reg,
                   bool& ok) {
  const json* sj = top.get("scalars");
  if (!sj) return;
  const jpath sp = top.path("scalars");
  if (!sj->is_object()) {
    ctx.error(sp, "expected an object (scalar name -> {dtype, value}), got " + json_type_name(*sj));
    ok = false;
    return;
  }
  for (const auto& [name, j] : sj->items()) {
    const jpath p = sp / name;
    if (!valid_identifier_name(ctx, p, name, "scalar") || !reg.claim(ctx, p, name, "a scalar"))
      ok = false;
    object_reader r(ctx, j, p, {"dtype", "value", "description"});
    if (!r.valid()) {
      ctx.mark_broken(name);
      ok = false;
      continue;
    }
    scalar s;
    s.name = name;
    if (auto d = r.string("description")) s.description = *d;
    auto t = read_dtype(ctx, r, "dtype", true);
    if (t && *t != dtype::float32 && *t != dtype::float64 && *t != dtype::int32 &&
        *t != dtype::int64) {
      ctx.error(r.path("dtype"), "a scalar's dtype must be float32, float64, int32 or int64, got " +
                                     quote(dtype_name(*t)));
      t.reset();
    }
    auto v = r.number("value", true);
    if (!t || !v) {
      ctx.mark_broken(name);
      ok = false;
      continue;
    }
    s.type = *t;
    s.value = *v;
    if (!dtype_is_float(s.type) && std::trunc(*v) != *v) {
      ctx.error(r.path("value"),
                "value of an integer scalar must be an integer, got " + r.get("value")->dump());
      ok = false;
    }
    op.scalars.push_back(std::move(s));
  }
}

// The one place a workload becomes private: workloads[].private (parsed
// above) or integrity.private_fraction's seeded choice. Everything after
// (prompts, screening, promotion, verify, reports) reads is_private only.
void select_private_workloads(context& ctx, const object_reader& top, operator_config& op,
                              bool& ok) {
  if (op.integ.private_fraction && !op.workloads.empty()) {
    std::vector<std::string> ids;
    for (const auto& w : op.workloads) ids.push_back(w.id);
    for (const auto& id :
         private_fraction_choice(ids, *op.integ.private_fraction, op.integ.private_seed))
      for (auto& w : op.workloads)
        if (w.id == id && !w.is_private) {
          w.is_private = true;
          w.private_by_fraction = true;
        }
  }
  const bool any_public = std::any_of(op.workloads.begin(), op.workloads.end(),
                                      [](const workload& w) { return !w.is_private; });
  if (!op.workloads.empty() && !any_public) {
    ctx.error(top.path("workloads"),
              "every workload is private (workloads[].private, integrity.private_fraction): at "
              "least one must stay public, or there is nothing to screen and score on");
    ok = false;
  }
}

void parse_workloads(context& ctx, const object_reader& top, operator_config& op, bool& ok,
                     const json_locator* loc) {
  const json* wj = top.require("workloads");
  if (!wj) {
    ok = false;
    return;
  }
  const jpath wp = top.path("workloads");
  if (!wj->is_array()) {
    ctx.error(wp, "expected an array of workloads, got " + json_type_name(*wj));
    ok = false;
    return;
  }
  if (wj->empty()) {
    ctx.error(wp, "needs at least one workload");
    ok = false;
  }
  std::vector<std::string> var_axes, const_axes;
  std::vector<std::string> expr_axes;
  for (const auto& a : op.axes)
    (a.is_const ? const_axes : a.is_expr() ? expr_axes : var_axes).push_back(a.name);
  std::vector<std::string> all_axes = names_of(op.axes);
  std::vector<std::string> scalar_names;
  for (const auto& s : op.scalars) scalar_names.push_back(s.name);
  std::map<std::string, jpath, std::less<>> seen_ids;
  for (std::size_t i = 0; i < wj->size(); ++i) {
    const jpath p = wp[i];
    object_reader r(ctx, (*wj)[i], p,
                    {"id", "axes", "scalars", "weight", "description", "tolerance", "private"});
    if (!r.valid()) {
      ok = false;
      continue;
    }
    workload w;
    bool wok = true;
    if (auto id = r.string("id", true)) {
      w.id = *id;
      if (id->empty() || id->find_first_of(" \t\r\n\"'") != std::string::npos) {
        ctx.error(r.path("id"), "workload id must be non-empty without spaces or quotes");
        wok = false;
      } else if (auto it = seen_ids.find(*id); it != seen_ids.end()) {
        std::string where;
        if (loc) {
          if (const located_value* lv = loc->find(it->second.ptr))
            where = " (first used at line " + std::to_string(lv->value.line) + ")";
        }
        ctx.error(r.path("id"), "duplicate workload id " + quote(*id) + where);
        wok = false;
      } else {
        seen_ids.emplace(*id, r.path("id"));
      }
    } else {
      wok = false;
    }
    if (auto d = r.string("description")) w.description = *d;
    if (auto pv = r.boolean("private"))
      w.is_private = *pv;
    else if (r.has("private"))
      wok = false;
    if (r.has("weight")) {
      if (auto v = r.number("weight")) {
        // Weights are relative. At the extremes their sums overflow (all
        // 1e308: weighted totals of 0 %) or their products underflow (all
        // 5e-324: 100 %), so only a range where every weighted sum of up to
        // a million workloads stays exact enough is accepted.
        constexpr double min_weight = 1e-9, max_weight = 1e9;
        if (*v <= 0) {
          ctx.error(r.path("weight"), "weight must be > 0, got " + r.get("weight")->dump());
          wok = false;
        } else if (*v < min_weight || *v > max_weight) {
          ctx.error(r.path("weight"), "weight " + r.get("weight")->dump() +
                                          " is outside [1e-9, 1e9]; weights are relative, so "
                                          "scale them into that range");
          wok = false;
        }
        w.weight = *v;
      } else {
        wok = false;
      }
    }
    if (const json* aj = r.require("axes")) {
      const jpath ap = r.path("axes");
      if (!aj->is_object()) {
        ctx.error(ap, "expected an object (axis name -> value), got " + json_type_name(*aj));
        wok = false;
      } else {
        for (const auto& [name, vj] : aj->items()) {
          const jpath xp = ap / name;
          if (std::find(const_axes.begin(), const_axes.end(), name) != const_axes.end()) {
            ctx.error(xp,
                      "axis " + quote(name) + " is const (value " +
                          std::to_string(op.find_axis(name)->value) +
                          ") and cannot be set by a workload",
                      true);
            wok = false;
            continue;
          }
          if (std::find(expr_axes.begin(), expr_axes.end(), name) != expr_axes.end()) {
            ctx.error(xp,
                      "axis " + quote(name) + " is an expression (" +
                          op.find_axis(name)->expression + ") and cannot be set by a workload",
                      true);
            wok = false;
            continue;
          }
          if (std::find(var_axes.begin(), var_axes.end(), name) == var_axes.end()) {
            ctx.error(xp, "unknown axis " + quote(name) + did_you_mean(name, all_axes), true);
            wok = false;
            continue;
          }
          auto v = as_integer(ctx, vj, xp);
          if (!v) {
            wok = false;
            continue;
          }
          if (*v < 1) {
            ctx.error(xp, "axis value must be >= 1, got " + std::to_string(*v));
            wok = false;
          }
          w.axes[name] = *v;
        }
        for (const auto& a : var_axes) {
          if (!aj->contains(a)) {
            ctx.error(ap, "missing value for var axis " + quote(a));
            wok = false;
          }
        }
      }
    } else {
      wok = false;
    }
    if (const json* sj = r.get("scalars")) {
      const jpath sp = r.path("scalars");
      if (!sj->is_object()) {
        ctx.error(sp, "expected an object (scalar name -> value), got " + json_type_name(*sj));
        wok = false;
      } else {
        for (const auto& [name, vj] : sj->items()) {
          const scalar* s = op.find_scalar(name);
          if (!s) {
            ctx.error(sp / name, "unknown scalar " + quote(name) + did_you_mean(name, scalar_names),
                      true);
            wok = false;
            continue;
          }
          auto v = as_number(ctx, vj, sp / name);
          if (!v) {
            wok = false;
            continue;
          }
          if (!dtype_is_float(s->type) && std::trunc(*v) != *v) {
            ctx.error(sp / name, "scalar " + quote(name) + " is an integer, got " + vj.dump());
            wok = false;
          }
          w.scalars[name] = *v;
        }
      }
    }
    if (const json* tj = r.get("tolerance")) {
      if (auto t = parse_tolerance(ctx, *tj, r.path("tolerance"), op.tol))
        w.tol = *t;
      else
        wok = false;
    }
    // Only sound workloads are evaluated later, so that a missing axis is
    // reported once and not again by every expression.
    if (!wok)
      ok = false;
    else
      op.workloads.push_back(std::move(w));
  }
}

void parse_roofline(context& ctx, const object_reader& top, operator_config& op, bool& ok) {
  const json* rj = top.get("roofline");
  if (!rj) return;
  object_reader r(ctx, *rj, top.path("roofline"), {"flops", "flop_unit", "bytes"});
  if (!r.valid()) {
    ok = false;
    return;
  }
  const auto axes = names_of(op.axes);
  if (const json* f = r.require("flops")) {
    if (auto e = as_expression(ctx, *f, r.path("flops"))) {
      if (check_expression_names(ctx, r.path("flops"), *e, axes, "axis"))
        op.roof.flops = *e;
      else
        ok = false;
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  if (auto u = r.string("flop_unit")) {
    const auto& units = flop_unit_names();
    if (std::find(units.begin(), units.end(), *u) == units.end()) {
      std::vector<std::string> choices(units.begin(), units.end());
      std::string all;
      for (auto n : units) all += (all.empty() ? "" : ", ") + std::string(n);
      ctx.error(r.path("flop_unit"), "unknown flop_unit " + quote(*u) + did_you_mean(*u, choices) +
                                         " (one of " + all + ")");
      ok = false;
    } else {
      op.roof.flop_unit = *u;
    }
  } else if (r.has("flop_unit")) {
    ok = false;
  }
  if (const json* b = r.get("bytes")) {
    if (auto e = as_expression(ctx, *b, r.path("bytes"))) {
      if (check_expression_names(ctx, r.path("bytes"), *e, axes, "axis"))
        op.roof.bytes = *e;
      else
        ok = false;
    } else {
      ok = false;
    }
  }
}

void parse_campaign(context& ctx, const object_reader& top, operator_config& op, bool& ok) {
  const json* cj = top.get("campaign");
  if (!cj) return;
  object_reader r(ctx, *cj, top.path("campaign"),
                  {"provider", "model", "budget", "target_sol_fraction", "candidates_per_iteration",
                   "dropout_p", "seed"});
  if (!r.valid()) {
    ok = false;
    return;
  }
  campaign_settings& c = op.campaign;
  if (auto p = r.string("provider")) {
    const auto& names = provider_names();
    if (std::find(names.begin(), names.end(), *p) == names.end()) {
      std::vector<std::string> choices(names.begin(), names.end());
      ctx.error(r.path("provider"), "unknown provider " + quote(*p) + did_you_mean(*p, choices) +
                                        " (one of autotune, openai, anthropic, command, replay)");
      ok = false;
    } else {
      c.provider = *p;
    }
  } else if (r.has("provider")) {
    ok = false;
  }
  if (auto m = r.string("model"))
    c.model = *m;
  else if (r.has("model"))
    ok = false;
  if (const json* bj = r.get("budget")) {
    object_reader b(ctx, *bj, r.path("budget"),
                    {"iterations", "wall_time_s", "tokens", "cost_usd"});
    if (!b.valid()) ok = false;
    auto nonneg_int = [&](const char* key, std::optional<std::int64_t>& out) {
      if (!b.has(key)) return;
      auto v = b.integer(key);
      if (!v) {
        ok = false;
      } else if (*v < 0) {
        ctx.error(b.path(key), std::string(key) + " must be >= 0, got " + std::to_string(*v));
        ok = false;
      } else {
        out = *v;
      }
    };
    auto nonneg = [&](const char* key, std::optional<double>& out) {
      if (!b.has(key)) return;
      auto v = b.number(key);
      if (!v) {
        ok = false;
      } else if (*v < 0) {
        ctx.error(b.path(key), std::string(key) + " must be >= 0, got " + b.get(key)->dump());
        ok = false;
      } else {
        out = *v;
      }
    };
    nonneg_int("iterations", c.limits.iterations);
    nonneg("wall_time_s", c.limits.wall_time_s);
    nonneg_int("tokens", c.limits.tokens);
    nonneg("cost_usd", c.limits.cost_usd);
  }
  if (r.has("target_sol_fraction")) {
    if (auto v = r.number("target_sol_fraction")) {
      if (!(*v > 0 && *v <= 1)) {
        ctx.error(r.path("target_sol_fraction"), "target_sol_fraction must be in (0, 1], got " +
                                                     r.get("target_sol_fraction")->dump());
        ok = false;
      } else {
        c.target_sol_fraction = *v;
      }
    } else {
      ok = false;
    }
  }
  if (r.has("candidates_per_iteration")) {
    if (auto v = r.integer("candidates_per_iteration")) {
      if (*v < 1 || *v > 64) {
        ctx.error(r.path("candidates_per_iteration"),
                  "candidates_per_iteration must be in 1..64, got " + std::to_string(*v));
        ok = false;
      } else {
        c.candidates_per_iteration = static_cast<int>(*v);
      }
    } else {
      ok = false;
    }
  }
  if (r.has("dropout_p")) {
    if (auto v = r.number("dropout_p")) {
      if (!(*v >= 0 && *v < 1)) {
        ctx.error(r.path("dropout_p"),
                  "dropout_p must be in [0, 1), got " + r.get("dropout_p")->dump());
        ok = false;
      } else {
        c.dropout_p = *v;
      }
    } else {
      ok = false;
    }
  }
  if (r.has("seed")) {
    const json* s = r.get("seed");
    if (s->is_number_unsigned()) {
      c.seed = s->get<std::uint64_t>();
    } else if (auto v = r.integer("seed")) {
      if (*v < 0) {
        ctx.error(r.path("seed"), "seed must be >= 0, got " + std::to_string(*v));
        ok = false;
      } else {
        c.seed = static_cast<std::uint64_t>(*v);
      }
    } else {
      ok = false;
    }
  }
}

// Everything that needs axis values: shapes, tensor sizes, generator integer
// bounds, roofline counts.
void check_operator_workloads(context& ctx, const operator_config& op) {
  const jpath root;
  for (const auto& w : op.workloads) {
    auto names = workload_names(op, w);
    const std::string who = "workload " + quote(w.id) + ": ";
    auto eval = [&](const jpath& p, const std::string& text) -> std::optional<std::int64_t> {
      try {
        return expr::evaluate(text, expr::map_resolver(names));
      } catch (const expr::expr_error& e) {
        ctx.expr_problem(p, e, text, who);
        return std::nullopt;
      }
    };
    bool axes_ok = true;
    for (const auto& a : op.axes) {
      if (!a.is_expr()) continue;
      const jpath ep = root / "axes" / a.name / "expression";
      if (!names.count(a.name)) {
        // Unresolved: the evaluation says which name (in a cycle, the other axis).
        if (eval(ep, a.expression))
          ctx.error(ep, who + "axis " + quote(a.name) + " could not be evaluated");
        axes_ok = false;
      } else if (names.at(a.name) < 1) {
        ctx.error(ep, who + "axis " + quote(a.name) + " = " + std::to_string(names.at(a.name)) +
                          " must be >= 1");
        axes_ok = false;
      }
    }
    if (!axes_ok) continue;
    for (const auto& s : op.scalars) {
      if (dtype_is_float(s.type)) continue;
      auto it = w.scalars.find(s.name);
      names[s.name] = static_cast<std::int64_t>(it == w.scalars.end() ? s.value : it->second);
    }
    for (std::size_t i = 0; i < op.constraints.size(); ++i) {
      const jpath cp = (root / "constraints")[i];
      try {
        const auto cond = expr::condition::parse(op.constraints[i]);
        if (!cond.holds(expr::map_resolver(names))) {
          std::string vals;  // the values it was checked with
          for (const auto& n : cond.names())
            if (auto it = names.find(n); it != names.end())
              vals += (vals.empty() ? "" : ", ") + n + " = " + std::to_string(it->second);
          ctx.error(cp,
                    who + "violates constraint " + quote(op.constraints[i]) + " (" + vals + ")");
        }
      } catch (const expr::expr_error& e) {
        ctx.error(cp, who + "constraint " + quote(op.constraints[i]) + ": " + e.what());
      }
    }
    // Integer scalars are names only in constraints.
    for (const auto& s : op.scalars)
      if (!dtype_is_float(s.type)) names.erase(s.name);
    for (int io = 0; io < 2; ++io) {
      const auto& list = io == 0 ? op.inputs : op.outputs;
      const jpath lp = root / (io == 0 ? "inputs" : "outputs");
      for (const auto& t : list) {
        const jpath tp = lp / t.name;
        std::int64_t bytes = static_cast<std::int64_t>(dtype_size(t.type));
        bool dims_ok = true;
        std::int64_t last = 1;
        for (std::size_t d = 0; d < t.shape.size(); ++d) {
          auto v = eval((tp / "shape")[d], t.shape[d]);
          if (!v) {
            dims_ok = false;
            continue;
          }
          if (*v < 1) {
            ctx.error((tp / "shape")[d], who + "dimension " + quote(t.shape[d]) + " = " +
                                             std::to_string(*v) + " must be >= 1");
            dims_ok = false;
            continue;
          }
          last = *v;
          if (dims_ok && __builtin_mul_overflow(bytes, *v, &bytes)) {
            ctx.error(tp / "shape", who + "tensor size in bytes overflows int64");
            dims_ok = false;
          }
        }
        if (!t.gen) continue;
        const generator& g = *t.gen;
        const jpath gp = tp / "generator";
        if (g.k == generator::kind::int_range) {
          auto lo = eval(gp / "low", g.int_low);
          auto hi = eval(gp / "high", g.int_high);
          if (lo && hi) {
            if (*lo >= *hi) {
              ctx.error(gp / "high", who + "int_range needs low < high (high is exclusive), got [" +
                                         std::to_string(*lo) + ", " + std::to_string(*hi) + ")");
            } else {
              std::int64_t tmin = 0, tmax = 0;
              switch (t.type) {
                case dtype::int8:
                  tmin = -128;
                  tmax = 127;
                  break;
                case dtype::uint8:
                  tmin = 0;
                  tmax = 255;
                  break;
                case dtype::int16:
                  tmin = -32768;
                  tmax = 32767;
                  break;
                case dtype::int32:
                  tmin = std::numeric_limits<std::int32_t>::min();
                  tmax = std::numeric_limits<std::int32_t>::max();
                  break;
                case dtype::boolean:
                  tmin = 0;
                  tmax = 1;
                  break;
                default:
                  tmin = std::numeric_limits<std::int64_t>::min();
                  tmax = std::numeric_limits<std::int64_t>::max();
                  break;
              }
              if (*lo < tmin || *hi - 1 > tmax)
                ctx.error(gp, who + "int_range [" + std::to_string(*lo) + ", " +
                                  std::to_string(*hi) + ") does not fit in " +
                                  std::string(dtype_name(t.type)));
            }
          }
        } else if (g.k == generator::kind::permutation) {
          if (t.shape.empty()) {
            ctx.error(gp / "kind", "permutation needs a tensor with at least one dimension");
          } else {
            // n defaults to the last dimension (generator_json / inputs.cpp).
            auto n =
                g.int_high.empty() ? std::optional<std::int64_t>(last) : eval(gp / "n", g.int_high);
            const std::int64_t elements = bytes / static_cast<std::int64_t>(dtype_size(t.type));
            if (n && dims_ok && *n < last)
              ctx.error(gp / "n", who + "permutation of [0, " + std::to_string(*n) +
                                      ") cannot fill rows of length " + std::to_string(last));
            else if (n && dims_ok && g.disjoint_rows && *n < elements)
              ctx.error(gp / "n", who + "disjoint permutation of [0, " + std::to_string(*n) +
                                      ") cannot fill " + std::to_string(elements) +
                                      " elements without repeating a value");
          }
        }
      }
    }
    if (auto f = eval(root / "roofline" / "flops", op.roof.flops); f && *f < 0)
      ctx.error(root / "roofline" / "flops",
                who + "flops = " + std::to_string(*f) + " is negative");
    if (op.roof.bytes) {
      if (auto b = eval(root / "roofline" / "bytes", *op.roof.bytes); b && *b < 0)
        ctx.error(root / "roofline" / "bytes",
                  who + "bytes = " + std::to_string(*b) + " is negative");
    }
  }
}

}  // namespace

std::optional<operator_config> parse_operator(context& ctx, const json& doc,
                                              const std::filesystem::path& base_dir,
                                              const json_locator* loc) {
  const jpath root;
  object_reader top(ctx, doc, root,
                    {"$schema", "name", "op_type", "kb_class", "description", "tags", "axes",
                     "scalars", "inputs", "outputs", "tolerance", "roofline", "workloads",
                     "constraints", "reference", "baseline", "seed", "campaign", "integrity"});
  if (!top.valid()) return std::nullopt;
  operator_config op;
  bool ok = true;
  (void)top.string("$schema");
  if (auto n = top.string("name", true)) {
    op.name = *n;
    if (n->empty() || n->find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789_.-") != std::string::npos) {
      ctx.error(top.path("name"),
                "name must be non-empty and use only letters, digits, '_', '.', '-'");
      ok = false;
    }
  } else {
    ok = false;
  }
  if (auto s = top.string("op_type")) op.op_type = *s;
  if (auto s = top.string("kb_class")) {
    // The knowledge base's class names (knowledge_base/kb/document.cpp,
    // operator_classes()); config does not link the knowledge base.
    static const std::vector<std::string> classes = {
        "elementwise", "normalization", "reduction",    "softmax",   "gemm",
        "gemv",        "attention",     "quantization", "moe",       "sort-scan",
        "topk",        "kv-cache",      "convolution",  "recurrent", "any"};
    if (std::find(classes.begin(), classes.end(), *s) == classes.end()) {
      std::string all;
      for (const auto& c : classes) all += (all.empty() ? "" : ", ") + c;
      ctx.error(top.path("kb_class"), "unknown knowledge-base operator class " + quote(*s) +
                                          did_you_mean(*s, classes) + " (one of " + all + ")");
      ok = false;
    } else {
      op.kb_class = *s;
    }
  }
  if (auto s = top.string("description")) op.description = *s;
  if (const json* tags = top.get("tags")) {
    if (!tags->is_array()) {
      ctx.error(top.path("tags"), "expected an array of strings, got " + json_type_name(*tags));
      ok = false;
    } else {
      for (std::size_t i = 0; i < tags->size(); ++i) {
        if (auto s = as_string(ctx, (*tags)[i], top.path("tags")[i]))
          op.tags.push_back(*s);
        else
          ok = false;
      }
    }
  }
  if (const json* tj = top.get("tolerance")) {
    if (auto t = parse_tolerance(ctx, *tj, top.path("tolerance"), tolerance{}))
      op.tol = *t;
    else
      ok = false;
  }
  if (const json* ij = top.get("integrity")) {
    object_reader ir(ctx, *ij, top.path("integrity"),
                     {"allow_clock_reads", "private_fraction", "private_seed"});
    if (!ir.valid()) {
      ok = false;
    } else {
      if (auto a = ir.boolean("allow_clock_reads"))
        op.integ.allow_clock_reads = *a;
      else if (ir.has("allow_clock_reads"))
        ok = false;
      if (auto f = ir.number("private_fraction")) {
        if (!(*f > 0 && *f < 1)) {
          ctx.error(ir.path("private_fraction"),
                    "private_fraction must be > 0 and < 1 (the share of workloads kept private), "
                    "got " +
                        ir.get("private_fraction")->dump());
          ok = false;
        } else {
          op.integ.private_fraction = *f;
        }
      } else if (ir.has("private_fraction")) {
        ok = false;
      }
      if (auto sd = ir.integer("private_seed")) {
        op.integ.private_seed = *sd;
        if (!ir.has("private_fraction")) {
          ctx.error(ir.path("private_seed"), "private_seed is used only with private_fraction");
          ok = false;
        }
      } else if (ir.has("private_seed")) {
        ok = false;
      }
    }
  }
  name_registry reg;
  parse_axes(ctx, top, op, reg, ok);
  parse_scalars(ctx, top, op, reg, ok);
  parse_tensors(ctx, top, "inputs", true, op, reg, base_dir, ok);
  parse_tensors(ctx, top, "outputs", false, op, reg, base_dir, ok);
  // Outputs without an explicit tolerance use the operator's; keeping it
  // explicit makes the snapshot say exactly what is checked.
  for (auto& t : op.outputs)
    if (!t.tol) t.tol = op.tol;
  for (auto& t : op.inputs)
    if (t.in_place && !t.tol) t.tol = op.tol;
  parse_roofline(ctx, top, op, ok);
  parse_workloads(ctx, top, op, ok, loc);
  select_private_workloads(ctx, top, op, ok);
  parse_constraints(ctx, top, op, ok);
  parse_campaign(ctx, top, op, ok);

  struct cand_slot {
    const char* key;
    bool required;
  };
  std::map<std::string, candidate> cands;
  for (const cand_slot& s :
       {cand_slot{"reference", true}, cand_slot{"baseline", false}, cand_slot{"seed", false}}) {
    const json* cj = s.required ? top.require(s.key) : top.get(s.key);
    if (!cj) {
      if (s.required) ok = false;
      continue;
    }
    auto c = parse_candidate(ctx, *cj, top.path(s.key), op, base_dir);
    if (!c) {
      ok = false;
      continue;
    }
    cands.emplace(s.key, std::move(*c));
  }
  if (op.campaign.provider == "autotune") {
    auto it = cands.find("seed");
    if (it == cands.end() && ok)
      ctx.warning(root,
                  "provider \"autotune\" searches the seed's parameters, but there is no seed");
    else if (it != cands.end() && it->second.parameters.empty())
      ctx.warning(top.path("seed"),
                  "provider \"autotune\" searches the seed's parameters, but the seed has none");
  }

  // Only parts that parsed cleanly (names known) reach the model, so
  // evaluation reports new problems, never repeats of the ones above.
  check_operator_workloads(ctx, op);
  for (const auto& [key, c] : cands) check_candidate_workloads(ctx, c, top.path(key), op);
  if (!ok || ctx.failed()) return std::nullopt;

  op.reference = std::move(cands.at("reference"));
  if (auto it = cands.find("baseline"); it != cands.end()) op.baseline = std::move(it->second);
  if (auto it = cands.find("seed"); it != cands.end()) op.seed = std::move(it->second);
  return op;
}

}  // namespace kopt::config::detail
