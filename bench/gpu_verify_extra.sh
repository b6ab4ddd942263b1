#!/usr/bin/env bash
# The remaining GPU checks of issue 24 in one bounded command on the GPU machine.
#
#   bench/gpu_verify_extra.sh BUNDLE_DIR [OPS]
#
# 1. noise      bench_compare_noise: the interleaved comparison against
#               back-to-back timing on an identical pair (docs/benchmarks.md)
# 2. diagnosis  kopt profile on rmsnorm's 1-token and 8192x8192 workloads: the
#               launch-bound rule (harness::is_launch_bound) against the counters
# 3. suite      kopt bench --json over OPS (default: every config of
#               configs/bench that finished within its limits before):
#               physical and attainable SOL per operator
# Results in $OUT: summary.txt and the raw files. Each step has its own timeout.
set -u
bundle=$(cd "${1:?usage: $0 BUNDLE_DIR [OPS]}" && pwd) || exit 2
ops=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/gpu_verify_extra}
mkdir -p "$out"
cd "$root" || exit 2
src=$(cat "$bundle/source_dir" 2>/dev/null)
if [[ -n $src && $src != "$root" && ! -e $src ]]; then mkdir -p "$(dirname "$src")" && ln -sfn "$root" "$src"; fi
export LD_LIBRARY_PATH=$bundle/lib KOPT_WORKER=$bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$bundle/bin/kopt
P=(--peaks configs/hardware/gpus.json)
sum=$out/summary.txt
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; git -C "$root" rev-parse --short HEAD 2>/dev/null; } | tee "$sum"
t0=$(date +%s)
echo "== noise" | tee -a "$sum"
timeout 150 "$bundle/bin/bench_compare_noise" --reps ${KOPT_NOISE_REPS:-12} --json >"$out/noise.json" 2>"$out/noise.err"
echo "noise rc=$? $(( $(date +%s) - t0 ))s" | tee -a "$sum"
python3 - "$out/noise.json" >>"$sum" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for mode, per in j["modes"].items():
    for wl, s in per.items():
        print(f"{mode:13} {wl:10} geomean {s['geomean_ratio']:.4f} sd(log) {s['sd_log_ratio']:.4f} "
              f"worst {s['worst_abs_deviation']:.4f} called_different {s['called_different']}/{j['reps']} "
              f"ci_width {s['median_ci_width']:.4f}")
PY
echo "== diagnosis" | tee -a "$sum"
timeout 120 "$K" profile configs/examples/rmsnorm.json "${P[@]}" --workloads t1_h4096 t8192_h8192 --no-store >"$out/profile.txt" 2>&1
echo "profile rc=$? $(( $(date +%s) - t0 ))s" | tee -a "$sum"
grep -iE "launch|bound|diagnos|t1_h4096|t8192" "$out/profile.txt" | head -20 >>"$sum"
echo "== suite" | tee -a "$sum"
if [[ -z $ops ]]; then
  ops=$(ls configs/bench/*.json | xargs -n1 basename | sed 's/\.json$//' | grep -vE '^(unified_attention|attention_forward|block_scaled_mm|fused_moe|fp8_blockscale_fused_moe)$' | tr '\n' ' ')
fi
mkdir -p "$out/suite"
left=$(( ${KOPT_EXTRA_BUDGET_S:-520} - ($(date +%s) - t0) ))
for op in $ops; do
  [[ -f configs/bench/$op.json ]] || continue
  el=$(( $(date +%s) - t0 )); rem=$(( ${KOPT_EXTRA_BUDGET_S:-520} - el ))
  if (( rem < 20 )); then echo "$op: not run: out of time" | tee -a "$sum"; continue; fi
  lim=$(( rem < ${KOPT_OP_LIMIT_S:-90} ? rem : ${KOPT_OP_LIMIT_S:-90} ))
  timeout "$lim" "$K" bench --ops "$op" --json --no-store --seeds 1 "${P[@]}" ${KOPT_BENCH_ARGS:-} >"$out/suite/$op.json" 2>"$out/suite/$op.err"
  echo "$op rc=$? $(( $(date +%s) - t0 ))s" | tee -a "$sum"
done
python3 bench/summarize_bench.py "$out/suite" >>"$sum" 2>&1
echo "total $(( $(date +%s) - t0 ))s" | tee -a "$sum"
