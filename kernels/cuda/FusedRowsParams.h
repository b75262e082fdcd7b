// Parameters of kernels/cuda/FusedRows.cu (see KernelParams.h for the contract).
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// fused_rows: the op's operands (rows [n_rows, FR_COLS], or weights [FR_COLS] / [1]) and the
// yielded rows, in the op's order (ir/RowProgram.h bounds them: 11 operands, 8 yields).
struct FusedRowsParams {
  MEMRA_DPTR(const float) x[11];
  MEMRA_DPTR(float) y[8];
  long long n_rows;
};
MEMRA_PARAMS_SIZE(FusedRowsParams, 160);
MEMRA_PARAMS_OFFSET(FusedRowsParams, y, 88);
MEMRA_PARAMS_OFFSET(FusedRowsParams, n_rows, 152);

MEMRA_PARAMS_END
