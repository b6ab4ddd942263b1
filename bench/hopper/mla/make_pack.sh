#!/bin/bash
# Builds the GPU pack .gpuwork/mla of this checkout (or DIR, with RUN as its run.sh:
# make_pack.sh [DIR [RUN]]; the second pack: make_pack.sh .gpuwork/mla2 run2.sh) from this
# directory: run.sh, the candidates (their source_file rewritten to the pack's copy of the
# configs), summarize_eval.py and a copy of configs/. Run from anywhere.
set -e
H=$(cd "$(dirname "$0")" && pwd); R=$(cd "$H/../../.." && pwd); W=${1:-$R/.gpuwork/mla}
RUN=${2:-run.sh}; README=README.txt; [ "$RUN" != run.sh ] && README=README2.txt
rm -rf $W && mkdir -p $W
cp -r $R/configs $W/configs
cp $H/$RUN $W/run.sh && cp $H/$README $W/README.txt && chmod +x $W/run.sh
cp $H/../summarize_eval.py $W/
python3 - $H $W <<'PY'
import glob, json, os, sys
H, W = sys.argv[1:]
for f in sorted(glob.glob(H + '/cand_*.json')):
    c = json.load(open(f))
    c['source_file'] = 'configs/bench/mla_decode_attention_baseline.cu'
    json.dump(c, open(W + '/' + os.path.basename(f), 'w'), indent=1)
PY
du -sh $W
