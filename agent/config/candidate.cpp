// The candidate format (reference, baseline, seed, LLM answers): parsing,
// validation against the operator, the NVRTC option allow-list and the
// per-workload evaluation of launch plans.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "config/detail/context.hpp"

namespace kopt::config {

namespace {

struct option_rule {
  std::string_view prefix;  // exact option, or prefix ending in '='
  bool takes_value;
  std::vector<std::string_view> values;  // empty = any integer (maxrregcount)
};

const std::vector<option_rule>& allowed_options() {
  static const std::vector<option_rule> rules = {
      {"--use_fast_math", false, {}},
      {"-use_fast_math", false, {}},
      {"-lineinfo", false, {}},
      {"--generate-line-info", false, {}},
      {"--extra-device-vectorization", false, {}},
      {"-extra-device-vectorization", false, {}},
      {"--restrict", false, {}},
      {"--ftz=", true, {"true", "false"}},
      {"--prec-div=", true, {"true", "false"}},
      {"--prec-sqrt=", true, {"true", "false"}},
      {"--fmad=", true, {"true", "false"}},
      {"-maxrregcount=", true, {}},
      {"--maxrregcount=", true, {}},
      {"--std=", true, {"c++17", "c++20"}},
      {"-std=", true, {"c++17", "c++20"}},
  };
  return rules;
}

std::string allowed_list() {
  return "--use_fast_math, -lineinfo, --extra-device-vectorization, --restrict, "
         "--ftz=true|false, --prec-div=true|false, --prec-sqrt=true|false, --fmad=true|false, "
         "-maxrregcount=N (16..255), --std=c++17|c++20";
}

}  // namespace

std::optional<std::string> check_compile_option(std::string_view option) {
  for (const auto& r : allowed_options()) {
    if (!r.takes_value) {
      if (option == r.prefix) return std::nullopt;
      continue;
    }
    if (option.substr(0, r.prefix.size()) != r.prefix) continue;
    const std::string_view value = option.substr(r.prefix.size());
    if (r.values.empty()) {
      std::int64_t n = 0;
      bool digits = !value.empty() && value.size() <= 4;
      for (char c : value) {
        if (c < '0' || c > '9') digits = false;
        else n = n * 10 + (c - '0');
      }
      if (!digits || n < 16 || n > 255)
        return "maxrregcount needs an integer in 16..255, got \"" + std::string(value) + "\"";
      return std::nullopt;
    }
    if (std::find(r.values.begin(), r.values.end(), value) != r.values.end()) return std::nullopt;
    std::string vals;
    for (auto v : r.values) vals += (vals.empty() ? "" : ", ") + std::string(v);
    return std::string(r.prefix.substr(0, r.prefix.size() - 1)) + " takes one of " + vals +
           ", got \"" + std::string(value) + "\"";
  }
  // Known but refused options get a specific reason.
  auto starts = [&](std::string_view p) { return option.substr(0, p.size()) == p; };
  if (starts("-arch") || starts("--gpu-architecture") || starts("-gencode"))
    return "the worker chooses the target architecture; remove this option";
  if (starts("-D") || starts("--define-macro"))
    return "macros come from tunable parameters (\"parameters\"), not from -D";
  if (starts("-I") || starts("--include-path") || starts("-include") || starts("--pre-include"))
    return "include paths are not allowed: only the headers NVRTC ships can be used";
  if (option == "-G" || starts("--device-debug"))
    return "device debug code changes performance; use -lineinfo for source correlation";
  if (starts("-rdc") || starts("--relocatable-device-code") || starts("-dlto") ||
      starts("--dlink-time-opt"))
    return "separate compilation is not supported: one translation unit per candidate";
  if (starts("-O") || starts("--dopt") || starts("-dopt"))
    return "optimization level is fixed by the worker";
  return "not on the NVRTC option allow-list (allowed: " + allowed_list() + ")";
}

const parameter* candidate::find_parameter(std::string_view name) const noexcept {
  for (const auto& p : parameters)
    if (p.name == name) return &p;
  return nullptr;
}

std::map<std::string, std::int64_t, std::less<>> candidate::default_parameters() const {
  std::map<std::string, std::int64_t, std::less<>> out;
  for (const auto& p : parameters) out[p.name] = p.default_value;
  return out;
}

namespace detail {

namespace {

// Textual check that `name` is declared as a __global__ function: look at
// each `__global__` and the identifiers followed by '(' before the body or
// the end of the declaration.
bool declares_kernel(const std::string& source, const std::string& name) {
  std::size_t at = 0;
  while ((at = source.find("__global__", at)) != std::string::npos) {
    at += 10;
    const std::size_t end = source.find_first_of("{;", at);
    const std::string_view span(source.data() + at,
                                (end == std::string::npos ? source.size() : end) - at);
    std::size_t pos = 0;
    while ((pos = span.find(name, pos)) != std::string_view::npos) {
      const bool left_ok = pos == 0 || !(std::isalnum(static_cast<unsigned char>(span[pos - 1])) ||
                                         span[pos - 1] == '_');
      std::size_t after = pos + name.size();
      while (after < span.size() && std::isspace(static_cast<unsigned char>(span[after]))) ++after;
      if (left_ok && after < span.size() && span[after] == '(') return true;
      pos += name.size();
    }
  }
  return false;
}

std::vector<std::string> tensor_names(const operator_config& op) {
  std::vector<std::string> out;
  for (const auto& t : op.inputs) out.push_back(t.name);
  for (const auto& t : op.outputs) out.push_back(t.name);
  return out;
}

std::vector<std::string> axis_names(const operator_config& op) {
  std::vector<std::string> out;
  for (const auto& a : op.axes) out.push_back(a.name);
  return out;
}

// What a name already denotes in the operator, for duplicate-name messages.
std::optional<std::string> operator_name_kind(const operator_config& op, std::string_view name) {
  if (op.find_axis(name)) return "an axis";
  for (const auto& t : op.inputs)
    if (t.name == name) return "an input";
  for (const auto& t : op.outputs)
    if (t.name == name) return "an output";
  if (op.find_scalar(name)) return "a scalar";
  return std::nullopt;
}

std::vector<std::string> parse_dims(context& ctx, const object_reader& r, std::string_view key,
                                    bool required, const std::vector<std::string>& known) {
  std::vector<std::string> out;
  const json* v = required ? r.require(key) : r.get(key);
  if (!v) return out;
  const jpath p = r.path(key);
  if (!v->is_array()) {
    ctx.error(p, "expected an array of 1 to 3 expressions, got " + json_type_name(*v));
    return out;
  }
  if (v->empty() || v->size() > 3) {
    ctx.error(p, "needs 1 to 3 dimensions (x, y, z), got " + std::to_string(v->size()));
    return out;
  }
  for (std::size_t i = 0; i < v->size(); ++i) {
    auto e = as_expression(ctx, (*v)[i], p[i]);
    if (!e) {
      out.clear();
      continue;
    }
    if (!check_expression_names(ctx, p[i], *e, known, "name")) {
      out.clear();
      continue;
    }
    out.push_back(*e);
  }
  if (out.size() != v->size()) out.clear();
  return out;
}

}  // namespace

std::optional<candidate> parse_candidate(context& ctx, const json& j, const jpath& p,
                                         const operator_config& op,
                                         const std::filesystem::path& base_dir) {
  object_reader r(ctx, j, p,
                  {"source", "source_file", "launches", "parameters", "workspaces",
                   "compile_options"});
  if (!r.valid()) return std::nullopt;
  candidate c;
  bool ok = true;
  std::set<std::string, std::less<>> own_names;  // parameters and workspaces

  // Source: exactly one of source / source_file.
  const bool has_src = r.has("source"), has_file = r.has("source_file");
  if (has_src && has_file) {
    ctx.error(r.path("source_file"), "give either \"source\" or \"source_file\", not both", true);
    ok = false;
  } else if (!has_src && !has_file) {
    ctx.error(p, "missing required field \"source\" or \"source_file\"");
    ok = false;
  } else if (has_src) {
    if (auto s = r.string("source")) {
      c.source = *s;
      if (c.source.find_first_not_of(" \t\r\n") == std::string::npos) {
        ctx.error(r.path("source"), "source is empty");
        ok = false;
      }
    } else {
      ok = false;
    }
  } else if (auto f = r.string("source_file")) {
    c.source_file = *f;
    if (auto text = read_source_file(ctx, r.path("source_file"), *f, base_dir))
      c.source = std::move(*text);
    else
      ok = false;
  } else {
    ok = false;
  }

  // Parameters.
  if (const json* ps = r.get("parameters")) {
    const jpath pp = r.path("parameters");
    if (!ps->is_object()) {
      ctx.error(pp, "expected an object (parameter name -> {values, default}), got " +
                        json_type_name(*ps));
      ok = false;
    } else {
      for (const auto& [name, pj] : ps->items()) {
        const jpath ip = pp / name;
        parameter prm;
        prm.name = name;
        if (!expr::is_identifier(name) || expr::is_function_name(name)) {
          ctx.error(ip, "parameter name " + quote(name) +
                            " must be an identifier ([A-Za-z_][A-Za-z0-9_]*) and not a function name",
                    true);
          ok = false;
        } else if (auto kind = operator_name_kind(op, name)) {
          ctx.error(ip, "parameter " + quote(name) + " has the same name as " + *kind, true);
          ok = false;
        }
        own_names.insert(name);
        object_reader pr(ctx, pj, ip, {"values", "default"});
        if (!pr.valid()) {
          ok = false;
          continue;
        }
        const json* vals = pr.require("values");
        bool vals_ok = vals != nullptr;
        if (vals) {
          if (!vals->is_array() || vals->empty()) {
            ctx.error(pr.path("values"), "expected a non-empty array of integers");
            vals_ok = false;
          } else {
            for (std::size_t i = 0; i < vals->size(); ++i) {
              auto v = as_integer(ctx, (*vals)[i], pr.path("values")[i]);
              if (!v) {
                vals_ok = false;
                continue;
              }
              if (std::find(prm.values.begin(), prm.values.end(), *v) != prm.values.end()) {
                ctx.error(pr.path("values")[i], "duplicate value " + std::to_string(*v));
                vals_ok = false;
              }
              prm.values.push_back(*v);
            }
          }
        }
        if (!vals_ok) ok = false;
        if (pr.has("default")) {
          auto d = pr.integer("default");
          if (!d) {
            ok = false;
          } else {
            prm.default_value = *d;
            if (vals_ok &&
                std::find(prm.values.begin(), prm.values.end(), *d) == prm.values.end()) {
              std::string list;
              for (auto v : prm.values) list += (list.empty() ? "" : ", ") + std::to_string(v);
              ctx.error(pr.path("default"),
                        "default " + std::to_string(*d) + " is not one of the values [" + list + "]");
              ok = false;
            }
          }
        } else if (vals_ok) {
          prm.default_value = prm.values.front();
        }
        c.parameters.push_back(std::move(prm));
      }
    }
  }

  std::vector<std::string> known = axis_names(op);
  for (const auto& prm : c.parameters) known.push_back(prm.name);
  const std::string known_desc = "name";

  // Workspaces.
  if (const json* ws = r.get("workspaces")) {
    const jpath wp = r.path("workspaces");
    if (!ws->is_object()) {
      ctx.error(wp, "expected an object (workspace name -> {bytes, zero_init}), got " +
                        json_type_name(*ws));
      ok = false;
    } else {
      for (const auto& [name, wj] : ws->items()) {
        const jpath ip = wp / name;
        workspace w;
        w.name = name;
        if (!expr::is_identifier(name)) {
          ctx.error(ip, "workspace name " + quote(name) + " must be an identifier", true);
          ok = false;
        } else if (auto kind = operator_name_kind(op, name)) {
          ctx.error(ip, "workspace " + quote(name) + " has the same name as " + *kind, true);
          ok = false;
        } else if (own_names.count(name)) {
          ctx.error(ip, "workspace " + quote(name) + " has the same name as a parameter", true);
          ok = false;
        }
        own_names.insert(name);
        object_reader wr(ctx, wj, ip, {"bytes", "zero_init"});
        if (!wr.valid()) {
          ok = false;
          continue;
        }
        if (const json* b = wr.require("bytes")) {
          if (auto e = as_expression(ctx, *b, wr.path("bytes"))) {
            if (!check_expression_names(ctx, wr.path("bytes"), *e, known, known_desc)) ok = false;
            w.bytes = *e;
          } else {
            ok = false;
          }
        } else {
          ok = false;
        }
        if (auto z = wr.boolean("zero_init")) w.zero_init = *z;
        c.workspaces.push_back(std::move(w));
      }
    }
  }

  // Compile options.
  if (const json* co = r.get("compile_options")) {
    const jpath cp = r.path("compile_options");
    if (!co->is_array()) {
      ctx.error(cp, "expected an array of strings, got " + json_type_name(*co));
      ok = false;
    } else {
      for (std::size_t i = 0; i < co->size(); ++i) {
        auto s = as_string(ctx, (*co)[i], cp[i]);
        if (!s) {
          ok = false;
          continue;
        }
        if (auto why = check_compile_option(*s)) {
          ctx.error(cp[i], "compile option " + quote(*s) + " is not allowed: " + *why);
          ok = false;
        }
        c.compile_options.push_back(*s);
      }
    }
  }

  // Launches.
  const std::vector<std::string> tensors = tensor_names(op);
  std::vector<std::string> scalars;
  for (const auto& s : op.scalars) scalars.push_back(s.name);
  std::vector<std::string> workspaces;
  for (const auto& w : c.workspaces) workspaces.push_back(w.name);
  std::set<std::string, std::less<>> passed_tensors;

  if (const json* ls = r.require("launches")) {
    const jpath lp = r.path("launches");
    if (!ls->is_array()) {
      ctx.error(lp, "expected an array of launches, got " + json_type_name(*ls));
      ok = false;
    } else if (ls->empty()) {
      ctx.error(lp, "needs at least one launch");
      ok = false;
    }
    for (std::size_t li = 0; ls->is_array() && li < ls->size(); ++li) {
      const jpath ip = lp[li];
      object_reader lr(ctx, (*ls)[li], ip,
                       {"kernel", "grid", "block", "cluster", "shared_bytes", "args"});
      if (!lr.valid()) {
        ok = false;
        continue;
      }
      launch l;
      if (auto k = lr.string("kernel", true)) {
        l.kernel = *k;
        if (!expr::is_identifier(*k)) {
          ctx.error(lr.path("kernel"), "kernel name " + quote(*k) + " is not an identifier");
          ok = false;
        } else if (!c.source.empty() && !declares_kernel(c.source, *k)) {
          ctx.warning(lr.path("kernel"),
                      "kernel " + quote(*k) +
                          " not found as a __global__ function in the source (textual check)");
        }
      } else {
        ok = false;
      }
      l.grid = parse_dims(ctx, lr, "grid", true, known);
      l.block = parse_dims(ctx, lr, "block", true, known);
      if (l.grid.empty() || l.block.empty()) ok = false;
      if (lr.has("cluster")) {
        l.cluster = parse_dims(ctx, lr, "cluster", false, known);
        if (l.cluster.empty()) ok = false;
      }
      if (const json* sb = lr.get("shared_bytes")) {
        if (auto e = as_expression(ctx, *sb, lr.path("shared_bytes"))) {
          if (!check_expression_names(ctx, lr.path("shared_bytes"), *e, known, known_desc))
            ok = false;
          l.shared_bytes = *e;
        } else {
          ok = false;
        }
      }
      if (const json* as = lr.require("args")) {
        const jpath ap = lr.path("args");
        if (!as->is_array()) {
          ctx.error(ap, "expected an array of arguments, got " + json_type_name(*as));
          ok = false;
        }
        for (std::size_t ai = 0; as->is_array() && ai < as->size(); ++ai) {
          const jpath xp = ap[ai];
          const json& aj = (*as)[ai];
          if (!aj.is_object()) {
            ctx.error(xp, "expected an argument object such as {\"tensor\": \"x\"}, got " +
                              json_type_name(aj));
            ok = false;
            continue;
          }
          std::vector<std::string> kinds;
          for (const char* k : {"tensor", "workspace", "int", "scalar"})
            if (aj.contains(k)) kinds.emplace_back(k);
          if (kinds.size() != 1) {
            ctx.error(xp, kinds.empty()
                              ? "an argument needs exactly one of \"tensor\", \"workspace\", "
                                "\"int\", \"scalar\""
                              : "an argument has exactly one of \"tensor\", \"workspace\", \"int\", "
                                "\"scalar\"; found " + std::to_string(kinds.size()));
            // Still report unknown fields.
            object_reader(ctx, aj, xp, {"tensor", "workspace", "int", "scalar", "type"});
            ok = false;
            continue;
          }
          const std::string& kind = kinds.front();
          const bool typed = kind == "int" || kind == "scalar";
          object_reader ar(ctx, aj, xp,
                           typed ? std::vector<std::string>{kind, "type"}
                                 : std::vector<std::string>{kind});
          launch_arg a;
          if (kind == "int") {
            a.k = launch_arg::kind::integer;
            if (auto e = as_expression(ctx, *ar.get("int"), ar.path("int"))) {
              if (!check_expression_names(ctx, ar.path("int"), *e, known, known_desc)) ok = false;
              a.name = *e;
            } else {
              ok = false;
            }
          } else {
            auto s = ar.string(kind);
            if (!s) {
              ok = false;
              continue;
            }
            a.name = *s;
            const std::vector<std::string>& pool =
                kind == "tensor" ? tensors : kind == "workspace" ? workspaces : scalars;
            if (std::find(pool.begin(), pool.end(), *s) == pool.end() && ctx.is_broken(*s)) {
              ok = false;
            } else if (std::find(pool.begin(), pool.end(), *s) == pool.end()) {
              std::string msg = "unknown " + kind + " " + quote(*s);
              if (pool.empty()) {
                msg += kind == "workspace" ? " (this candidate declares no workspaces)"
                                           : " (the operator declares no " + kind + "s)";
              }
              msg += did_you_mean(*s, pool);
              ctx.error(ar.path(kind), msg);
              ok = false;
            }
            if (kind == "tensor") {
              a.k = launch_arg::kind::tensor;
              passed_tensors.insert(*s);
            } else if (kind == "workspace") {
              a.k = launch_arg::kind::workspace;
            } else {
              a.k = launch_arg::kind::scalar;
              if (const scalar* sc = op.find_scalar(*s)) a.type = sc->type;
            }
          }
          if (typed && !ar.has("type") && kind == "int") a.type = dtype::int32;
          if (auto t = ar.string("type")) {
            auto dt = parse_dtype(*t);
            const bool allowed =
                dt && (*dt == dtype::int32 || *dt == dtype::int64 ||
                       (kind == "scalar" && (*dt == dtype::float32 || *dt == dtype::float64)));
            if (!allowed) {
              const std::vector<std::string> choices =
                  kind == "int" ? std::vector<std::string>{"int32", "int64"}
                                : std::vector<std::string>{"float32", "float64", "int32", "int64"};
              ctx.error(ar.path("type"), "type " + quote(*t) + " is not allowed for an " + kind +
                                             " argument (use " +
                                             (kind == "int" ? "int32 or int64"
                                                            : "float32, float64, int32 or int64") +
                                             ")" + did_you_mean(*t, choices));
              ok = false;
            } else {
              a.type = *dt;
            }
          }
          l.args.push_back(std::move(a));
        }
      }
      c.launches.push_back(std::move(l));
    }
  } else {
    ok = false;
  }

  if (ok) {
    for (const auto& t : op.outputs) {
      if (!passed_tensors.count(t.name))
        ctx.warning(r.path("launches"), "output " + quote(t.name) + " is not passed to any launch");
    }
  }
  if (!ok) return std::nullopt;
  return c;
}

namespace {

struct eval_scope {
  context& ctx;
  const workload& w;
  const std::map<std::string, std::int64_t, std::less<>>& names;
  bool ok = true;

  std::optional<std::int64_t> eval(const jpath& p, const std::string& text) {
    try {
      return expr::evaluate(text, expr::map_resolver(names));
    } catch (const expr::expr_error& e) {
      ctx.expr_problem(p, e, text, "workload " + quote(w.id) + ": ");
      ok = false;
      return std::nullopt;
    }
  }
  void fail(const jpath& p, const std::string& msg) {
    ctx.error(p, "workload " + quote(w.id) + ": " + msg);
    ok = false;
  }
};

}  // namespace

void check_candidate_workloads(context& ctx, const candidate& c, const jpath& p,
                               const operator_config& op, bool oversized_shared_is_error) {
  const auto params = c.default_parameters();
  constexpr std::int64_t max_shared = 232448;  // 227 KiB: H100/H200 opt-in maximum
  for (const auto& w : op.workloads) {
    const auto names = workload_names(op, w, params);
    eval_scope s{ctx, w, names};
    for (std::size_t li = 0; li < c.launches.size(); ++li) {
      const launch& l = c.launches[li];
      const jpath lp = p / "launches";
      const jpath ip = lp[li];
      std::vector<std::int64_t> grid, block, cluster;
      static const char* axis_letter[] = {"x", "y", "z"};
      for (std::size_t d = 0; d < l.grid.size(); ++d) {
        auto v = s.eval((ip / "grid")[d], l.grid[d]);
        if (!v) continue;
        const std::int64_t limit = d == 0 ? 2147483647 : 65535;
        if (*v < 1)
          s.fail((ip / "grid")[d], "grid." + std::string(axis_letter[d]) + " = " +
                                      std::to_string(*v) + " must be >= 1 (expression " +
                                      quote(l.grid[d]) + ")");
        else if (*v > limit)
          s.fail((ip / "grid")[d], "grid." + std::string(axis_letter[d]) + " = " +
                                      std::to_string(*v) + " exceeds the limit " +
                                      std::to_string(limit));
        grid.push_back(*v);
      }
      for (std::size_t d = 0; d < l.block.size(); ++d) {
        auto v = s.eval((ip / "block")[d], l.block[d]);
        if (!v) continue;
        const std::int64_t limit = d == 2 ? 64 : 1024;
        if (*v < 1)
          s.fail((ip / "block")[d], "block." + std::string(axis_letter[d]) + " = " +
                                       std::to_string(*v) + " must be >= 1 (expression " +
                                       quote(l.block[d]) + ")");
        else if (*v > limit)
          s.fail((ip / "block")[d], "block." + std::string(axis_letter[d]) + " = " +
                                       std::to_string(*v) + " exceeds the limit " +
                                       std::to_string(limit));
        block.push_back(*v);
      }
      if (block.size() == l.block.size()) {
        std::int64_t threads = 1;
        bool positive = true;
        for (auto b : block) {
          positive = positive && b >= 1;
          if (b >= 1 && b <= 1024) threads *= b;
        }
        if (positive && threads > 1024)
          s.fail(ip / "block", std::to_string(threads) + " threads per block exceed 1024");
      }
      for (std::size_t d = 0; d < l.cluster.size(); ++d) {
        auto v = s.eval((ip / "cluster")[d], l.cluster[d]);
        if (!v) continue;
        if (*v < 1) {
          s.fail((ip / "cluster")[d], "cluster." + std::string(axis_letter[d]) + " = " +
                                         std::to_string(*v) + " must be >= 1");
        } else if (d < grid.size() && grid.size() == l.grid.size() && grid[d] >= 1 &&
                   grid[d] % *v != 0) {
          s.fail((ip / "cluster")[d], "grid." + std::string(axis_letter[d]) + " = " +
                                         std::to_string(grid[d]) +
                                         " is not a multiple of cluster." + axis_letter[d] +
                                         " = " + std::to_string(*v));
        }
        cluster.push_back(*v);
      }
      if (cluster.size() == l.cluster.size() && !cluster.empty()) {
        std::int64_t n = 1;
        for (auto v : cluster) n *= std::clamp<std::int64_t>(v, 1, 1024);
        if (n > 16) s.fail(ip / "cluster", "cluster of " + std::to_string(n) + " blocks exceeds 16");
      }
      if (auto v = s.eval(ip / "shared_bytes", l.shared_bytes)) {
        if (*v < 0)
          s.fail(ip / "shared_bytes", "shared_bytes = " + std::to_string(*v) + " is negative");
        else if (*v > max_shared && oversized_shared_is_error)
          // No GPU gives a block more (sm_90 and sm_100 opt-in maximum), so
          // this launch can only fail: an error now, not on the GPU later.
          s.fail(ip / "shared_bytes", "shared_bytes = " + std::to_string(*v) +
                                          " exceeds 232448 (227 KiB, the largest opt-in shared "
                                          "memory per block of any target, sm_90 included)");
        else if (*v > max_shared)
          ctx.warning(ip / "shared_bytes", "workload " + quote(w.id) + ": shared_bytes = " +
                                               std::to_string(*v) +
                                               " exceeds 232448 (227 KiB, the H100/H200 maximum)");
      }
      for (std::size_t ai = 0; ai < l.args.size(); ++ai) {
        const launch_arg& a = l.args[ai];
        if (a.k != launch_arg::kind::integer) continue;
        const jpath xp = (ip / "args")[ai] / "int";
        auto v = s.eval(xp, a.name);
        if (v && a.type == dtype::int32 &&
            (*v < std::numeric_limits<std::int32_t>::min() ||
             *v > std::numeric_limits<std::int32_t>::max()))
          s.fail(xp, "value " + std::to_string(*v) + " of " + quote(a.name) +
                         " does not fit in int32 (use \"type\": \"int64\")");
      }
    }
    for (const auto& ws : c.workspaces) {
      const jpath wp = p / "workspaces" / ws.name / "bytes";
      if (auto v = s.eval(wp, ws.bytes); v && *v < 0)
        s.fail(wp, "workspace size " + std::to_string(*v) + " is negative");
    }
  }
}

}  // namespace detail
}  // namespace kopt::config
