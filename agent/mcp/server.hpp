// kopt::mcp: a Model Context Protocol server (JSON-RPC 2.0 over stdio,
// newline-delimited), independent of what its tools do. It speaks the
// 2025-11-25 revision (and accepts the older 2025-06-18, 2025-03-26 and
// 2024-11-05 in the version negotiation): initialize with the tools
// capability, ping, tools/list, tools/call with structured results checked
// against each tool's outputSchema, notifications/progress for calls that
// carry a progress token, and notifications/cancelled. Everything a client
// sends is untrusted: a malformed message gets a JSON-RPC error (or is
// dropped when it is a notification), never a crash, and a tool that throws
// becomes a tool error result. The tools themselves live with the CLI
// (agent/cli/mcp.cpp); this library only knows their names, schemas and a
// callback, so that it can be fuzzed and tested alone.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace kopt::mcp {

using json = nlohmann::json;

// The protocol revision kopt implements, and those it also accepts.
inline constexpr std::string_view latest_protocol_version = "2025-11-25";
const std::vector<std::string>& supported_protocol_versions();

// JSON-RPC error codes (the JSON-RPC 2.0 specification's).
enum class rpc_error : int {
  parse_error = -32700,
  invalid_request = -32600,
  method_not_found = -32601,
  invalid_params = -32602,
  internal_error = -32603,
};

// Handed to a running tool: progress reports (sent only when the client
// asked for them with a progress token) and the cancellation flag (set by
// notifications/cancelled, or when the client goes away).
class call_context {
 public:
  call_context(std::function<void(const json&)> notify, json progress_token)
      : notify_(std::move(notify)), token_(std::move(progress_token)) {}
  bool cancelled() const noexcept { return cancelled_.load(); }
  void cancel() noexcept { cancelled_ = true; }
  // `done` must grow from call to call (the protocol requires it); a report
  // that does not is dropped.
  void progress(double done, std::optional<double> total = std::nullopt,
                const std::string& message = {});

 private:
  std::function<void(const json&)> notify_;
  json token_;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  double last_ = -1;
};

// What a tool returns. `structured` is an object that matches the tool's
// outputSchema (errors too: kopt's schemas have "status" as their only
// required field); `text` is the human-readable form (default: the
// structured object as JSON, as the specification recommends for clients
// that read only text).
struct tool_result {
  json structured = json::object();
  std::string text;
  bool is_error = false;
};

struct tool {
  std::string name;
  std::string title;
  std::string description;
  json input_schema;                  // JSON Schema, type object
  json output_schema;                 // JSON Schema, type object
  json annotations = json::object();  // readOnlyHint, destructiveHint, ...
  std::function<tool_result(const json& arguments, call_context& ctx)> run;
};

struct server_info {
  std::string name = "kopt";
  std::string title;
  std::string version;
  std::string instructions;
};

// The subset of JSON Schema that tool arguments are checked against before a
// tool runs: type of the value, required properties, property types, enum,
// minimum/maximum, additionalProperties false, array item types. Returns the
// problems ("arguments.file: expected string"), none when valid.
std::vector<std::string> check_schema(const json& value, const json& schema,
                                      const std::string& path = "arguments");

class server {
 public:
  // `redact` is applied to every tool result before it is sent (API keys).
  server(server_info info, std::vector<tool> tools,
         std::function<std::string(std::string)> redact = nullptr);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Serves until end of input (or a read error); tool calls run on their own
  // threads so that ping and cancellation are answered while they work.
  // Returns 0 on a clean end of input.
  int serve(int in_fd, int out_fd);

  // One message (a line without its newline) in; what the server sends back
  // goes to `out`. Tool calls run inline (tests, fuzzing): `out` sees the
  // progress notifications and then the response.
  void handle_line(std::string_view line, const std::function<void(const json&)>& out);

  // Called with initialize's params (clientInfo, capabilities) when a client
  // initializes; before serve().
  void on_initialize(std::function<void(const json& params)> f) { on_initialize_ = std::move(f); }

  // Lines longer than this are refused with a parse error (not buffered).
  static constexpr std::size_t max_line_bytes = 64u << 20;

 private:
  struct in_flight;
  void handle(const json& msg, const std::function<void(const json&)>& out, bool threaded);
  json call_tool(const json& id, const json& params, const std::function<void(const json&)>& out,
                 call_context& ctx);
  json list_tools() const;
  void reap(bool all);

  server_info info_;
  std::vector<tool> tools_;
  std::map<std::string, std::size_t> by_name_;
  std::function<std::string(std::string)> redact_;
  std::function<void(const json&)> on_initialize_;
  bool initialized_ = false;                                 // initialize answered
  std::string version_;                                      // negotiated protocol version
  std::mutex mu_;                                            // guards calls_
  std::map<std::string, std::shared_ptr<in_flight>> calls_;  // by request id (dumped)
  std::vector<std::pair<std::thread, std::shared_ptr<in_flight>>> threads_;
};

// A JSON-RPC error response. `id` is null when the request's id is unknown.
json error_response(const json& id, rpc_error code, const std::string& message,
                    const json& data = nullptr);

}  // namespace kopt::mcp
