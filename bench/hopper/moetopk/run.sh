#!/bin/bash
# moetopk GPU pack (built into .gpuwork/moetopk by bench/hopper/moetopk/make_pack.sh): run on the
# device from the repository root with OUT set and the kopt bundle at .gpuwork/suite/bundle.
# Five kopt evals under hard limits (59 s in all), see README.txt.
bash bench/suite/eval_pack.sh .gpuwork/moetopk/moetopk.spec
for f in $OUT/*.txt; do echo "== $f"; head -c 2500 "$f"; done
