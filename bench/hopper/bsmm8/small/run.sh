#!/bin/bash
# bsmm8s pack (built by bench/hopper/bsmm8/small/build.sh): block_scaled_mm FP8 path with its own
# split-K plan for the small-m shapes (FP8 = 1, FP8_DB = 2, FP8_SMALL = 1; UNMEASURED before this
# pack). kopt eval of a config whose baseline is the shipped kernel and whose seed is the
# candidate, so both see the same inputs and reference in one run. Own budget 115 s.
# 1) e_small: s12 (m 237: 2 splits), s1 (m 1024: unsplit, 128 tiles), s0 (m 349: 2 splits), 3
#    input sets (correctness of the chained split-K across repeated launches), limit 45 s.
# 2) e_ctl: s2, s13, s14 (unsplit FP8 shapes: must equal pack B's db2 figures), limit 30 s.
# 3) harness (if >= 20 s are left): old / db2 / small on the same 6 shapes, prep and main apart.
R=$PWD; W=$R/.gpuwork/bsmm8s; S=$R/.gpuwork/suite; T0=$(date +%s); BUDGET=115
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; P="--peaks $W/configs/hardware/gpus.json --no-store --json --min-time 0.05 --max-time 0.15 --launch-timeout-ms 4000"
el() { echo "$1 t=$(( $(date +%s) - T0 ))s" | tee -a $OUT/log.txt; }
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
ev() {  # name limit seeds workloads
  local L=$(left); local T=$2; [ $T -gt $(( L - 3 )) ] && T=$(( L - 3 ))
  if [ $T -lt 8 ]; then el "$1 SKIPPED (left $L s)"; return; fi
  # own session, killed as a whole afterwards (kopt-worker runs in a process group of its own)
  setsid -w timeout -k 3 $T $K eval $W/configs/bench/block_scaled_mm.json $P --seeds $3 --workloads $4 \
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
    print(f'{w["workload"]:24s} base {x.get("status")} {x.get("median_ns", 0) / 1e3:8.1f} us | FP8_SMALL {w["status"]} '
          f'{w["median_ns"] / 1e3:8.1f} us abs {w.get("max_abs_err", float("nan")):.2e} | ratio {w["median_ns"] / max(x.get("median_ns", 1), 1):.3f}')
PY
}
ev e_small 45 3 s12_m237_n4096_k4096,s1_m1024_n2048_k2048,s0_m349_n2048_k2048
ev e_ctl 30 1 s2_m4533_n2048_k2048,s13_m3072_n4096_k4096,s14_m4096_n4096_k4096
if [ $(left) -ge 20 ]; then
  HB=/tmp/bsmm8s_bin; rm -rf $HB; mkdir -p $HB; tar xzf $W/bin.tgz -C $HB; HB=$HB/bin
  SH=("349 2048 2048" "1024 2048 2048" "237 4096 4096" "4533 2048 2048" "3072 4096 4096" "4096 4096 4096")
  for v in small old db2; do echo "== $v"; timeout -k 2 8 $HB/$v "${SH[@]}"; echo "rc=$?"; done > $OUT/h.txt 2>&1
  el "harness"
else
  el "harness SKIPPED (left $(left) s)"
fi
el "done"
cat $OUT/log.txt; for f in $OUT/e_*_cmp.txt $OUT/e_*_seed.txt; do echo "== $f"; cut -c1-220 $f; done; cat $OUT/h.txt 2>/dev/null
cd $OUT && tar czf bsmm8s.tgz *
