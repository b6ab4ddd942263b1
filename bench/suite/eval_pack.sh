#!/bin/bash
# A GPU pack of `kopt eval` runs from a spec file, run on the device machine from the
# repository root (the device copies the working tree, so configs and candidate files are
# read in place; only the kopt bundle is carried):
#   bench/suite/eval_pack.sh SPEC [BUNDLE]     (BUNDLE: default .gpuwork/suite/bundle)
# SPEC lines: LABEL SECONDS ROLE CONFIG [kopt eval options...]   ('#' starts a comment)
#   ROLE: baseline or candidate (the result block summarize_eval.py prints)
# Every eval runs with --no-store --json --peaks configs/hardware/gpus.json and, unless the
# line says otherwise, --seeds 1 --max-time 0.2, under a hard limit that kills its process
# group. Writes $OUT/LABEL.json/.err/.txt and one line per eval on stdout; tar $OUT yourself or
# run it through bench/suite/run_packs.sh. Example line:
#   fp8_wwall 40 candidate configs/bench/fp8_blockscale_fused_moe.json --candidate bench/hopper/fp8_moe/cand_wwall_gv8.json
set -u
SPEC=${1:?usage: eval_pack.sh SPEC [BUNDLE]}; BND=${2:-.gpuwork/suite/bundle}; R=$PWD
: "${OUT:?set OUT to the output folder}"
case "$BND" in /*) ;; *) BND=$R/$BND;; esac
B=$(cat "$BND/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$BND/lib KOPT_WORKER=$BND/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$BND/bin/kopt; T0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
while read -r label secs role cfg rest; do
  [ -z "${label:-}" ] || [ "${label:0:1}" = "#" ] && continue
  extra=""
  case " $rest " in *" --seeds "*|*" --seeds="*) ;; *) extra="--seeds 1";; esac
  case " $rest " in *" --max-time "*|*" --max-time="*) ;; *) extra="$extra --max-time 0.2";; esac
  # Its own session, killed as a whole afterwards: kopt starts kopt-worker in a process group
  # of its own, which a timeout of kopt alone would leave running on the GPU.
  setsid -w timeout -k 3 "$secs" "$K" eval "$cfg" $rest $extra --no-store --json --peaks configs/hardware/gpus.json \
    > "$OUT/$label.json" 2> "$OUT/$label.err" < /dev/null &
  sid=$!; wait $sid; rc=$?
  pkill -9 -s $sid 2>/dev/null
  timeout 10 python3 bench/hopper/summarize_eval.py "$OUT/$label.json" "$role" > "$OUT/$label.txt" 2>&1 < /dev/null
  echo "$label rc=$rc at $(( $(date +%s) - T0 )) s: $(sed -n 2p "$OUT/$label.txt" < /dev/null | cut -c1-150)"
done < "$SPEC"
date -u >> $OUT/gpu.txt
