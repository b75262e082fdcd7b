// Products on weights in blocks for a few dozen rows (batched decode of 9 to 64 sequences, short
// prompt chunks): matmul / matmul_group / matmul_swiglu through MoeGemm.cu's moe_gemm with the
// identity grouping (one "expert", every row a slot; kernels/cuda/MoeGemm.h), which streams the
// raw blocks through shared memory once per 64-row tile and dequantizes them there. The Gemm unit
// (Gemm.cc) would first dequantize each whole matrix into the bf16 workspace and then run
// cuBLASLt: a write and a read of 2 bytes per weight on top of the blocks, per product, so at
// these row counts it streams ~4x the bytes (9B Q4_K_M: ~40 GB per step instead of 5.2). The same
// numeric class as that path (weights dequantized exactly and rounded to bf16, activations rounded
// to bf16, f32 accumulation). Past kMaxRows the tile count grows and cuBLASLt's tensor-core rate
// wins; up to 8 rows the per-format GEMVs (GemvQuant.cc) read the blocks once already.
#include "ir/StatusMacros.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/MoeGemm.h"

namespace memra::kernels::cuda {
namespace {

constexpr int64_t kMinRows = 9, kMaxRows = 64;

class GemmBlocksImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "gemm_blocks"; }
  bool Implements(ir::OpKind k) const override {
    return k == ir::OpKind::kMatMul || k == ir::OpKind::kMatMulGroup || k == ir::OpKind::kMatMulSwiglu;
  }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& x = c.shapes.in[0];
    const int64_t K = x.empty() ? 1 : x.back();
    const int64_t M = Numel(x) / std::max<int64_t>(K, 1);
    if (M < kMinRows || M > kMaxRows) return std::optional<OpSelection>();
    const bool swiglu = c.op.is(ir::OpKind::kMatMulSwiglu);
    for (unsigned i = 1; i < c.shapes.in.size(); ++i) {
      const WeightLayout* l = c.shapes.layout(i);
      if (l == nullptr || l->kind != WeightLayoutKind::kBlocks || !MoeGemmReads(c.op.operand(i)->dtype()))
        return std::optional<OpSelection>();
    }
    if (swiglu && c.op.operand(1)->dtype() != c.op.operand(2)->dtype()) return std::optional<OpSelection>();
    OpSelection s;
    for (unsigned i = 1; i < c.shapes.in.size(); ++i) {
      // A shape moe_gemm does not take (K not a multiple of its block) falls back to Gemm.cc.
      auto l = MoeGemmLaunch(c.target, c.op.operand(i)->dtype(), K, c.shapes.in[i][0], 1, M, swiglu,
                             /*grouped=*/false);
      if (!l.ok()) return std::optional<OpSelection>();
      s.launches.push_back(std::move(*l));
      if (swiglu) break;  // gate and up in one launch
    }
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    const int64_t K = x.empty() ? 1 : x.back();
    const int64_t M = Numel(x) / std::max<int64_t>(K, 1);
    const auto& bucket_x = c.shapes().in[0];
    const int64_t max_rows = Numel(bucket_x) / std::max<int64_t>(K, 1);
    const bool swiglu = c.op().is(ir::OpKind::kMatMulSwiglu);
    const unsigned last = swiglu ? 1 : c.op().num_operands() - 1;
    for (unsigned i = 1; i <= last; ++i) {
      MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, c.Matrix(i));
      if (m.cols != K) return BindError(c.op(), "K mismatch");
      MoeGemmArgs a;
      a.a = c.In(0);
      a.w0 = m.data;
      a.row_bytes = m.row_bytes();
      a.expert_bytes = m.rows * a.row_bytes;
      a.y = c.Out(swiglu ? 0 : i - 1);
      a.n_slots = M;
      a.max_slots = max_rows;
      a.N = m.rows;
      a.K = K;
      if (swiglu) {
        MEMRA_ASSIGN_OR_RETURN(DeviceMatrix up, c.Matrix(2));
        if (up.rows != m.rows || up.cols != K || up.row_bytes() != a.row_bytes)
          return BindError(c.op(), "gate and up differ in shape or storage");
        a.w1 = up.data;
      }
      BindMoeGemm(w, i - 1, a);
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateGemmBlocks() { return std::make_unique<GemmBlocksImpl>(); }

}  // namespace memra::kernels::cuda
