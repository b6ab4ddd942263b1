#include "mcp/server.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <exception>

namespace kopt::mcp {

namespace {

// Deeper JSON than this is refused before parsing: nothing kopt's tools take
// nests beyond a few levels, and it keeps every later walk of the value
// (dump, schema check) far from the stack's limit.
constexpr int max_depth = 64;

bool too_deep(std::string_view s) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// A JSON-RPC id: a string or an integer (the specification also allows
// numbers with fractions; MCP forbids null).
bool valid_id(const json& id) {
  return id.is_string() || id.is_number_integer() || id.is_number_unsigned();
}

std::string type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool has_type(const json& v, const std::string& t) {
  if (t == "integer") {
    if (v.is_number_integer() || v.is_number_unsigned()) return true;
    // An integral float is an integer too (JSON does not tell them apart),
    // within the range a tool can convert it to without overflow.
    return v.is_number_float() && std::isfinite(v.get<double>()) &&
           v.get<double>() == std::floor(v.get<double>()) && std::fabs(v.get<double>()) < 9.0e15;
  }
  if (t == "number") return v.is_number();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  if (t == "null") return v.is_null();
  return true;  // unknown type keyword: not checked
}

json response(const json& id, json result) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

}  // namespace

const std::vector<std::string>& supported_protocol_versions() {
  static const std::vector<std::string> v = {std::string(latest_protocol_version), "2025-06-18",
                                             "2025-03-26", "2024-11-05"};
  return v;
}

json error_response(const json& id, rpc_error code, const std::string& message, const json& data) {
  json e = {{"code", static_cast<int>(code)}, {"message", message}};
  if (!data.is_null()) e["data"] = data;
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(e)}};
}

std::vector<std::string> check_schema(const json& value, const json& schema,
                                      const std::string& path) {
  std::vector<std::string> out;
  if (!schema.is_object()) return out;
  if (auto t = schema.find("type"); t != schema.end()) {
    bool ok = false;
    std::string want;
    if (t->is_string()) {
      ok = has_type(value, t->get<std::string>());
      want = t->get<std::string>();
    } else if (t->is_array()) {
      for (const auto& x : *t)
        if (x.is_string()) {
          ok = ok || has_type(value, x.get<std::string>());
          want += (want.empty() ? "" : " or ") + x.get<std::string>();
        }
    } else {
      ok = true;
    }
    if (!ok) {
      out.push_back(path + ": expected " + want + ", got " + type_name(value));
      return out;
    }
  }
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
    if (std::find(e->begin(), e->end(), value) == e->end()) {
      std::string allowed;
      for (const auto& x : *e) allowed += (allowed.empty() ? "" : ", ") + x.dump();
      out.push_back(path + ": must be one of " + allowed);
    }
  }
  if (value.is_number()) {
    const double v = value.get<double>();
    if (auto m = schema.find("minimum");
        m != schema.end() && m->is_number() && v < m->get<double>())
      out.push_back(path + ": must be at least " + m->dump());
    if (auto m = schema.find("maximum");
        m != schema.end() && m->is_number() && v > m->get<double>())
      out.push_back(path + ": must be at most " + m->dump());
  }
  if (value.is_string()) {
    if (auto m = schema.find("maxLength");
        m != schema.end() && m->is_number_unsigned() &&
        value.get_ref<const std::string&>().size() > m->get<std::size_t>())
      out.push_back(path + ": longer than " + m->dump() + " bytes");
  }
  if (value.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const auto& r : schema.value("required", json::array()))
      if (r.is_string() && !value.contains(r.get<std::string>()))
        out.push_back(path + ": missing required property \"" + r.get<std::string>() + "\"");
    const bool closed =
        schema.contains("additionalProperties") && schema["additionalProperties"] == false;
    for (const auto& [k, v] : value.items()) {
      if (auto p = props.find(k); p != props.end()) {
        auto sub = check_schema(v, *p, path + "." + k);
        out.insert(out.end(), sub.begin(), sub.end());
      } else if (closed) {
        out.push_back(path + ": unknown property \"" + k + "\"");
      }
    }
  }
  if (value.is_array())
    if (auto items = schema.find("items"); items != schema.end()) {
      std::size_t i = 0;
      for (const auto& v : value) {
        auto sub = check_schema(v, *items, path + "[" + std::to_string(i++) + "]");
        out.insert(out.end(), sub.begin(), sub.end());
        if (out.size() > 20) break;
      }
    }
  return out;
}

void call_context::progress(double done, std::optional<double> total, const std::string& message) {
  if (token_.is_null() || !notify_) return;
  std::lock_guard lk(mu_);
  if (!(done > last_)) return;
  last_ = done;
  json p = {{"progressToken", token_}, {"progress", done}};
  if (total) p["total"] = *total;
  if (!message.empty()) p["message"] = message;
  notify_(json{{"jsonrpc", "2.0"}, {"method", "notifications/progress"}, {"params", p}});
}

struct server::in_flight {
  std::shared_ptr<call_context> ctx;
  std::atomic<bool> done{false};
};

server::server(server_info info, std::vector<tool> tools,
               std::function<std::string(std::string)> redact)
    : info_(std::move(info)), tools_(std::move(tools)), redact_(std::move(redact)) {
  for (std::size_t i = 0; i < tools_.size(); ++i) by_name_[tools_[i].name] = i;
}

server::~server() {
  {
    std::lock_guard lk(mu_);
    for (auto& [id, f] : calls_) f->ctx->cancel();
  }
  reap(true);
}

json server::list_tools() const {
  json list = json::array();
  for (const auto& t : tools_) {
    json j = {{"name", t.name}, {"description", t.description}, {"inputSchema", t.input_schema}};
    if (!t.title.empty()) j["title"] = t.title;
    if (!t.output_schema.is_null()) j["outputSchema"] = t.output_schema;
    if (!t.annotations.empty()) j["annotations"] = t.annotations;
    list.push_back(std::move(j));
  }
  return json{{"tools", list}};
}

json server::call_tool(const json& id, const json& params,
                       const std::function<void(const json&)>& out, call_context& ctx) {
  (void)out;
  const std::string name = params.at("name").get<std::string>();
  const tool& t = tools_.at(by_name_.at(name));
  const json args = params.contains("arguments") && !params["arguments"].is_null()
                        ? params["arguments"]
                        : json::object();
  tool_result r;
  if (const auto problems = check_schema(args, t.input_schema); !problems.empty()) {
    std::string msg = "invalid arguments for " + name + ": ";
    for (std::size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    r.is_error = true;
    r.structured = {{"status", "invalid_input"}, {"message", msg}};
  } else {
    try {
      r = t.run(args, ctx);
    } catch (const std::exception& e) {
      r = tool_result{};
      r.is_error = true;
      r.structured = {{"status", "internal_error"},
                      {"message", std::string(name) + " failed: " + e.what()}};
    } catch (...) {
      r = tool_result{};
      r.is_error = true;
      r.structured = {{"status", "internal_error"}, {"message", name + " failed"}};
    }
  }
  if (!r.structured.is_object())
    r.structured = {{"status", "internal_error"}, {"value", r.structured}};
  std::string text =
      r.text.empty() ? r.structured.dump(2, ' ', false, json::error_handler_t::replace) : r.text;
  json structured = r.structured;
  if (redact_) {
    text = redact_(std::move(text));
    const std::string dumped = structured.dump(-1, ' ', false, json::error_handler_t::replace);
    const std::string clean = redact_(dumped);
    if (clean != dumped) structured = json::parse(clean, nullptr, false);
    if (structured.is_discarded())
      structured = {{"status", "internal_error"}, {"message", "[REDACTED]"}};
  }
  json result = {{"content", json::array({json{{"type", "text"}, {"text", text}}})},
                 {"structuredContent", structured}};
  if (r.is_error) result["isError"] = true;
  return response(id, std::move(result));
}

void server::handle(const json& msg, const std::function<void(const json&)>& out, bool threaded) {
  if (msg.is_array()) {
    // JSON-RPC batches were removed from MCP in 2025-06-18.
    out(error_response(nullptr, rpc_error::invalid_request,
                       "batches are not supported by MCP 2025-11-25"));
    return;
  }
  if (!msg.is_object()) {
    out(error_response(nullptr, rpc_error::invalid_request, "a JSON-RPC message is an object"));
    return;
  }
  const bool has_id = msg.contains("id");
  const json id = has_id && valid_id(msg["id"]) ? msg["id"] : json(nullptr);
  auto fail = [&](rpc_error code, const std::string& m) {
    if (has_id) out(error_response(id, code, m));
  };
  if (msg.value("jsonrpc", json()) != "2.0") {
    out(error_response(id, rpc_error::invalid_request, "\"jsonrpc\" must be \"2.0\""));
    return;
  }
  if (!msg.contains("method")) {
    // A response: kopt sends no requests to the client, so there is nothing
    // it could answer. Ignored.
    if (msg.contains("result") || msg.contains("error")) return;
    out(error_response(id, rpc_error::invalid_request, "a request needs a \"method\""));
    return;
  }
  if (!msg["method"].is_string()) {
    out(error_response(id, rpc_error::invalid_request, "\"method\" must be a string"));
    return;
  }
  if (has_id && !valid_id(msg["id"])) {
    out(error_response(nullptr, rpc_error::invalid_request,
                       "\"id\" must be a string or an integer"));
    return;
  }
  const std::string method = msg["method"].get<std::string>();
  const json params = msg.contains("params") ? msg["params"] : json::object();
  if (!params.is_object()) {
    fail(rpc_error::invalid_params, "\"params\" must be an object");
    return;
  }

  if (!has_id) {  // notifications
    if (method == "notifications/cancelled") {
      const json rid = params.value("requestId", json());
      if (!valid_id(rid)) return;
      std::lock_guard lk(mu_);
      if (auto it = calls_.find(rid.dump()); it != calls_.end()) it->second->ctx->cancel();
    }
    // notifications/initialized and anything unknown: nothing to do.
    return;
  }

  if (method == "initialize") {
    const json v = params.value("protocolVersion", json());
    if (!v.is_string()) {
      fail(rpc_error::invalid_params, "initialize: \"protocolVersion\" (a string) is required");
      return;
    }
    const auto& sup = supported_protocol_versions();
    const std::string want = v.get<std::string>();
    version_ = std::find(sup.begin(), sup.end(), want) != sup.end()
                   ? want
                   : std::string(latest_protocol_version);
    initialized_ = true;
    if (on_initialize_) on_initialize_(params);
    json si = {{"name", info_.name}, {"version", info_.version}};
    if (!info_.title.empty()) si["title"] = info_.title;
    json result = {{"protocolVersion", version_},
                   {"capabilities", {{"tools", {{"listChanged", false}}}}},
                   {"serverInfo", si}};
    if (!info_.instructions.empty()) result["instructions"] = info_.instructions;
    out(response(id, std::move(result)));
    return;
  }
  if (method == "ping") {
    out(response(id, json::object()));
    return;
  }
  if (!initialized_) {
    fail(rpc_error::invalid_request, "the server is not initialized: send \"initialize\" first");
    return;
  }
  if (method == "tools/list") {
    if (params.contains("cursor") && !params["cursor"].is_string()) {
      fail(rpc_error::invalid_params, "tools/list: \"cursor\" must be a string");
      return;
    }
    out(response(id, list_tools()));  // one page: a cursor never comes from kopt
    return;
  }
  if (method == "tools/call") {
    const json name = params.value("name", json());
    if (!name.is_string()) {
      fail(rpc_error::invalid_params, "tools/call: \"name\" (a string) is required");
      return;
    }
    if (!by_name_.count(name.get<std::string>())) {
      fail(rpc_error::invalid_params, "Unknown tool: " + name.get<std::string>());
      return;
    }
    if (params.contains("arguments") && !params["arguments"].is_object() &&
        !params["arguments"].is_null()) {
      fail(rpc_error::invalid_params, "tools/call: \"arguments\" must be an object");
      return;
    }
    json token;
    if (const json meta = params.value("_meta", json()); meta.is_object()) {
      const json t = meta.value("progressToken", json());
      if (valid_id(t)) token = t;
    }
    auto f = std::make_shared<in_flight>();
    f->ctx = std::make_shared<call_context>(out, token);
    const std::string key = id.dump();
    {
      std::lock_guard lk(mu_);
      if (calls_.count(key)) {
        fail(rpc_error::invalid_request, "a request with this id is still running");
        return;
      }
      calls_[key] = f;
    }
    auto work = [this, f, key, id, params, out] {
      json resp;
      try {
        resp = call_tool(id, params, out, *f->ctx);
      } catch (const std::exception& e) {
        resp =
            error_response(id, rpc_error::internal_error, std::string("tools/call: ") + e.what());
      }
      {
        std::lock_guard lk(mu_);
        calls_.erase(key);
      }
      // A cancelled request gets no response (the specification's SHOULD).
      if (!f->ctx->cancelled()) out(resp);
      f->done = true;
    };
    if (!threaded) {
      work();
      return;
    }
    reap(false);
    threads_.emplace_back(std::thread(work), f);
    return;
  }
  fail(rpc_error::method_not_found, "method not found: " + method);
}

void server::reap(bool all) {
  // Finished calls' threads are joined as new ones start; all of them at the
  // end of the session.
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (all || it->second->done) {
      if (it->first.joinable()) it->first.join();
      it = threads_.erase(it);
    } else {
      ++it;
    }
  }
}

void server::handle_line(std::string_view line, const std::function<void(const json&)>& out) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.remove_suffix(1);
  if (line.empty()) return;
  if (line.size() > max_line_bytes) {
    out(error_response(nullptr, rpc_error::parse_error, "message too long"));
    return;
  }
  if (too_deep(line)) {
    out(error_response(nullptr, rpc_error::parse_error, "JSON nested too deeply"));
    return;
  }
  json msg = json::parse(line.begin(), line.end(), nullptr, false);
  if (msg.is_discarded()) {
    out(error_response(nullptr, rpc_error::parse_error, "not valid JSON"));
    return;
  }
  try {
    handle(msg, out, false);
  } catch (const std::exception& e) {
    out(error_response(nullptr, rpc_error::internal_error,
                       std::string("internal error: ") + e.what()));
  }
}

int server::serve(int in_fd, int out_fd) {
  auto out_mu = std::make_shared<std::mutex>();
  auto broken = std::make_shared<std::atomic<bool>>(false);
  // Every message is one line: dump() escapes control characters, so no
  // newline appears inside one (stdio transport's rule).
  std::function<void(const json&)> out = [out_mu, broken, out_fd](const json& m) {
    std::string s = m.dump(-1, ' ', false, json::error_handler_t::replace);
    s.push_back('\n');
    std::lock_guard lk(*out_mu);
    std::size_t off = 0;
    while (off < s.size() && !*broken) {
      const ssize_t n = ::write(out_fd, s.data() + off, s.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        *broken = true;
        break;
      }
      off += static_cast<std::size_t>(n);
    }
  };
  auto process = [&](std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    if (line.empty()) return;
    if (too_deep(line)) {
      out(error_response(nullptr, rpc_error::parse_error, "JSON nested too deeply"));
      return;
    }
    json msg = json::parse(line.begin(), line.end(), nullptr, false);
    if (msg.is_discarded()) {
      out(error_response(nullptr, rpc_error::parse_error, "not valid JSON"));
      return;
    }
    try {
      handle(msg, out, true);
    } catch (const std::exception& e) {
      out(error_response(nullptr, rpc_error::internal_error,
                         std::string("internal error: ") + e.what()));
    }
  };
  std::string buf;
  bool skipping = false;  // inside a line that was too long
  char chunk[65536];
  int rc = 0;
  for (;;) {
    const ssize_t n = ::read(in_fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      rc = 1;
      break;
    }
    if (n == 0) {
      // A last message without its newline still counts.
      if (!skipping && !buf.empty()) process(buf);
      break;
    }
    std::string_view data(chunk, static_cast<std::size_t>(n));
    while (!data.empty()) {
      const auto nl = data.find('\n');
      if (nl == std::string_view::npos) {
        if (!skipping) {
          buf.append(data);
          if (buf.size() > max_line_bytes) {
            out(error_response(nullptr, rpc_error::parse_error, "message too long"));
            buf.clear();
            skipping = true;
          }
        }
        break;
      }
      if (!skipping) {
        buf.append(data.substr(0, nl));
        process(buf);
      }
      buf.clear();
      skipping = false;
      data.remove_prefix(nl + 1);
    }
    if (*broken) break;
  }
  // End of input: the client is gone. Running calls finish (their
  // subprocesses have their own limits); nobody reads their answers.
  {
    std::lock_guard lk(mu_);
    for (auto& [id, f] : calls_) f->ctx->cancel();
  }
  reap(true);
  return rc;
}

}  // namespace kopt::mcp
