#!/bin/bash
# GPU pack of the split-context paged_attention_decode kernels (built by
# bench/hopper/pad/make_pack.sh; holds its own copy of the .cu and the candidates). Run on the
# device from the repository root with OUT set and the kopt bundle at .gpuwork/suite/bundle
# (carry .gpuwork/suite and .gpuwork/pad). 9 evals, 93 s of limits.
: "${OUT:?set OUT to the output folder}"
bash bench/suite/eval_pack.sh .gpuwork/pad/pad.spec > $OUT/pad.log 2>&1
cat $OUT/pad.log
