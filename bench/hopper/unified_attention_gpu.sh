#!/bin/bash
# The unified_attention baseline on the H200 (issue 23), about 4 minutes of device time.
# 1) harness on 8 d = 128 workloads: the default (wg2: two wgmma warpgroups), wg2skip (the version
#    measured on 2026-12-02, serialized by ptxas), fa2 (mma.sync), wg2ns (one
#    bf16 P, time only: fails the tolerance), each against PyTorch SDPA on dense KV;
# 2) kopt eval of the config's baseline on all 25 workloads in 4 batches (the naive reference
#    makes one eval of all 25 overrun its limit); 3) kopt profile --full on s20.
# From the repository root on the GPU machine, with kopt and kopt-worker bundled in .gpuwork/bundle:
#   bash bench/hopper/unified_attention_gpu.sh [CFG_DIR] [HARNESS_DIR]
# CFG_DIR holds unified_attention.json and its .cu files (default configs/bench), HARNESS_DIR this
# script's Python files (default bench/hopper). Everything lands in $OUT.
R=$PWD; G=$R/.gpuwork; C=${1:-$R/configs/bench}; A=${2:-$R/bench/hopper}
# kopt's compiled-in source directory (recorded by bench/gpu_bundle.sh) must name this checkout.
B=$(cat "$G/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$G/bundle/lib KOPT_WORKER=$G/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$G/bundle/bin/kopt; T0=$(date +%s); P="--peaks $R/configs/hardware/gpus.json"
el() { echo "$1 $(( $(date +%s) - T0 ))s"; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
H="python3 $A/unified_attention.py --src $C/unified_attention_baseline.cu --config $C/unified_attention.json"
D128=s20_n1_l6294_hq32_hkv4_d128,s21_n1_l2018_hq32_hkv8_d128,s9_n324_l256_hq16_hkv4_d128,s0_n130_l256_hq10_hkv1_d128,s3_n1_l16_hq16_hkv1_d128,s7_n1_l1144_hq16_hkv2_d128,s16_n18_l256_hq28_hkv4_d128,s23_n1_l145_hq40_hkv8_d128
PYTHONUNBUFFERED=1 timeout 80 $H --only $D128 --variants "wg2=UA_WGMMA=2;wg2skip=UA_WGMMA=2,UA_WG_SKIP=1;fa2=UA_WGMMA=0;wg2ns=UA_WGMMA=2,UA_P_SPLIT=0" --no-check wg2ns --out $OUT/h128.json > $OUT/h128.log 2>&1; el "h128 rc=$?"
grep summary $OUT/h128.log
E="$K eval $C/unified_attention.json $P --seeds 1 --max-time 0.2 --no-store --json"
B1="s20_n1_l6294_hq32_hkv4_d128 s21_n1_l2018_hq32_hkv8_d128 s7_n1_l1144_hq16_hkv2_d128 s3_n1_l16_hq16_hkv1_d128 s23_n1_l145_hq40_hkv8_d128 s16_n18_l256_hq28_hkv4_d128 s0_n130_l256_hq10_hkv1_d128 s1_n290_l256_hq10_hkv1_d128 s2_n484_l256_hq10_hkv1_d128 s9_n324_l256_hq16_hkv4_d128"
B2="s10_n699_l256_hq16_hkv4_d128 s11_n1032_l256_hq16_hkv4_d128 s12_n1882_l256_hq16_hkv4_d128 s17_n118_l256_hq28_hkv4_d128"
B3="s13_n3095_l256_hq16_hkv4_d128 s18_n1192_l256_hq28_hkv4_d128 s19_n2056_l256_hq28_hkv4_d128"
B4="s4_n1_l1688_hq16_hkv16_d192 s5_n1_l11840_hq16_hkv16_d72 s6_n1_l24752_hq16_hkv16_d80 s8_n1_l875_hq16_hkv2_d256 s14_n1_l72_hq16_hkv4_d256 s15_n1_l7_hq20_hkv20_d64 s22_n1_l49152_hq4_hkv4_d72 s24_n1_l5926_hq8_hkv1_d256"
for bb in B1 B4 B2 B3; do
  timeout 75 $E --workloads ${!bb} > $OUT/eval_$bb.json 2> $OUT/eval_$bb.err; el "eval_$bb rc=$?"
  python3 $A/summarize_eval.py $OUT/eval_$bb.json 2>&1 | tee $OUT/eval_$bb.txt | cut -c1-170
done
el=$(( $(date +%s) - T0 ))
if [ $el -lt 270 ]; then timeout 40 $K profile $C/unified_attention.json $P --workloads s20_n1_l6294_hq32_hkv4_d128 --full --seeds 1 --max-time 0.2 --no-store > $OUT/profile.txt 2>&1; el "profile rc=$?"; cut -c1-160 $OUT/profile.txt | tail -30; fi
# weighted SOL over all 25 workloads from the four batches (failed or missing count 0)
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
