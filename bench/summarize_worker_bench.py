#!/usr/bin/env python3
"""Turns the files of run_worker_bench.sh into the tables of docs/benchmarks.md."""
import csv
import glob
import json
import os
import statistics
import sys

out = sys.argv[1]
sizes = {"n2m": 2097152, "n8m": 8388608, "n32m": 33554432, "n128m": 134217728, "n512m": 536870912, "n2g": 2147483648}
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

runs = load_runs("fidelity_kopt_*.json")
large = load_runs("fidelity_large_kopt_*.json")

def ncu_median(n):
    vals = []
    try:
        for row in csv.reader(open(os.path.join(out, f"ncu_{n}.csv"))):
            if len(row) > 3 and row[-3] == "gpu__time_duration.sum":
                unit, v = row[-2], float(row[-1].replace(",", ""))
                vals.append(v * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1))
    except FileNotFoundError:
        return None, 0
    return (statistics.median(vals) if vals else None), len(vals)

if not runs and not large:
    print("Fidelity and repeatability: not run (PARTS without fidelity).")
else:
    print("| workload | bytes moved | kopt median (run 1) | ncu gpu__time_duration median | difference | kopt median over 5 runs: min / max | spread (max-min)/median |")
    print("|---|---|---|---|---|---|---|")
    for w, n in sizes.items():
        meds = [r[w]["median_ns"] for r in runs + large if w in r and r[w]["status"] == "ok"]
        ncu, cnt = ncu_median(n)
        if not meds:
            print(f"| {w} | {8*n/1e6:.0f} MB | failed | | | | |")
            continue
        k1 = meds[0]
        diff = f"{100*(k1-ncu)/ncu:+.2f} %" if ncu else "n/a"
        spread = (max(meds) - min(meds)) / statistics.median(meds)
        print(f"| {w} | {8*n/1e6:.0f} MB | {k1/1e3:.2f} us | {ncu/1e3 if ncu else float('nan'):.2f} us ({cnt} launches) | {diff} | "
              f"{min(meds)/1e3:.2f} / {max(meds)/1e3:.2f} us | {100*spread:.2f} % ({len(meds)} runs) |")

print()
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
