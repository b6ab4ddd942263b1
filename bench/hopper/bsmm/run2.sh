#!/bin/bash
# GPU run 2 (bench/hopper/bsmm): harness variants on the small-m shapes, the new kernel on all
# 24 shapes (harness check against the reference kernel), then kopt eval of the new config on
# s0, s1, s12. From the repository root on the GPU machine, pack in .gpuwork/bsmm.
R=$PWD; W=$R/.gpuwork/bsmm; B=$W/bin; T0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
S=("349 2048 2048" "1024 2048 2048" "237 4096 4096")
for v in old new new_nopf new_pg264 new_pg132 new_s4 new_stg300 new_stg800; do
  echo "== $v"; timeout 20 $B/$v "${S[@]}"
done > $OUT/h_small.txt 2>&1; cat $OUT/h_small.txt; echo "small done $(( $(date +%s) - T0 ))s"
ALL=(); for m in 349 1024 4533 6918 20480 51200 65536 98304 118784 250880 516096 704512; do ALL+=("$m 2048 2048"); done
for m in 237 3072 4096 8192 16384 24576 49152 65536 98304 131072 258048 299520; do ALL+=("$m 4096 4096"); done
timeout 60 $B/new "${ALL[@]}" > $OUT/h_all.txt 2>&1; echo "all rc=$? $(( $(date +%s) - T0 ))s"; cat $OUT/h_all.txt
# kopt eval of the new config on the small-m workloads
BD=$(cat "$W/bundle/source_dir" 2>/dev/null); [ -n "$BD" ] && [ "$R" != "$BD" ] && [ ! -e "$BD" ] && mkdir -p "$(dirname "$BD")" && ln -sfn "$R" "$BD"
export LD_LIBRARY_PATH=$W/bundle/lib KOPT_WORKER=$W/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
C=$W/configs/bench; P="--peaks $W/configs/hardware/gpus.json"
timeout 90 $W/bundle/bin/kopt eval $C/block_scaled_mm.json $P --seeds 1 --max-time 0.3 --no-store --json \
  --workloads s12_m237_n4096_k4096,s1_m1024_n2048_k2048,s0_m349_n2048_k2048 > $OUT/eval_small.json 2> $OUT/eval_small.err
echo "eval rc=$? $(( $(date +%s) - T0 ))s"; tail -3 $OUT/eval_small.err | cut -c1-300
python3 $W/summarize_eval.py $OUT/eval_small.json 2>&1 | tee $OUT/eval_small.txt
