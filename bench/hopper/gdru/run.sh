#!/bin/bash
# gdru GPU pack (built into .gpuwork/gdru by bench/hopper/gdru/make_pack.sh): run on the device
# from the repository root with OUT set and the kopt bundle at .gpuwork/suite/bundle.
# Three kopt evals under hard limits (88 s in all), see README.txt.
bash bench/suite/eval_pack.sh .gpuwork/gdru/gdru.spec
for f in $OUT/*.txt; do echo "== $f"; head -c 2500 "$f"; done
