// The unified_attention / attention_forward baseline kernels
// (configs/bench/unified_attention_baseline.cu) run on the CPU through
// bench/hopper/emu's model of the PTX primitives (ldmatrix, mma.sync, wgmma
// with its shared-memory descriptors, cp.async groups, shuffles, barriers):
// every output element of small paged/causal/GQA/varlen and dense cases
// against a float64 reference under the configs' tolerances. It checks the
// kernels' indexing and control flow against the operand layouts they
// assume, without a GPU; kopt eval on the GPU is the check of record.
// Built four times: UA_WGMMA=0 (the mma.sync path for every head size),
// UA_WGMMA=1 (d = 128 on wgmma, one warpgroup) and UA_WGMMA=2 (two
// warpgroups sharing the K / V tiles; the 40-token sequence leaves the upper
// warpgroup without rows) and UA_WGMMA=3 (the warp-specialized kernel
// unified_attention_ws: producer warpgroup, mbarrier ring, ping-pong named barriers), and
// once more with UA_PERSIST=1 (that kernel persistent: work counter, double-buffered Q), and
// with UA_HPAIR=1 as well (items of 64 rows of two heads that share a KV head).
#define UA_EMU_NO_MAIN
#include <gtest/gtest.h>

#include "ua_emu.cpp"

TEST(BenchBaselineEmu, UnifiedAttentionAndAttentionForwardMatchTheReference) {
  EXPECT_TRUE(run_cases(0));
}
