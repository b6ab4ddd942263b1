#!/bin/bash
# afwd pack v3 (after batch B): the two candidates that combine what batch B measured faster,
# and W3P (three consumer warpgroups, helper afwd2).
#   Y = cand_Y.json: AF_BN72 = 128 (128-key tiles at d = 72), AF_PINGPONG = 1 (all components
#       ran correct in batch B); X = cand_X.json: Y + AF_S_RS = 1 (S with Q from registers) +
#       AF_NS128 = 6 (6 ring stages at d = 128, faster on s9 in batch B).
#   1: A + B workload groups (18 workloads): kopt eval of attention_forward_afwd.json (the config
#      with seed = Y): baseline and Y against one reference output
#   2: W = attention_forward_w3.json (the config with seed = cand_W3P.json: AF_WG3 = 1, three
#      consumer warpgroups / 192 rows / 512 threads at d 64 / 72, ping-pong round robin, 64-key
#      tiles, 6 ring stages): baseline and W3P on the same 18 workloads (d = 128 included: the
#      512-thread launch changes its register budget to 224)
#   3: C group (s10, s7, s8: the naive reference takes ~50 s) baseline and Y, with the time left
#   4: X (--candidate) on the same 18 workloads, last: skipped unless time is left
# Budgeted: a step that would not fit in the 145 s is skipped and logged. A step killed at its
# limit leaves kopt's worker (own process group) running on the GPU: its pid is killed (only
# workers that appeared during the step, found by their executable).
R=$PWD; W=$R/.gpuwork/afwd; S=$R/.gpuwork/suite; T0=$(date +%s)
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; P="--peaks $W/configs/hardware/gpus.json --seeds 1 --no-store --json --max-time 0.2 --launch-timeout-ms 5000"
CFG=$W/configs/bench/attention_forward_afwd.json
WX=$(readlink -f $KOPT_WORKER)
el() { echo "$1 t=$(( $(date +%s) - T0 ))s" | tee -a $OUT/log.txt; }
left() { echo $(( 145 - ($(date +%s) - T0) )); }
workers() { for p in /proc/[0-9]*; do [ "$(readlink -f $p/exe 2>/dev/null)" = "$WX" ] && echo -n "${p#/proc/} "; done; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
ev() {  # name candidate-json|-|cfg=CONFIG timeout workloads (- = CFG, cfg= a config's baseline + seed)
  local L=$(left); local T=$3; [ $T -gt $(( L - 3 )) ] && T=$(( L - 3 ))
  if [ $T -lt 8 ]; then el "$1 SKIPPED (left $L s)"; return; fi
  local C="--candidate $W/$2.json" G=$CFG; [ "$2" = "-" ] && C=""; [ "$2" != "-" ] && G=$W/configs/bench/attention_forward.json
  case "$2" in cfg=*) C=""; G=$W/configs/bench/${2#cfg=}.json;; esac
  local before=$(workers)
  timeout $T $K eval $G $C $P --workloads $4 2>&1 > $OUT/$1.json | head -c 20000 > $OUT/$1.err
  local rc=${PIPESTATUS[0]}
  el "$1 rc=$rc (limit $T s) json $(stat -c %s $OUT/$1.json) bytes"
  if [ $rc -eq 124 ]; then
    for p in $(workers); do case " $before " in *" $p "*) ;; *) kill -9 $p 2>/dev/null; el "killed orphan worker $p";; esac; done
    sleep 2
  fi
  for role in baseline seed candidate; do
    timeout 5 python3 $W/summarize_eval.py $OUT/$1.json $role > $OUT/$1.$role.txt 2>&1
  done
  gzip -9 -f $OUT/$1.json
}
AB=s11_l276_h4_d72,s12_l600_h4_d72,s13_l1012_h4_d72,s14_l2024_h4_d72,s20_l1_h8_d128,s0_l720_h16_d72,s1_l1200_h16_d72,s2_l2116_h16_d72,s3_l3844_h16_d72,s15_l4100_h4_d72,s16_l8184_h4_d72,s4_l8136_h16_d72,s17_l15476_h4_d72,s18_l24952_h4_d72,s5_l17296_h16_d72,s6_l24368_h16_d72,s19_l40560_h4_d72,s9_l16742_h32_d128
Cw=s10_l30793_h32_d128,s7_l49596_h16_d72,s8_l65556_h16_d72
ev Y - 45 $AB
ev W cfg=attention_forward_w3 45 $AB
ev YC - 140 $Cw
ev X cand_X 35 $AB
el "done"
cat $OUT/log.txt; for f in $OUT/*.txt; do echo "== $f"; head -c 2500 $f; done
cd $OUT && tar czf afwd.tgz --exclude=afwd.tgz * && find . -maxdepth 1 -type f ! -name afwd.tgz -delete
