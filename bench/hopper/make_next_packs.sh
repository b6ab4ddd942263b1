#!/bin/bash
# Makes the GPU packs of bench/hopper/NEXT.md under .gpuwork/ from tracked files (run from the
# repository root, after `bash bench/gpu_bundle.sh build-rel .gpuwork/suite/bundle`), then
# prints the device command. .gpuwork is git-ignored, so a fresh checkout has to do this.
set -e
R=$PWD; [ -f bench/hopper/NEXT.md ] || { echo "run from the repository root" >&2; exit 2; }
[ -x .gpuwork/suite/bundle/bin/kopt ] || echo "warning: no bundle at .gpuwork/suite/bundle (bench/gpu_bundle.sh)" >&2
P=.gpuwork/persist
rm -rf $P .gpuwork/persistb && mkdir -p $P
cp bench/hopper/uattn/persist/run.sh bench/hopper/uattn/persist/cand_*.json $P/
cp -r configs $P/configs && cp -r $P .gpuwork/persistb
bash bench/hopper/bsmm8/next/build.sh "$R/.gpuwork/bsmm8_next" > /dev/null
bash bench/hopper/afwd/make_pack.sh "$R/.gpuwork/afwd" > /dev/null
mkdir -p .gpuwork/lint && cp bench/suite/kb_lint_pack.sh .gpuwork/lint/run.sh
du -sh .gpuwork/persist .gpuwork/persistb .gpuwork/bsmm8_next .gpuwork/afwd .gpuwork/lint
cat <<'M'
Device calls (short ones, highest value first; carry .gpuwork/suite plus the packs named):
  bash bench/suite/run_packs.sh persist:150 persistb:150
  bash bench/suite/run_packs.sh bsmm8_next:145 afwd:145
  LINT2=1 bash bench/suite/run_packs.sh lint:245
M
