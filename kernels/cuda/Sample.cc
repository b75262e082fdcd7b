// The unit of kernels/cuda/Sample.cu: the `sample` op (the batched step's device sampler), one
// block of 1024 threads per row; the vocabulary and the penalty entries are compile-time sizes.
#include <algorithm>

#include "ir/StatusMacros.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/SampleParams.h"

namespace memra::kernels::cuda {
namespace {

constexpr char kFile[] = "Sample.cu";
constexpr int64_t kBlock = 1024;  // Sample.cu's SMP_BLOCK

class SampleImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "sample"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kSample; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const int64_t rows = c.shapes.in[0][0], V = c.shapes.in[0][1], P = c.shapes.in[2][1] / 2;
    // Sample.cu's SmpShared: the penalized-id bitmap, P entries, 256-bin histograms, reductions.
    const int64_t smem = (V + 31) / 32 * 4 + P * 8 + 256 * 12 + (kBlock / 32) * 24 + 32;
    if (smem > c.target.smem_per_block)
      return Unsupported(
          c.op, absl::StrCat("a vocabulary of ", V, " and ", P, " penalty entries need ", smem,
                             " bytes of shared memory (the device has ", c.target.smem_per_block, " per block)"));
    if (V >= (int64_t{1} << 23))
      return Unsupported(c.op, absl::StrCat("a vocabulary of ", V, " ids overflows the 64-bit weight sums"));
    Launch l;
    l.kernel.module.file = kFile;
    l.kernel.module.defines = MakeDefines({Def("SMP_V", V), Def("SMP_P", std::max<int64_t>(P, 1))});
    l.kernel.entry = "sample_rows";
    l.block = static_cast<uint32_t>(kBlock);
    l.grid = static_cast<uint32_t>(std::clamp<int64_t>(rows, 1, 65535));
    OpSelection s;
    s.launches.push_back(std::move(l));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    SampleParams p;
    p.logits = c.In(0);
    p.params = c.In(1);
    p.penalties = c.In(2);
    p.ids = c.Out(0);
    p.n_rows = x[0];
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateSample() { return std::make_unique<SampleImpl>(); }

}  // namespace memra::kernels::cuda
