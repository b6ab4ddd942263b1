#!/bin/bash
# block_scaled_mm with the cluster split-K (issue 23, helper bsmm2): one GPU run, about 4 minutes.
# 1) bsmm_cluster.py --variants: atomics / v4 / cluster forms on the 3 small-m shapes (harness);
# 2) kopt eval of the config's baseline on all 24 workloads in 4 batches (the first with the
#    EPI_V4 candidate beside it, on the 3 small-m workloads);
# 3) torch._scaled_mm on all 24 shapes; 4) the fp8 tensor core's accuracy per promotion width.
# From a directory R holding configs/, bench/ and bundle/ (kopt, kopt-worker, libraries):
#   OUT=... bash bench/hopper/bsmm_cluster_gpu.sh
# Run on 2026-12-02 11:29 UTC while the cluster kernel and plan were the config's baseline; they
# now live in bench/hopper/bsmm_cluster/ (candidate.json): pass it with --candidate to repeat.
# Keep OUT's file count low: the device tool returns 8 files (tar them).
R=$PWD; T0=$(date +%s)
el() { echo "$1 $(( $(date +%s) - T0 ))s" | tee -a $OUT/steps.txt; }
left() { echo $(( ${BUDGET:-250} - ($(date +%s) - T0) )); }
B=$(cat "$R/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$R/bundle/lib KOPT_WORKER=$R/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$R/bundle/bin/kopt; C=$R/configs/bench/block_scaled_mm.json
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
PYTHONUNBUFFERED=1 timeout 60 python3 bench/hopper/bsmm_cluster.py --variants --out $OUT > $OUT/variants.log 2>&1; el "variants rc=$?"
grep -v '^torch' $OUT/variants.log | cut -c1-260
OK=$(python3 - $OUT/bsmm_cluster.json <<'PY'
import json, sys
try:
    rows = [r for r in json.load(open(sys.argv[1])) if r.get("variant") == "cluster"]
except Exception:
    rows = []
print(1 if len(rows) == 3 and all("error" not in r and r["failing"] == 0 and r["nonfinite"] == 0 for r in rows) else 0)
PY
)
el "cluster_ok=$OK"
E="$K eval $C --peaks $R/configs/hardware/gpus.json --seeds 1 --min-time 0.02 --max-time 0.08 --no-store --json"
S1="s0_m349_n2048_k2048 s1_m1024_n2048_k2048 s12_m237_n4096_k4096"
S2="s2_m4533_n2048_k2048 s3_m6918_n2048_k2048 s4_m20480_n2048_k2048 s5_m51200_n2048_k2048 s6_m65536_n2048_k2048 s13_m3072_n4096_k4096 s14_m4096_n4096_k4096 s15_m8192_n4096_k4096 s16_m16384_n4096_k4096 s17_m24576_n4096_k4096"
S3="s7_m98304_n2048_k2048 s8_m118784_n2048_k2048 s9_m250880_n2048_k2048 s18_m49152_n4096_k4096 s19_m65536_n4096_k4096 s20_m98304_n4096_k4096"
S4="s10_m516096_n2048_k2048 s11_m704512_n2048_k2048 s21_m131072_n4096_k4096 s22_m258048_n4096_k4096 s23_m299520_n4096_k4096"
# S1: the baseline (cluster plan) and the EPI_V4 candidate side by side (both roles in one file)
timeout 40 $E --candidate bench/hopper/bsmm_epi_v4.json --workloads $S1 > $OUT/eval_S1.json 2> $OUT/eval_S1.err; el "eval_S1 rc=$?"
for bb in S2 S3 S4; do
  L=$(left); [ $L -lt 30 ] && { el "skip eval_$bb (left $L s)"; continue; }
  timeout $(( L - 5 )) $E --workloads ${!bb} > $OUT/eval_$bb.json 2> $OUT/eval_$bb.err; el "eval_$bb rc=$?"
done
for f in $OUT/eval_S*.json; do python3 bench/hopper/summarize_eval.py $f 2>&1 | cut -c1-200; done | tee $OUT/eval_summary.txt
python3 bench/hopper/summarize_eval.py $OUT/eval_S1.json candidate 2>&1 | cut -c1-200 | tee -a $OUT/eval_summary.txt
python3 - "$C" $OUT/eval_S*.json <<'PY' | tee $OUT/weighted.txt
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
L=$(left); [ $L -gt 25 ] && { PYTHONUNBUFFERED=1 timeout $(( L > 50 ? 45 : L - 5 )) python3 bench/hopper/bsmm_cluster.py --torch --out $OUT > $OUT/torch.log 2>&1; el "torch rc=$?"; }
L=$(left); [ $L -gt 15 ] && { mkdir -p $OUT/sl; PYTHONUNBUFFERED=1 timeout $(( L - 5 )) python3 bench/hopper/bsmm_cluster.py --fp8-slices --out $OUT/sl > $OUT/slices.log 2>&1; el "slices rc=$?"; }
grep -v '^torch' $OUT/torch.log $OUT/slices.log 2>/dev/null | cut -c1-200
