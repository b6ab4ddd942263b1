#!/usr/bin/env python3
"""The daemon overnight-style, uninterrupted and under kill -9 (GPU
verification issue 24, item 1). Driven by bench/daemon_gpu_soak.sh; python3
standard library only (the GPU machine has no sqlite3 CLI).

Four campaigns at once on one GPU slot (a timing worker and a --profile-only
counters worker): two replay campaigns of vector_add (seeds 1 and 2), one
autotune campaign of rmsnorm and one agent campaign of rmsnorm, fed by the
scripted agent bench/soak_agent.py through `kopt propose` (the seed with its
tunables fixed to other values). With max_active_campaigns 4 the replay
campaigns' LLM phases overlap the others' GPU phases.

Run A is uninterrupted. Run B starts from a fresh state directory and kills
the daemon (with its workers) and a worker alone with SIGKILL at random
moments (KILLS of them, alternating, at least 4 s apart), restarting the
daemon after each daemon kill. Then it checks, per campaign: the same final
state and winner (source hash) as A; every iteration once (numbers 1..spent,
all done); every journaled evaluation once (the cache keys of the
`evaluated` events); one `finished` event. GPU busy time comes from
/api/daemon (per GPU slot `busy_s`, counted from each daemon start, so it is
polled every second and the last value of every daemon incarnation summed).

--dry: no GPU; the daemon's "fake" evaluator (docs/daemon.md, tests only) by
default, or with --fake-worker PATH a fake worker process (extracted from
tests/daemon/fake_worker.hpp by the shell script) so worker kills are real.

Writes OUT/{a,b}/result.json, OUT/summary.json, OUT/summary.txt,
OUT/revise_prompts.md; exit 0 when every check passed, 1 otherwise.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TERMINAL = ("done", "failed", "cancelled")
# (BLOCK, VEC) of the agent's proposals, in order: the seed's own space, each
# fixed to one point, so every proposal compiles and is correct.
AGENT_POINTS = [(512, 8), (128, 8), (256, 4)]


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def make_configs(d, a):
    os.makedirs(os.path.join(d, "ops"), exist_ok=True)
    os.makedirs(os.path.join(d, "state"), exist_ok=True)
    ex = os.path.join(HERE, "configs/examples")
    va = json.load(open(os.path.join(ex, "replay/vector_add.json")))
    ops = {}
    for seed in (1, 2):
        c = json.loads(json.dumps(va))
        c["campaign"]["seed"] = seed
        c["campaign"]["budget"]["iterations"] = a.replay_iterations
        c["name"] = "vector_add_s%d" % seed
        ops["va%d" % seed] = c
    rms = json.load(open(os.path.join(ex, "rmsnorm.json")))
    for f in ("rmsnorm_reference.cu", "rmsnorm_baseline.cu", "rmsnorm_seed.cu"):
        shutil.copy(os.path.join(ex, f), os.path.join(d, "ops", f))
    r = json.loads(json.dumps(rms))
    r["campaign"]["budget"]["iterations"] = a.autotune_iterations
    r["name"] = "rmsnorm_autotune"
    ops["rms"] = r
    g = json.loads(json.dumps(rms))
    g["name"] = "rmsnorm_agent"
    g["campaign"]["provider"] = "agent"
    g["campaign"]["model"] = ""
    g["campaign"]["candidates_per_iteration"] = 1
    g["campaign"]["budget"]["iterations"] = len(AGENT_POINTS)
    ops["agent"] = g
    for k, c in ops.items():
        json.dump(c, open(os.path.join(d, "ops", k + ".json"), "w"), indent=2)
    # The agent's candidates: the seed with its parameters fixed.
    seed = rms["seed"]
    src = open(os.path.join(ex, seed["source_file"])).read()
    cdir = os.path.join(d, "agent_candidates")
    os.makedirs(cdir, exist_ok=True)
    for i, (b, v) in enumerate(AGENT_POINTS):
        cand = {"source": src, "launches": seed["launches"],
                "parameters": {"BLOCK": {"values": [b], "default": b}, "VEC": {"values": [v], "default": v}},
                "compile_options": seed.get("compile_options", [])}
        json.dump(cand, open(os.path.join(cdir, "%02d.json" % i), "w"), indent=2)
    cfg = {"state_dir": os.path.join(d, "state"), "gpus": 1,
           "worker": {"launch_timeout_ms": 3000, "min_time_s": 0.05, "max_time_s": 0.5},
           "providers": {"replay": {"model": "replay-corpus",
                                    "transcript": os.path.join(HERE, "tests/data/replay/vector_add/transcript.jsonl")}},
           "limits": {"max_active_campaigns": 4, "spool_poll_ms": 200}, "http": {"port": 0}}
    if a.dry:
        if a.fake_worker:
            cfg["worker"] = {"exe": a.fake_worker, "hello_timeout_s": 30, "silence_timeout_s": 60}
        else:
            cfg["evaluator"] = "fake"
            cfg["fake"] = {"delay_ms": a.fake_delay_ms}
    json.dump(cfg, open(os.path.join(d, "daemon.json"), "w"), indent=2)
    ids = {}
    for k in ("va1", "va2", "rms", "agent"):
        r = subprocess.run([a.kopt, "--db", os.path.join(d, "state/kopt.db"), "submit",
                            os.path.join(d, "ops", k + ".json")], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise SystemExit("submit %s failed: %s" % (k, r.stderr))
        ids[k] = int(r.stdout.strip())
    return ids


class Daemon:
    def __init__(self, d, a):
        self.d, self.a = d, a
        self.proc = None
        self.incarnations = []  # per daemon start: {"pid", "busy_s", "gpu_evaluations", ...}
        self.port = None
        self.max_active = 0
        self.worker_pids_seen = set()

    def start(self):
        env = dict(os.environ)
        if self.a.worker_exe:
            env["KOPT_WORKER"] = self.a.worker_exe
        logf = open(os.path.join(self.d, "daemon.log"), "ab")
        self.proc = subprocess.Popen([self.a.kopt, "daemon", "--config", os.path.join(self.d, "daemon.json")],
                                     stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.incarnations.append({"pid": self.proc.pid, "busy_s": 0.0, "gpu_evaluations": 0,
                                  "worker_starts": 0, "worker_restarts": 0, "worker_failures": 0})
        self.port = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _port(self):
        if self.port:
            return self.port
        try:
            j = json.load(open(os.path.join(self.d, "state/daemon.json")))
        except (OSError, ValueError):
            return None
        if j.get("pid") != self.proc.pid:
            return None  # the file of the previous (killed) daemon
        self.port = j.get("http", {}).get("port")
        return self.port

    def poll(self):
        """Reads /api/daemon; keeps the last busy time of this incarnation."""
        p = self._port()
        if not p:
            return None
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/api/daemon" % p, timeout=3) as r:
                j = json.load(r)
        except Exception:
            return None
        inc = self.incarnations[-1]
        gpus = j.get("gpus", [])
        inc["busy_s"] = sum(g.get("busy_s", 0.0) for g in gpus)
        for k in ("worker_starts", "worker_restarts", "worker_failures"):
            inc[k] = sum(g.get(k, 0) for g in gpus)
        inc["gpu_evaluations"] = sum(g.get("evaluations", 0) for g in gpus)
        inc["evaluator"] = j.get("evaluator")
        self.max_active = max(self.max_active, len(j.get("active_campaigns", [])))
        json.dump(j, open(os.path.join(self.d, "api_daemon_last.json"), "w"), indent=1)
        return j

    def workers(self):
        """(pid, argv) of this daemon's worker processes (its children named
        *worker*), found through /proc."""
        out = []
        if not self.alive():
            return out
        for e in os.listdir("/proc"):
            if not e.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % e) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != self.proc.pid:
                    continue
                with open("/proc/%s/cmdline" % e, "rb") as f:
                    argv = [x.decode(errors="replace") for x in f.read().split(b"\0") if x]
            except (OSError, ValueError, IndexError):
                continue
            if argv and any("worker" in os.path.basename(x) for x in argv[:2]):
                out.append((int(e), argv))
        return out

    def kill9(self):
        ws = self.workers()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        # systemd's KillMode=mixed would reap the rest of the unit: the
        # workers go too, so the next daemon does not share the GPU with them.
        for pid, _ in ws:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(ws)

    def stop(self):
        if not self.alive():
            return
        self.poll()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            log("daemon did not stop within 20 s of SIGTERM: SIGKILL")
            self.kill9()


def states(a, d):
    try:
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d, "state/kopt.db"), uri=True, timeout=5)
        rows = db.execute("SELECT id, state FROM campaigns").fetchall()
        db.close()
        return dict(rows)
    except sqlite3.Error:
        return None


def run(a, d, kill_plan):
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    ids = make_configs(d, a)
    t0 = time.time()
    dm = Daemon(d, a)
    dm.start()
    agent_log = os.path.join(d, "agent.log")
    agent = subprocess.Popen([sys.executable, os.path.join(HERE, "bench/soak_agent.py"), a.kopt,
                              os.path.join(d, "state/kopt.db"), str(ids["agent"]),
                              os.path.join(d, "agent_candidates"), agent_log, "--deadline",
                              str(a.run_timeout + 30)])
    kills, plan = [], list(kill_plan)
    worker_kills = 0
    timed_out = False
    while True:
        time.sleep(1)
        el = time.time() - t0
        dm.poll()
        st = states(a, d)
        if st and len(st) == 4 and all(s in TERMINAL for s in st.values()):
            break
        if el > a.run_timeout:
            timed_out = True
            log("run timeout (%d s): campaigns %s" % (a.run_timeout, st))
            break
        if not dm.alive():
            log("daemon exited by itself (code %s): restarting" % dm.proc.returncode)
            kills.append({"at_s": round(el, 1), "what": "daemon exited by itself", "code": dm.proc.returncode})
            dm.start()
            continue
        if plan and el >= plan[0][0]:
            at, what = plan[0]
            if what == "daemon":
                plan.pop(0)
                n = dm.kill9()
                kills.append({"at_s": round(el, 1), "what": "kill -9 daemon (and its %d workers)" % n})
                log("kill -9 daemon at %.1f s (%d workers)" % (el, n))
                time.sleep(0.3)
                dm.start()
            else:
                ws = dm.workers()
                # Timing worker on the first worker kill, the counters worker
                # (--profile-only) on the second when there is one.
                want_profile = worker_kills % 2 == 1
                pick = [w for w in ws if ("--profile-only" in w[1]) == want_profile] or ws
                if not pick:
                    if el - at > 5:
                        plan.pop(0)
                        kills.append({"at_s": round(el, 1), "what": "worker kill skipped: no worker process"})
                        log("worker kill skipped: the daemon has no worker process")
                    continue  # no worker up at this moment: try next second
                plan.pop(0)
                pid, argv = pick[0]
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                worker_kills += 1
                kind = "counters worker" if "--profile-only" in argv else "timing worker"
                kills.append({"at_s": round(el, 1), "what": "kill -9 %s (pid %d)" % (kind, pid)})
                log("kill -9 %s at %.1f s" % (kind, el))
    t1 = time.time()
    dm.stop()
    try:
        agent.wait(timeout=15)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.wait()
    res = analyse(d, ids, t1 - t0, dm, kills, timed_out, len(plan))
    json.dump(res, open(os.path.join(d, "result.json"), "w"), indent=2)
    return res


def analyse(d, ids, wall, dm, kills, timed_out, kills_left):
    db = sqlite3.connect(os.path.join(d, "state/kopt.db"))
    busy = sum(i["busy_s"] for i in dm.incarnations)
    evals = db.execute("SELECT count(*) FROM evaluations").fetchone()[0]
    res = {"wall_s": round(wall, 1), "evaluations": evals, "gpu_busy_s": round(busy, 1),
           "gpu_busy_fraction": round(busy / wall, 3) if wall > 0 else None,
           "evaluations_per_gpu_hour": round(evals / wall * 3600) if wall > 0 else None,
           "evaluations_per_busy_gpu_hour": round(evals / busy * 3600) if busy > 0 else None,
           "daemon_starts": len(dm.incarnations), "incarnations": dm.incarnations,
           "max_active_campaigns_seen": dm.max_active, "kills": kills, "kills_not_done": kills_left,
           "timed_out": timed_out,
           "llm_calls": db.execute("SELECT count(*) FROM llm_calls").fetchone()[0],
           "evaluation_statuses": dict(db.execute("SELECT status, count(*) FROM evaluations GROUP BY status").fetchall()),
           "agent_submissions": db.execute("SELECT status, count(*) FROM agent_submissions GROUP BY status").fetchall(),
           "campaigns": {}}
    for key, cid in ids.items():
        row = db.execute("SELECT c.state, c.spent_iterations, c.best_candidate_id, cd.source_hash, c.best_score, "
                         "o.name, cd.launch_plan_json, cd.parameters_json FROM campaigns c JOIN operators o ON o.id = c.operator_id "
                         "LEFT JOIN candidates cd ON cd.id = c.best_candidate_id WHERE c.id = ?", (cid,)).fetchone()
        state, spent, best, src_hash, score, name, plan, params = row
        # The winner's identity: its source and its launch plan with the
        # parameters (the rmsnorm campaigns' winners share the seed's source
        # and differ in BLOCK and VEC only).
        h = None
        if src_hash is not None:
            h = hashlib.sha256(json.dumps([src_hash, json.loads(plan), json.loads(params)],
                                          sort_keys=True).encode()).hexdigest()
        its = db.execute("SELECT number, status FROM iterations WHERE campaign_id = ? AND number > 0 "
                         "ORDER BY number", (cid,)).fetchall()
        keys = []
        for (dj,) in db.execute("SELECT data_json FROM events WHERE campaign_id = ? AND kind = 'evaluated'",
                                (cid,)):
            try:
                for s in json.loads(dj).get("subjects", []):
                    keys.append(s.get("cache_key"))
            except (ValueError, TypeError, AttributeError):
                keys.append("unparsable")
        dup = sorted({k for k in keys if keys.count(k) > 1})
        fin = db.execute("SELECT count(*) FROM events WHERE campaign_id = ? AND kind = 'finished'",
                         (cid,)).fetchone()[0]
        nev = db.execute("SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
                         "WHERE c.campaign_id = ?", (cid,)).fetchone()[0]
        res["campaigns"][key] = {
            "id": cid, "operator": name, "state": state, "spent_iterations": spent, "best": best,
            "best_source_hash": src_hash, "best_params": json.loads(params) if params else None,
            "best_key": h, "best_score": score, "iterations": len(its),
            "iterations_done": sum(1 for n, s in its if s == "done"),
            "iteration_numbers_ok": [n for n, _ in its] == list(range(1, len(its) + 1)),
            "evaluated_keys": len(keys), "duplicate_keys": len(dup), "finished_events": fin,
            "evaluation_rows": nev, "keys": sorted(set(keys))}
    db.close()
    return res


def compare(a, b, dry):
    checks = []

    def check(name, ok, detail=""):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})

    for r, tag in ((a, "A"), (b, "B")):
        check("%s: no run timeout" % tag, not r["timed_out"])
        for k, c in r["campaigns"].items():
            check("%s %s: done" % (tag, k), c["state"] == "done", c["state"])
            check("%s %s: every iteration once and done" % (tag, k),
                  c["iteration_numbers_ok"] and c["iterations_done"] == c["iterations"] == c["spent_iterations"],
                  "%d iterations, %d done, spent %d" % (c["iterations"], c["iterations_done"], c["spent_iterations"]))
            check("%s %s: no evaluation journaled twice" % (tag, k), c["duplicate_keys"] == 0,
                  "%d keys, %d duplicated" % (c["evaluated_keys"], c["duplicate_keys"]))
            check("%s %s: one finished event" % (tag, k), c["finished_events"] == 1, str(c["finished_events"]))
    check("B: kills done as planned", b["kills_not_done"] == 0 and len(
        [k for k in b["kills"] if k["what"].startswith("kill -9")]) >= 3,
        "; ".join("%s at %ss" % (k["what"], k["at_s"]) for k in b["kills"]))
    # A kill from outside is not the candidate's fault: B must not record
    # more crashed or timed-out evaluations than A.
    for st in ("crashed", "timeout"):
        na, nb = a["evaluation_statuses"].get(st, 0), b["evaluation_statuses"].get(st, 0)
        check("B: no %s evaluations beyond A's" % st, nb <= na, "A %d, B %d" % (na, nb))
    for k in a["campaigns"]:
        x, y = a["campaigns"][k], b["campaigns"][k]
        check("%s: same winner in A and B (source, plan, parameters)" % k, x["best_key"] == y["best_key"],
              "%s vs %s" % ((x["best_key"] or "-")[:12], (y["best_key"] or "-")[:12]))
        check("%s: same iterations in A and B" % k, x["spent_iterations"] == y["spent_iterations"],
              "%d vs %d" % (x["spent_iterations"], y["spent_iterations"]))
        same_keys = set(x["keys"]) == set(y["keys"])
        # On a GPU the measured times differ between runs, so a different
        # promotion can change which later subjects are evaluated; only the
        # deterministic dry run must evaluate exactly the same set.
        if dry:
            check("%s: same evaluations in A and B" % k, same_keys,
                  "%d vs %d distinct keys" % (len(x["keys"]), len(y["keys"])))
        else:
            checks.append({"check": "%s: same evaluated keys in A and B (informative)" % k, "ok": same_keys,
                           "detail": "%d vs %d distinct keys, %d in common" % (
                               len(x["keys"]), len(y["keys"]), len(set(x["keys"]) & set(y["keys"]))),
                           "informative": True})
    return checks


def revise_prompts(d, out):
    try:
        db = sqlite3.connect(os.path.join(d, "state/kopt.db"))
        rows = db.execute("SELECT l.id, i.number, l.prompt FROM llm_calls l JOIN iterations i ON i.id = l.iteration_id "
                          "WHERE i.number >= 2 ORDER BY l.id LIMIT 2").fetchall()
        with open(out, "w") as f:
            for cid, n, p in rows:
                try:
                    pj = json.loads(p)
                    sysp, user = pj.get("system", ""), pj["messages"][-1]["content"]
                except (ValueError, KeyError, IndexError, TypeError):
                    sysp, user = "", p
                f.write("## LLM call %d (iteration %d)\n\n### system\n\n%s\n\n### user\n\n%s\n\n" % (cid, n, sysp, user))
        un = db.execute("SELECT count(*) FROM llm_calls WHERE iteration_id IS NULL").fetchone()[0]
        unc = db.execute("SELECT count(*) FROM candidates WHERE origin='llm' AND llm_call_id IS NULL "
                          "AND coalesce(provider, '') != 'agent'").fetchone()[0]
        return {"revise_prompts": len(rows), "unlinked_calls": un, "unlinked_llm_candidates": unc}
    except sqlite3.Error as e:
        return {"error": str(e)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--kopt", required=True)
    p.add_argument("--worker-exe", default="")
    p.add_argument("--dry", action="store_true")
    p.add_argument("--fake-worker", default="")
    p.add_argument("--fake-delay-ms", type=int, default=400)
    p.add_argument("--kills", type=int, default=4)
    p.add_argument("--run-timeout", type=int, default=150)
    p.add_argument("--replay-iterations", type=int, default=6)
    p.add_argument("--autotune-iterations", type=int, default=4)
    p.add_argument("--seed", type=int, default=None)
    a = p.parse_args()
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    seed = a.seed if a.seed is not None else int(time.time()) % 100000
    rnd = random.Random(seed)
    log("soak: %s, kills %d, kill seed %d, run timeout %d s" % ("DRY (no GPU)" if a.dry else "GPU", a.kills, seed,
                                                                  a.run_timeout))
    log("== run A: uninterrupted")
    ra = run(a, os.path.join(out, "a"), [])
    log("run A: %.0f s, %d evaluations" % (ra["wall_s"], ra["evaluations"]))
    # Kill moments: random, one in each of KILLS equal parts of the window
    # from 10 % to 75 % of A's wall time (so they are spread and apart),
    # alternating daemon / worker.
    span = max(ra["wall_s"], 8.0 + 4.0 * a.kills)
    w = 0.65 * span / max(a.kills, 1)
    times = [0.10 * span + i * w + rnd.uniform(0.15 * w, 0.85 * w) for i in range(a.kills)]
    # The fake evaluator has no worker process: only daemon kills then.
    no_workers = a.dry and not a.fake_worker
    plan = [(t, "daemon" if i % 2 == 0 or no_workers else "worker") for i, t in enumerate(times)]
    log("== run B: kill plan %s" % ", ".join("%s at %.1f s" % (w, t) for t, w in plan))
    rb = run(a, os.path.join(out, "b"), plan)
    log("run B: %.0f s, %d evaluations" % (rb["wall_s"], rb["evaluations"]))
    checks = compare(ra, rb, a.dry)
    prompts = revise_prompts(os.path.join(out, "a"), os.path.join(out, "revise_prompts.md"))
    lines = ["%-8s %-20s %-5s %-5s %-4s %-4s %-14s %-14s %s" % ("campaign", "operator", "A", "B", "itA", "itB",
                                                               "A winner", "B winner", "")]
    lines[0] += "(winner: sha256 of source hash, plan, parameters)"
    for k in ra["campaigns"]:
        x, y = ra["campaigns"][k], rb["campaigns"][k]
        lines.append("%-8s %-20s %-5s %-5s %-4d %-4d %-14s %-14s %s" % (
            k, x["operator"], x["state"], y["state"], x["spent_iterations"], y["spent_iterations"],
            (x["best_key"] or "-")[:12], (y["best_key"] or "-")[:12],
            "same" if x["best_key"] == y["best_key"] else "DIFFERENT"))
    for tag, r in (("A", ra), ("B", rb)):
        lines.append("run %s: %.0f s wall, %d evaluations, GPU busy %.1f s = %.0f %% of wall, %s evaluations per "
                     "GPU-hour (%s per busy GPU-hour), %d daemon start(s), max %d campaigns active at once, "
                     "%d LLM calls" % (tag, r["wall_s"], r["evaluations"], r["gpu_busy_s"],
                                       100 * (r["gpu_busy_fraction"] or 0), r["evaluations_per_gpu_hour"],
                                       r["evaluations_per_busy_gpu_hour"], r["daemon_starts"],
                                       r["max_active_campaigns_seen"], r["llm_calls"]))
    lines.append("evaluation statuses: A %s; B %s" % (json.dumps(ra["evaluation_statuses"]),
                                                      json.dumps(rb["evaluation_statuses"])))
    lines.append("kills in B: " + ("; ".join("%s at %s s" % (k["what"], k["at_s"]) for k in rb["kills"]) or "none"))
    lines.append("prompts: %s" % json.dumps(prompts))
    failed = [c for c in checks if not c["ok"] and not c.get("informative")]
    for c in checks:
        if not c["ok"] or c.get("informative"):
            lines.append("%s %s: %s" % ("FAIL" if not c["ok"] and not c.get("informative") else "info",
                                        c["check"], c["detail"]))
    lines.append("checks: %d passed, %d failed (of %d; informative ones not counted)" % (
        sum(1 for c in checks if c["ok"] and not c.get("informative")), len(failed),
        sum(1 for c in checks if not c.get("informative"))))
    txt = "\n".join(lines)
    print(txt, flush=True)
    open(os.path.join(out, "summary.txt"), "w").write(txt + "\n")
    json.dump({"dry": a.dry, "kill_seed": seed, "a": {k: v for k, v in ra.items() if k != "campaigns"},
               "b": {k: v for k, v in rb.items() if k != "campaigns"},
               "campaigns": {k: {"A": {x: v for x, v in ra["campaigns"][k].items() if x != "keys"},
                                 "B": {x: v for x, v in rb["campaigns"][k].items() if x != "keys"}}
                             for k in ra["campaigns"]},
               "checks": checks, "prompts": prompts}, open(os.path.join(out, "summary.json"), "w"), indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
