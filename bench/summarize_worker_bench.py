#!/usr/bin/env python3
"""Turns the files of run_worker_bench.sh into the tables of docs/benchmarks.md."""
import csv
import glob
import json
import os
import statistics
import sys

out = sys.argv[1]
sizes = ["n2m", "n8m", "n32m", "n128m", "n512m", "n2g"]
print(open(os.path.join(out, "gpu.txt")).read())

def load_runs(pattern):
    runs = []
    for f in sorted(glob.glob(os.path.join(out, pattern))):
        try:
            j = json.load(open(f))
            runs.append({r["workload"]: r for r in j["results"]["candidate"]["rows"] if r["status"] != "not_run"})
        except Exception as e:  # keep going: report what is there
            print(f"{f}: unreadable ({e})")
    return runs

# The probe's jobs, in its order: label, kernel, launches under ncu (plain 20:
# 20 samples + 3 warm-up; 5 + 3 for the two largest copies).
jobs = [("empty", "probe_empty", 23)] + \
    [(f"copy {w}", "copy4", 8 if w in ("n512m", "n2g") else 23) for w in sizes] + \
    [(f"ffma {w}", "ffma_chain", 23) for w in ("i128", "i256", "i512", "i1280", "i25600", "i128000")] + \
    [(f"smem {w}", "smem_walk", 23) for w in ("i500", "i1000", "i2000", "i10000", "i100000")]

def ncu_medians():
    rows = {}
    try:
        for row in csv.reader(open(os.path.join(out, "ncu_probe.csv"))):
            if len(row) > 10 and row[0].isdigit():
                r = rows.setdefault(int(row[0]), {"kernel": row[4]})
                unit, v = row[-2], float(row[-1].replace(",", ""))
                r[row[-3]] = v * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "ns": 1}.get(unit, 1)
    except FileNotFoundError:
        return {}
    ids = sorted(rows)
    res, pos = {}, 0
    for label, kernel, n in jobs:
        seg = [rows[i] for i in ids[pos:pos + n]]
        pos += n
        if len(seg) < n or any(r["kernel"] != kernel for r in seg):
            print(f"ncu_probe.csv: launches of {label} not where expected; ncu figures left out")
            return {}
        d = [r["gpu__time_duration.sum"] for r in seg[3:]]
        clk = [r.get("sm__cycles_elapsed.avg.per_second", 0) / 1e6 for r in seg[3:]]
        res[label] = (statistics.median(d), len(d), statistics.median(clk))
    return res

def probe(mode):
    res = {}
    try:
        for row in csv.DictReader(open(os.path.join(out, f"probe_{mode}.csv"))):
            res[row["kernel"]] = row
    except FileNotFoundError:
        pass
    return res

kopt = {}
for k in ("copy", "ffma", "smem"):
    for w, rows in [(w, r) for run in load_runs(f"fidelity_{k}_kopt_[0-9]*.json") + load_runs(f"fidelity_{k}_kopt_large_*.json")
                    for w, r in run.items()]:
        if rows["status"] == "ok":
            kopt.setdefault(f"{k} {w}", []).append(rows["median_ns"])
ncu = ncu_medians()
if not kopt and not ncu:
    print("Fidelity and repeatability: not run (PARTS without fidelity).")
else:
    print("| kernel | kopt median (run 1) | ncu gpu__time_duration (median) | kopt - ncu | kopt median over runs: min / max | spread (max-min)/median |")
    print("|---|---|---|---|---|---|")
    for label, _, _ in jobs:
        meds = kopt.get(label, [])
        n = ncu.get(label)
        if not meds and not n:
            continue
        k1 = f"{meds[0]/1e3:.2f} us" if meds else "not run"
        nc = f"{n[0]/1e3:.2f} us ({n[1]} launches, SM {n[2]:.0f} MHz)" if n else "n/a"
        diff = f"{100*(meds[0]-n[0])/n[0]:+.2f} % ({(meds[0]-n[0])/1e3:+.2f} us)" if meds and n else ""
        spread = (f"{min(meds)/1e3:.2f} / {max(meds)/1e3:.2f} us | {100*(max(meds)-min(meds))/statistics.median(meds):.2f} % ({len(meds)} runs)"
                  if meds else " | ")
        print(f"| {label} | {k1} | {nc} | {diff} | {spread} |")
    act, noev, serial = probe("activity"), probe("activity-noev"), probe("serial")
    if act:
        print()
        print("Probe (medians of 50 samples, after kopt's flush): Activity span, the stream's gap from the flush's end to the kernel's start, ncu")
        print("| kernel | regs | Activity span | gap, events between | gap, no events | span, serialized Activity kind | ncu | ncu - span |")
        print("|---|---|---|---|---|---|---|---|")
        for label, _, _ in jobs:
            a = act.get(label)
            if not a:
                continue
            n = ncu.get(label)
            span = float(a["span_us"])
            print(f"| {label} | {a['regs']} | {span:.3f} us | {float(a['gap_us']):.3f} us | "
                  f"{float(noev[label]['gap_us']):.3f} us | {float(serial[label]['span_us']):.3f} us | "
                  f"{n[0]/1e3:.3f} us | {n[0]/1e3 - span:+.3f} us |" if label in noev and label in serial and n else
                  f"| {label} | {a['regs']} | {span:.3f} us | {float(a['gap_us']):.3f} us | | | | |")

print()
if not os.path.exists(os.path.join(out, "throughput_wall.txt")):
    print("Throughput: not run (PARTS without throughput).")
else:
    walls = {}
    for line in open(os.path.join(out, "throughput_wall.txt")):
        k, v = line.split()
        walls[k] = float(v)
    kopt = [walls[k] for k in ("1", "2", "3", "4") if k in walls]
    print("Throughput (20 workloads, 3 seeds, request to stored result):")
    print(f"- cold kopt eval wall times (new process and worker each): {', '.join(f'{v:.2f} s' for v in kopt)} "
          "(run 1 compiles with an empty cache)")
    warm = []
    try:
        try:
            cj = json.load(open(os.path.join(out, "throughput_warm_compile.json")))
            cw = [r["request_to_stored_s"] for r in cj["timing"]["runs"]]
            print(f"- warm with compile (one worker, `--repeat 5 --recompile`): {', '.join(f'{v:.2f} s' for v in cw)}; "
                  f"median of runs 2-5 (reference outputs cached) {statistics.median(cw[1:]) if len(cw) > 1 else float('nan'):.2f} s")
            print("  compiles per run (longest ms, cached of total): " + ", ".join(
                f"{r.get('compile_ms', float('nan')):.0f} ms {r.get('compiles_cached', '?')}/{r.get('compiles', '?')}"
                for r in cj["timing"]["runs"]))
        except Exception as e:
            print(f"- warm runs with compile unreadable: {e}")
        wj = json.load(open(os.path.join(out, "throughput_warm.json")))
        t = wj["timing"]
        warm = [r["request_to_stored_s"] for r in t["runs"]]
        print(f"- warm (one worker, `--repeat 5`): worker start-up {t['worker_start_s']:.2f} s, then "
              f"{', '.join(f'{v:.2f} s' for v in warm)} from request to stored result; median {statistics.median(warm):.2f} s")
    except Exception as e:
        print(f"- warm runs unreadable: {e}")
    if kopt:
        print(f"- cold median: {statistics.median(kopt):.2f} s")
    try:
        kb = json.load(open(os.path.join(out, "kernelbench.json")))
        print(f"- KernelBench-style (load_inline build {kb['build_s']:.1f} s + checks/timing {kb['eval_s']:.1f} s): "
              f"{walls.get('kernelbench', kb['total_s']):.1f} s wall, torch {kb['torch']}")
        if kopt:
            print(f"- ratio KernelBench-style / kopt cold median: {walls.get('kernelbench', kb['total_s']) / statistics.median(kopt):.1f}x")
        if warm:
            print(f"- ratio KernelBench-style / kopt warm median: {walls.get('kernelbench', kb['total_s']) / statistics.median(warm):.1f}x")
    except Exception as e:
        print(f"- KernelBench-style: failed ({e})")
    try:
        tj = json.load(open(os.path.join(out, "throughput_2.json")))
        row = tj["results"]["candidate"]
        print(f"- kopt result: {row['workloads_ok']}/{row['workloads']} workloads ok, weighted SOL {100*row['weighted_sol_fraction']:.1f} %")
    except Exception as e:
        print(f"- kopt throughput result unreadable: {e}")
