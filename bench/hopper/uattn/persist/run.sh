#!/bin/bash
# persist GPU pack (2026-12-03, third session): unified_attention's UA_PERSIST = 1 after the fix of
# its misaligned item slots (st / ld.shared.v4 at base + 104, cudaErrorMisalignedAddress on every
# workload in the 17:34 UTC run; see bench/hopper/uattn/NOTES.md, "helper persist"). Installed as
# .gpuwork/persist with its own configs/ (the fixed kernel; UA_PERSIST = 0 is byte-identical to
# the shipped cubin). Each step is one kopt eval; a step that would not fit is skipped and logged
# (hard stop LIMIT s, default 140).
# Second run (batch C; run.sh of batch B = run_b.sh, results in results_2026-12-03_1821/: correct on
# the 23 workloads it ran, faster on every 256-token batch and on s20 / s21). Steps:
#   b0x / p1x  baseline / UA_PERSIST=1 on s3, s7, s23 (short ones, the 18:21 run compared them
#              with the 17:34 baseline only: +4 %, -2 %, +7 %), the same run
#   p13, p19   UA_PERSIST=1 on the giant s13, s19 (the last two workloads not yet run with it),
#              each alone so that one finishing is kept if the other runs out of time
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
X=s3_n1_l16_hq16_hkv1_d128,s7_n1_l1144_hq16_hkv2_d128,s23_n1_l145_hq40_hkv8_d128
ev b0x - 14 $X
ev p1x cand_persist1 14 $X
ev p13 cand_persist1 62 s13_n3095_l256_hq16_hkv4_d128
ev p19 cand_persist1 62 s19_n2056_l256_hq28_hkv4_d128
el "done"
cat $OUT/log.txt; for f in $OUT/*.txt; do echo "== $f"; head -c 1500 $f; done
cd $OUT && tar czf $NAME.tgz --exclude=$NAME.tgz * && find . -maxdepth 1 -type f ! -name $NAME.tgz -delete
