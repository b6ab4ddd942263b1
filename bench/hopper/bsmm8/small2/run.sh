#!/bin/bash
# bsmm8u pack (built by bench/hopper/bsmm8/small2/build.sh): block_scaled_mm FP8_SMALL = 2 (split
# shapes on FP8_SMALL = 1's loops, unsplit shapes on FP8_SMALL = 0's) and FP8_SMALL = 3 (2 with
# pinned scale-row pointers in the unsplit loop), both UNMEASURED before this pack, against the
# shipped default (FP8 1, FP8_DB 2, FP8_SMALL 1). kopt eval of configs whose baseline is the
# shipped kernel and whose seed is the candidate: both see the same inputs and reference in one
# run. Own budget 100 s (the bsmm8s pack of the same shape took 7 s).
# 1) e2_split / e3_split: s12 (m 237, 2 splits), s0 (m 349, 2 splits), s1 (m 1024: unsplit in the
#    FP8 plan, so it takes the unsplit instance), 3 input sets, limit 25 s each.
# 2) e2_unsplit / e3_unsplit, then e2_unsplit_r / e3_unsplit_r (the same in reverse workload
#    order: the run-to-run spread is of the size of the expected gain, 3-5 %): s2, s13, s14,
#    s15, 1 input set, limit 15 s each.
# 3) harness (if >= 15 s are left): small2 / small3 / small (FP8_SMALL 1) / db2 (0) / small2 on
#    m 237 x 4096, 3072 x 4096, 4096 x 4096 (k = n = 4096), prep and main apart.
R=$PWD; W=$R/.gpuwork/bsmm8u; S=$R/.gpuwork/suite; T0=$(date +%s); BUDGET=100
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; P="--peaks $W/configs/hardware/gpus.json --no-store --json --min-time 0.05 --max-time 0.15 --launch-timeout-ms 4000"
el() { echo "$1 t=$(( $(date +%s) - T0 ))s" | tee -a $OUT/log.txt; }
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
ev() {  # name limit seeds workloads config
  local L=$(left); local T=$2; [ $T -gt $(( L - 3 )) ] && T=$(( L - 3 ))
  if [ $T -lt 8 ]; then el "$1 SKIPPED (left $L s)"; return; fi
  # own session, killed as a whole afterwards (kopt-worker runs in a process group of its own)
  setsid -w timeout -k 3 $T $K eval $W/configs/bench/$5 $P --seeds $3 --workloads $4 \
    > $OUT/$1.json 2> $OUT/$1.err < /dev/null &
  local sid=$!; wait $sid; local rc=$?; pkill -9 -s $sid 2>/dev/null
  el "$1 rc=$rc (limit $T s)"
  for role in baseline seed; do
    timeout -k 1 5 python3 $R/bench/hopper/summarize_eval.py $OUT/$1.json $role > $OUT/$1_$role.txt 2>&1
  done
  timeout -k 1 5 python3 - $OUT/$1.json > $OUT/$1_cmp.txt 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
b = {w["workload"]: w for w in r["baseline"]["rows"]}
for w in r["seed"]["rows"]:
    x = b.get(w["workload"], {})
    print(f'{w["workload"]:24s} base {x.get("status")} {x.get("median_ns", 0) / 1e3:8.1f} us | seed {w["status"]} '
          f'{w["median_ns"] / 1e3:8.1f} us abs {w.get("max_abs_err", float("nan")):.2e} | ratio {w["median_ns"] / max(x.get("median_ns", 1), 1):.3f}')
PY
}
SP=s12_m237_n4096_k4096,s0_m349_n2048_k2048,s1_m1024_n2048_k2048
US=s2_m4533_n2048_k2048,s13_m3072_n4096_k4096,s14_m4096_n4096_k4096,s15_m8192_n4096_k4096
UR=s15_m8192_n4096_k4096,s14_m4096_n4096_k4096,s13_m3072_n4096_k4096,s2_m4533_n2048_k2048
C2=block_scaled_mm.json; C3=block_scaled_mm_s3.json
ev e2_split 25 3 $SP $C2
ev e3_split 25 3 $SP $C3
ev e2_unsplit 15 1 $US $C2
ev e3_unsplit 15 1 $US $C3
ev e2_unsplit_r 15 1 $UR $C2
ev e3_unsplit_r 15 1 $UR $C3
if [ $(left) -ge 15 ]; then
  HB=/tmp/bsmm8u_bin; rm -rf $HB; mkdir -p $HB; tar xzf $W/bin.tgz -C $HB; HB=$HB/bin
  SH=("237 4096 4096" "3072 4096 4096" "4096 4096 4096")
  for v in small2 small3 small db2 small2; do echo "== $v"; timeout -k 2 8 $HB/$v "${SH[@]}"; echo "rc=$?"; done > $OUT/h.txt 2>&1
  el "harness"
else
  el "harness SKIPPED (left $(left) s)"
fi
el "done"
cat $OUT/log.txt; for f in $OUT/e*_cmp.txt $OUT/e*_seed.txt; do echo "== $f"; cut -c1-220 $f; done; cat $OUT/h.txt 2>/dev/null
cd $OUT && tar czf bsmm8u.tgz *
