#!/bin/bash
# uattn2 GPU pack (prepared 2026-12-03, NOT yet run): unified_attention d = 128 warp-specialized
# kernel with UA_PERSIST = 1 (persistent CTAs, min(132, items) blocks, work counter in the
# workspace, Q double-buffered so the producer loads the next item while the consumers finish).
# Installed as .gpuwork/uattn2 (steps A) and, optionally, a second copy as .gpuwork/uattn2b
# (steps B); see README.md. Each step is one kopt eval; a step that would not fit the budget is
# skipped and logged (hard stop LIMIT s, default 140).
#  A: p1a  UA_PERSIST=1 on the mid-size 256-token batches + two short d = 128 shapes
#     b0a  the config's baseline (UA_PERSIST=0, the shipped cubin) on the same workloads
#     p1h  UA_PERSIST=1 on s20, s21 (long causal: must not lose; longest-first kept)
#     b0h  baseline on s20, s21
#     p1m  UA_PERSIST=1 on the other 256-token batches except the two giant ones
#  B: p1g  UA_PERSIST=1 on s13, s19 (the giant inputs: slow generation and reference)
#     p2h  UA_PERSIST=2 on s20, s21 (the rule's fallback: one-item grid above 1024 tokens, run by
#          the persistent kernel; should match b0h)
#     b0m  baseline on p1m's workloads
#     b0g  baseline on s13, s19
#     r1a  UA_PERSIST=1 + UA_S_RS=1 on p1a's workloads
#     san  UA_PERSIST=1 under compute-sanitizer (kopt eval --sanitize) on s3 (16 blocks); runs
#          only with LIMIT raised (LIMIT=190 and a 200 s run_packs limit)
R=$PWD; W=$(dirname "$(readlink -f "$0")"); NAME=$(basename "$W"); S=$R/.gpuwork/suite; T0=$(date +%s)
LIMIT=${LIMIT:-140}
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; P="--peaks $W/configs/hardware/gpus.json --seeds 1 --no-store --json --max-time 0.2 --launch-timeout-ms 5000"
CFG=$W/configs/bench/unified_attention.json
el() { echo "$1 t=$(( $(date +%s) - T0 ))s" | tee -a $OUT/log.txt; }
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
{ timeout 10 nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
ev() {  # name candidate-json|- timeout workloads [extra kopt options]; keeps what it writes small
  local L=$(left); local T=$3; [ $T -gt $(( L - 3 )) ] && T=$(( L - 3 ))
  if [ $T -lt 8 ]; then el "$1 SKIPPED (left $L s)"; return; fi
  local C="--candidate $W/$2.json" K2=candidate; [ "$2" = "-" ] && C="" && K2=baseline
  timeout $T $K eval $CFG $C $P --workloads $4 $5 2>&1 > $OUT/$1.json | head -c 20000 > $OUT/$1.err
  el "$1 rc=${PIPESTATUS[0]} (limit $T s) json $(stat -c %s $OUT/$1.json) bytes"
  timeout 5 python3 $R/bench/hopper/summarize_eval.py $OUT/$1.json $K2 2>&1 | head -c 6000 > $OUT/$1.txt
  gzip -9 -f $OUT/$1.json
  [ $(stat -c %s $OUT/$1.json.gz) -gt 1500000 ] && { head -c 1500000 $OUT/$1.json.gz > $OUT/$1.json.gz.head; rm -f $OUT/$1.json.gz; }
}
A=s0_n130_l256_hq10_hkv1_d128,s9_n324_l256_hq16_hkv4_d128,s16_n18_l256_hq28_hkv4_d128,s17_n118_l256_hq28_hkv4_d128,s10_n699_l256_hq16_hkv4_d128,s3_n1_l16_hq16_hkv1_d128,s23_n1_l145_hq40_hkv8_d128
H=s20_n1_l6294_hq32_hkv4_d128,s21_n1_l2018_hq32_hkv8_d128
M=s1_n290_l256_hq10_hkv1_d128,s2_n484_l256_hq10_hkv1_d128,s11_n1032_l256_hq16_hkv4_d128,s12_n1882_l256_hq16_hkv4_d128,s18_n1192_l256_hq28_hkv4_d128,s7_n1_l1144_hq16_hkv2_d128
G=s13_n3095_l256_hq16_hkv4_d128,s19_n2056_l256_hq28_hkv4_d128
if [ "${NAME%b}" = "$NAME" ]; then  # steps A
  ev p1a cand_persist1 30 $A
  ev b0a - 28 $A
  ev p1h cand_persist1 14 $H
  ev b0h - 12 $H
  ev p1m cand_persist1 40 $M
else  # steps B
  ev p1g cand_persist1 35 $G
  ev p2h cand_persist2 14 $H
  ev b0m - 35 $M
  ev b0g - 35 $G
  ev r1a cand_persist1_rs1 20 $A
  ev san cand_persist1 40 s3_n1_l16_hq16_hkv1_d128 --sanitize
fi
el "done"
cat $OUT/log.txt; for f in $OUT/*.txt; do echo "== $f"; head -c 1500 $f; done
cd $OUT && tar czf $NAME.tgz --exclude=$NAME.tgz * && find . -maxdepth 1 -type f ! -name $NAME.tgz -delete
