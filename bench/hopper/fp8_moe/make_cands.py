#!/usr/bin/env python3
"""Candidate files for fp8_blockscale_fused_moe variants (the config's baseline block with
parameters and the tensor-core launches adjusted).
    python3 make_cands.py CONFIG OUT_DIR NAME=K:V,K:V ...
    python3 make_cands.py --baseline CONFIG K:V,K:V   (rewrites CONFIG's baseline block in place)
Parameters: GV_WARPS, GV_MINB, F8_INT, TC_FP8 (1: wgmma e4m3 GEMM 1), TC1_STAGES, WG_PROMO,
TC2_V (1: generic mma.sync fmoe_tc2, 2: wgmma f16 fmoe_tc2, needs TC_FP8 1), TC2_WM, TC2_BN, TC2_STAGES, TC2_TM (TC2_V 2: 64 or 128 slot rows per tile), WG_OVL. The candidate's source_file is the
config's baseline source (the candidate sits next to it). TC1_PERSIST / TC2_PERSIST exist only
in the draft bench/hopper/fp8_moe/fp8_blockscale_fused_moe_persist.cu (copy it over the
baseline source to use them). Defaults as in the source (TC2_STAGES 4)."""
import copy, json, sys

GE = "min(1, tokens / 64)"
TILES = "(ceil_div(tokens * top_k, 64) + num_experts)"


def on(expr):
    return f"({expr}) * {GE} + (1 - {GE})"


def cand(base, p):
    c = copy.deepcopy(base)
    for k, v in p.items():
        c["parameters"][k] = {"values": [v], "default": v}
    for L in c["launches"]:
        if L["kernel"] == "fmoe_tc1" and p.get("TC_FP8", 0) == 1:
            st = p.get("TC1_STAGES", 5)
            if p.get("TC1_PERSIST", 0):
                L["grid"] = [on("132"), "1"]  # one CTA per H200 SM
            else:
                L["grid"] = [on("inter / 128"), on(TILES)]
            L["block"] = [384]
            # + 1 KB of tile table in the persistent kernel (fp8_blockscale_fused_moe_persist.cu)
            L["shared_bytes"] = str(st * (64 * 128 + 256 * 128) + 2048 +
                                    (1024 if p.get("TC1_PERSIST", 0) else 0))
        if L["kernel"] == "fmoe_tc2" and p.get("TC2_V", 0) == 2:
            st, tm = p.get("TC2_STAGES", 4), p.get("TC2_TM", 64)
            if p.get("TC2_PERSIST", 0):
                L["grid"] = [on("132"), "1"]
            else:
                L["grid"] = [on("hidden / 256"),
                             on(f"(ceil_div(tokens * top_k, {tm}) + num_experts)")]
            L["block"] = [384]
            L["shared_bytes"] = str(st * (256 * 128 + tm * 256) + 2048 +
                                    (1024 if p.get("TC2_PERSIST", 0) else 0))
        if L["kernel"] == "fmoe_tc2" and p.get("TC2_V", 0) == 1:
            bn, st = p.get("TC2_BN", 128), p.get("TC2_STAGES", 4)
            L["grid"] = [on(f"hidden / {bn}"), on(TILES)]
            L["block"] = [bn]
            L["shared_bytes"] = str(st * (64 * 288 + bn * 144))
    return c


if __name__ == "__main__":
    if sys.argv[1] == "--baseline":
        text = open(sys.argv[2]).read()
        cfg = json.loads(text)
        p = {k: int(v) for k, v in (x.split(":") for x in sys.argv[3].split(",") if x)}
        blk = cand(cfg["baseline"], p)
        # replace only the baseline block's text (the rest of the file keeps its layout)
        a = text.index('"baseline": {') + len('"baseline": ')
        depth, b = 0, a
        while True:
            depth += {"{": 1, "}": -1}.get(text[b], 0)
            b += 1
            if depth == 0:
                break
        new = json.dumps(blk, indent=2).replace("\n", "\n  ")
        text = text[:a] + new + text[b:]
        assert json.loads(text)["baseline"] == blk
        open(sys.argv[2], "w").write(text)
        sys.exit(0)
    cfg = json.load(open(sys.argv[1]))
    for spec in sys.argv[3:]:
        name, kv = spec.split("=", 1)
        p = {k: int(v) for k, v in (x.split(":") for x in kv.split(",") if x)}
        with open(f"{sys.argv[2]}/cand_{name}.json", "w") as f:
            json.dump(cand(cfg["baseline"], p), f, indent=1)
        print(name, p)
