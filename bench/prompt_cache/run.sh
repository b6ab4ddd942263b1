#!/usr/bin/env bash
# The prompt-cache benchmark of docs/benchmarks.md: the recorded rmsnorm
# campaign rendered with the templates before the cache-friendly ordering
# (commit 622f8ca) and after it, with and without per-call diversity.
# Usage: bench/prompt_cache/run.sh [BUILD_DIR]   (default build-dev)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-dev}
cmake --build "$build" --target kopt_prompt_cache_bench -j2 >/dev/null
bin="$build/bin/kopt_prompt_cache_bench"
[ -x "$bin" ] || bin=$(find "$build" -name kopt_prompt_cache_bench -type f | head -1)
old=$(mktemp -d)
trap 'rm -rf "$old"' EXIT
# The templates as they were before this change.
git archive 622f8ca prompts/templates | tar -x -C "$old"
out=${OUT:-bench/prompt_cache/results.jsonl}
: >"$out"
"$bin" --label "before: old order, K identical prompts" --templates "$old/prompts/templates" | jq -c . >>"$out"
"$bin" --label "new order, K identical prompts" --templates prompts/templates | jq -c . >>"$out"
"$bin" --label "new order, strategy hints (default)" --templates prompts/templates --hints | jq -c . >>"$out"
"$bin" --label "new order, hints + call dropout 0.3" --templates prompts/templates --hints --call-dropout 0.3 | jq -c . >>"$out"
"$bin" --label "old order, hints" --templates "$old/prompts/templates" --hints | jq -c . >>"$out"
jq -r '"| \(.label) | \(.calls) | \(.mean_input_tokens_per_call|floor) | \(.iterations_with_identical_prompts) | \(.openai_cached_share*100|floor) % | \(.openai_mean_share_per_call*100|floor) % | \(.anthropic_cached_share*100|floor) % |"' "$out"
