#!/bin/bash
# Builds the bsmms GPU pack (block_scaled_mm FP8_SMALL = 4: one flag per split unit; 5: the same
# in one launch, bsmm_fp8_1l) into $1 (default .gpuwork/bsmms of the main checkout): comparison
# configs (baseline = the shipped kernel of branch main with the config's default FP8_SMALL = 3,
# seed = cand_small4.json / cand_small5.json on the pack's copy of this branch's kernel), the
# candidate JSONs pointing at that copy, run.sh and README.txt. Run from anywhere.
set -e
H="$(cd "$(dirname "$0")" && pwd)"; R="$(cd $H/../../../.. && pwd)"
D=${1:-$(git -C $R worktree list | awk 'NR==1{print $1}')/.gpuwork/bsmms}
rm -rf $D; mkdir -p $D/configs/bench
cp -r $R/configs/schema $R/configs/hardware $D/configs/
git -C $R show main:configs/bench/block_scaled_mm_baseline.cu > $D/configs/bench/block_scaled_mm_baseline.cu
cp $R/configs/bench/block_scaled_mm_reference.cu $D/configs/bench/
cp $R/configs/bench/block_scaled_mm_baseline.cu $D/bsmm_small45.cu
cp $R/configs/bench/block_scaled_mm_baseline.cu $D/configs/bench/bsmm_small45.cu
python3 - $R $D <<'PY'
import json, sys
R, D = sys.argv[1:]
for v in (4, 5):
    c = json.load(open(f"{R}/configs/bench/block_scaled_mm.json"))
    s = json.load(open(f"{R}/bench/hopper/bsmm8/cand_small{v}.json"))
    assert c["baseline"]["parameters"]["FP8_SMALL"]["default"] == 3
    assert s["parameters"]["FP8_SMALL"]["default"] == v
    if v == 4:
        assert s["launches"] == c["baseline"]["launches"] and s["workspaces"] == c["baseline"]["workspaces"]
    s["source_file"] = "bsmm_small45.cu"          # beside the comparison config
    json.dump(s, open(f"{D}/cand_small{v}.json", "w"), indent=1)  # beside the pack's copy
    c["seed"] = s
    json.dump(c, open(f"{D}/configs/bench/block_scaled_mm_s{v}.json", "w"), indent=1)
PY
F="-DSTAGES=5 -DGROUP_M=8 -DCTAS=132 -DPF_L2=1 -DFP8=1 -DFP8_DB=2"
{ for f in configs/bench/block_scaled_mm_baseline.cu bsmm_small45.cu; do
    echo "$f FP8_SMALL=3: $(python3 $R/bench/nvrtc_check.py $D/$f --hash $F -DFP8_SMALL=3)"; done
  for v in 4 5; do
    echo "bsmm_small45.cu FP8_SMALL=$v: $(python3 $R/bench/nvrtc_check.py $D/bsmm_small45.cu --hash $F -DFP8_SMALL=$v)"; done
} | tee $D/hashes.txt
cp $H/run.sh $H/README.txt $D/; chmod +x $D/run.sh
touch $D/READY
echo "built $D ($(du -sh $D | cut -f1))"; ls $D
