#include "config/operator.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/hash.hpp"
#include "common/text.hpp"
#include "config/detail/context.hpp"
#include "config/detail/json_locator.hpp"
#include "config/detail/validate.hpp"
#include "config/expr.hpp"

namespace kopt::config {

namespace {

struct dtype_info {
  dtype type;
  std::string_view name;
  std::size_t size;
};

constexpr dtype_info dtype_table[] = {
    {dtype::float64, "float64", 8},
    {dtype::float32, "float32", 4},
    {dtype::float16, "float16", 2},
    {dtype::bfloat16, "bfloat16", 2},
    {dtype::float8_e4m3fn, "float8_e4m3fn", 1},
    {dtype::float8_e5m2, "float8_e5m2", 1},
    {dtype::int64, "int64", 8},
    {dtype::int32, "int32", 4},
    {dtype::int16, "int16", 2},
    {dtype::int8, "int8", 1},
    {dtype::uint8, "uint8", 1},
    {dtype::boolean, "bool", 1},
};

const dtype_info& info(dtype t) noexcept {
  for (const auto& d : dtype_table)
    if (d.type == t) return d;
  return dtype_table[0];
}

}  // namespace

std::string_view dtype_name(dtype t) noexcept {
  return info(t).name;
}

const char* tolerance_form_name(tolerance_form f) noexcept {
  return f == tolerance_form::sum ? "sum" : "max_of";
}

std::optional<dtype> parse_dtype(std::string_view name) noexcept {
  for (const auto& d : dtype_table)
    if (d.name == name) return d.type;
  return std::nullopt;
}

std::size_t dtype_size(dtype t) noexcept {
  return info(t).size;
}

bool dtype_is_float(dtype t) noexcept {
  switch (t) {
    case dtype::float64:
    case dtype::float32:
    case dtype::float16:
    case dtype::bfloat16:
    case dtype::float8_e4m3fn:
    case dtype::float8_e5m2:
      return true;
    default:
      return false;
  }
}

bool dtype_is_integer(dtype t) noexcept {
  return !dtype_is_float(t);
}

const std::vector<std::string_view>& dtype_names() noexcept {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& d : dtype_table) v.push_back(d.name);
    return v;
  }();
  return names;
}

const std::vector<std::string_view>& flop_unit_names() noexcept {
  static const std::vector<std::string_view> names = {
      "fp64",        "fp32",        "fp16",       "bf16",        "tf32_tensor",
      "bf16_tensor", "fp16_tensor", "fp8_tensor", "int8_tensor", "fp64_tensor"};
  return names;
}

const std::vector<std::string_view>& provider_names() noexcept {
  static const std::vector<std::string_view> names = {"autotune", "openai", "anthropic",
                                                      "command",  "replay", "agent"};
  return names;
}

// ---------------------------------------------------------------- canonical JSON

namespace {

using json = nlohmann::json;

// Non-default settings only, so that the snapshots (and content hashes) of
// configs written before these keys existed do not change.
json tolerance_json(const tolerance& t) {
  json j = {{"atol", t.atol}, {"rtol", t.rtol}, {"matched_ratio", t.matched_ratio}};
  if (t.form != tolerance_form::max_of) j["form"] = tolerance_form_name(t.form);
  return j;
}

json generator_json(const generator& g) {
  switch (g.k) {
    case generator::kind::normal:
      return {{"kind", "normal"}, {"mean", g.mean}, {"stddev", g.stddev}, {"scale", g.scale}};
    case generator::kind::uniform:
      return {{"kind", "uniform"}, {"low", g.low}, {"high", g.high}, {"scale", g.scale}};
    case generator::kind::int_range:
      return {{"kind", "int_range"}, {"low", g.int_low}, {"high", g.int_high}};
    case generator::kind::permutation: {
      json j = {{"kind", "permutation"}};
      if (!g.int_high.empty()) j["n"] = g.int_high;
      if (g.disjoint_rows) j["disjoint"] = true;
      return j;
    }
    case generator::kind::constant:
      return {{"kind", "constant"}, {"value", g.value}};
    case generator::kind::kernel:
      return {{"kind", "kernel"}, {"source", g.kernel_source}, {"kernel", g.kernel_name}};
  }
  return {};
}

json tensor_json(const tensor& t, bool is_input) {
  json j = {{"shape", t.shape}, {"dtype", dtype_name(t.type)}, {"description", t.description}};
  if (is_input) {
    j["in_place"] = t.in_place;
    if (t.gen) j["generator"] = generator_json(*t.gen);
  }
  if (t.tol) j["tolerance"] = tolerance_json(*t.tol);
  return j;
}

json arg_json(const launch_arg& a) {
  switch (a.k) {
    case launch_arg::kind::tensor:
      return {{"tensor", a.name}};
    case launch_arg::kind::workspace:
      return {{"workspace", a.name}};
    case launch_arg::kind::integer:
      return {{"int", a.name}, {"type", dtype_name(a.type)}};
    case launch_arg::kind::scalar:
      return {{"scalar", a.name}, {"type", dtype_name(a.type)}};
  }
  return {};
}

}  // namespace

nlohmann::json candidate::to_json() const {
  json launches_j = json::array();
  for (const auto& l : launches) {
    json lj = {{"kernel", l.kernel},
               {"grid", l.grid},
               {"block", l.block},
               {"shared_bytes", l.shared_bytes}};
    if (!l.cluster.empty()) lj["cluster"] = l.cluster;
    json args = json::array();
    for (const auto& a : l.args) args.push_back(arg_json(a));
    lj["args"] = std::move(args);
    launches_j.push_back(std::move(lj));
  }
  json params = json::object();
  for (const auto& p : parameters)
    params[p.name] = {{"values", p.values}, {"default", p.default_value}};
  json ws = json::object();
  for (const auto& w : workspaces) ws[w.name] = {{"bytes", w.bytes}, {"zero_init", w.zero_init}};
  return {{"source", source},
          {"launches", std::move(launches_j)},
          {"parameters", std::move(params)},
          {"workspaces", std::move(ws)},
          {"compile_options", compile_options}};
}

nlohmann::json operator_config::snapshot() const {
  json j;
  j["name"] = name;
  j["op_type"] = op_type;
  if (!kb_class.empty()) j["kb_class"] = kb_class;  // only when set: hashes stay
  j["description"] = description;
  j["tags"] = tags;
  json axes_j = json::object();
  for (const auto& a : axes) {
    json aj = {{"type", a.is_const    ? "const"
                        : a.is_expr() ? "expr"
                                      : "var"},
               {"description", a.description}};
    if (a.is_const) aj["value"] = a.value;
    if (a.is_expr()) aj["expression"] = a.expression;
    axes_j[a.name] = std::move(aj);
  }
  j["axes"] = std::move(axes_j);
  json scalars_j = json::object();
  for (const auto& s : scalars) {
    json sj = {{"dtype", dtype_name(s.type)}, {"description", s.description}};
    if (dtype_is_float(s.type))
      sj["value"] = s.value;
    else
      sj["value"] = static_cast<std::int64_t>(s.value);
    scalars_j[s.name] = std::move(sj);
  }
  j["scalars"] = std::move(scalars_j);
  json in = json::object(), out = json::object();
  for (const auto& t : inputs) in[t.name] = tensor_json(t, true);
  for (const auto& t : outputs) out[t.name] = tensor_json(t, false);
  j["inputs"] = std::move(in);
  j["outputs"] = std::move(out);
  j["tolerance"] = tolerance_json(tol);
  if (integ.allow_clock_reads) j["integrity"]["allow_clock_reads"] = true;
  if (integ.private_fraction) {
    j["integrity"]["private_fraction"] = *integ.private_fraction;
    j["integrity"]["private_seed"] = integ.private_seed;
  }
  json roof_j = {{"flops", roof.flops}, {"flop_unit", roof.flop_unit}};
  if (roof.bytes) roof_j["bytes"] = *roof.bytes;
  j["roofline"] = std::move(roof_j);
  json wl = json::array();
  for (const auto& w : workloads) {
    json wj = {{"id", w.id}, {"weight", w.weight}, {"description", w.description}};
    // Only the hand-marked flag: the fraction's choice is remade from the
    // rule (integrity.private_*) when the snapshot is loaded.
    if (w.is_private && !w.private_by_fraction) wj["private"] = true;
    json ax = json::object();
    for (const auto& [k, v] : w.axes) ax[k] = v;
    wj["axes"] = std::move(ax);
    json sc = json::object();
    for (const auto& [k, v] : w.scalars) sc[k] = v;
    wj["scalars"] = std::move(sc);
    // Only when set, so that configs without it keep their content hash.
    if (w.tol) wj["tolerance"] = tolerance_json(*w.tol);
    wl.push_back(std::move(wj));
  }
  j["workloads"] = std::move(wl);
  if (!constraints.empty()) j["constraints"] = constraints;
  j["reference"] = reference.to_json();
  if (baseline) j["baseline"] = baseline->to_json();
  if (seed) j["seed"] = seed->to_json();
  json budget_j = json::object();
  if (campaign.limits.iterations) budget_j["iterations"] = *campaign.limits.iterations;
  if (campaign.limits.wall_time_s) budget_j["wall_time_s"] = *campaign.limits.wall_time_s;
  if (campaign.limits.tokens) budget_j["tokens"] = *campaign.limits.tokens;
  if (campaign.limits.cost_usd) budget_j["cost_usd"] = *campaign.limits.cost_usd;
  j["campaign"] = {{"provider", campaign.provider},
                   {"model", campaign.model},
                   {"budget", std::move(budget_j)},
                   {"target_sol_fraction", campaign.target_sol_fraction},
                   {"candidates_per_iteration", campaign.candidates_per_iteration},
                   {"dropout_p", campaign.dropout_p},
                   {"seed", campaign.seed}};
  return j;
}

std::string operator_config::content_hash() const {
  return kopt::sha256_hex(snapshot().dump());
}

const tensor* operator_config::find_tensor(std::string_view n) const noexcept {
  for (const auto& t : inputs)
    if (t.name == n) return &t;
  for (const auto& t : outputs)
    if (t.name == n) return &t;
  return nullptr;
}

const axis* operator_config::find_axis(std::string_view n) const noexcept {
  for (const auto& a : axes)
    if (a.name == n) return &a;
  return nullptr;
}

const scalar* operator_config::find_scalar(std::string_view n) const noexcept {
  for (const auto& s : scalars)
    if (s.name == n) return &s;
  return nullptr;
}

const workload* operator_config::find_workload(std::string_view id) const noexcept {
  for (const auto& w : workloads)
    if (w.id == id) return &w;
  return nullptr;
}

// ---------------------------------------------------------------- diagnostics

std::string diagnostic::to_string() const {
  std::string out = file.empty() ? std::string("<input>") : file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (column > 0) out += ":" + std::to_string(column);
  }
  out += level == severity::error ? ": error: " : ": warning: ";
  if (!path.empty()) out += path + ": ";
  out += message;
  return out;
}

bool has_errors(const std::vector<diagnostic>& diagnostics) noexcept {
  return std::any_of(diagnostics.begin(), diagnostics.end(),
                     [](const diagnostic& d) { return d.level == diagnostic::severity::error; });
}

// ---------------------------------------------------------------- loading

namespace {

// Syntax check with positions, then the DOM. Returns nullopt (with
// diagnostics in ctx) when the text is not a JSON document.
std::optional<json> parse_json(std::string_view text, detail::context& ctx,
                               const detail::json_locator& loc, const std::string& label) {
  for (const auto& p : loc.problems()) {
    diagnostic d;
    d.file = label;
    d.line = p.where.line;
    d.column = p.where.column;
    d.message = p.message;
    ctx.add(d);
  }
  if (!loc.syntax_ok()) return std::nullopt;
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // The scanner accepted it, so this is something it does not check
    // (invalid UTF-8 in a string, for instance).
    diagnostic d;
    d.file = label;
    const auto where = loc.position_of(e.byte > 0 ? e.byte - 1 : 0);
    d.line = where.line;
    d.column = where.column;
    d.message = std::string("JSON syntax error: ") + e.what();
    ctx.add(d);
    return std::nullopt;
  } catch (const json::exception& e) {
    // Anything else nlohmann refuses (out_of_range and the like) is still a
    // problem of the file, never an internal error.
    diagnostic d;
    d.file = label;
    d.message = std::string("cannot read the JSON document: ") + e.what();
    ctx.add(d);
    return std::nullopt;
  }
}

bool read_file(const std::filesystem::path& file, std::string& out, std::string& why) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    why = std::strerror(errno);
    return false;
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) {
    why = "read error";
    return false;
  }
  out = buf.str();
  return true;
}

diagnostic file_problem(const std::filesystem::path& file, const std::string& why) {
  diagnostic d;
  d.file = printable_utf8(file.string());
  d.message = "cannot read " + d.file + ": " + why;
  return d;
}

std::filesystem::path dir_of(const std::filesystem::path& file) {
  auto dir = file.parent_path();
  return dir.empty() ? std::filesystem::path(".") : dir;
}

}  // namespace

load_result load_operator_text(std::string_view text, const std::string& file_label,
                               const std::filesystem::path& base_dir, const file_policy& policy) {
  load_result result;
  detail::json_locator loc(text);
  detail::context ctx(file_label, &loc, &policy);
  auto doc = parse_json(text, ctx, loc, file_label);
  if (doc) {
    auto op = detail::parse_operator(ctx, *doc, base_dir, &loc);
    if (op && !ctx.failed() && loc.problems().empty()) result.op = std::move(op);
  }
  result.diagnostics = ctx.take();
  if (has_errors(result.diagnostics)) result.op.reset();
  return result;
}

load_result load_operator_file(const std::filesystem::path& file, const file_policy& policy) {
  std::string text, why;
  if (std::error_code ec; std::filesystem::is_directory(file, ec)) {
    load_result r;
    r.diagnostics.push_back(file_problem(file, "is a directory"));
    return r;
  }
  if (!read_file(file, text, why)) {
    load_result r;
    r.diagnostics.push_back(file_problem(file, why));
    return r;
  }
  // The label goes into diagnostics, which --json prints: a file name that
  // is not UTF-8 is shown with \xNN escapes.
  load_result r = load_operator_text(text, printable_utf8(file.string()), dir_of(file), policy);
  if (r.op) r.op->file = file;
  return r;
}

candidate_result load_candidate_text(std::string_view text, const std::string& file_label,
                                     const std::filesystem::path& base_dir,
                                     const operator_config& op) {
  candidate_result result;
  detail::json_locator loc(text);
  detail::context ctx(file_label, &loc);
  if (auto doc = parse_json(text, ctx, loc, file_label)) {
    const detail::jpath root;
    auto c = detail::parse_candidate(ctx, *doc, root, op, base_dir);
    if (c)
      detail::check_candidate_workloads(ctx, *c, root, op, /*oversized_shared_is_error=*/false);
    if (c && !ctx.failed()) result.cand = std::move(c);
  }
  result.diagnostics = ctx.take();
  if (has_errors(result.diagnostics)) result.cand.reset();
  return result;
}

candidate_result load_candidate_file(const std::filesystem::path& file, const operator_config& op) {
  std::string text, why;
  if (!read_file(file, text, why)) {
    candidate_result r;
    r.diagnostics.push_back(file_problem(file, why));
    return r;
  }
  return load_candidate_text(text, printable_utf8(file.string()), dir_of(file), op);
}

// ---------------------------------------------------------------- evaluation

std::map<std::string, std::int64_t, std::less<>> workload_names(
    const operator_config& op, const workload& w,
    const std::map<std::string, std::int64_t, std::less<>>& parameters) {
  std::map<std::string, std::int64_t, std::less<>> names;
  for (const auto& a : op.axes)
    if (a.is_const) names[a.name] = a.value;
  for (const auto& [k, v] : w.axes) names[k] = v;
  // Expr axes may refer to each other: resolve in passes until none is left
  // or a pass makes no progress (a cycle or an unknown name).
  std::vector<const axis*> pending;
  for (const auto& a : op.axes)
    if (a.is_expr()) pending.push_back(&a);
  while (!pending.empty()) {
    std::vector<const axis*> next;
    for (const axis* a : pending) {
      try {
        names[a->name] = expr::evaluate(a->expression, expr::map_resolver(names));
      } catch (const expr::expr_error&) {
        next.push_back(a);
      }
    }
    if (next.size() == pending.size()) break;
    pending = std::move(next);
  }
  for (const auto& [k, v] : parameters) names[k] = v;
  return names;
}

namespace {

std::int64_t eval_or_throw(const std::string& text,
                           const std::map<std::string, std::int64_t, std::less<>>& names,
                           const std::string& what, const workload& w) {
  try {
    return expr::evaluate(text, expr::map_resolver(names));
  } catch (const expr::expr_error& e) {
    throw config_error(what + " (\"" + text + "\") for workload \"" + w.id + "\": " + e.what());
  }
}

}  // namespace

std::vector<std::int64_t> tensor_shape(const operator_config& op, const tensor& t,
                                       const workload& w) {
  const auto names = workload_names(op, w);
  std::vector<std::int64_t> out;
  for (std::size_t d = 0; d < t.shape.size(); ++d) {
    const std::int64_t v = eval_or_throw(
        t.shape[d], names, "tensor \"" + t.name + "\" dimension " + std::to_string(d), w);
    if (v < 1)
      throw config_error("tensor \"" + t.name + "\" dimension " + std::to_string(d) + " is " +
                         std::to_string(v) + " for workload \"" + w.id + "\"");
    out.push_back(v);
  }
  return out;
}

std::int64_t tensor_bytes(const operator_config& op, const tensor& t, const workload& w) {
  auto bytes = static_cast<std::int64_t>(dtype_size(t.type));
  for (std::int64_t d : tensor_shape(op, t, w)) {
    if (__builtin_mul_overflow(bytes, d, &bytes))
      throw config_error("size of tensor \"" + t.name + "\" overflows int64 for workload \"" +
                         w.id + "\"");
  }
  return bytes;
}

std::int64_t roofline_flops(const operator_config& op, const workload& w) {
  return eval_or_throw(op.roof.flops, workload_names(op, w), "roofline.flops", w);
}

std::int64_t roofline_bytes(const operator_config& op, const workload& w) {
  if (op.roof.bytes)
    return eval_or_throw(*op.roof.bytes, workload_names(op, w), "roofline.bytes", w);
  std::int64_t total = 0;
  auto add = [&](std::int64_t b) {
    if (__builtin_add_overflow(total, b, &total))
      throw config_error("default roofline bytes overflow int64 for workload \"" + w.id + "\"");
  };
  for (const auto& t : op.inputs) {
    const std::int64_t b = tensor_bytes(op, t, w);
    add(b);
    if (t.in_place) add(b);  // read and written back
  }
  for (const auto& t : op.outputs) add(tensor_bytes(op, t, w));
  return total;
}

std::vector<std::string> private_fraction_choice(const std::vector<std::string>& ids,
                                                 double fraction, std::int64_t seed) {
  // FNV-1a of the id, mixed with the seed by splitmix64's finaliser: fixed
  // arithmetic, so the choice never changes between builds or machines.
  auto mix = [](std::uint64_t v) {
    v += 0x9E3779B97F4A7C15ull;
    v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
    v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
    return v ^ (v >> 31);
  };
  std::vector<std::pair<std::uint64_t, std::size_t>> ranked;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::uint64_t h = 0xCBF29CE484222325ull;
    for (const char c : ids[i]) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
    ranked.emplace_back(mix(h ^ mix(static_cast<std::uint64_t>(seed))), i);
  }
  std::sort(ranked.begin(), ranked.end());
  std::size_t k =
      static_cast<std::size_t>(std::llround(fraction * static_cast<double>(ids.size())));
  if (fraction > 0 && k == 0) k = 1;  // a fraction asked for is never silently none
  k = std::min(k, ids.size());
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < k; ++i) chosen.push_back(ranked[i].second);
  std::sort(chosen.begin(), chosen.end());
  std::vector<std::string> out;
  for (const auto i : chosen) out.push_back(ids[i]);
  return out;
}

}  // namespace kopt::config
