#!/bin/bash
# GPU pack for the draft stream-K decode attention (bench/hopper/decode/NOTES.md). Run from the
# repository root on the device with OUT set and the kopt suite bundle at .gpuwork/suite/bundle
# (the helper pack layout): kopt eval of the shipped reference config against the draft
# candidates and the shipped kernel; each eval <= 8 s, none started after 27 s (<= ~36 s in all).
R=$PWD; W=$R/bench/hopper/decode; S=$R/.gpuwork/suite
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; C=$R/knowledge_base/references/decode-attention-split-kv/operator.json
P="--peaks $R/configs/hardware/gpus.json --seeds 2 --no-store --json --max-time 0.2 --launch-timeout-ms 2000"
T0=$(date +%s)
ev() {  # name timeout [--candidate file]
  local n=$1 t=$2; shift 2
  if [ $(( $(date +%s) - T0 )) -gt 27 ]; then echo "$n skipped (time)" >> $OUT/log.txt; return; fi
  local s=$(date +%s)
  timeout -k 2 $t $K eval $C "$@" $P > $OUT/$n.json 2> $OUT/$n.err
  echo "$n rc=$? $(( $(date +%s) - s )) s" >> $OUT/log.txt
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/log.txt 2>&1
ev stream 8 --candidate $W/cand_stream.json
ev rows 8 --candidate $W/cand_rows.json
ev shipped 6
ev stream_ns4 6 --candidate $W/cand_stream_ns4.json
ev stream_nw2 6 --candidate $W/cand_stream_nw2.json
ev rows4 6 --candidate $W/cand_rows4.json
ev stream_movm 6 --candidate $W/cand_stream_movm.json
for f in $OUT/*.json; do r=candidate; [ "$(basename $f)" = shipped.json ] && r=baseline; echo "== $(basename $f)"; timeout 3 python3 $R/bench/hopper/summarize_eval.py $f $r; done > $OUT/summary.txt 2>&1
cd $OUT && tar czf decode.tgz *
