#!/bin/bash
# GPU pack (install as .gpuwork/hpair/run.sh): the UA_HPAIR spec through bench/suite/eval_pack.sh.
bash bench/suite/eval_pack.sh bench/hopper/uattn/hpair/hpair.spec
