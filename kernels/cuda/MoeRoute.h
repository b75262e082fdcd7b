// The routing launch of kernels/cuda/Moe.cu (moe_route, moe_route_sigmoid: MoeRoute.cuh's warp per
// token) and its defines, shared by Moe.cc's moe_route unit and Gemv.cc's moe_router, whose router
// product routes in its last block with the same defines.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/Op.h"
#include "kernels/cuda/GpuOp.h"

namespace memra::kernels::cuda {

inline constexpr int64_t kMaxRouteExperts = 1024;  // MoeRoute.cuh: 32 values a lane

// The routing of E experts choosing k (sigmoid: moe_route_sigmoid's, renormalized when `norm`):
// MR_E, MR_K and the flags MR_SIGMOID, MR_NORM. An error naming `op` outside 1 <= E <= 1024,
// 1 <= k <= min(E, 32).
absl::StatusOr<Defines> RouteDefines(const ir::Op& op, int64_t E, int64_t k, bool sigmoid, bool norm);

// The routed weights' factor the routing kernels take (MoeRouteParams / GemvRouteParams `scale`):
// a sigmoid routing's `scale` attribute when set and not 0, else 1.
float RouteScale(const ir::Op& op, bool sigmoid);

// Moe.cu's routing launch over `tokens` rows of logits (a warp each, 8 a block).
absl::StatusOr<Launch> MoeRouteLaunch(const ir::Op& op, const Target& target, int64_t E, int64_t k, bool sigmoid,
                                      bool norm, int64_t tokens);

}  // namespace memra::kernels::cuda
