#!/bin/bash
# kopt bench of some suite configs on the GPU machine, one `timeout` per config, from the
# repository root there, with a pack unpacked in PACK (default .gpuwork/suite: bundle/,
# configs/, knowledge_base/). Usage: suite_gpu.sh OP:SECONDS[:MAXTIME] ...
# Writes $OUT/bench/OP.json (+ .err) for bench/summarize_bench.py, gpu.txt, and
# results.tgz (the device returns at most 8 files).
R=$PWD; W=$R/${PACK:-.gpuwork/suite}
B=$(cat "$W/bundle/source_dir" 2>/dev/null)
[ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$W/bundle/lib KOPT_WORKER=$W/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$W/bundle/bin/kopt; T0=$(date +%s); mkdir -p "$OUT/bench"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
for spec in "$@"; do
  IFS=: read -r op secs maxt <<<"$spec"
  timeout "$secs" "$K" bench --suite "$W/configs/bench" --ops "$op" --json --no-store --seeds 1 \
    --peaks "$W/configs/hardware/gpus.json" ${maxt:+--max-time $maxt} >"$OUT/bench/$op.json" 2>"$OUT/bench/$op.err"
  echo "$op rc=$? at $(($(date +%s) - T0)) s"
done
date -u >>"$OUT/gpu.txt"
(cd "$OUT" && tar czf results.tgz gpu.txt bench)
