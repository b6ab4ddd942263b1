#!/bin/bash
# Builds the harness variants listed in $VARIANTS ("name KERNEL_FILE flags...", one a line)
# into $1 (default .gpuwork/bsmm/bin under the repository root). KERNEL_FILE is relative to the worktree root.
H="$(cd "$(dirname "$0")" && pwd)"; R="$(cd $H/../../.. && pwd)"; D=${1:-$R/.gpuwork/bsmm/bin}; mkdir -p $D
N="/usr/local/cuda/bin/nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17"
while read -r name kf flags; do
  [ -z "$name" ] && continue
  $N -DKFILE="\"$R/$kf\"" -DREFFILE="\"$R/configs/bench/block_scaled_mm_reference.cu\"" $flags --resource-usage -o $D/$name $H/harness.cu 2>&1 | grep -A1 "error\|Function properties for bsmm_f16" | tail -1 | sed "s/^/$name: /"
done <<VARS
${VARIANTS}
VARS
