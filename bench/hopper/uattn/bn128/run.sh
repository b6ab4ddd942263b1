#!/bin/bash
# GPU pack (install as .gpuwork/bn128/run.sh): the UA_WS128_BN = 128 spec through
# bench/suite/eval_pack.sh (about 135 s of eval limits).
bash bench/suite/eval_pack.sh bench/hopper/uattn/bn128/bn128.spec
