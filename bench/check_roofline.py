#!/usr/bin/env python3
"""Checks the roofline counts of the benchmark suite against Atrex-Bench.

For every configs/bench/<op>.json and every workload s<id>_..., evaluates the
config's roofline FLOP expression and bytes (explicit expression or kopt's
default rule) and compares them with the shape's counts in
configs/bench/data/<op>.json (Atrex-Bench's semantic_W_flops and
semantic_Q_read_bytes + semantic_Q_write_bytes). They must match exactly,
except for operators listed in configs/bench/data/roofline_tolerances.json, whose Atrex-Bench counts were
taken from one random draw of the inputs (e.g. how many (token, expert)
pairs are distinct); those must match within the stated relative tolerance.

Also checks that every shape of the data has exactly one workload and that
the workload weights follow the weight rule (docs/benchmarks.md "Suite").

Usage: check_roofline.py [--suite configs/bench] [--ops a,b] [--verbose]
Exit codes: 0 all match, 1 a mismatch, 2 bad input.
"""
import argparse
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "suite"))
import kopt_config as kc  # noqa: E402

def data_dependent(suite):
    """op -> {"flops": rel_tol, "bytes": rel_tol, "why": ...}, from
    configs/bench/data/roofline_tolerances.json (shared with the C++ test)."""
    p = os.path.join(suite, "data", "roofline_tolerances.json")
    if not os.path.exists(p):
        return {}
    with open(p) as f:
        return json.load(f)["operators"]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default=os.path.join(os.path.dirname(HERE), "configs", "bench"))
    ap.add_argument("--ops", default="", help="comma-separated operator names (default: all configs)")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    paths = sorted(glob.glob(os.path.join(a.suite, "*.json")))
    if a.ops:
        wanted = set(a.ops.split(","))
        paths = [p for p in paths if os.path.basename(p)[:-5] in wanted]
        missing = wanted - {os.path.basename(p)[:-5] for p in paths}
        if missing:
            print("error: no config for: %s" % ", ".join(sorted(missing)), file=sys.stderr)
            return 2
    if not paths:
        print("error: no configs in %s" % a.suite, file=sys.stderr)
        return 2
    failures = 0
    checked = 0
    tolerances = data_dependent(a.suite)
    covered = {}  # op -> (shape ids of its data, shape ids with a workload in some config)
    for path in paths:
        cfg = kc.load(path)
        base = os.path.basename(path)[:-5]
        # A config may cover part of an operator's shapes (e.g. one dtype);
        # its data file is the operator's: the name before a "_<dtype>" suffix.
        op = base
        data_path = os.path.join(a.suite, "data", op + ".json")
        while not os.path.exists(data_path) and "_" in op:
            op = op.rsplit("_", 1)[0]
            data_path = os.path.join(a.suite, "data", op + ".json")
        if not os.path.exists(data_path):
            print("%s: error: no data file for %s in %s/data" % (path, base, a.suite))
            failures += 1
            continue
        with open(data_path) as f:
            data = json.load(f)["shapes"]
        tol = tolerances.get(op, {"flops": 0.0, "bytes": 0.0})
        for wl in cfg["workloads"]:
            m = re.match(r"s(\d+)_", wl["id"])
            if not m or m.group(1) not in data:
                print("%s: %s: error: workload id does not name an Atrex-Bench shape (s<id>_...)" % (base, wl["id"]))
                failures += 1
                continue
            d = data[m.group(1)]
            axes = kc.workload_axes(cfg, wl)
            try:
                flops, nbytes = kc.roofline(cfg, axes)
            except kc.ExprError as e:
                print("%s: %s: error: %s" % (base, wl["id"], e))
                failures += 1
                continue
            want_flops = sum(d["flops"].values()) if d["flops"] else 0
            want_bytes = d["read_bytes"] + d["write_bytes"]
            checked += 1
            for what, got, want in (("flops", flops, want_flops), ("bytes", nbytes, want_bytes)):
                rel = abs(got - want) / max(abs(want), 1)
                ok = rel <= tol[what]
                if not ok or a.verbose:
                    print("%s: %s: %s %s: config %d, atrex %d (rel. diff %.3g, allowed %.3g)"
                          % (base, wl["id"], what, "ok" if ok else "MISMATCH", got, want, rel, tol[what]))
                if not ok:
                    failures += 1
            if abs(wl.get("weight", 1.0) - d["weight"]) > 1e-9 * max(1.0, d["weight"]) + 1e-12:
                print("%s: %s: weight %g differs from the weight rule's %g" % (base, wl["id"], wl.get("weight", 1.0), d["weight"]))
                failures += 1
        ids = {re.match(r"s(\d+)_", w["id"]).group(1) for w in cfg["workloads"] if re.match(r"s(\d+)_", w["id"])}
        seen = covered.setdefault(op, (set(data), set()))[1]
        dup = seen & ids
        if dup:
            print("%s: error: shapes with a workload in two configs: %s" % (base, ", ".join(sorted(dup, key=int))))
            failures += 1
        seen |= ids
    for op, (want, seen) in sorted(covered.items()):
        if not a.ops and want != seen:
            print("%s: error: shapes without a workload: %s" % (op, ", ".join(sorted(want - seen, key=int))))
            failures += 1
    print("checked %d workloads of %d configs: %s" % (checked, len(paths), "all match" if not failures else "%d problems" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
