#!/bin/bash
# Builds the next-session bsmm8 pack into $1 (default .gpuwork/bsmm8_next of this checkout): harness
# binaries (nvcc, sm_90a) of the FP8 variants, configs, candidates, run.sh. Run from anywhere.
set -e
H="$(cd "$(dirname "$0")" && pwd)"; R="$(cd $H/../../../.. && pwd)"; D=${1:-$R/.gpuwork/bsmm8_next}
rm -rf $D; mkdir -p $D/configs/bench $D/cand /tmp/bsmm8n/bin
NB=(/usr/local/cuda/bin/nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17
    "-DREFFILE=\"$R/configs/bench/block_scaled_mm_reference.cu\""
    "-DKFILE=\"$R/configs/bench/block_scaled_mm_baseline.cu\"")
HS=$R/bench/hopper/bsmm/harness.cu; B=/tmp/bsmm8n/bin
"${NB[@]}" -o $B/old $HS
"${NB[@]}" -DFP8=1 -DFP8_DB=2 -o $B/db2 $HS
"${NB[@]}" -DFP8=1 -DFP8_DB=2 -DFP8_ACC_XOR=1 -o $B/db2_xor $HS
"${NB[@]}" -DFP8=1 -DFP8_DB=2 -DFP8_SC_ORDER=1 -o $B/db2_ord $HS
(cd /tmp/bsmm8n && tar czf $D/bin.tgz bin)
cp -r $R/configs/schema $R/configs/hardware $D/configs/
cp $R/configs/bench/block_scaled_mm.json $R/configs/bench/block_scaled_mm_reference.cu $R/configs/bench/block_scaled_mm_baseline.cu $D/configs/bench/
cp $R/configs/bench/block_scaled_mm_baseline.cu $D/cand/bsmm_fp8.cu
python3 - $D <<'PY'
import json, sys, copy
D = sys.argv[1]
c = json.load(open(f"{D}/configs/bench/block_scaled_mm.json"))
for name, extra in (("db2", {}), ("db2_xor", {"FP8_ACC_XOR": 1}), ("db2_ord", {"FP8_SC_ORDER": 1})):
    b = copy.deepcopy(c["baseline"]); b["source_file"] = "bsmm_fp8.cu"
    for k, v in dict({"FP8": 1, "FP8_DB": 2}, **extra).items():
        b["parameters"][k] = {"values": [v], "default": v}
    json.dump(b, open(f"{D}/cand/cand_{name}.json", "w"), indent=1)
PY
cp $H/run.sh $D/run.sh
echo "built $D ($(du -sh $D | cut -f1))"
