#!/usr/bin/env bash
# The daemon on one GPU, overnight-style (GPU verification issue, items 1-2):
# three campaigns at once (two replay campaigns of vector_add with different
# seeds, one autotune campaign of rmsnorm), first uninterrupted (run A), then
# in a fresh state directory with `kill -9` of the daemon or of a worker at
# random moments, restarted each time (run B). Prints per campaign the final
# state, best candidate source hash and score for A and B, the GPU busy
# fraction and evaluations per GPU-hour of each run, and dumps two revise
# prompts of run A (what the daemon sent, with counters-based diagnoses and
# knowledge-base snippets) into OUT.
#
# Usage: bench/daemon_gpu_soak.sh OUT [BIN]   (BIN: kopt and kopt-worker; default .devbuild/bin)
# Needs an NVIDIA GPU and python3 (standard library).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: $0 OUT [BIN]}
bin=${2:-$here/.devbuild/bin}
kills=${KOPT_SOAK_KILLS:-3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
kopt="$bin/kopt"

make_configs() {  # DIR: the three operator configs and the daemon config
  local d=$1
  mkdir -p "$d/ops"
  python3 - "$here" "$d" <<'PY'
import json, shutil, sys, os
here, d = sys.argv[1], sys.argv[2]
va = json.load(open(os.path.join(here, "configs/examples/replay/vector_add.json")))
for seed in (1, 2):
    c = json.loads(json.dumps(va))
    c["campaign"]["seed"] = seed
    c["name"] = "vector_add_s%d" % seed
    json.dump(c, open(os.path.join(d, "ops", "va%d.json" % seed), "w"), indent=2)
rms = json.load(open(os.path.join(here, "configs/examples/rmsnorm.json")))
rms["campaign"]["budget"]["iterations"] = 6
for f in ("rmsnorm_reference.cu", "rmsnorm_baseline.cu", "rmsnorm_seed.cu"):
    shutil.copy(os.path.join(here, "configs/examples", f), os.path.join(d, "ops", f))
json.dump(rms, open(os.path.join(d, "ops", "rms.json"), "w"), indent=2)
cfg = {"state_dir": os.path.join(d, "state"), "gpus": 1,
       "worker": {"launch_timeout_ms": 3000, "min_time_s": 0.05, "max_time_s": 0.5},
       "providers": {"replay": {"model": "replay-corpus",
                                "transcript": os.path.join(here, "tests/data/replay/vector_add/transcript.jsonl")}},
       "limits": {"max_active_campaigns": 4, "spool_poll_ms": 200}, "http": {"port": 0}}
json.dump(cfg, open(os.path.join(d, "daemon.json"), "w"), indent=2)
PY
  for f in va1 va2 rms; do "$kopt" --db "$d/state/kopt.db" submit "$d/ops/$f.json" >"$d/$f.id" || return 1; done
}

start_daemon() {  # DIR
  KOPT_WORKER="$bin/kopt-worker" setsid "$kopt" daemon --config "$1/daemon.json" >>"$1/daemon.log" 2>&1 &
  echo $! >"$1/daemon.pid"
}

all_done() {  # DIR: every campaign in a terminal state
  "$kopt" --db "$1/state/kopt.db" list --json 2>/dev/null | python3 -c '
import json,sys
try: cs=json.load(sys.stdin)
except Exception: sys.exit(1)
cs = cs.get("campaigns", cs) if isinstance(cs, dict) else cs
sys.exit(0 if cs and all(c.get("state") in ("done","failed","cancelled") for c in cs) else 1)'
}

run() {  # DIR KILLS
  local d=$1 n=$2 t0 t1 k=0
  make_configs "$d" || { echo "setup failed" >&2; return 1; }
  t0=$(date +%s.%N)
  start_daemon "$d"
  while ! all_done "$d"; do
    sleep 1
    if [ "$k" -lt "$n" ] && [ $((RANDOM % 12)) -eq 0 ]; then
      k=$((k + 1))
      if [ $((k % 2)) -eq 1 ]; then
        echo "kill -9 daemon ($k/$n) at $(date +%T)" | tee -a "$d/kills.log"
        kill -9 "$(cat "$d/daemon.pid")" 2>/dev/null
        pkill -9 -f "$bin/kopt-worker" 2>/dev/null
        sleep 0.5
        start_daemon "$d"
      else
        echo "kill -9 worker ($k/$n) at $(date +%T)" | tee -a "$d/kills.log"
        pkill -9 -f "$bin/kopt-worker --gpu" 2>/dev/null
      fi
    fi
    [ $(( $(date +%s) - ${t0%.*} )) -gt 420 ] && { echo "timeout" >&2; break; }
  done
  t1=$(date +%s.%N)
  curl -s "http://127.0.0.1:$(python3 -c "import json;print(json.load(open('$d/state/daemon.json'))['http']['port'])")/health" >"$d/health.json" 2>/dev/null
  kill -TERM "$(cat "$d/daemon.pid")" 2>/dev/null
  sleep 2
  python3 - "$d" "$t0" "$t1" "$kopt" <<'PY'
import json, sqlite3, subprocess, sys
d, t0, t1, kopt = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
db = sqlite3.connect(d + "/state/kopt.db")
rows = db.execute("SELECT c.id, o.name, c.state, c.best_candidate_id, cd.source_hash FROM campaigns c "
                  "JOIN operators o ON o.id = c.operator_id LEFT JOIN candidates cd ON cd.id = c.best_candidate_id "
                  "ORDER BY c.id").fetchall()
evals = db.execute("SELECT count(*) FROM evaluations").fetchone()[0]
try:
    h = json.load(open(d + "/health.json"))
    busy = sum(g.get("busy_s", 0) for g in h.get("gpus", []))
except Exception:
    busy = float("nan")
wall = t1 - t0
res = {"wall_s": wall, "evaluations": evals, "gpu_busy_s_since_last_start": busy,
       "evaluations_per_gpu_hour": evals / wall * 3600, "campaigns": []}
for cid, name, state, best, h in rows:
    res["campaigns"].append({"id": cid, "operator": name, "state": state, "best": best, "best_source_hash": h})
json.dump(res, open(d + "/result.json", "w"), indent=2)
print(json.dumps(res))
PY
}

echo "== run A: uninterrupted"
run "$out/a" 0
echo "== run B: $kills kills"
run "$out/b" "$kills"
python3 - "$out" <<'PY'
import json, sys
o = sys.argv[1]
a, b = json.load(open(o + "/a/result.json")), json.load(open(o + "/b/result.json"))
print("%-16s %-6s %-6s %-18s %-18s" % ("operator", "A", "B", "A best", "B best"))
for x, y in zip(a["campaigns"], b["campaigns"]):
    print("%-16s %-6s %-6s %-18s %-18s %s" % (x["operator"], x["state"], y["state"], (x["best_source_hash"] or "-")[:16],
          (y["best_source_hash"] or "-")[:16], "same" if x["best_source_hash"] == y["best_source_hash"] else "DIFFERENT"))
for k, r in (("A", a), ("B", b)):
    print("run %s: %.0f s wall, %d evaluations, %.0f evaluations per GPU-hour" % (k, r["wall_s"], r["evaluations"], r["evaluations_per_gpu_hour"]))
PY
# Two revise prompts the daemon sent in run A (LLM calls of iterations >= 2).
python3 - "$out" <<'PY'
import json, sqlite3, sys
o = sys.argv[1]
db = sqlite3.connect(o + "/a/state/kopt.db")
rows = db.execute("SELECT l.id, i.number, l.prompt FROM llm_calls l JOIN iterations i ON i.id = l.iteration_id "
                  "WHERE i.number >= 2 ORDER BY l.id LIMIT 2").fetchall()
with open(o + "/revise_prompts.md", "w") as f:
    for cid, n, p in rows:
        pj = json.loads(p)
        f.write("## LLM call %d (iteration %d)\n\n### system\n\n%s\n\n### user\n\n%s\n\n" % (cid, n, pj.get("system", ""), pj["messages"][-1]["content"]))
print("revise prompts:", len(rows), "written to revise_prompts.md")
print("unlinked calls:", db.execute("SELECT count(*) FROM llm_calls WHERE iteration_id IS NULL").fetchone()[0],
      "unlinked llm candidates:", db.execute("SELECT count(*) FROM candidates WHERE origin='llm' AND llm_call_id IS NULL").fetchone()[0])
PY
