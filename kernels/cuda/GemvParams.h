// Parameters of kernels/cuda/Gemv.cu (see KernelParams.h for the contract).
#pragma once
#include "DeltaNetParams.h"
#include "KernelParams.h"
#include "NormParams.h"

MEMRA_PARAMS_BEGIN

// One weight: its storage (GEMV_W) and, for q8, the per-32 scales.
struct GemvWeight {
  MEMRA_DPTR(const void) w;
  MEMRA_DPTR(const float) scale;
};
MEMRA_PARAMS_SIZE(GemvWeight, 16);
MEMRA_PARAMS_OFFSET(GemvWeight, scale, 8);

// gemv: y = W x.
struct GemvParams {
  GemvWeight w;
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(float) y;
  int n_rows;
};
MEMRA_PARAMS_SIZE(GemvParams, 40);
MEMRA_PARAMS_OFFSET(GemvParams, x, 16);
MEMRA_PARAMS_OFFSET(GemvParams, y, 24);
MEMRA_PARAMS_OFFSET(GemvParams, n_rows, 32);

// gemv_splitk_route (moe_router, one token): gemv_splitk's product into g.y (the step's scratch:
// the logits), then the launch's last block routes them into weights and ids (moe_route's
// arithmetic, or with MR_SIGMOID moe_route_sigmoid's); `ticket` is zero between launches (the
// step's ticket word).
struct GemvRouteParams {
  GemvParams g;
  MEMRA_DPTR(float) weights;
  MEMRA_DPTR(int) ids;
  MEMRA_DPTR(const float) per_expert;  // softmax: the experts' output scales; sigmoid: the selection bias; or 0
  MEMRA_DPTR(unsigned) ticket;
  float scale;  // sigmoid: the weights' scale (1: none)
  int pad_;
};
MEMRA_PARAMS_SIZE(GemvRouteParams, 80);
MEMRA_PARAMS_OFFSET(GemvRouteParams, weights, 40);
MEMRA_PARAMS_OFFSET(GemvRouteParams, ids, 48);
MEMRA_PARAMS_OFFSET(GemvRouteParams, per_expert, 56);
MEMRA_PARAMS_OFFSET(GemvRouteParams, ticket, 64);
MEMRA_PARAMS_OFFSET(GemvRouteParams, scale, 72);

// gemv_splitk_add_norm / gemv_add_norm (matmul_add_rms_norm, one token): the product into g.y
// (the op's sum), then the launch's last block adds norm.b and normalizes the row (AddNormTail.cuh).
struct GemvAddNormParams {
  GemvParams g;
  AddNormTailParams norm;
};
MEMRA_PARAMS_SIZE(GemvAddNormParams, 80);
MEMRA_PARAMS_OFFSET(GemvAddNormParams, norm, 40);

// gemv_swiglu: y = silu(Wg x) * (Wu x).
struct GemvSwigluParams {
  GemvWeight gate, up;
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(float) y;
  int n_rows;
};
MEMRA_PARAMS_SIZE(GemvSwigluParams, 56);
MEMRA_PARAMS_OFFSET(GemvSwigluParams, up, 16);
MEMRA_PARAMS_OFFSET(GemvSwigluParams, x, 32);
MEMRA_PARAMS_OFFSET(GemvSwigluParams, y, 40);
MEMRA_PARAMS_OFFSET(GemvSwigluParams, n_rows, 48);

// gemv_group: up to kGemvGroupMax weights sharing x (unused entries: n_rows 0).
#define MEMRA_GEMV_GROUP_MAX 4
struct GemvGroupParams {
  GemvWeight w[MEMRA_GEMV_GROUP_MAX];
  MEMRA_DPTR(float) y[MEMRA_GEMV_GROUP_MAX];
  MEMRA_DPTR(const float) x;
  int n_rows[MEMRA_GEMV_GROUP_MAX];
};
MEMRA_PARAMS_SIZE(GemvGroupParams, 120);
MEMRA_PARAMS_OFFSET(GemvGroupParams, y, 64);
MEMRA_PARAMS_OFFSET(GemvGroupParams, x, 96);
MEMRA_PARAMS_OFFSET(GemvGroupParams, n_rows, 104);

// add_rms_norm_matmul's prologue (the kernel's x is its a): sum = a + b (written by block 0),
// the products read rms_norm(sum) * w.
struct GemvNorm {
  MEMRA_DPTR(const float) b;
  MEMRA_DPTR(const float) w;
  MEMRA_DPTR(float) sum;
  float eps;
};
MEMRA_PARAMS_SIZE(GemvNorm, 32);
MEMRA_PARAMS_OFFSET(GemvNorm, eps, 24);

struct GemvNormParams {
  GemvParams g;
  GemvNorm norm;
};
MEMRA_PARAMS_SIZE(GemvNormParams, 72);
MEMRA_PARAMS_OFFSET(GemvNormParams, norm, 40);

struct GemvSwigluNormParams {
  GemvSwigluParams g;
  GemvNorm norm;
};
MEMRA_PARAMS_SIZE(GemvSwigluNormParams, 88);
MEMRA_PARAMS_OFFSET(GemvSwigluNormParams, norm, 56);

struct GemvGroupNormParams {
  GemvGroupParams g;
  GemvNorm norm;
};
MEMRA_PARAMS_SIZE(GemvGroupNormParams, 152);
MEMRA_PARAMS_OFFSET(GemvGroupNormParams, norm, 120);

// gemv_group_delta_step (matmul_delta_net_step, one token): the products of w[0..3] (qkv, z, beta,
// alpha) with x into step.x, step.z, step.b and step.a (the op's scratch), then each
// value head's step (delta_net_step's parameters) by the block completing the rows it reads;
// ticket: a word a value head, then a word a key head (its conv rows), zero between launches.
struct GemvDeltaStepParams {
  GemvWeight w[4];
  MEMRA_DPTR(const float) x;
  MEMRA_DPTR(unsigned) ticket;
  DeltaNetStepParams step;
};
MEMRA_PARAMS_SIZE(GemvDeltaStepParams, 184);
MEMRA_PARAMS_OFFSET(GemvDeltaStepParams, x, 64);
MEMRA_PARAMS_OFFSET(GemvDeltaStepParams, ticket, 72);
MEMRA_PARAMS_OFFSET(GemvDeltaStepParams, step, 80);

MEMRA_PARAMS_END
