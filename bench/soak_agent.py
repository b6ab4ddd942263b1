#!/usr/bin/env python3
"""A scripted agent for an agent campaign (provider "agent", docs/agents.md),
used by bench/daemon_soak.py. No network, no LLM: it polls the campaign with
`kopt status ID --json` through the store and, each time the campaign waits
for an agent with no pending submission, proposes the next candidate of a
fixed list with `kopt propose`, answering the brief of the agent_brief event
(its brief_hash). It keeps no state of its own: the next candidate is the
number of submissions it already made, read from the store, so a restart of
this script (or of the daemon) neither skips nor repeats a proposal.

Usage: soak_agent.py KOPT DB CAMPAIGN_ID CANDIDATE_DIR LOG [--deadline S] [--think S]
--think S: seconds the agent "thinks" before each proposal (default 3), an
LLM-like phase of the campaign that the others' GPU work overlaps.
CANDIDATE_DIR holds 00.json, 01.json, ... (candidate files as for kopt propose).
Exit 0 when the campaign is over, 1 on a refused proposal, 2 at the deadline.
"""
import json
import os
import subprocess
import sys
import time

AGENT = "soak-agent"


def status(kopt, db, cid):
    try:
        r = subprocess.run([kopt, "--db", db, "status", str(cid), "--json"], capture_output=True,
                           text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0:
        return None  # the store is busy or being recovered: try again
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def main():
    kopt, db, cid, cdir, logf = sys.argv[1:6]
    opts = dict(zip(sys.argv[6::2], sys.argv[7::2]))
    deadline = time.time() + float(opts.get("--deadline", 600))
    think = float(opts.get("--think", 3))
    files = sorted(f for f in os.listdir(cdir) if f.endswith(".json"))
    log = open(logf, "a", buffering=1)
    log.write("agent: %d candidates for campaign %s\n" % (len(files), cid))
    while time.time() < deadline:
        st = status(kopt, db, cid)
        if st is None:
            time.sleep(0.5)
            continue
        if st.get("state") in ("done", "failed", "cancelled"):
            log.write("agent: campaign %s is %s (%s); exit\n" % (cid, st["state"], st.get("stop_reason")))
            return 0
        subs = [s for s in st.get("agent_submissions", []) if s.get("agent") == AGENT]
        pending = [s for s in subs if s.get("status") == "pending"]
        if st.get("waiting_for") == "agent" and not pending:
            n = len(subs)
            if n >= len(files):
                log.write("agent: campaign waits but all %d candidates were proposed\n" % n)
                time.sleep(1)
                continue
            time.sleep(think)
            ev = st.get("last_event") or {}
            bh = (ev.get("data") or {}).get("brief_hash") if ev.get("kind") == "agent_brief" else None
            cmd = [kopt, "--db", db, "propose", str(cid), os.path.join(cdir, files[n]), "--agent", AGENT,
                   "--note", "soak proposal %d (%s)" % (n, files[n]), "--json"]
            if bh:
                cmd += ["--brief-hash", bh]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                log.write("agent: propose timed out; status decides whether it was stored\n")
                continue
            log.write("agent: propose %s (brief %s) -> exit %d %s\n" %
                      (files[n], (bh or "-")[:12], r.returncode, r.stdout.strip().replace("\n", " ")[:300]))
            if r.returncode == 1:
                return 1
        time.sleep(0.5)
    log.write("agent: deadline reached\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
