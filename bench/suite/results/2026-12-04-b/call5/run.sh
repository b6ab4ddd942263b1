bash bench/suite/eval_pack.sh .gpuwork/fin/fin.spec
# kb lint --run of the references whose configs changed this session (attention_forward: one seed,
# its giant workloads' naive reference takes about a minute).
R=$PWD; S=$R/.gpuwork/suite
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
L="kb lint --run --json --no-builtin --kb-dir knowledge_base/techniques --kb-dir knowledge_base/references --peaks configs/hardware/gpus.json --max-time 0.1"
setsid -w timeout -k 3 60 $S/bundle/bin/kopt $L --seeds 1 --only paged-attention-decode --only moe-topk-gating-softmax > $OUT/lint_small.json 2> $OUT/lint_small.err < /dev/null; echo "lint_small rc=$?"
setsid -w timeout -k 3 110 $S/bundle/bin/kopt $L --seeds 1 --only attention-forward-ws > $OUT/lint_afwd.json 2> $OUT/lint_afwd.err < /dev/null; echo "lint_afwd rc=$?"
tail -3 $OUT/lint_small.err $OUT/lint_afwd.err
