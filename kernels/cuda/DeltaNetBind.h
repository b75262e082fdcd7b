// The binding every gated-delta scan unit shares (DeltaNet.cc: the sequential scans;
// DeltaNetChunked.cc: the chunked one): the fields their parameter structs take from the op's
// first six operands (q, k, v, g, beta, state), its result and its attributes.
#pragma once

#include "ir/StatusMacros.h"
#include "kernels/cuda/GpuOp.h"

namespace memra::kernels::cuda {

template <typename P>
absl::Status FillScanParams(const BindContext& c, P& p) {
  MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
  p.q = c.In(0);
  p.k = c.In(1);
  p.v = c.In(2);
  p.g = c.In(3);
  p.beta = c.In(4);
  p.state = c.In(5);
  p.o = c.Out(0);
  p.n_tok = static_cast<int>(x[0]);
  p.scale = static_cast<float>(c.op().attrs().F64Or("scale", 1.0));
  p.qk_eps = static_cast<float>(c.op().attrs().F64Or("qk_l2_eps", 0.0));
  return absl::OkStatus();
}

}  // namespace memra::kernels::cuda
