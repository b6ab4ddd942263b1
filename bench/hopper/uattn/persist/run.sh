#!/bin/bash
# persist GPU pack (2026-12-03, third session): unified_attention's UA_PERSIST = 1 after the fix of
# its misaligned item slots (st / ld.shared.v4 at base + 104, cudaErrorMisalignedAddress on every
# workload in the 17:34 UTC run; see bench/hopper/uattn/NOTES.md, "helper persist"). Installed as
# .gpuwork/persist with its own configs/ (the fixed kernel; UA_PERSIST = 0 is byte-identical to
# the shipped cubin). Each step is one kopt eval; a step that would not fit is skipped and logged
# (hard stop LIMIT s, default 140). Steps, in priority order:
#   p1s  UA_PERSIST=1 on the 256-token batches s0, s9, s16, s17     b0s  the baseline on them
#   p1h  UA_PERSIST=1 on s20, s21 (long causal: must not lose)      b0h  the baseline on them
#   p1d  UA_PERSIST=1 on the other d = 128 workloads but the giant s13 / s19
#   p1o  UA_PERSIST=1 on the other head sizes (fa2 path; only the workspace offset differs)
#   p2h  UA_PERSIST=2 on s20, s21 (one-item grid above 1024 tokens), if time is left
#   san  UA_PERSIST=1 on s3 under kopt eval --sanitize (memcheck / racecheck after a pass), with
#        whatever time is left
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
SS=s0_n130_l256_hq10_hkv1_d128,s9_n324_l256_hq16_hkv4_d128,s16_n18_l256_hq28_hkv4_d128,s17_n118_l256_hq28_hkv4_d128
H=s20_n1_l6294_hq32_hkv4_d128,s21_n1_l2018_hq32_hkv8_d128
D=s1_n290_l256_hq10_hkv1_d128,s2_n484_l256_hq10_hkv1_d128,s3_n1_l16_hq16_hkv1_d128,s7_n1_l1144_hq16_hkv2_d128,s10_n699_l256_hq16_hkv4_d128,s11_n1032_l256_hq16_hkv4_d128,s12_n1882_l256_hq16_hkv4_d128,s18_n1192_l256_hq28_hkv4_d128,s23_n1_l145_hq40_hkv8_d128
O=s4_n1_l1688_hq16_hkv16_d192,s5_n1_l11840_hq16_hkv16_d72,s6_n1_l24752_hq16_hkv16_d80,s8_n1_l875_hq16_hkv2_d256,s14_n1_l72_hq16_hkv4_d256,s15_n1_l7_hq20_hkv20_d64,s22_n1_l49152_hq4_hkv4_d72,s24_n1_l5926_hq8_hkv1_d256
ev p1s cand_persist1 20 $SS
ev b0s - 20 $SS
ev p1h cand_persist1 14 $H
ev b0h - 12 $H
ev p1d cand_persist1 40 $D
ev p1o cand_persist1 35 $O
ev p2h cand_persist2 12 $H
ev san cand_persist1 40 s3_n1_l16_hq16_hkv1_d128 --sanitize  # compute-sanitizer, if the device has it
el "done"
cat $OUT/log.txt; for f in $OUT/*.txt; do echo "== $f"; head -c 1500 $f; done
cd $OUT && tar czf $NAME.tgz --exclude=$NAME.tgz * && find . -maxdepth 1 -type f ! -name $NAME.tgz -delete
