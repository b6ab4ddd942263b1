#!/usr/bin/env python3
"""Merges the rows of one role from several `kopt eval --json` outputs (plain or .gz) into one
file of the same schema, recomputing the weighted fields over the merged rows, so that a config
measured in several time-boxed calls of one GPU run can be read (summarize_eval.py) and composed
into the suite figure (summarize_bench.py --eval-file) as one eval.

  merge_evals.py OUT.json ROLE IN.json[.gz][:ROLE2] [IN ...]
ROLE (candidate, baseline, seed) names the result block written; an input may name the block it
is read from after a colon (a seed in one run, the candidate in another).

A workload that appears twice is an error: which measurement counts must be chosen by hand.
"""
import gzip
import json
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def weighted(rows, key):
    # kopt's weighting: sum(weight * fraction) / sum(weight) over the rows that have the field;
    # a failed row counts 0, as in `kopt eval`.
    total = sum(r["weight"] for r in rows)
    if total <= 0:
        return None
    return sum(r["weight"] * (r.get(key) or 0.0) for r in rows if r.get("status") == "ok") / total


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, role, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
    merged, rows, seen = None, [], {}
    for spec in inputs:
        path, _, src = spec.partition(":")
        src = src or role
        d = load(path)
        block = d.get("results", {}).get(src)
        if block is None:
            sys.exit(f"{path}: no '{src}' results")
        if merged is None:
            merged = d
            merged["results"] = {role: dict(block, role=role)}
        for r in block["rows"]:
            if r["workload"] in seen:
                sys.exit(f"{r['workload']}: in both {seen[r['workload']]} and {path}")
            seen[r["workload"]] = path
            rows.append(r)
    block = merged["results"][role]
    block["rows"] = rows
    block["workloads"] = len(rows)
    block["workloads_ok"] = sum(1 for r in rows if r.get("status") == "ok")
    block["status"] = "ok" if block["workloads_ok"] == len(rows) else "partial"
    block["weighted_sol_fraction"] = weighted(rows, "sol_fraction")
    block["weighted_attainable_sol_fraction"] = weighted(rows, "attainable_sol_fraction")
    merged["merged_from"] = inputs
    with open(out, "w") as f:
        json.dump(merged, f, indent=1)
    print(f"{out}: {len(rows)} rows, {block['workloads_ok']} ok, weighted SOL "
          f"{block['weighted_sol_fraction']:.4f}")


if __name__ == "__main__":
    main()
