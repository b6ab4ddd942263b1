#!/bin/bash
# topk_filter: kopt eval of the draft (bench/hopper/topk/topk_filter_select.json) and of the
# config's current default, all 8 workloads. Pack (on the CPU machine, from /work/main):
#   P=.gpuwork/topk; mkdir -p $P; cp -r .gpuwork/suite/bundle $P/bundle; cp -r configs $P/configs
#   mkdir -p $P/draft; cp bench/hopper/topk/topk_filter_select.* $P/draft/
#   (the draft json refers to ../../../configs: put it where that resolves, or edit the paths)
#   cp bench/hopper/summarize_eval.py $P/
# then run `bash .gpuwork/topk/run.sh` with carry [".gpuwork/topk"] (about 80 s of command).
R=$PWD; W=$R/.gpuwork/topk
B=$(cat "$W/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$W/bundle/lib KOPT_WORKER=$W/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$W/bundle/bin/kopt; T0=$(date +%s); P="--peaks $W/configs/hardware/gpus.json"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
timeout 70 $K eval $W/configs/bench/topk_filter.json $P --seeds 2 --max-time 0.15 --no-store --json > $OUT/eval_new.json 2> $OUT/eval_new.err; echo "new rc=$? $(( $(date +%s) - T0 ))s"
python3 $W/summarize_eval.py $OUT/eval_new.json 2>&1 | tee $OUT/eval_new.txt | cut -c1-200
timeout 50 $K eval $W/old/bench/topk_filter.json $P --seeds 1 --max-time 0.15 --no-store --json > $OUT/eval_old.json 2> $OUT/eval_old.err; echo "old rc=$? $(( $(date +%s) - T0 ))s"
python3 $W/summarize_eval.py $OUT/eval_old.json 2>&1 | tee $OUT/eval_old.txt | cut -c1-200
tail -n 3 $OUT/eval_*.err | cut -c1-300
cd $OUT && tar czf results.tgz gpu.txt eval_*
