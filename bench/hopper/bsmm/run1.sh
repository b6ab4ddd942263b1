#!/bin/bash
# GPU run 1: harness variants on the small-m shapes (timing, trace, correctness).
W=$PWD/.gpuwork/bsmm; B=$W/bin
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
S="349 2048 2048|1024 2048 2048|237 4096 4096"
for v in trace base rt rt_trace noepi noresc rt_noepi c66; do
  echo "== $v"; IFS='|' read -ra SH <<< "$S"
  timeout 30 $B/$v "${SH[@]}"
done 2>&1 | tee $OUT/run1.txt
echo "== rt large"; timeout 30 $B/rt "4533 2048 2048" "3072 4096 4096" 2>&1 | tee -a $OUT/run1.txt
