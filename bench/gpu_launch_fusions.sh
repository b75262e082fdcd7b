#!/usr/bin/env bash
# The last-block launch fusions, opt-in since session 37 (session 34: the split-KV merge in the split's last blocks,
# moe_router's routing in the router GEMV's last block; session 35: matmul_add_rms_norm, the norm
# as a 16-bit product's last block; session 36: matmul_delta_net_step, each key head's delta-net
# step in the block completing its input projections) checked and measured in one device call: the op table's
# attention, MoE and decode-fusion rows, CudaExecutor, CudaGraph and Q8Companion tests, then a
# same-binary decode A/B (bench/gpu_ab.sh): the old side compiles without fuse-moe-router,
# fuse-matmul-add-rmsnorm and fuse-matmul-delta-net-step and with select-kernels{last-block-merge=false} (the
# default pipeline since session 37), the new side with all four. To measure them one at a time:
# bench/gpu_variants.sh with bench/variants/launch-fusions.tsv. The A/B takes what is left of BUDGET_S; the presets run in order, so
# the first ones matter most (the 0.8B first: the norm tails are its 48 launches a token).
#
#   bash bench/gpu_launch_fusions.sh [BUDGET_S]    # default 585; logs under $OUT
set -uo pipefail
OUT=${OUT:-/tmp/memra-launch-fusions}
mkdir -p "$OUT"
B=/tmp/b; mkdir -p $B && tar xJf build-gpu/gpu-bundle.tar.xz -C $B
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$(date +%s); t() { n=$1; shift; timeout $n "$@"; }
sum() { grep -E '^\[  (FAILED|PASSED) |^\[==========\]' $1 | tail -3; grep -E '^\[  FAILED' $1 | head; }
t 130 $B/OpTable_test --gtest_filter='*AttentionPieces*:*AttentionGeometries*:*KvCacheTypes*:*Gemma4Pieces*:*Step35Pieces*:*GatedAttentionStep*:*Moe*:*DecodeFusions*' > $OUT/optable.log 2>&1
echo "optable rc=$? $(( $(date +%s)-s ))s"; sum $OUT/optable.log; grep -E 'moe_router' $OUT/optable.log | head -6
t 90 $B/CudaExecutor_test > $OUT/cudaexec.log 2>&1; echo "cudaexec rc=$? $(( $(date +%s)-s ))s"; sum $OUT/cudaexec.log
t 40 $B/CudaGraph_test > $OUT/cudagraph.log 2>&1; echo "cudagraph rc=$? $(( $(date +%s)-s ))s"; sum $OUT/cudagraph.log
t 30 $B/Q8Companion_test > $OUT/q8c.log 2>&1; echo "q8c rc=$? $(( $(date +%s)-s ))s"; sum $OUT/q8c.log
P1="canonicalize,cse,fuse-attention-output-gate,fuse-qk-norm-rope,fuse-kv-append-norm,fuse-swiglu,fuse-moe-ffn,fuse-gated-rmsnorm,fuse-delta-net-inputs,fuse-delta-net-step,fuse-gated-attention-step,fuse-qk-norm-rope-append,"
P2="fuse-add-rmsnorm,fuse-matmul-group,fuse-rows,"
P3="dce,bucket-shapes,fuse-delta-net-inputs,"
OLD="${P1}${P2}${P3}select-kernels{arch=sm_90 sm-count=132 last-block-merge=false},plan-memory,partition-segments"
NEW="${P1}fuse-moe-router,${P2}fuse-matmul-add-rmsnorm,fuse-matmul-delta-net-step,${P3}select-kernels{arch=sm_90 sm-count=132 last-block-merge=true},plan-memory,partition-segments"
left=$(( ${1:-585} - ($(date +%s)-s) ))
echo "A/B budget $left s"
OUT=$OUT/ab bash bench/gpu_ab.sh $B/memra $B/memra $left 2 --fill=tiled "--old-args=--passes=\"$OLD\"" "--new-args=--passes=\"$NEW\"" \
  0.8b:bf16 gemma4-26b-a4b:q4_k_m step35-flash-8l:q4_k_m 9b:bf16 gemma4-31b:q4_k_m
