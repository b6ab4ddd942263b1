// Fuzz target for kopt's MCP server (agent/mcp): the input is a session,
// one JSON-RPC message per line, against a server with tools that echo,
// report progress, return errors and throw. Every reply must be a JSON-RPC
// 2.0 object (a response with an id, result or error, or a notification);
// anything else, a crash or a hang is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "mcp/server.hpp"

namespace {

using kopt::mcp::json;

std::vector<kopt::mcp::tool> fuzz_tools() {
  const json in = {{"type", "object"},
                   {"properties",
                    {{"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 5}}},
                     {"s", {{"type", "string"}, {"maxLength", 64}}},
                     {"e", {{"type", "string"}, {"enum", {"a", "b"}}}},
                     {"list", {{"type", "array"}, {"items", {{"type", "integer"}}}}}}},
                   {"required", {"n"}},
                   {"additionalProperties", false}};
  const json out = {{"type", "object"},
                    {"properties", {{"status", {{"type", "string"}}}}},
                    {"required", {"status"}}};
  std::vector<kopt::mcp::tool> t;
  t.push_back(
      {"echo", "", "echo", in, out, json::object(), [](const json& a, kopt::mcp::call_context& cx) {
         for (int i = 0; i < a.value("n", 0); ++i) cx.progress(i + 1, 5);
         return kopt::mcp::tool_result{{{"status", "ok"}, {"args", a}}, "", false};
       }});
  t.push_back({"throws",
               "",
               "throws",
               {{"type", "object"}},
               out,
               json::object(),
               [](const json&, kopt::mcp::call_context&) -> kopt::mcp::tool_result {
                 throw std::runtime_error("boom");
               }});
  t.push_back({"bad_result",
               "",
               "returns a non-object",
               {{"type", "object"}},
               out,
               json::object(),
               [](const json&, kopt::mcp::call_context&) {
                 return kopt::mcp::tool_result{json::array(), "", false};
               }});
  return t;
}

bool well_formed(const json& m) {
  if (!m.is_object() || m.value("jsonrpc", "") != "2.0") return false;
  if (m.contains("method")) return m["method"].is_string() && !m.contains("id");  // a notification
  if (!m.contains("id")) return false;
  const json& id = m["id"];
  if (!(id.is_null() || id.is_string() || id.is_number_integer() || id.is_number_unsigned()))
    return false;
  if (m.contains("result") == m.contains("error")) return false;
  if (m.contains("error"))
    return m["error"].is_object() && m["error"].contains("code") &&
           m["error"]["code"].is_number_integer() && m["error"].contains("message") &&
           m["error"]["message"].is_string();
  return m["result"].is_object();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kopt::mcp::server srv({"fuzz", "", "0", ""}, fuzz_tools());
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto check = [](const json& m) {
    if (!well_formed(m)) std::abort();
    (void)m.dump(-1, ' ', false, json::error_handler_t::replace);
  };
  while (!in.empty()) {
    const auto nl = in.find('\n');
    srv.handle_line(in.substr(0, nl), check);
    if (nl == std::string_view::npos) break;
    in.remove_prefix(nl + 1);
  }
  return 0;
}
