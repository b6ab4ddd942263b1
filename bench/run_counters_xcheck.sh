#!/usr/bin/env bash
# Counters cross-check (issue #4): kopt's CUPTI Range Profiler figures for
# three kernels with known behaviour against Nsight Compute's for the same
# kernels and launch configurations, and the cost of the counters pass.
# Runs on a GPU machine from the repository root with kopt built (or
# bundled): KOPT=path/to/kopt, OUT=directory for results.
set -uo pipefail
: "${KOPT:=build/bin/kopt}"
: "${OUT:=counters-out}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/gpu.txt"
cfg=bench/counters/identity.json
for pair in copy:copy_1g fma:fma_270k oneblock:one_64k; do
  cand=${pair%%:*}; wl=${pair##*:}
  "$KOPT" profile "$cfg" --candidate "bench/counters/$cand.json" --workloads "$wl" --json --no-store \
    > "$OUT/kopt_$cand.json" 2> "$OUT/kopt_$cand.err"
  "$KOPT" profile "$cfg" --candidate "bench/counters/$cand.json" --workloads "$wl" --full --json --no-store \
    > "$OUT/kopt_full_$cand.json" 2> "$OUT/kopt_full_$cand.err"
done
metrics=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d["results"]["candidate"]["rows"][0]; print(",".join(sorted(r["counters"]["metrics"].keys())))' "$OUT/kopt_copy.json")
nvcc -O3 -arch=sm_90a -o /tmp/kopt_counters_target bench/counters/target.cu
ncu --clock-control none --metrics "$metrics" --csv /tmp/kopt_counters_target > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
python3 bench/counters/summarize.py "$OUT" | tee "$OUT/summary.md"
