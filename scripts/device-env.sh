# Environment for running a bundled build (scripts/device-bundle) on the GPU
# machine from the repository root: `source scripts/device-env.sh`.
export LD_LIBRARY_PATH=$PWD/.devbuild/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KOPT_WORKER=$PWD/.devbuild/bin/kopt-worker
export KOPT_REQUIRE_GPU=1
export KOPT_DATA_DIR=$PWD/configs
export KOPT_PROMPTS_DIR=$PWD/prompts/templates
export KOPT_CACHE_DIR=${KOPT_CACHE_DIR:-/tmp/kopt-cache}
export PATH=$PWD/.devbuild/bin:$PATH
