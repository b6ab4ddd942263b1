#!/usr/bin/env python3
"""Writes this folder's candidate files from configs/bench/unified_attention.json (run from the
repository root after the config's baseline changes):
  cand_s1pp.json  UA_WS_SMALL 1 (the config's own three-launch plan)
  cand_k4pp.json  UA_WS_SMALL 2, unified_attention_ws_small as a fourth launch (num_seqs 0)
  cand_k3pp.json  UA_WS_SMALL 2, unified_attention_ws_small as the first launch in place of
                  unified_attention_cu (it writes the prefix sums; num_seqs passed)
Every other parameter keeps the config's default as its only value; UA_WS_PP 1, UA_WS_BN 128,
UA_WS_NS 3 (the .cu's defaults). The ws launch of the k plans is the config's without the
UA_WS_SMALL terms (d = 128 only)."""
import copy, json

cfg = json.load(open("configs/bench/unified_attention.json"))
base = cfg["baseline"]
S = "min(1, UA_WS_SMALL) * min(1, 127 / head_size) * min(1, ceil_div(seq_len, 16) / 8)"
SHARED = 22528 + 320 * 3 * 128  # 2 KiB slack + Q 2 x 64 x 80 bf16 + 3 stages of K + V (128 x 80)


def params(value):
    p = {k: {"values": [v["default"]], "default": v["default"]} for k, v in base["parameters"].items()}
    p["UA_WS_SMALL"] = {"values": [value], "default": value}
    p["UA_WS_PP"] = {"values": [1], "default": 1}
    return p


def launch(c, name):
    return [l for l in c["launches"] if l["kernel"] == name][0]


def strip_small(ws):  # the config's ws launch without the UA_WS_SMALL routing (d = 128 only)
    ws = copy.deepcopy(ws)
    ws["grid"] = [g.split(" + (num_query_heads - 1) * " + S)[0].split(" + (ceil_div(seq_len, 128) - 1) * " + S)[0]
                  .split(" + (num_seqs - 1) * " + S)[0] for g in ws["grid"]]
    sb = ws["shared_bytes"]
    pre = "("
    assert sb.startswith(pre) and (" * (1 - " + S + ")") in sb, sb
    ws["shared_bytes"] = sb[1:sb.index(") * (1 - " + S + ")")]
    assert S not in json.dumps(ws), ws
    return ws


def write(name, c):
    c["source_file"] = "../../../../configs/bench/unified_attention_baseline.cu"
    json.dump(c, open(f"bench/hopper/uattn/small/{name}.json", "w"), indent=1)
    print(name, [l["kernel"] for l in c["launches"]])


c = copy.deepcopy(base)
c["parameters"] = params(1)
write("cand_s1pp", c)

small = copy.deepcopy(launch(base, "unified_attention_ws"))
small["kernel"] = "unified_attention_ws_small"
small["grid"] = ["1 + (num_query_heads - 1) * " + S, "1 + (ceil_div(seq_len, 128) - 1) * " + S,
                 "1 + (num_seqs - 1) * " + S]
small["block"] = [384]

c = copy.deepcopy(base)
c["parameters"] = params(2)
ws = strip_small(launch(c, "unified_attention_ws"))
k4 = copy.deepcopy(small)
k4["shared_bytes"] = f"{SHARED} * {S}"
k4["args"] = k4["args"] + [{"int": "0", "type": "int32"}]
c["launches"] = [launch(c, "unified_attention_cu"), launch(c, "unified_attention_fa2"), ws, k4]
write("cand_k4pp", c)

c = copy.deepcopy(base)
c["parameters"] = params(2)
k3 = copy.deepcopy(small)
k3["shared_bytes"] = f"{SHARED} * {S} + 4096 * (1 - {S})"
k3["args"] = k3["args"] + [{"int": "num_seqs", "type": "int32"}]
c["launches"] = [k3, launch(c, "unified_attention_fa2"), strip_small(launch(c, "unified_attention_ws"))]
write("cand_k3pp", c)


# install/: the config with a k plan as its baseline launches and UA_WS_SMALL [2] (the config's
# text kept, only the parameter line and the launches rewritten)
def install(cand, out):
    txt = open("configs/bench/unified_attention.json").read()
    c = json.load(open(f"bench/hopper/uattn/small/{cand}.json"))
    i = txt.index('"baseline": {')
    head = txt[:txt.index('"launches": [', i)]

    def one(l):
        lines = ["      {", '        "kernel": %s,' % json.dumps(l["kernel"])]
        for k in ("grid", "block", "shared_bytes"):
            if k in l:
                lines.append('        "%s": %s,' % (k, json.dumps(l[k])))
        if len(l["args"]) <= 3:
            lines.append('        "args": %s' % json.dumps(l["args"]))
        else:
            lines.append('        "args": [')
            lines.append(",\n".join("          " + json.dumps(a) for a in l["args"]))
            lines.append("        ]")
        lines.append("      }")
        return "\n".join(lines)

    text = head + '"launches": [\n' + ",\n".join(one(l) for l in c["launches"]) + "\n    ]\n  }\n}\n"
    old = '"UA_WS_SMALL": {"values": [0], "default": 0}'
    assert text.count(old) == 1
    text = text.replace(old, '"UA_WS_SMALL": {"values": [2], "default": 2}')
    json.loads(text)
    open(f"bench/hopper/uattn/small/install/{out}.json", "w").write(text)
    print("install/" + out, [l["kernel"] for l in c["launches"]])


install("cand_k3pp", "unified_attention")
install("cand_k4pp", "unified_attention_k4")
