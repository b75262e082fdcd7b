// Parameters of kernels/cuda/Dequant.cu (see KernelParams.h for the contract).
//
// The matrices these kernels read are ggml block formats exactly as the GGUF stores them (the
// kBlocks layout of WeightLayout.h): a [rows, cols] matrix is `rows` rows of cols / QK blocks
// back to back, row r at w + r * row_bytes (row_bytes = cols / QK * block bytes), each block as
// ggml-common.h declares it (block_q4_K, ...). Nothing is repacked or aligned: blocks of 18, 22,
// 34, 84, 110 or 210 bytes start at any byte, so the kernels load bytes.
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// dequant_bf16: y[r, :] = bf16(dequantize(w row row0 + r)) for r < n_rows (y row-major, 16-byte
// aligned; cols a multiple of 8).
struct DequantParams {
  MEMRA_DPTR(const unsigned char) w;
  MEMRA_DPTR(unsigned short) y;
  long long row_bytes;
  long long row0;
  long long n_rows;
  long long cols;
};
MEMRA_PARAMS_SIZE(DequantParams, 48);
MEMRA_PARAMS_OFFSET(DequantParams, y, 8);
MEMRA_PARAMS_OFFSET(DequantParams, row_bytes, 16);
MEMRA_PARAMS_OFFSET(DequantParams, row0, 24);
MEMRA_PARAMS_OFFSET(DequantParams, n_rows, 32);
MEMRA_PARAMS_OFFSET(DequantParams, cols, 40);

// dequant_rows_f32 (the embedding lookup on blocks): y[t, :] = dequantize(w row ids[t]) in f32,
// exactly the CPU's values, for t < n_tok (ids checked against the vocabulary by the executor).
struct DequantRowsParams {
  MEMRA_DPTR(const unsigned char) w;
  MEMRA_DPTR(const int) ids;
  MEMRA_DPTR(float) y;
  long long row_bytes;
  long long cols;
  int n_tok;
};
MEMRA_PARAMS_SIZE(DequantRowsParams, 48);
MEMRA_PARAMS_OFFSET(DequantRowsParams, ids, 8);
MEMRA_PARAMS_OFFSET(DequantRowsParams, y, 16);
MEMRA_PARAMS_OFFSET(DequantRowsParams, row_bytes, 24);
MEMRA_PARAMS_OFFSET(DequantRowsParams, cols, 32);
MEMRA_PARAMS_OFFSET(DequantRowsParams, n_tok, 40);

MEMRA_PARAMS_END
