#!/usr/bin/env bash
# /metrics latency while every campaign step runs (issue #26): `kopt daemon`
# with the fake evaluator (no GPU), 8 fake GPU slots and 16 active autotune
# campaigns (of 300 queued, 60 iterations each, so some always run) keeps
# every core busy; then 200 scrapes, 50 ms apart. The same
# store is served in alternating rounds with http.slice_us = 0 (the kernel's
# default slice) and with the setting under test (default 200), so both see
# the same store size and host load. Prints median, p99 and max per round and
# per setting. A benchmark, not a CI test (a few minutes).
#
# Usage: bench/metrics_latency.sh OUT [BIN] (BIN holds kopt; default build/bin)
# Environment: KOPT_LAT_SLICE_US (200), KOPT_LAT_ROUNDS (2 per setting),
#   KOPT_LAT_CAMPAIGNS (300),
#   KOPT_LAT_WARM_S (20: steps running before the scrapes start),
#   KOPT_LAT_SCRAPES (200).
# Needs python3 (standard library).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: $0 OUT [BIN]}
bin=${2:-$here/build/bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec python3 - "$out" "$bin/kopt" <<'PY'
import json, os, signal, sqlite3, statistics, subprocess, sys, time, urllib.request

out, kopt = sys.argv[1], sys.argv[2]
SLICE = int(os.environ.get("KOPT_LAT_SLICE_US", "200"))
ROUNDS = int(os.environ.get("KOPT_LAT_ROUNDS", "2"))
WARM = float(os.environ.get("KOPT_LAT_WARM_S", "20"))
SCRAPES = int(os.environ.get("KOPT_LAT_SCRAPES", "200"))
N = int(os.environ.get("KOPT_LAT_CAMPAIGNS", "300"))
state = os.path.join(out, "state")
os.makedirs(os.path.join(state, "spool"), exist_ok=True)

def operator(i):
    # vadd with 16 workloads and a 1,536-point space, 60 iterations (as in
    # bench/store_scale.sh).
    wl = [{"id": "n%d" % k, "axes": {"n": 1000 * 2 ** k}, "weight": 1.0} for k in range(16)]
    def kernel(name, marker, params=None):
        k = {"source": 'extern "C" __global__ void %s(const float* a, const float* b, float* out, long long n) { %s\n }\n' % (name, marker),
             "launches": [{"kernel": name, "grid": ["ceil_div(n, 256)"], "block": [256],
                           "args": [{"tensor": "a"}, {"tensor": "b"}, {"tensor": "out"}, {"int": "n", "type": "int64"}]}]}
        if params: k["parameters"] = params
        return k
    params = {"BLOCK": {"values": [32, 64, 128, 256, 512, 1024, 2048, 4096], "default": 256},
              "ITEMS": {"values": [1, 2, 4, 8, 16, 32, 64, 128], "default": 4},
              "UNROLL": {"values": [1, 2, 4, 8, 16, 32], "default": 2},
              "VEC": {"values": [1, 2, 4, 8], "default": 1}}
    return {"name": "vadd_%d" % i, "op_type": "elementwise", "description": "out = a + b",
            "axes": {"n": {"type": "var"}},
            "inputs": {"a": {"shape": ["n"], "dtype": "float32"}, "b": {"shape": ["n"], "dtype": "float32"}},
            "outputs": {"out": {"shape": ["n"], "dtype": "float32"}},
            "roofline": {"flops": "n", "flop_unit": "fp32"},
            "workloads": wl, "reference": kernel("ref", "// reference"),
            "seed": kernel("seed", "// speed 1.0", params), "baseline": kernel("base", "// speed 1.1"),
            "campaign": {"provider": "autotune", "seed": i, "budget": {"iterations": 60},
                         "target_sol_fraction": 0.99, "candidates_per_iteration": 6}}

for i in range(1, N + 1):
    p = os.path.join(state, "spool", "c%04d.json" % i)
    json.dump(operator(i), open(p + ".tmp", "w")); os.rename(p + ".tmp", p)

def run_round(slice_us, label):
    cfg = os.path.join(out, "daemon.json")
    json.dump({"state_dir": state, "gpus": 8, "evaluator": "fake", "fake": {"delay_ms": 0},
               "http": {"port": 0, "slice_us": slice_us},
               "limits": {"max_active_campaigns": 16, "spool_poll_ms": 200}}, open(cfg, "w"))
    log = open(os.path.join(out, "daemon-%s.log" % label), "w")
    p = subprocess.Popen([kopt, "daemon", "--config", cfg], stdout=log, stderr=subprocess.STDOUT)
    port = None
    for _ in range(600):
        try:
            info = json.load(open(os.path.join(state, "daemon.json")))
            if info.get("pid") == p.pid: port = info["http"]["port"]; break
        except Exception: pass
        time.sleep(0.1)
    if port is None: raise SystemExit("the daemon did not start; see " + log.name)
    def get(path):
        t0 = time.perf_counter()
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=30) as r:
            r.read()
        return (time.perf_counter() - t0) * 1000
    time.sleep(WARM)
    load = os.getloadavg()[0]
    # /health between the scrapes: it reads no store, so its tail is the
    # wait for a CPU alone, and the difference is the store's share.
    lat, hl = [], []
    for _ in range(SCRAPES):
        lat.append(get("/metrics")); hl.append(get("/health")); time.sleep(0.05)
    c = sqlite3.connect("file:%s?mode=ro" % os.path.join(state, "kopt.db"), uri=True, timeout=30)
    running = c.execute("SELECT count(*) FROM campaigns WHERE state = 'running'").fetchone()[0]
    rows = c.execute("SELECT coalesce(sum(n), 0) FROM store_counts WHERE key LIKE 'evaluations:%'").fetchone()[0]
    c.close()
    p.send_signal(signal.SIGTERM); p.wait(timeout=120)
    lat.sort(); hl.sort()
    r = {"health_median_ms": statistics.median(hl), "health_p99_ms": hl[int(0.99 * (len(hl) - 1))],
         "health_max_ms": hl[-1],"slice_us": slice_us, "median_ms": statistics.median(lat), "p99_ms": lat[int(0.99 * (len(lat) - 1))],
         "max_ms": lat[-1], "over_10ms": sum(x > 10 for x in lat), "load1": load,
         "running_campaigns": running, "evaluation_rows": rows}
    print("%-8s slice_us %6d: median %6.2f ms, p99 %6.2f ms, max %6.2f ms, %3d of %d over 10 ms "
          "(%d campaigns running, %d rows, load %.1f)"
          % (label, slice_us, r["median_ms"], r["p99_ms"], r["max_ms"], r["over_10ms"], len(lat),
             running, rows, load), flush=True)
    print("%-8s %14s  /health median %6.2f ms, p99 %6.2f ms, max %6.2f ms"
          % ("", "", r["health_median_ms"], r["health_p99_ms"], r["health_max_ms"]), flush=True)
    if running == 0: print("  warning: no campaign was running at the end of this round", flush=True)
    return r, lat

res = {"default": [], "short": []}
for k in range(ROUNDS):
    for label, s in (("default", 0), ("short", SLICE)):
        res[label].append(run_round(s, "%s%d" % (label, k)))
print("over all rounds (%d scrapes each):" % (ROUNDS * SCRAPES))
summary = {}
for label, rs in res.items():
    lat = sorted(x for _, l in rs for x in l)
    summary[label] = {"slice_us": rs[0][0]["slice_us"], "median_ms": statistics.median(lat),
                      "p99_ms": lat[int(0.99 * (len(lat) - 1))], "max_ms": lat[-1],
                      "over_10ms": sum(x > 10 for x in lat), "n": len(lat)}
    print("  %-8s slice_us %6d: median %6.2f ms, p99 %6.2f ms, max %6.2f ms, %d of %d over 10 ms"
          % (label, summary[label]["slice_us"], summary[label]["median_ms"], summary[label]["p99_ms"],
             summary[label]["max_ms"], summary[label]["over_10ms"], len(lat)))
json.dump({"rounds": {k: [r for r, _ in v] for k, v in res.items()}, "summary": summary},
          open(os.path.join(out, "metrics_latency.json"), "w"), indent=2)
PY
