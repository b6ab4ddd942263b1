#!/bin/bash
# persist GPU pack (2026-12-03 ~18:40 UTC; for the next batch): unified_attention UA_PERSIST = 1
# TOGETHER WITH UA_S_RS = 1 (the config's default since 2026-12-03 evening), which has not run:
# batch B (run_b.sh, 18:21 UTC, results_2026-12-03_1821/) ran UA_PERSIST = 1 with UA_S_RS = 0
# against UA_S_RS = 0. Needs the checkout's configs/ copied into the pack (README.md): the
# baseline is then the shipped default (UA_S_RS = 1, UA_PERSIST = 0), the candidates
# cand_p1rs1 (UA_PERSIST = 1) and cand_p2rs1 (UA_PERSIST = 2), both with UA_S_RS = 1.
# Installed as .gpuwork/persist (steps A) and, as a copy, .gpuwork/persistb (steps B); each step
# is one kopt eval, skipped and logged when it would not fit (hard stop LIMIT s, default 140).
#  A: q1k / b0k  candidate / baseline on s0, s9, s16, s17, s20, s21 (same run)
#     q1d        candidate on the other d = 128 workloads but the giant s13 / s19
#     b0x        baseline on s3, s7, s23 (the short ones, to compare with q1d in one run)
#     q1o        candidate on the other head sizes (the fa2 kernel reads the workspace at cu + 4)
#     q2h        UA_PERSIST = 2 (+ S_RS 1) on s20, s21
#  B: q13, q19   candidate on s13 and on s19 (each alone: 35-60 s), then b0g baseline on both
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
K6=s0_n130_l256_hq10_hkv1_d128,s9_n324_l256_hq16_hkv4_d128,s16_n18_l256_hq28_hkv4_d128,s17_n118_l256_hq28_hkv4_d128,s20_n1_l6294_hq32_hkv4_d128,s21_n1_l2018_hq32_hkv8_d128
H=s20_n1_l6294_hq32_hkv4_d128,s21_n1_l2018_hq32_hkv8_d128
D=s1_n290_l256_hq10_hkv1_d128,s2_n484_l256_hq10_hkv1_d128,s3_n1_l16_hq16_hkv1_d128,s7_n1_l1144_hq16_hkv2_d128,s10_n699_l256_hq16_hkv4_d128,s11_n1032_l256_hq16_hkv4_d128,s12_n1882_l256_hq16_hkv4_d128,s18_n1192_l256_hq28_hkv4_d128,s23_n1_l145_hq40_hkv8_d128
X=s3_n1_l16_hq16_hkv1_d128,s7_n1_l1144_hq16_hkv2_d128,s23_n1_l145_hq40_hkv8_d128
O=s4_n1_l1688_hq16_hkv16_d192,s5_n1_l11840_hq16_hkv16_d72,s6_n1_l24752_hq16_hkv16_d80,s8_n1_l875_hq16_hkv2_d256,s14_n1_l72_hq16_hkv4_d256,s15_n1_l7_hq20_hkv20_d64,s22_n1_l49152_hq4_hkv4_d72,s24_n1_l5926_hq8_hkv1_d256
G=s13_n3095_l256_hq16_hkv4_d128,s19_n2056_l256_hq28_hkv4_d128
if [ "${NAME%b}" = "$NAME" ]; then  # steps A (about 60 s by batch B's times)
  ev q1k cand_p1rs1 20 $K6
  ev b0k - 20 $K6
  ev q1d cand_p1rs1 40 $D
  ev b0x - 12 $X
  ev q1o cand_p1rs1 20 $O
  ev q2h cand_p2rs1 12 $H
else  # steps B
  ev q13 cand_p1rs1 65 s13_n3095_l256_hq16_hkv4_d128
  ev q19 cand_p1rs1 65 s19_n2056_l256_hq28_hkv4_d128
  ev b0g - 65 $G
fi
el "done"
cat $OUT/log.txt; for f in $OUT/*.txt; do echo "== $f"; head -c 1500 $f; done
cd $OUT && tar czf $NAME.tgz --exclude=$NAME.tgz * && find . -maxdepth 1 -type f ! -name $NAME.tgz -delete
