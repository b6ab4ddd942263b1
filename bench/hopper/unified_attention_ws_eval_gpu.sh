#!/bin/bash
# kopt eval of configs/bench/unified_attention.json (default UA_WGMMA = 3) on all 25 workloads, in
# the four batches of unified_attention_gpu.sh, and the weighted SOL. From the repository root on
# the GPU machine, pack unpacked in .gpuwork/uattn2 (configs/, bundle/, summarize_eval.py).
R=$PWD; W=$R/.gpuwork/uattn2; C=$W/configs/bench
B=$(cat "$W/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$W/bundle/lib KOPT_WORKER=$W/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$W/bundle/bin/kopt; T0=$(date +%s); P="--peaks $W/configs/hardware/gpus.json"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
E="$K eval $C/unified_attention.json $P --seeds 1 --max-time 0.2 --no-store --json"
B1="s20_n1_l6294_hq32_hkv4_d128 s21_n1_l2018_hq32_hkv8_d128 s7_n1_l1144_hq16_hkv2_d128 s3_n1_l16_hq16_hkv1_d128 s23_n1_l145_hq40_hkv8_d128 s16_n18_l256_hq28_hkv4_d128 s0_n130_l256_hq10_hkv1_d128 s1_n290_l256_hq10_hkv1_d128 s2_n484_l256_hq10_hkv1_d128 s9_n324_l256_hq16_hkv4_d128"
B2="s10_n699_l256_hq16_hkv4_d128 s11_n1032_l256_hq16_hkv4_d128 s12_n1882_l256_hq16_hkv4_d128 s17_n118_l256_hq28_hkv4_d128"
B3="s13_n3095_l256_hq16_hkv4_d128 s18_n1192_l256_hq28_hkv4_d128 s19_n2056_l256_hq28_hkv4_d128"
B4="s4_n1_l1688_hq16_hkv16_d192 s5_n1_l11840_hq16_hkv16_d72 s6_n1_l24752_hq16_hkv16_d80 s8_n1_l875_hq16_hkv2_d256 s14_n1_l72_hq16_hkv4_d256 s15_n1_l7_hq20_hkv20_d64 s22_n1_l49152_hq4_hkv4_d72 s24_n1_l5926_hq8_hkv1_d256"
for bb in B1 B4 B2 B3; do
  timeout 75 $E --workloads ${!bb} > $OUT/eval_$bb.json 2> $OUT/eval_$bb.err; echo "eval_$bb rc=$? $(( $(date +%s) - T0 ))s"
  python3 $W/summarize_eval.py $OUT/eval_$bb.json 2>&1 | tee $OUT/eval_$bb.txt | cut -c1-170
done
python3 - "$C/unified_attention.json" $OUT/eval_B*.json <<'PY' | tee $OUT/weighted.txt
import json, sys
W = {w["id"]: w["weight"] for w in json.load(open(sys.argv[1]))["workloads"]}
rows = {}
for f in sys.argv[2:]:
    try:
        for r in json.load(open(f))["results"]["baseline"]["rows"]:
            rows[r["workload"]] = r
    except Exception as ex:
        print("unreadable", f, ex)
ok = {k: r for k, r in rows.items() if r["status"] == "ok"}
s = sum(W[k] * (r.get("sol_fraction") or 0) for k, r in ok.items())
print(f"ok {len(ok)}/{len(W)}; weighted SOL over all {len(W)}: {s / sum(W.values()):.4f}; missing or failed: {sorted(set(W) - set(ok))}")
PY
tail -n 3 $OUT/eval_*.err | cut -c1-300
cd $OUT && tar czf results.tgz gpu.txt eval_* weighted.txt
