#!/bin/bash
# Builds the bsmm8u GPU pack (FP8_SMALL = 2: the split shapes keep FP8_SMALL = 1's loops, the
# unsplit ones run FP8_SMALL = 0's; FP8_SMALL = 3: the same with pinned scale-row pointers) into
# $1 (default .gpuwork/bsmm8u of the main checkout): two comparison configs (baseline = the
# shipped kernel of branch main, whose config default is FP8_SMALL = 1; seed = cand_small2.json
# resp. cand_small3.json on this branch's kernel), the harness binaries (nvcc, sm_90a) and
# run.sh. Run from anywhere.
set -e
H="$(cd "$(dirname "$0")" && pwd)"; R="$(cd $H/../../../.. && pwd)"
D=${1:-$(git -C $R worktree list | awk 'NR==1{print $1}')/.gpuwork/bsmm8u}
TB=/tmp/bsmm8u_b
rm -rf $D/configs $D/bin.tgz $TB; mkdir -p $D/configs/bench $TB/bin
cp -r $R/configs/schema $R/configs/hardware $D/configs/
git -C $R show main:configs/bench/block_scaled_mm_baseline.cu > $D/configs/bench/block_scaled_mm_baseline.cu
cp $R/configs/bench/block_scaled_mm_reference.cu $D/configs/bench/
cp $R/configs/bench/block_scaled_mm_baseline.cu $D/configs/bench/bsmm_small2.cu
python3 - $R $D <<'PY'
import json, sys
R, D = sys.argv[1:]
for v, out in ((2, "block_scaled_mm.json"), (3, "block_scaled_mm_s3.json")):
    c = json.load(open(f"{R}/configs/bench/block_scaled_mm.json"))
    s = json.load(open(f"{R}/bench/hopper/bsmm8/cand_small{v}.json"))
    assert s["launches"] == c["baseline"]["launches"] and s["workspaces"] == c["baseline"]["workspaces"]
    assert c["baseline"]["parameters"]["FP8_SMALL"]["default"] == 1
    assert s["parameters"]["FP8_SMALL"]["default"] == v
    s["source_file"] = "bsmm_small2.cu"
    c["seed"] = s
    json.dump(c, open(f"{D}/configs/bench/{out}", "w"), indent=1)
PY
# The baseline file of main must give the shipped cubin (FP8_SMALL = 1 default of the config).
F="-DSTAGES=5 -DGROUP_M=8 -DCTAS=132 -DPF_L2=1 -DFP8=1 -DFP8_DB=2"
for f in block_scaled_mm_baseline.cu bsmm_small2.cu; do
  echo "$f FP8_SMALL=1: $(python3 $R/bench/nvrtc_check.py $D/configs/bench/$f --hash $F -DFP8_SMALL=1)"
done
for v in 2 3; do
  echo "bsmm_small2.cu FP8_SMALL=$v: $(python3 $R/bench/nvrtc_check.py $D/configs/bench/bsmm_small2.cu --hash $F -DFP8_SMALL=$v)"
done
B=$TB/bin; HS=$R/bench/hopper/bsmm/harness.cu
NB=(/usr/local/cuda/bin/nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17
    "-DREFFILE=\"$D/configs/bench/block_scaled_mm_reference.cu\"" "-DKFILE=\"$D/configs/bench/bsmm_small2.cu\""
    -DFP8=1 -DFP8_DB=2)
nice -n 10 "${NB[@]}" -DFP8_SMALL=0 -o $B/db2 $HS
nice -n 10 "${NB[@]}" -DFP8_SMALL=1 -o $B/small $HS
nice -n 10 "${NB[@]}" -DFP8_SMALL=2 -o $B/small2 $HS
nice -n 10 "${NB[@]}" -DFP8_SMALL=3 -o $B/small3 $HS
(cd $TB && tar czf $D/bin.tgz bin)
cp $H/run.sh $D/run.sh
echo "built $D ($(du -sh $D | cut -f1))"
