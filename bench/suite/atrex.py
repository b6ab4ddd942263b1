#!/usr/bin/env python3
"""Atrex-Bench data for kopt's benchmark suite: importance weights per shape
and the roofline counts kept in the repo.

The suite's configs (configs/bench/<op>.json) carry one workload per
Atrex-Bench shape, with id "s<shape id>_..." so that a workload can be traced
back to its shape, and weight = the shape's share of the operator's
importance (the weight rule below, also in docs/benchmarks.md "Suite").

Usage:
  atrex.py weights OP [--data DIR]   print {shape id: weight} as JSON
  atrex.py export [--data DIR]       copy importance, call counts and roofline
                                     counts of all operators into
                                     configs/bench/data/<op>.json

Only the standard library: this runs in CI (no torch, no network).
"""
import argparse
import json
import os
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DATA = os.path.join(os.path.dirname(REPO), "shared", "data", "atrex-bench")
REPO_DATA = os.path.join(REPO, "configs", "bench", "data")


def shape_weights(importance, call_counts):
    """The weight rule.

    importance: the operator's importance_score (share of production GPU time).
    call_counts: {shape id: call count or None} for every shape.

    - Shapes whose metadata gives a call count share the operator's importance
      in proportion to their call counts.
    - A shape without a call count is given the median of the known counts
      (a neutral guess that neither drops nor favours it).
    - If no shape has a call count, the importance is spread evenly.
    The weights of an operator sum to its importance, so weights are
    comparable across operators and the suite total is a plain weighted sum.
    Weights are rounded to 6 significant digits (and stay > 0).
    """
    known = [c for c in call_counts.values() if c is not None and c > 0]
    if not known:
        raw = {sid: 1.0 for sid in call_counts}
    else:
        fill = statistics.median(known)
        raw = {sid: float(c) if (c is not None and c > 0) else float(fill)
               for sid, c in call_counts.items()}
    total = sum(raw.values())
    return {sid: float(f"{importance * r / total:.6g}") for sid, r in raw.items()}


def load_op(op, data_dir):
    d = os.path.join(data_dir, op)
    with open(os.path.join(d, "metadata.json")) as f:
        meta = json.load(f)
    with open(os.path.join(d, "shapes.json")) as f:
        shapes = json.load(f)
    with open(os.path.join(d, "roofline.json")) as f:
        roof = json.load(f)["shapes"]
    with open(os.path.join(data_dir, "operator_importance.json")) as f:
        imp = json.load(f)["operators"][op]["importance_score"]
    return meta, shapes, roof, imp


def op_record(op, data_dir):
    meta, shapes, roof, imp = load_op(op, data_dir)
    counts = {sid: meta["shapes"].get(sid, {}).get("call_count") for sid in shapes}
    weights = shape_weights(imp, counts)
    rec = {
        "source": "alibaba/atrex-bench data/%s (Apache-2.0, see LICENSE and NOTICE here)" % op,
        "importance_score": imp,
        "weight_rule": "docs/benchmarks.md#suite",
        "shapes": {},
    }
    for sid, s in shapes.items():
        r = roof[sid]
        rec["shapes"][sid] = {
            "input_kwargs": s.get("input_kwargs"),
            "init_kwargs": s.get("init_kwargs"),
            "description": meta["shapes"].get(sid, {}).get("description", ""),
            "call_count": counts[sid],
            "weight": weights[sid],
            "flops": r.get("semantic_W_flops", {}),
            "read_bytes": r.get("semantic_Q_read_bytes"),
            "write_bytes": r.get("semantic_Q_write_bytes"),
        }
    return rec


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("weights")
    w.add_argument("op")
    w.add_argument("--data", default=DEFAULT_DATA)
    e = sub.add_parser("export")
    e.add_argument("--data", default=DEFAULT_DATA)
    a = ap.parse_args(argv)
    if a.cmd == "weights":
        print(json.dumps({k: v["weight"] for k, v in op_record(a.op, a.data)["shapes"].items()}, indent=1))
        return 0
    ops = sorted(x for x in os.listdir(a.data) if os.path.isdir(os.path.join(a.data, x)))
    os.makedirs(REPO_DATA, exist_ok=True)
    for op in ops:
        with open(os.path.join(REPO_DATA, op + ".json"), "w") as f:
            json.dump(op_record(op, a.data), f, indent=1, sort_keys=True)
            f.write("\n")
    for name in ("LICENSE", "NOTICE"):
        with open(os.path.join(a.data, name)) as src, open(os.path.join(REPO_DATA, name), "w") as dst:
            dst.write(src.read())
    print("exported %d operators to %s" % (len(ops), REPO_DATA))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
