// Parameters of kernels/cuda/Sample.cu (see KernelParams.h for the contract): the `sample` op.
#pragma once
#include "KernelParams.h"

MEMRA_PARAMS_BEGIN

// logits: [n_rows, SMP_V]; params: [n_rows, 8] (SampleMath.cuh's SMP_* columns); penalties:
// [n_rows, 2 * SMP_P] (ids, then counts); ids: [n_rows].
struct SampleParams {
  MEMRA_DPTR(const float) logits;
  MEMRA_DPTR(const float) params;
  MEMRA_DPTR(const int) penalties;
  MEMRA_DPTR(int) ids;
  long long n_rows;
};
MEMRA_PARAMS_SIZE(SampleParams, 40);
MEMRA_PARAMS_OFFSET(SampleParams, penalties, 16);
MEMRA_PARAMS_OFFSET(SampleParams, ids, 24);
MEMRA_PARAMS_OFFSET(SampleParams, n_rows, 32);

MEMRA_PARAMS_END
