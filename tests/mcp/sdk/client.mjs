// The official MCP TypeScript SDK (@modelcontextprotocol/sdk) as a client of
// `kopt mcp`: initialize, list the tools, call them as an agent would, and
// drive an agent campaign that a real `kopt daemon` (fake evaluator: no GPU)
// evaluates and promotes. Exits non-zero on the first failed check.
//   node client.mjs KOPT SOURCE_DIR WORK_DIR
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import assert from "node:assert/strict";

const [kopt, sourceDir, workDir] = process.argv.slice(2);
if (!kopt || !sourceDir || !workDir) {
  console.error("usage: node client.mjs KOPT SOURCE_DIR WORK_DIR");
  process.exit(2);
}
fs.rmSync(workDir, { recursive: true, force: true });
fs.mkdirSync(workDir, { recursive: true });
const stateDir = path.join(workDir, "state");
const db = path.join(stateDir, "kopt.db");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let checks = 0;
function check(cond, what, detail) {
  checks++;
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? "" : "\n" + JSON.stringify(detail, null, 2).slice(0, 4000)}`);
    process.exit(1);
  }
  console.log(`ok   ${what}`);
}

// --- an agent campaign for the daemon (the daemon tests' vadd operator) ---
const kernel = (name, marker) => ({
  source: `extern "C" __global__ void ${name}(const float* a, const float* b, float* out, long long n) { ${marker}\n }\n`,
  launches: [{ kernel: name, grid: ["ceil_div(n, 256)"], block: [256],
               args: [{ tensor: "a" }, { tensor: "b" }, { tensor: "out" }, { int: "n", type: "int64" }] }],
});
const sizes = [["n1k", 1000, 0.2], ["n64k", 65536, 0.3], ["n1m", 1 << 20, 0.3], ["n16m", 16 << 20, 0.2]];
const op = {
  name: "vadd_agent", op_type: "elementwise", description: "out = a + b",
  axes: { n: { type: "var" } },
  inputs: { a: { shape: ["n"], dtype: "float32" }, b: { shape: ["n"], dtype: "float32" } },
  outputs: { out: { shape: ["n"], dtype: "float32" } },
  roofline: { flops: "n", flop_unit: "fp32" },
  workloads: sizes.map(([id, n, w]) => ({ id, axes: { n }, weight: w })),
  reference: kernel("ref", "// reference"),
  seed: kernel("seed", "// speed 1.0"),
  baseline: kernel("base", "// speed 1.1"),
  // The fake evaluator's kernels rarely reach 100 % of speed of light: the
  // campaign normally ends on its iteration budget.
  campaign: { provider: "agent", seed: 7, budget: { iterations: 2 }, target_sol_fraction: 1.0,
              candidates_per_iteration: 2 },
};
const opFile = path.join(workDir, "vadd_agent.json");
fs.writeFileSync(opFile, JSON.stringify(op, null, 2));
const submitted = JSON.parse(execFileSync(kopt, ["--db", db, "submit", opFile, "--json"], { encoding: "utf8" }));
const campaignId = submitted.campaign_id ?? submitted.id;
check(Number.isInteger(campaignId), "kopt submit queued the agent campaign", submitted);

const daemonCfg = path.join(workDir, "daemon.json");
fs.writeFileSync(daemonCfg, JSON.stringify({
  state_dir: stateDir, evaluator: "fake", gpus: 1, fake: { delay_ms: 10 },
  http: { port: 0 }, limits: { spool_poll_ms: 100 },
}));
const daemonLog = fs.openSync(path.join(workDir, "daemon.log"), "a");
const daemon = spawn(kopt, ["daemon", "--config", daemonCfg], { stdio: ["ignore", daemonLog, daemonLog] });
process.on("exit", () => { try { daemon.kill("SIGKILL"); } catch {} });

// --- the MCP session ---
const transport = new StdioClientTransport({
  command: kopt, args: ["mcp", "--db", db], stderr: "pipe",
  env: { ...process.env, FAKE_API_KEY: "sk-kopt-test-secret-0123456789" },
});
let serverStderr = "";
transport.stderr?.on("data", (d) => { serverStderr += d.toString(); });
const client = new Client({ name: "kopt-sdk-test", version: "1.0.0" });
await client.connect(transport);
check(client.getServerVersion()?.name === "kopt", "initialize: serverInfo names kopt", client.getServerVersion());
check(client.getServerCapabilities()?.tools !== undefined, "initialize: tools capability",
      client.getServerCapabilities());
check(typeof client.getInstructions() === "string" && client.getInstructions().length > 0, "initialize: instructions");

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
const expected = ["campaign_log", "campaign_status", "candidate_diff", "candidate_show", "candidate_submit",
                  "kb_search", "kb_show", "kernel_compile", "kernel_evaluate", "kernel_profile",
                  "operator_brief", "operator_validate"];
check(JSON.stringify(names) === JSON.stringify(expected), "tools/list: the twelve tools", names);
for (const t of tools) {
  check(t.inputSchema?.type === "object" && t.outputSchema?.type === "object" &&
        t.outputSchema.required?.includes("status") && t.description.length > 20,
        `tools/list: ${t.name} has input and output schemas and a description`, t);
}

const call = (name, args, opts) => client.callTool({ name, arguments: args }, undefined, opts);
const rmsnorm = path.join(sourceDir, "configs/examples/rmsnorm.json");

// operator_validate, good and broken
let r = await call("operator_validate", { config: rmsnorm });
check(!r.isError && r.structuredContent.status === "valid" && r.structuredContent.valid === true,
      "operator_validate: rmsnorm.json is valid", r.structuredContent);
const broken = JSON.stringify(op, null, 2).replace('"dtype": "float32"', '"dtype": "float33"');
r = await call("operator_validate", { config_text: broken });
const d0 = r.structuredContent.diagnostics?.[0];
check(r.structuredContent.status === "invalid" && r.structuredContent.valid === false && d0 &&
      d0.line > 1 && d0.column > 0 && /float33|dtype/.test(d0.message + d0.path),
      "operator_validate: a broken config gives diagnostics with line and column", r.structuredContent);
r = await call("operator_validate", { config: "/nonexistent/op.json" });
check(r.isError && r.structuredContent.status === "not_found", "operator_validate: a missing file is not_found");

// knowledge base
r = await call("kb_search", { text: "coalesced memory access", limit: 3 });
const snippets = r.structuredContent.retrieval?.snippets ?? [];
check(!r.isError && snippets.length > 0 && snippets.length <= 3, "kb_search: ranked snippets", r.structuredContent);
r = await call("kb_show", { id: snippets[0].id });
check(!r.isError && r.structuredContent.document?.id === snippets[0].id, "kb_show: the first hit in full");
r = await call("kb_show", { id: "no-such-document" });
check(r.isError && r.structuredContent.status === "not_found", "kb_show: unknown id is not_found");

// operator_brief: the prompt of `kopt prompt render`
r = await call("operator_brief", { config: rmsnorm });
const b = r.structuredContent;
check(!r.isError && b.system.length > 100 && b.user.length > 100 && b.workloads.length > 0 &&
      b.workloads.every((w) => typeof w.weight === "number") && b.roofline?.flops,
      "operator_brief: spec, workloads with weights, roofline, system and user prompt", b);
check(b.user.includes("```") || b.system.includes("```"), "operator_brief: states the answer format");

// kernel_compile: NVRTC in an isolated child
r = await call("kernel_compile", { config: rmsnorm });
const compiles = r.structuredContent.compiles ?? [];
check(!r.isError && r.structuredContent.status === "ok" && compiles.length >= 2 &&
      compiles.every((c) => c.status === "ok" && Object.values(c.kernels ?? {}).every((k) => k.registers > 0)),
      "kernel_compile: the config's kernels compile, with registers", r.structuredContent);
// Progress: a kernel no cache has seen (a nonce in its source) takes NVRTC
// long enough that the first report arrives well before the answer. (The
// SDK handles notifications a microtask late and drops those that arrive in
// the same read as the response, so a report right before it may be lost.)
const progress = [];
const fresh = kernel("fresh", `// nonce ${Date.now()} ${Math.random()}`);
r = await call("kernel_compile", { config_text: JSON.stringify(op), candidate: fresh },
               { onprogress: (p) => progress.push(p) });
check(!r.isError && r.structuredContent.compiles.some((c) => c.role === "candidate" && c.status === "ok" && !c.cached),
      "kernel_compile: a fresh candidate compiles (not from the cache)", r.structuredContent);
check(progress.length >= 1 && progress.every((p) => p.total === 1 && p.progress <= 1) &&
      progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress),
      "kernel_compile: progress notifications (increasing, with a total)", progress);
const badKernel = { source: 'extern "C" __global__ void k(float* out) { this is not CUDA }',
                    launches: [{ kernel: "k", grid: [1], block: [32], args: [{ tensor: "no_such_tensor" }] }] };
r = await call("kernel_compile", { config_text: JSON.stringify(op), candidate: {
  ...kernel("cand", "// x"), source: kernel("cand", "// x").source.replace("{ // x", "{ syntax error here") } });
check(r.isError && r.structuredContent.status === "compile_error" &&
      r.structuredContent.compiles.some((c) => c.status === "compile_error" && c.log.length > 0),
      "kernel_compile: a broken candidate is compile_error with its log", r.structuredContent);
r = await call("kernel_compile", { config_text: JSON.stringify(op), candidate: badKernel });
check(r.isError && r.structuredContent.status === "invalid_input" && r.structuredContent.diagnostics.length > 0,
      "kernel_compile: a candidate that does not fit the operator is invalid_input with diagnostics",
      r.structuredContent);

// kernel_evaluate: without a GPU a structured needs_gpu, with one the table
r = await call("kernel_evaluate", { config: rmsnorm, workloads: [] });
const ev = r.structuredContent;
if (ev.gpu === false) {
  check(r.isError && ev.status === "needs_gpu" && ev.needs_gpu.length > 0 && Array.isArray(ev.compile_checks),
        "kernel_evaluate: no GPU here, a structured needs_gpu with compile checks", ev);
} else {
  check(ev.status === "ok" && ev.results && Object.keys(ev.results).length > 0, "kernel_evaluate: results table", ev);
}

// cancellation: the SDK sends notifications/cancelled; the server stays up
const ac = new AbortController();
// The request is written, then notifications/cancelled follows at once: the
// server drops the call's answer, the client's promise rejects.
const pending = call("kernel_profile", { config: rmsnorm }, { signal: ac.signal });
ac.abort("test cancels");
let aborted = false;
try { await pending; } catch (e) { aborted = true; }
check(aborted, "cancellation: the aborted call rejects on the client");
await client.ping();
check(true, "cancellation: the server still answers ping");

// --- the agent campaign ---
async function until(what, pred, ms = 120000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = await pred();
    if (last) return last;
    await sleep(200);
  }
  check(false, what + " (timed out)", { last, daemon: fs.readFileSync(path.join(workDir, "daemon.log"), "utf8").slice(-3000) });
}
const statusOf = async () => (await call("campaign_status", { campaign_id: campaignId })).structuredContent.campaign;
await until("the daemon set the campaign up and waits for the agent",
            async () => { const c = await statusOf(); return c?.waiting_for === "agent" ? c : null; });
check(true, "campaign_status: waiting_for agent");
const port = JSON.parse(fs.readFileSync(path.join(stateDir, "daemon.json"), "utf8")).http.port;
const health = await (await fetch(`http://127.0.0.1:${port}/health`)).json();
check(health.waiting_for_agent?.some((w) => w.campaign_id === campaignId && w.waiting_for === "agent"),
      "daemon /health lists the campaign as waiting for the agent", health);
const listed = JSON.parse(execFileSync(kopt, ["--db", db, "list", "--json"], { encoding: "utf8" }));
check(listed.find((c) => c.id === campaignId)?.waiting_for === "agent", "kopt list --json: waiting_for agent", listed);
const listText = execFileSync(kopt, ["--db", db, "list"], { encoding: "utf8" });
check(listText.includes("running (waiting for agent)"), "kopt list: running (waiting for agent)", listText);
r = await call("operator_brief", { campaign_id: campaignId });
const brief = r.structuredContent;
check(!r.isError && brief.iteration === 1 && brief.brief_hash.length === 64 && brief.user.includes("seed"),
      "operator_brief(campaign_id): the waiting iteration's brief with its hash", brief);

const fast = kernel("agent_fast", "// speed 0.5");
r = await call("candidate_submit", { campaign_id: campaignId, candidate: fast, brief_hash: brief.brief_hash,
                                     note: "half the time (fake evaluator marker)" });
check(!r.isError && r.structuredContent.status === "pending" && r.structuredContent.agent === "kopt-sdk-test",
      "candidate_submit: pending, recorded under the client's name", r.structuredContent);
r = await call("candidate_submit", { campaign_id: campaignId, candidate: badKernel });
check(r.isError && r.structuredContent.status === "invalid_input", "candidate_submit: an invalid candidate is refused");
r = await call("candidate_submit", { campaign_id: 99999, candidate: fast });
check(r.isError && r.structuredContent.status === "not_found", "candidate_submit: unknown campaign is not_found");

const promoted = await until("iteration 1 took the submission and promoted it", async () => {
  const c = await statusOf();
  return c?.best_candidate?.note?.includes("agent kopt-sdk-test") ? c : null;
});
const sub = promoted.agent_submissions.find((s) => s.status === "taken");
check(sub && sub.iteration === 1 && sub.brief_hash === brief.brief_hash && sub.agent === "kopt-sdk-test",
      "campaign_status: the submission was taken by iteration 1 with the brief it answered", promoted.agent_submissions);
const bestId = promoted.best_candidate.id;
r = await call("candidate_show", { candidate_id: bestId });
const cand = r.structuredContent.candidate;
check(!r.isError && cand.provider === "agent" && cand.source.includes("speed 0.5") &&
      cand.evaluations.some((e) => e.stage === "full" && e.status === "ok"),
      "candidate_show: the promoted candidate, provider agent, evaluated on the full sweep", cand);
r = await call("candidate_diff", { a: cand.parent_id, b: bestId });
check(!r.isError && JSON.stringify(r.structuredContent.diff).includes("speed 0.5"), "candidate_diff: seed -> agent's kernel");

// Iteration 2 (unless the target was reached): a wrong kernel; the budget
// then ends the campaign, and the agent's kernel is verified as the winner.
const after1 = await statusOf();
let iterations = 2;
if (!["done", "failed"].includes(after1.state)) {
  await until("iteration 2 waits for the agent", async () => ((await statusOf()).waiting_for === "agent" ? true : null));
  // From a shell this time: kopt propose.
  const wrongFile = path.join(workDir, "wrong.json");
  fs.writeFileSync(wrongFile, JSON.stringify(kernel("agent_wrong", "// broken speed 0.2")));
  const proposed = JSON.parse(execFileSync(kopt, ["--db", db, "propose", String(campaignId), wrongFile, "--agent",
                                                  "shell-user", "--json"], { encoding: "utf8" }));
  check(proposed.status === "pending" && proposed.agent === "shell-user", "kopt propose: a second candidate for iteration 2",
        proposed);
  iterations = 3;
}
const done = await until("the campaign finished", async () => {
  const c = await statusOf();
  return c && ["done", "failed"].includes(c.state) ? c : null;
});
check(done.state === "done" && done.best_candidate.id === bestId && done.waiting_for === null,
      "campaign finished, the agent's kernel is the verified best", done);
r = await call("campaign_log", { campaign_id: campaignId });
const its = r.structuredContent.log.iterations;
check(!r.isError && its.length === iterations && its[1].promoted === true && (iterations === 2 || its[2].promoted === false),
      "campaign_log: setup, iteration 1 promoted (iteration 2: the wrong kernel is not)", its);
let refused = null;
try { execFileSync(kopt, ["--db", db, "propose", String(campaignId), path.join(workDir, "wrong.json")], { stdio: "pipe" }); }
catch (e) { refused = e.status; }
check(refused === 1, "kopt propose: a finished campaign takes nothing (exit 1)", refused);
const text = JSON.stringify(await call("campaign_status", { campaign_id: campaignId }));
check(!text.includes("sk-kopt-test-secret"), "no API key in any result");

await client.close();
daemon.kill("SIGTERM");
console.log(`all ${checks} checks passed`);
process.exit(0);
