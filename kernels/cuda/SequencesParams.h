// Parameters of kernels/cuda/Sequences.cu (see KernelParams.h for the contract): the ops of a step
// over several sequences (ir/Ops.def, "sequences").
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// seq_positions (pos, slot written) and seq_advance_positions (counter advanced; tok_seq, pos,
// slot unused). counter: [n_seq]; seq_slot: [n_seq]; seq_start: [n_seq + 1]; tok_seq, pos, slot:
// [n_tok].
struct SeqPositionsParams {
  MEMRA_DPTR(int) counter;
  MEMRA_DPTR(const int) tok_seq;
  MEMRA_DPTR(const int) seq_slot;
  MEMRA_DPTR(const int) seq_start;
  MEMRA_DPTR(int) pos;
  MEMRA_DPTR(int) slot;
  int n_seq;
  int n_tok;
};
MEMRA_PARAMS_SIZE(SeqPositionsParams, 56);
MEMRA_PARAMS_OFFSET(SeqPositionsParams, seq_start, 24);
MEMRA_PARAMS_OFFSET(SeqPositionsParams, slot, 40);
MEMRA_PARAMS_OFFSET(SeqPositionsParams, n_seq, 48);
MEMRA_PARAMS_OFFSET(SeqPositionsParams, n_tok, 52);

// paged_kv_append: rows of PG_WIDTH (= Hkv * D) floats into [n_blocks, PG_BS, Hkv, D] pools;
// blocks: [S, max_blocks].
struct PagedKvAppendParams {
  MEMRA_DPTR(const float) k;
  MEMRA_DPTR(const float) v;
  MEMRA_DPTR(void) k_cache;  // PG_KT elements
  MEMRA_DPTR(void) v_cache;  // PG_VT elements
  MEMRA_DPTR(const int) blocks;
  MEMRA_DPTR(const int) pos;
  MEMRA_DPTR(const int) slot;
  int n_tok;
  int max_blocks;
  int n_blocks;
};
MEMRA_PARAMS_SIZE(PagedKvAppendParams, 72);
MEMRA_PARAMS_OFFSET(PagedKvAppendParams, blocks, 32);
MEMRA_PARAMS_OFFSET(PagedKvAppendParams, slot, 48);
MEMRA_PARAMS_OFFSET(PagedKvAppendParams, n_tok, 56);
MEMRA_PARAMS_OFFSET(PagedKvAppendParams, max_blocks, 60);
MEMRA_PARAMS_OFFSET(PagedKvAppendParams, n_blocks, 64);

// paged_attention_split (partials into part: [n_tok, PA_HQ, PA_SPLITS, PA_D + 2]) and
// paged_attention_combine (part -> o [n_tok, PA_HQ, PA_D], zeros on rows with slot < 0).
struct PagedAttentionParams {
  MEMRA_DPTR(const float) q;
  MEMRA_DPTR(const void) k_cache;  // PA_KT elements
  MEMRA_DPTR(const void) v_cache;  // PA_VT elements
  MEMRA_DPTR(const int) blocks;
  MEMRA_DPTR(const int) pos;
  MEMRA_DPTR(const int) slot;
  MEMRA_DPTR(float) part;
  MEMRA_DPTR(float) o;
  int n_tok;
  int max_blocks;
  int n_blocks;
  float scale;
  int window;  // 0 (causal) or the sliding window in keys
  int pad_;
};
MEMRA_PARAMS_SIZE(PagedAttentionParams, 88);
MEMRA_PARAMS_OFFSET(PagedAttentionParams, slot, 40);
MEMRA_PARAMS_OFFSET(PagedAttentionParams, o, 56);
MEMRA_PARAMS_OFFSET(PagedAttentionParams, n_tok, 64);
MEMRA_PARAMS_OFFSET(PagedAttentionParams, max_blocks, 68);
MEMRA_PARAMS_OFFSET(PagedAttentionParams, n_blocks, 72);
MEMRA_PARAMS_OFFSET(PagedAttentionParams, scale, 76);
MEMRA_PARAMS_OFFSET(PagedAttentionParams, window, 80);

// take_seq_last_rows: y[b] = x[seq_start[b+1] - 1] (rows of `row` floats), zeros for an entry
// without rows.
struct TakeSeqLastRowsParams {
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(const int) seq_start;
  MEMRA_DPTR(float) y;
  long long row;
  int n_seq;
  int n_tok;
};
MEMRA_PARAMS_SIZE(TakeSeqLastRowsParams, 40);
MEMRA_PARAMS_OFFSET(TakeSeqLastRowsParams, row, 24);
MEMRA_PARAMS_OFFSET(TakeSeqLastRowsParams, n_seq, 32);
MEMRA_PARAMS_OFFSET(TakeSeqLastRowsParams, n_tok, 36);

MEMRA_PARAMS_END
