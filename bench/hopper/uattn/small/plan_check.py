#!/usr/bin/env python3
"""Compares the launch plans of two unified_attention configs: python3 plan_check.py OLD.json NEW.json
evaluates every launch (grid, block, shared bytes) and the workspace of every workload for every
combination of OLD's listed parameter values (NEW with UA_WS_SMALL = 0) and prints the differences;
then NEW's plan at UA_WS_SMALL = 1 for the d <= 80 workloads. Integer / is floor division."""
import itertools, json, re, sys


def ev(e, env):
    e = str(e)
    e = re.sub(r'(?<![/])/(?!/)', '//', e)
    return eval(e, {"min": min, "max": max, "ceil_div": lambda a, b: -(-a // b)}, dict(env))
def plan(cfg, wl, params):
    b = cfg['baseline']; env = dict(wl['axes']); env['block_size'] = 16; env.update(params)
    out = []
    for l in b['launches']:
        out.append((l['kernel'], [ev(x, env) for x in l['grid']], [ev(x, env) for x in l['block']],
                    ev(l.get('shared_bytes', 0), env)))
    ws = {k: ev(v['bytes'], env) for k, v in b.get('workspaces', {}).items()}
    return out, ws
old = json.load(open(sys.argv[1])); new = json.load(open(sys.argv[2]))
P = old['baseline']['parameters']
names = list(P); combos = list(itertools.product(*[P[n]['values'] for n in names]))
bad = 0
for wl in new['workloads']:
    for c in combos:
        prm = dict(zip(names, c))
        a = plan(old, wl, prm); b = plan(new, wl, dict(prm, UA_WS_SMALL=0))
        if a != b: bad += 1; print("DIFF", wl['id'], prm, a, b)
print("combos", len(combos), "x workloads", len(new['workloads']), "differences:", bad)
# UA_WS_SMALL = 1 at the defaults
dflt = {n: P[n]['default'] for n in names}
for wl in new['workloads']:
    p, _ = plan(new, wl, dict(dflt, UA_WS_SMALL=1))
    q, _ = plan(new, wl, dict(dflt, UA_WS_SMALL=0))
    if p != q or wl['axes']['head_size'] <= 80:
        print(wl['id'], "small=1:", p[1:], "\n      small=0:", q[1:])
