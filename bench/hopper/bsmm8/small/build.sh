#!/bin/bash
# Builds the bsmm8s GPU pack (FP8_SMALL = 1: the FP8 path with its own split-K plan for the
# small-m shapes) into $1 (default .gpuwork/bsmm8s of the main checkout): a comparison config
# (baseline = the shipped kernel of branch main, seed = cand_small.json's parameters on this
# branch's kernel), the harness binaries (nvcc, sm_90a) and run.sh. Run from anywhere.
set -e
H="$(cd "$(dirname "$0")" && pwd)"; R="$(cd $H/../../../.. && pwd)"
D=${1:-$(git -C $R worktree list | awk 'NR==1{print $1}')/.gpuwork/bsmm8s}
rm -rf $D/configs $D/bin.tgz; mkdir -p $D/configs/bench /tmp/bsmm8s_b/bin
cp -r $R/configs/schema $R/configs/hardware $D/configs/
git -C $R show main:configs/bench/block_scaled_mm_baseline.cu > $D/configs/bench/block_scaled_mm_baseline.cu
cp $R/configs/bench/block_scaled_mm_reference.cu $D/configs/bench/
cp $R/configs/bench/block_scaled_mm_baseline.cu $D/configs/bench/bsmm_small.cu
python3 - $R $D <<'PY'
import json, sys, copy
R, D = sys.argv[1:]
c = json.load(open(f"{R}/configs/bench/block_scaled_mm.json"))
s = json.load(open(f"{R}/bench/hopper/bsmm8/cand_small.json"))
assert s["launches"] == c["baseline"]["launches"] and s["workspaces"] == c["baseline"]["workspaces"]
s["source_file"] = "bsmm_small.cu"
c["seed"] = s
json.dump(c, open(f"{D}/configs/bench/block_scaled_mm.json", "w"), indent=1)
PY
B=/tmp/bsmm8s_b/bin; HS=$R/bench/hopper/bsmm/harness.cu
NB=(/usr/local/cuda/bin/nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17
    "-DREFFILE=\"$D/configs/bench/block_scaled_mm_reference.cu\"")
nice -n 10 "${NB[@]}" "-DKFILE=\"$D/configs/bench/block_scaled_mm_baseline.cu\"" -o $B/old $HS
nice -n 10 "${NB[@]}" "-DKFILE=\"$D/configs/bench/bsmm_small.cu\"" -DFP8=1 -DFP8_DB=2 -o $B/db2 $HS
nice -n 10 "${NB[@]}" "-DKFILE=\"$D/configs/bench/bsmm_small.cu\"" -DFP8=1 -DFP8_DB=2 -DFP8_SMALL=1 -o $B/small $HS
(cd /tmp/bsmm8s_b && tar czf $D/bin.tgz bin)
cp $H/run.sh $D/run.sh
echo "built $D ($(du -sh $D | cut -f1))"
