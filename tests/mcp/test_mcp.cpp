// kopt::mcp, the protocol layer (agent/mcp), in-process: version
// negotiation, tools/list, tools/call errors (protocol vs tool errors),
// argument checking, progress, and cancellation on the threaded stdio loop.
// Then `kopt mcp` as a process fed every file of the malformed-message
// corpus (tests/fuzz/corpus/mcp): it must answer with well-formed JSON-RPC,
// exit 0 at end of input and never hang.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "../common/test_util.hpp"
#include "mcp/server.hpp"

namespace {

using kopt::mcp::json;
using namespace std::chrono_literals;

std::vector<kopt::mcp::tool> tools(std::atomic<bool>* release = nullptr,
                                   std::atomic<int>* saw_cancel = nullptr) {
  const json out = {{"type", "object"},
                    {"properties", {{"status", {{"type", "string"}}}}},
                    {"required", {"status"}}};
  std::vector<kopt::mcp::tool> t;
  t.push_back({"count",
               "Count",
               "reports progress n times",
               {{"type", "object"},
                {"properties", {{"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 10}}}}},
                {"required", {"n"}},
                {"additionalProperties", false}},
               out,
               json::object(),
               [](const json& a, kopt::mcp::call_context& cx) {
                 const int n = a.at("n").get<int>();
                 for (int i = 1; i <= n; ++i) cx.progress(i, n, "step");
                 cx.progress(1, n);  // not increasing: dropped
                 return kopt::mcp::tool_result{{{"status", "ok"}, {"n", n}}, "", false};
               }});
  t.push_back({"throws",
               "",
               "throws",
               {{"type", "object"}},
               out,
               json::object(),
               [](const json&, kopt::mcp::call_context&) -> kopt::mcp::tool_result {
                 throw std::runtime_error("boom sk-abcdefghijklmnopqrstuvwx");
               }});
  t.push_back({"wait",
               "",
               "waits until cancelled or released",
               {{"type", "object"}},
               out,
               json::object(),
               [release, saw_cancel](const json&, kopt::mcp::call_context& cx) {
                 const auto end = std::chrono::steady_clock::now() + 20s;
                 while (!cx.cancelled() && !(release && *release) &&
                        std::chrono::steady_clock::now() < end)
                   std::this_thread::sleep_for(5ms);
                 if (cx.cancelled() && saw_cancel) ++*saw_cancel;
                 return kopt::mcp::tool_result{
                     {{"status", cx.cancelled() ? "cancelled" : "ok"}}, "", false};
               }});
  return t;
}

std::vector<json> run(kopt::mcp::server& s, const std::vector<json>& msgs) {
  std::vector<json> out;
  for (const auto& m : msgs) s.handle_line(m.dump(), [&](const json& r) { out.push_back(r); });
  return out;
}

json init(const std::string& version = "2025-11-25") {
  return {{"jsonrpc", "2.0"},
          {"id", 0},
          {"method", "initialize"},
          {"params",
           {{"protocolVersion", version},
            {"capabilities", json::object()},
            {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
}

json call(int id, const std::string& name, json args, json meta = nullptr) {
  json p = {{"name", name}, {"arguments", std::move(args)}};
  if (!meta.is_null()) p["_meta"] = meta;
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"}, {"params", p}};
}

TEST(McpServer, NegotiatesTheProtocolVersion) {
  {
    kopt::mcp::server s({"kopt", "", "1", ""}, tools());
    auto r = run(s, {init()});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0]["result"]["protocolVersion"], "2025-11-25");
    EXPECT_EQ(r[0]["result"]["capabilities"]["tools"]["listChanged"], false);
    EXPECT_EQ(r[0]["result"]["serverInfo"]["name"], "kopt");
  }
  {
    kopt::mcp::server s({"kopt", "", "1", ""}, tools());
    EXPECT_EQ(run(s, {init("2025-06-18")})[0]["result"]["protocolVersion"], "2025-06-18");
  }
  {
    kopt::mcp::server s({"kopt", "", "1", ""}, tools());
    EXPECT_EQ(run(s, {init("2099-01-01")})[0]["result"]["protocolVersion"], "2025-11-25");
  }
}

TEST(McpServer, RefusesRequestsBeforeInitializeButAnswersPing) {
  kopt::mcp::server s({"kopt", "", "1", ""}, tools());
  auto r = run(s, {{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}},
                   {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "ping"}}});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["error"]["code"], -32600);
  EXPECT_EQ(r[1]["result"], json::object());
}

TEST(McpServer, ListsToolsWithSchemas) {
  kopt::mcp::server s({"kopt", "", "1", ""}, tools());
  auto r = run(s, {init(), {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}}});
  const json list = r.at(1)["result"]["tools"];
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]["name"], "count");
  EXPECT_EQ(list[0]["title"], "Count");
  EXPECT_EQ(list[0]["inputSchema"]["type"], "object");
  EXPECT_EQ(list[0]["outputSchema"]["required"][0], "status");
}

TEST(McpServer, UnknownToolIsAProtocolErrorBadArgumentsAToolError) {
  kopt::mcp::server s({"kopt", "", "1", ""}, tools());
  auto r = run(s, {init(), call(1, "nope", json::object()), call(2, "count", {{"n", "three"}}),
                   call(3, "count", {{"n", 11}}), call(4, "count", {{"n", 1}, {"extra", 1}}),
                   call(5, "count", json::object())});
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[1]["error"]["code"], -32602);
  EXPECT_NE(r[1]["error"]["message"].get<std::string>().find("nope"), std::string::npos);
  for (std::size_t i = 2; i <= 5; ++i) {
    EXPECT_EQ(r[i]["result"]["isError"], true) << r[i].dump();
    EXPECT_EQ(r[i]["result"]["structuredContent"]["status"], "invalid_input");
  }
  EXPECT_NE(
      r[2]["result"]["content"][0]["text"].get<std::string>().find("arguments.n: expected integer"),
      std::string::npos);
  EXPECT_NE(r[5]["result"]["structuredContent"]["message"].get<std::string>().find(
                "missing required property \"n\""),
            std::string::npos);
}

TEST(McpServer, AThrowingToolIsAnErrorResultAndSecretsAreRedacted) {
  kopt::mcp::server s({"kopt", "", "1", ""}, tools(), [](std::string t) {
    for (auto p = t.find("sk-"); p != std::string::npos; p = t.find("sk-", p))
      t.replace(p, t.find_first_of(" \"", p) - p, "[REDACTED]");
    return t;
  });
  auto r = run(s, {init(), call(1, "throws", json::object())});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1]["result"]["isError"], true);
  EXPECT_EQ(r[1]["result"]["structuredContent"]["status"], "internal_error");
  EXPECT_EQ(r[1].dump().find("sk-abc"), std::string::npos) << r[1].dump();
  EXPECT_NE(r[1].dump().find("[REDACTED]"), std::string::npos);
}

TEST(McpServer, ReportsProgressOnlyWithATokenAndMonotonically) {
  kopt::mcp::server s({"kopt", "", "1", ""}, tools());
  auto r = run(s, {init(), call(1, "count", {{"n", 3}}, {{"progressToken", "tok"}}),
                   call(2, "count", {{"n", 2}})});
  // init, 3 progress notifications, response 1, response 2 (no token: none).
  ASSERT_EQ(r.size(), 6u);
  for (std::size_t i = 1; i <= 3; ++i) {
    EXPECT_EQ(r[i]["method"], "notifications/progress");
    EXPECT_EQ(r[i]["params"]["progressToken"], "tok");
    EXPECT_EQ(r[i]["params"]["progress"], i);
    EXPECT_EQ(r[i]["params"]["total"], 3);
  }
  EXPECT_EQ(r[4]["id"], 1);
  EXPECT_EQ(r[4]["result"]["structuredContent"]["n"], 3);
  EXPECT_EQ(r[5]["id"], 2);
}

// The stdio loop: a cancelled call gets no response, other requests are
// answered while a call runs, and end of input ends serve().
TEST(McpServer, CancellationOnTheStdioLoop) {
  int in[2], out[2];
  ASSERT_EQ(pipe(in), 0);
  ASSERT_EQ(pipe(out), 0);
  std::atomic<bool> release{false};
  std::atomic<int> saw_cancel{0};
  kopt::mcp::server s({"kopt", "", "1", ""}, tools(&release, &saw_cancel));
  int rc = -1;
  std::thread t([&] { rc = s.serve(in[0], out[1]); });
  auto send = [&](const json& m) {
    const std::string line = m.dump() + "\n";
    ASSERT_EQ(write(in[1], line.data(), line.size()), static_cast<ssize_t>(line.size()));
  };
  std::string buf;
  auto next = [&]() -> json {
    for (;;) {
      if (auto nl = buf.find('\n'); nl != std::string::npos) {
        json j = json::parse(buf.substr(0, nl));
        buf.erase(0, nl + 1);
        return j;
      }
      pollfd p{out[0], POLLIN, 0};
      if (poll(&p, 1, 10000) <= 0) return json();
      char c[4096];
      const ssize_t n = read(out[0], c, sizeof c);
      if (n <= 0) return json();
      buf.append(c, static_cast<std::size_t>(n));
    }
  };
  send(init());
  EXPECT_EQ(next()["id"], 0);
  send(call(7, "wait", json::object()));
  send({{"jsonrpc", "2.0"}, {"id", 8}, {"method", "ping"}});
  EXPECT_EQ(next()["id"], 8);  // answered while 7 runs
  send({{"jsonrpc", "2.0"},
        {"method", "notifications/cancelled"},
        {"params", {{"requestId", 7}, {"reason", "test"}}}});
  // Call 7 sees its cancellation before anything could release it.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (saw_cancel == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(2ms);
  EXPECT_EQ(saw_cancel, 1);
  send(call(9, "wait", json::object()));
  release = true;  // 9 finishes normally; 7 was cancelled and stays silent
  const json r9 = next();
  EXPECT_EQ(r9["id"], 9) << r9.dump();
  EXPECT_EQ(r9["result"]["structuredContent"]["status"], "ok");
  send({{"jsonrpc", "2.0"}, {"id", 10}, {"method", "ping"}});
  EXPECT_EQ(next()["id"], 10);
  close(in[1]);
  t.join();
  close(out[1]);
  EXPECT_EQ(rc, 0);
  // Nothing more came: no response for the cancelled request 7.
  EXPECT_TRUE(next().is_null());
  close(in[0]);
  close(out[0]);
}

bool well_formed(const json& m) {
  if (!m.is_object() || m.value("jsonrpc", "") != "2.0") return false;
  if (m.contains("method")) return m["method"].is_string() && !m.contains("id");
  if (!m.contains("id") || m.contains("result") == m.contains("error")) return false;
  if (m.contains("error"))
    return m["error"]["code"].is_number_integer() && m["error"]["message"].is_string();
  return m["result"].is_object();
}

struct process_result {
  int exit_code = -1;
  bool timed_out = false;
  std::string out;
};

// `kopt mcp` with `input` on stdin, killed after `limit`. With `done`, stdin
// stays open until done(output so far) holds (the end of input cancels the
// calls still running).
process_result run_kopt_mcp(const std::string& input, const std::filesystem::path& db,
                            std::chrono::seconds limit,
                            std::function<bool(const std::string&)> done = {}) {
  std::atomic<bool> may_close{!done};
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  const std::string exe = std::string(KOPT_BINARY_DIR) + "/bin/kopt";
  const std::string dbs = db.string();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    execl(exe.c_str(), exe.c_str(), "mcp", "--db", dbs.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  process_result r;
  std::thread writer([&] {
    std::size_t off = 0;
    while (off < input.size()) {
      const ssize_t n = write(in[1], input.data() + off, input.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    while (!may_close) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    close(in[1]);
  });
  const auto end = std::chrono::steady_clock::now() + limit;
  char buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      may_close = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    r.out.append(buf, static_cast<std::size_t>(n));
    if (done && done(r.out)) may_close = true;
  }
  may_close = true;
  writer.join();
  close(out[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

TEST(KoptMcpProcess, MalformedMessagesGetErrorsNeverACrashOrAHang) {
  kopt::test::scratch_dir dir;
  const std::filesystem::path corpus =
      std::filesystem::path(KOPT_SOURCE_DIR) / "tests/fuzz/corpus/mcp";
  std::size_t files = 0, replies = 0, errors = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus)) {
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const auto r = run_kopt_mcp(ss.str(), dir / "kopt.db", 60s);
    ++files;
    EXPECT_FALSE(r.timed_out) << e.path();
    EXPECT_EQ(r.exit_code, 0) << e.path();
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      const json m = json::parse(line, nullptr, false);
      ASSERT_FALSE(m.is_discarded()) << e.path() << ": not JSON: " << line.substr(0, 200);
      EXPECT_TRUE(well_formed(m)) << e.path() << ": " << line.substr(0, 300);
      ++replies;
      if (m.contains("error") || (m.contains("result") && m["result"].value("isError", false)))
        ++errors;
    }
  }
  EXPECT_GE(files, 10u);
  EXPECT_GE(errors, 40u);  // the corpus is nearly all mistakes
  std::printf("%zu corpus files, %zu replies, %zu errors\n", files, replies, errors);
}

}  // namespace

// Private workloads (docs/integrity.md) never reach a model through MCP
// either: operator_brief leaves them out of its workload list and its
// prompt, and kernel_evaluate refuses to measure one by name.
TEST(KoptMcpProcess, PrivateWorkloadsAreNeitherShownNorMeasured) {
  kopt::test::scratch_dir dir;
  const std::filesystem::path ex = std::filesystem::path(KOPT_SOURCE_DIR) / "configs/examples";
  for (const char* f : {"rmsnorm_reference.cu", "rmsnorm_baseline.cu", "rmsnorm_seed.cu"})
    std::filesystem::copy_file(ex / f, dir / f);
  json op;
  {
    std::ifstream in(ex / "rmsnorm.json");
    op = json::parse(in);
  }
  for (auto& w : op["workloads"])
    if (w["id"] == "t2048_h4096") w["private"] = true;
  const auto cfg = dir / "rmsnorm.json";
  {
    std::ofstream out(cfg);
    out << op.dump(2);
  }
  std::string input = init().dump() + "\n";
  input += json({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}).dump() + "\n";
  input += call(1, "operator_brief", {{"config", cfg.string()}}).dump() + "\n";
  input += call(2, "kernel_evaluate", {{"config", cfg.string()}, {"workloads", {"t2048_h4096"}}})
               .dump() +
           "\n";
  const auto r = run_kopt_mcp(input, dir / "kopt.db", 60s, [](const std::string& out) {
    return out.find("{\"id\":1,") != std::string::npos &&
           out.find("{\"id\":2,") != std::string::npos;
  });
  ASSERT_FALSE(r.timed_out) << r.out;
  std::map<int, json> by_id;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);)
    if (!l.empty()) {
      const json m = json::parse(l);
      if (m.contains("id") && m["id"].is_number_integer()) by_id[m["id"].get<int>()] = m;
    }
  ASSERT_TRUE(by_id.count(1) && by_id.count(2)) << r.out;
  const json& brief = by_id[1]["result"];
  ASSERT_TRUE(brief.contains("structuredContent")) << brief.dump();
  bool public_listed = false;
  for (const auto& w : brief["structuredContent"]["workloads"]) {
    EXPECT_NE(w["id"], "t2048_h4096");
    public_listed = public_listed || w["id"] == "t1_h4096";
  }
  EXPECT_TRUE(public_listed) << brief.dump();
  EXPECT_EQ(brief.dump().find("t2048_h4096"), std::string::npos);
  const json& ev = by_id[2]["result"];
  EXPECT_TRUE(ev.value("isError", false)) << ev.dump();
  EXPECT_EQ(ev["structuredContent"]["status"], "invalid_input") << ev.dump();
  EXPECT_NE(ev["structuredContent"].value("message", "").find("is private"), std::string::npos)
      << ev.dump();
}
