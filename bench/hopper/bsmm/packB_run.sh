#!/bin/bash
# bsmm pack B (2026-12-03): split-K as a chain in quarters (block_scaled_mm_chain.cu): split sp
# waits for split sp - 1's running sum of a quarter tile, adds, stores; the last writes out.
# Deadlock-free without co-residency: units are taken by atomic ticket in arrival order and a
# block waits only for a smaller ticket (a block that is already running). 1) harness: old
# baseline vs chain on s0, s1, s12 (timeout -k 2 12); 2) only if chain is correct there
# (bad 0 on all 3): kopt eval --candidate chain on s12, s1, s0, then 6 mid/large workloads.
# Own budget 55 s.
R=$PWD; W=$R/.gpuwork/bsmm; S=$R/.gpuwork/suite; T0=$(date +%s)
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; P="--peaks $W/configs/hardware/gpus.json --seeds 1 --no-store --json --max-time 0.15 --launch-timeout-ms 4000"
CFG=$W/configs/bench/block_scaled_mm.json
el() { echo "$1 t=$(( $(date +%s) - T0 ))s" | tee -a $OUT/log.txt; }
left() { echo $(( 55 - ($(date +%s) - T0) )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
HB=/tmp/bsmm_bin; rm -rf $HB; mkdir -p $HB; tar xzf $W/bin.tgz -C $HB; HB=$HB/bin
for v in old chain; do
  echo "== $v"; timeout -k 2 12 $HB/$v "349 2048 2048" "1024 2048 2048" "237 4096 4096"; echo "rc=$?"
done > $OUT/h_small.txt 2>&1; el "harness"
OK=$(awk '/^== chain/{c=1} c && /^shape/ && / bad 0 /{n++} END{print (n==3)?1:0}' $OUT/h_small.txt); el "chain_ok=$OK"
ev() {  # name timeout workloads
  local L=$(left); local T=$2; [ $T -gt $(( L - 4 )) ] && T=$(( L - 4 ))
  if [ $T -lt 8 ]; then el "$1 SKIPPED (left $L s)"; return; fi
  timeout -k 3 $T $K eval $CFG --candidate $W/cand/cand_chain.json $P --workloads $3 > $OUT/$1.json 2> $OUT/$1.err
  el "$1 rc=$? (limit $T s)"
  timeout -k 1 5 python3 $R/bench/hopper/summarize_eval.py $OUT/$1.json candidate > $OUT/$1.txt 2>&1
}
if [ "$OK" = 1 ]; then
  ev ch_small 20 s12_m237_n4096_k4096,s1_m1024_n2048_k2048,s0_m349_n2048_k2048
  ev ch_mid 28 s2_m4533_n2048_k2048,s3_m6918_n2048_k2048,s13_m3072_n4096_k4096,s14_m4096_n4096_k4096,s17_m24576_n4096_k4096,s19_m65536_n4096_k4096
fi
el "done"
cat $OUT/log.txt $OUT/h_small.txt; for f in $OUT/ch_*.txt; do echo "== $f"; cut -c1-200 $f; done
cd $OUT && tar czf bsmm.tgz *
