#!/bin/bash
# GPU check of kopt-worker's exit when its parent dies (kopt::exit_when_parent_dies, exit code
# 143, docs/worker-protocol.md): starts a long `kopt eval` (unified_attention s13, about 6 ms a
# launch, seconds of timing), kills kopt alone with SIGKILL while the worker is on the GPU, and
# reports whether a kopt-worker is still alive 1, 2 and 4 s later. Run on the device from the
# repository root (as a pack: copy to .gpuwork/orphan/run.sh; bundle in .gpuwork/suite/bundle).
set -u
R=$PWD; S=$R/.gpuwork/suite; : "${OUT:?set OUT}"
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt
workers() { pgrep -f "$KOPT_WORKER" | tr '\n' ' '; }
echo "workers before: [$(workers)]"
$K eval configs/bench/unified_attention.json --workloads s13_n3095_l256_hq16_hkv4_d128 --seeds 3 \
  --min-time 5 --max-time 10 --no-store --json > $OUT/orphan_eval.json 2> $OUT/orphan_eval.err < /dev/null &
kp=$!
# wait until the worker exists and has had time to start timing (compile + first launches)
for i in $(seq 1 40); do [ -n "$(workers)" ] && break; sleep 0.25; done
sleep 4
w=$(workers); echo "kopt pid $kp, worker(s) before the kill: [$w]"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>&1 | sed 's/^/  gpu app: /'
kill -9 $kp; t0=$(date +%s.%N)
for d in 1 2 4; do
  sleep $(python3 -c "import time; print(max(0, $t0 + $d - time.time()))")
  echo "after ${d} s: worker(s) alive: [$(workers)]"
done
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>&1 | sed 's/^/  gpu app after: /'
[ -z "$(workers)" ] && echo "RESULT: worker gone within 4 s of its parent's SIGKILL" || { echo "RESULT: worker STILL ALIVE"; pkill -9 -f "$KOPT_WORKER"; }
