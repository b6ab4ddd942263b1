#!/usr/bin/env python3
"""Writes this folder's candidate files from configs/bench/unified_attention.json (run from the
repository root; every parameter of the config keeps its default as its only value):
  cand_b3.json     UA_WS_BIG 2: three launches, unified_attention_ws_small (prefix sums, and
                   d <= 80 at every length), unified_attention_ws_big (d 192 / 256) in place of
                   unified_attention_fa2, unified_attention_ws (d 128)
  cand_b3np.json   cand_b3 with UA_WB_PP 0 (no consumer ping-pong)
  cand_b3n64.json  cand_b3 with 64-key tiles and 2 stages (UA_WB_BN 64, UA_WB_NS 2)
  cand_b3n48.json  cand_b3 with 48-key tiles and 3 stages (UA_WB_BN 48, UA_WB_NS 3)
  cand_b4.json     UA_WS_BIG 1: the config's three launches (unified_attention_fa2 now one block
                   for d 192 / 256, which returns) plus unified_attention_ws_big as a fourth
install/unified_attention.json: the config with cand_b3's plan (the text kept, only the
parameter line and the launches rewritten)."""
import copy, json

H = "bench/hopper/uattn/big"
cfg = json.load(open("configs/bench/unified_attention.json"))
base = cfg["baseline"]
S = "min(1, UA_WS_SMALL) * min(1, 127 / head_size) * min(1, ceil_div(seq_len, 16) / 8)"
S2 = "min(1, UA_WS_SMALL) * min(1, 127 / head_size)"  # d <= 80 at every length
B = "min(1, head_size / 192)"  # d 192 / 256


def launch(c, name):
    return [l for l in c["launches"] if l["kernel"] == name][0]


def params(big, **extra):
    p = {k: {"values": [v["default"]], "default": v["default"]} for k, v in base["parameters"].items()}
    p["UA_WS_BIG"] = {"values": [big], "default": big}
    p["UA_WB_SKIP"] = {"values": [1], "default": 1}
    for k, v in extra.items():
        p[k] = {"values": [v], "default": v}
    return p


def ws_big(bn, ns):
    l = copy.deepcopy(launch(base, "unified_attention_ws"))
    l["kernel"] = "unified_attention_ws_big"
    l["grid"] = [f"1 + (num_query_heads - 1) * {B}", f"1 + (ceil_div(seq_len, 128) - 1) * {B}",
                 f"1 + (num_seqs - 1) * {B}"]
    l["block"] = [384]
    # 1 KiB barriers / slack + Q 2 x 64 x d + ns stages of a K and a V tile (bn x d), bf16
    l["shared_bytes"] = f"(1024 + head_size * (256 + {4 * ns * bn})) * {B}"
    return l


def write(name, c):
    c["source_file"] = "../../../../configs/bench/unified_attention_baseline.cu"
    json.dump(c, open(f"{H}/{name}.json", "w"), indent=1)
    print(name, [l["kernel"] for l in c["launches"]], c["parameters"]["UA_WS_BIG"])


def b3(extra, bn=32, ns=4):
    c = copy.deepcopy(base)
    c["parameters"] = params(2, **extra)
    small = copy.deepcopy(launch(c, "unified_attention_ws_small"))
    js = json.dumps(small)
    assert S in js
    small = json.loads(js.replace(S, S2))
    c["launches"] = [small, ws_big(bn, ns), launch(c, "unified_attention_ws")]
    return c


write("cand_b3", b3({"UA_WB_PP": 1}))
write("cand_b3np", b3({"UA_WB_PP": 0}))
write("cand_b3n64", b3({"UA_WB_PP": 1, "UA_WB_BN": 64, "UA_WB_NS": 2}, 64, 2))
write("cand_b3n48", b3({"UA_WB_PP": 1, "UA_WB_BN": 48, "UA_WB_NS": 3}, 48, 3))

# cand_b4: unified_attention_fa2's grid gets one more term, (X - 1) * B off each dimension X
c = copy.deepcopy(base)
c["parameters"] = params(1, UA_WB_PP=1)
fa2 = launch(c, "unified_attention_fa2")
g = []
for e in fa2["grid"]:
    x = e.split(" - (")[0] if e.startswith("num_") else e[:e.index(") - (") + 1]
    assert e.count(x) >= 2, (x, e)
    g.append(f"{e} - ({x} - 1) * {B}")
fa2["grid"] = g
c["launches"] = [launch(c, "unified_attention_ws_small"), fa2, launch(c, "unified_attention_ws"),
                 ws_big(32, 4)]
write("cand_b4", c)


def install(cand, out):
    txt = open("configs/bench/unified_attention.json").read()
    c = json.load(open(f"{H}/{cand}.json"))
    i = txt.index('"baseline": {')
    head = txt[:txt.index('"launches": [', i)]

    def one(l):
        lines = ["      {", '        "kernel": %s,' % json.dumps(l["kernel"])]
        for k in ("grid", "block", "shared_bytes"):
            if k in l:
                lines.append('        "%s": %s,' % (k, json.dumps(l[k])))
        lines.append('        "args": [')
        lines.append(",\n".join("          " + json.dumps(a) for a in l["args"]))
        lines.append("        ]")
        lines.append("      }")
        return "\n".join(lines)

    text = head + '"launches": [\n' + ",\n".join(one(l) for l in c["launches"]) + "\n    ]\n  }\n}\n"
    old = '"UA_WS_SMALL": {"values": [2], "default": 2}'
    assert text.count(old) == 1
    pp = c["parameters"]
    add = ", ".join(f'"{k}": {{"values": {json.dumps(pp[k]["values"])}, "default": {pp[k]["default"]}}}'
                    for k in pp if k not in base["parameters"])
    text = text.replace(old, old + ", " + add)
    json.loads(text)
    open(f"{H}/install/{out}.json", "w").write(text)
    print("install/" + out, [l["kernel"] for l in c["launches"]])


install("cand_b3", "unified_attention")
install("cand_b4", "unified_attention_b4")
