#!/bin/bash
# Builds the GPU pack .gpuwork/pad of the main checkout (or DIR: make_pack.sh [DIR]) from this
# folder: run.sh, pad.spec, README.txt, a copy of configs/bench/paged_attention_decode_baseline.cu
# and the candidates with source_file pointing at that copy (the device has main's tree, not
# this branch).
set -e
H=$(cd "$(dirname "$0")" && pwd); R=$(cd "$H/../../.." && pwd); W=${1:-/work/main/.gpuwork/pad}
rm -rf $W && mkdir -p $W
cp $R/configs/bench/paged_attention_decode_baseline.cu $W/
cp $H/run.sh $H/pad.spec $W/ && cp $H/README.txt $W/README.txt && chmod +x $W/run.sh
python3 $H/make_cands.py $W paged_attention_decode_baseline.cu
touch $W/READY
ls $W
