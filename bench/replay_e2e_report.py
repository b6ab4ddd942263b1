#!/usr/bin/env python3
"""Reads the store of a replay campaign and says, for every answer of the
corpus, what became of it and why it lost; checks the outcomes against the
corpus manifest (tests/data/replay/<op>/expected.json).

    replay_e2e_report.py MANIFEST DB [--other-db DB2] [--json OUT] [--allow-other-winner]

Checks (each failure is printed as FAIL and makes the exit code 1):
- the campaign finished (state done) with a verified winner;
- every usable answer became exactly one candidate (matched by the SHA-256
  of its device code), every unusable one was refused in its iteration;
- the worker statuses of each candidate: the expected status occurs, and no
  status outside the expected one and its allowed others ("also");
- the expected error text, where the manifest gives one;
- the winner is the expected answer (a warning only with
  --allow-other-winner), and no correct, honest candidate was measured
  faster than the winner by more than the noise margin (3 %, weighted
  geometric mean) without also being slower than the winner on some
  workload by more than the campaign's promotion_max_regression (default
  5 %) plus that margin: such a candidate trades one shape for others,
  which the promotion rule refuses, so it is reported (WARN) but is not a
  faster candidate the campaign missed;
- with --other-db (the killed-and-resumed run): the same winner (same
  source hash and launch plan) and the same set of candidates.

Uses only the Python standard library (the GPU machine has no sqlite3 CLI);
the store is opened read-only.
"""
import argparse
import json
import math
import sqlite3
import sys
from collections import defaultdict

NOISE = 0.03  # a correct candidate this much faster than the winner is a failure
MAX_REGRESSION = 0.05  # campaign default of loop.promotion_max_regression (agent/campaign/promotion.hpp)


def connect(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


class Campaign:
    def __init__(self, path):
        self.db = connect(path)
        rows = self.db.execute("SELECT * FROM campaigns ORDER BY id").fetchall()
        if not rows:
            raise SystemExit(f"{path}: no campaign")
        self.c = rows[-1]
        cid = self.c["id"]
        self.workloads = {r["id"]: dict(r) for r in self.db.execute(
            "SELECT id, key, weight, position FROM workloads WHERE operator_id = ? ORDER BY position",
            (self.c["operator_id"],))}
        self.candidates = [dict(r) for r in self.db.execute(
            "SELECT c.*, i.number AS iteration FROM candidates c LEFT JOIN iterations i ON i.id = c.iteration_id "
            "WHERE c.campaign_id = ? ORDER BY c.id", (cid,))]
        self.by_id = {c["id"]: c for c in self.candidates}
        self.evals = defaultdict(list)
        for r in self.db.execute(
                "SELECT e.* FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
                "WHERE c.campaign_id = ? ORDER BY e.id", (cid,)):
            self.evals[r["candidate_id"]].append(dict(r))
        self.compiles = defaultdict(list)
        for r in self.db.execute(
                "SELECT m.* FROM compilations m JOIN candidates c ON c.id = m.candidate_id "
                "WHERE c.campaign_id = ? ORDER BY m.id", (cid,)):
            self.compiles[r["candidate_id"]].append(dict(r))
        self.events = [dict(r) for r in self.db.execute(
            "SELECT * FROM events WHERE campaign_id = ? ORDER BY id", (cid,))]
        for e in self.events:
            e["data"] = json.loads(e["data_json"]) if e["data_json"] else {}
        self.iterations = {r["number"]: dict(r) for r in self.db.execute(
            "SELECT * FROM iterations WHERE campaign_id = ?", (cid,))}
        self.proposals = {}
        for e in self.events:
            if e["kind"] == "proposals":
                self.proposals[e["data"].get("iteration")] = e["data"]

    def medians(self, cid, stage):
        out = {}
        for e in self.evals[cid]:
            if e["stage"] == stage and e["status"] == "ok" and e["median_ns"]:
                out[e["workload_id"]] = e["median_ns"]
        return out

    def geomean(self, med, over=None):
        keys = [w for w in (over if over is not None else med.keys()) if w in med]
        if not keys or (over is not None and len(keys) != len(over)):
            return None
        ws = sum(self.workloads[w]["weight"] for w in keys)
        return math.exp(sum(self.workloads[w]["weight"] * math.log(med[w]) for w in keys) / ws)

    def statuses(self, cid):
        return {e["status"] for e in self.evals[cid]}


def fmt_us(ns):
    return "-" if ns is None else f"{ns / 1e3:.2f} us"


def why_lost(camp, cand, winner_id):
    """One sentence from the store: how far the candidate got and why it stopped there."""
    cid = cand["id"]
    if cid == winner_id:
        fin = next((e for e in camp.events if e["kind"] == "finished"), None)
        extra = ""
        if fin and "speedup_vs_baseline" in fin["data"]:
            extra = f"; {fin['data']['speedup_vs_baseline']:.2f}x the baseline (weighted geomean, fresh seeds)"
        return "WINNER: the campaign's best, verified with fresh seeds" + extra
    evs = camp.evals[cid]
    bad = [e for e in evs if e["status"] != "ok"]
    if bad:
        first = bad[0]
        w = camp.workloads[first["workload_id"]]["key"]
        msg = (first["error"] or "").replace("\n", " ")
        if len(msg) > 160:
            msg = msg[:157] + "..."
        return f"{first['status']} at the {first['stage']} stage on {w}: {msg}"
    stages = {e["stage"] for e in evs}
    for e in camp.events:
        d = e["data"]
        if e["kind"] in ("promoted", "not_promoted") and d.get("challenger") == cid:
            dec = d.get("decision", {})
            if e["kind"] == "not_promoted":
                return (f"compared head to head with the incumbent (candidate {d.get('incumbent')}), "
                        f"{dec.get('verdict')}: {dec.get('reason')}")
            later = [x for x in camp.events if x["kind"] == "promoted" and x["id"] > e["id"]]
            nxt = later[0]["data"].get("challenger") if later else None
            return (f"was promoted in iteration {d.get('iteration')} ({dec.get('reason')}), "
                    f"then replaced by candidate {nxt}")
    if cand["origin"] in ("seed", "baseline", "reference"):
        return f"{cand['origin']}: the starting point; beaten by the winner"
    it = camp.iterations.get(cand["iteration"])
    parent = it["parent_candidate_id"] if it else None
    if "full" in stages:
        full = camp.geomean(camp.medians(cid, "full"), list(camp.workloads))
        best = camp.geomean(camp.medians(winner_id, "full"), list(camp.workloads)) if winner_id else None
        return (f"passed the full sweep ({fmt_us(full)} weighted geomean) but was not the fastest of its iteration "
                f"or not faster than the incumbent of the time (the winner: {fmt_us(best)})")
    if "screen" in stages:
        mine = camp.medians(cid, "screen")
        ref = camp.medians(parent, "screen") if parent else {}
        keys = [w for w in mine if w in ref]
        g_m, g_p = camp.geomean(mine, keys), camp.geomean(ref, keys)
        if g_m and g_p:
            return (f"correct, but {g_m / g_p:.2f}x the time of its parent (candidate {parent}) on the screen "
                    f"workloads ({fmt_us(g_m)} vs {fmt_us(g_p)}): not sent to the full sweep")
        return f"correct on screen but not faster than its parent (candidate {parent})"
    comp = camp.compiles[cid]
    if comp:
        return f"compilation {comp[-1]['status']}: {(comp[-1]['log'] or '')[:160]}"
    return "never evaluated"


def check(manifest, camp, allow_other_winner, out):
    fails, warns = [], []
    k = manifest["candidates_per_iteration"]
    by_hash = defaultdict(list)
    for c in camp.candidates:
        by_hash[c["source_hash"]].append(c)
    c = camp.c
    winner_id = c["best_candidate_id"]
    fin = next((e for e in camp.events if e["kind"] == "finished"), None)
    if c["state"] != "done":
        fails.append(f"campaign state is {c['state']} ({c['stop_reason']}), not done")
    if not fin or not fin["data"].get("verified"):
        fails.append("the winner was not verified with fresh seeds")
    rows = []
    answer_of = {}
    for a in manifest["answers"]:
        idx = a["index"]
        it = (idx - 1) // k + 1
        row = {"answer": idx, "file": a["file"].split("/")[-1], "category": a["category"],
               "expected": a["status"], "iteration": it}
        if a["parse"] != "ok":
            prop = camp.proposals.get(it)
            problems = "\n".join(prop.get("problems", [])) if prop else ""
            row["candidate"] = None
            row["observed"] = "unusable" if a["parse_problem"] in problems else "?"
            row["why"] = "refused by the extractor: " + (a["parse_problem"] if row["observed"] == "unusable"
                                                         else "NOT FOUND in the iteration's problems")
            if row["observed"] != "unusable":
                fails.append(f"answer {idx} ({row['file']}): expected a refused answer in iteration {it}, "
                             f"the proposals event says: {problems[:300]!r}")
            rows.append(row)
            continue
        cands = [x for x in by_hash.get(a["source_sha256"], []) if x["origin"] == "llm"]
        if len(cands) != 1:
            fails.append(f"answer {idx} ({row['file']}): {len(cands)} candidates with its source, expected 1")
            row.update(candidate=None, observed="missing", why="no candidate")
            rows.append(row)
            continue
        cand = cands[0]
        answer_of[cand["id"]] = idx
        st = camp.statuses(cand["id"])
        allowed = {a["status"]} | set(a.get("also", []))
        row["candidate"] = cand["id"]
        row["observed"] = ",".join(sorted(st)) or "not evaluated"
        if cand["iteration"] != it:
            fails.append(f"answer {idx}: proposed in iteration {cand['iteration']}, expected {it} "
                         f"(the transcript was not served in order)")
        if a["status"] not in st or not st <= allowed:
            fails.append(f"answer {idx} ({row['file']}): statuses {sorted(st)}, expected {a['status']}"
                         + (f" (others allowed: {sorted(allowed - {a['status']})})" if a.get("also") else ""))
        if a.get("message"):
            msgs = " ".join((e["error"] or "") for e in camp.evals[cand["id"]] if e["status"] == a["status"])
            if a["message"] not in msgs:
                fails.append(f"answer {idx} ({row['file']}): no {a['status']} message contains "
                             f"{a['message']!r}; got {msgs[:300]!r}")
        row["why"] = why_lost(camp, cand, winner_id)
        rows.append(row)

    # The winner.
    exp = manifest["expected_winner"]  # an answer's index, or "seed"
    got = answer_of.get(winner_id)
    if got is None and camp.by_id.get(winner_id, {}).get("origin") == "seed":
        got = "seed"
    win_desc = f"candidate {winner_id} = answer {got}" if got else f"candidate {winner_id} ({camp.by_id.get(winner_id, {}).get('origin')})"
    if got != exp:
        msg = f"the winner is {win_desc}, the manifest expects answer {exp}"
        (warns if allow_other_winner else fails).append(msg)
    # No correct, honest candidate measurably faster than the winner, under
    # the campaign's own rule: faster by weighted geomean beyond the noise
    # margin, and on no workload slower by more than max_regression (plus the
    # margin, since the two were measured in different requests).
    try:
        settings = json.loads(c["settings_json"] or "{}")
    except ValueError:
        settings = {}
    max_reg = settings.get("loop", {}).get("promotion_max_regression", MAX_REGRESSION)

    def judge(cid, label, mine, theirs, keys):
        g_c, g_w = camp.geomean(mine, keys), camp.geomean(theirs, keys)
        if not (g_c and g_w and g_c < g_w * (1 - NOISE)):
            return
        who = f"candidate {cid} (answer {answer_of.get(cid, camp.by_id[cid]['origin'])})"
        worst_id = max(keys, key=lambda w: mine[w] / theirs[w])
        r = mine[worst_id] / theirs[worst_id]
        worst = camp.workloads[worst_id]["key"]
        if r > 1 + max_reg + NOISE:
            warns.append(f"{who} measured {fmt_us(g_c)} on {label}, faster than the winner's {fmt_us(g_w)} "
                         f"by weighted geomean, but {100 * (r - 1):.1f} % slower on {worst}: a trade the "
                         f"promotion rule refuses (max_regression {100 * max_reg:.0f} %)")
        else:
            fails.append(f"{who} measured {fmt_us(g_c)} on {label}, faster than the winner's {fmt_us(g_w)}")

    if winner_id:
        all_w = list(camp.workloads)
        w_full = camp.medians(winner_id, "full")
        w_screen = camp.medians(winner_id, "screen")
        for cand in camp.candidates:
            cid = cand["id"]
            if cid == winner_id or cand["origin"] == "reference":
                continue
            st = camp.statuses(cid)
            if not st or st != {"ok"}:
                continue  # incorrect, cheating or never measured
            full = camp.medians(cid, "full")
            if all(w in full and w in w_full for w in all_w):
                # Swept in full: that sweep (and the compare it led to) is
                # what decided, not the screen subset.
                judge(cid, "the full sweep", full, w_full, all_w)
                continue
            scr = camp.medians(cid, "screen")
            keys = [w for w in scr if w in w_screen]
            if keys:
                judge(cid, "screen", scr, w_screen, keys)
    for x in camp.candidates:
        if x["origin"] in ("seed", "baseline"):
            rows.append({"answer": x["origin"], "file": "-", "category": x["origin"], "expected": "ok",
                         "iteration": 0, "candidate": x["id"],
                         "observed": ",".join(sorted(camp.statuses(x["id"]))),
                         "why": why_lost(camp, x, winner_id)})
    out.update(winner=winner_id, winner_answer=got, state=c["state"], stop_reason=c["stop_reason"],
               best_score=c["best_score"], rows=rows, fails=fails, warnings=warns,
               winner_source_hash=camp.by_id.get(winner_id, {}).get("source_hash"),
               winner_plan=camp.by_id.get(winner_id, {}).get("launch_plan_json"))
    return fails, warns


def print_report(title, out):
    print(f"== {title}: campaign {out['state']} ({out['stop_reason']}); winner {out['winner']}"
          f" (answer {out['winner_answer']}), weighted SOL {out['best_score'] or 0:.3f}")
    print(f"{'ans':>4} {'it':>2} {'cand':>5}  {'expected':<18} {'observed':<28} why")
    for r in out["rows"]:
        cand = "-" if r["candidate"] is None else str(r["candidate"])
        print(f"{str(r['answer']):>4} {r['iteration']:>2} {cand:>5}  {r['expected']:<18} {r['observed']:<28} "
              f"{r['file']}: {r['why']}")
    for w in out["warnings"]:
        print("WARN", w)
    for f in out["fails"]:
        print("FAIL", f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("manifest")
    ap.add_argument("db")
    ap.add_argument("--other-db", help="store of the killed and resumed run, compared with DB")
    ap.add_argument("--json", help="write the report as JSON here")
    ap.add_argument("--allow-other-winner", action="store_true",
                    help="a winner other than the manifest's is a warning, not a failure "
                         "(it must still be the fastest correct candidate measured)")
    args = ap.parse_args()
    manifest = json.load(open(args.manifest))
    report = {}
    fails = []
    a = Campaign(args.db)
    report["a"] = {}
    f, _ = check(manifest, a, args.allow_other_winner, report["a"])
    print_report(f"run A ({args.db})", report["a"])
    fails += f
    if args.other_db:
        b = Campaign(args.other_db)
        report["b"] = {}
        f, _ = check(manifest, b, args.allow_other_winner, report["b"])
        print_report(f"run B, killed and resumed ({args.other_db})", report["b"])
        fails += f
        resumed = [e for e in b.events if e["kind"] == "resumed"]
        if not resumed:
            fails.append("run B has no 'resumed' event: it was not interrupted and resumed")
        same = (report["a"]["winner_source_hash"] == report["b"]["winner_source_hash"] and
                report["a"]["winner_plan"] == report["b"]["winner_plan"])
        hashes_a = sorted(c["source_hash"] for c in a.candidates)
        hashes_b = sorted(c["source_hash"] for c in b.candidates)
        print(f"== resume: run B resumed {len(resumed)} time(s); same winner (source hash and plan): {same}; "
              f"same candidates: {hashes_a == hashes_b} ({len(hashes_a)} vs {len(hashes_b)})")
        if not same:
            fails.append(f"the winners differ: run A {report['a']['winner_source_hash']}, "
                         f"run B {report['b']['winner_source_hash']}")
        if hashes_a != hashes_b:
            fails.append("the runs did not consider the same candidates (the resumed run was served other answers)")
        report["resume"] = {"resumed_events": len(resumed), "same_winner": same, "same_candidates": hashes_a == hashes_b}
    report["fails"] = fails
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2, default=str)
    print("RESULT:", "FAIL" if fails else "PASS")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
