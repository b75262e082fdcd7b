// Units of kernels/cuda/Dequant.cu, the block formats' dequantizers: the embedding lookup on a
// kBlocks table (embed_blocks: the rows of the tokens dequantized to f32, exactly the CPU's
// values), and DequantBf16Launch, which the GEMM units (Gemm.cc) issue to dequantize a kBlocks
// matrix into the executor's bf16 workspace before the cuBLASLt product.
#include "absl/strings/str_cat.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/DequantParams.h"
#include "kernels/cuda/GpuOp.h"

namespace memra::kernels::cuda {
namespace {

constexpr const char* kFile = "Dequant.cu";

Defines DequantDefines(ir::DType stored) { return {Def("DEQ_TYPE", ir::InfoOf(stored).ggml_id)}; }

class EmbedBlocksImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "embed_blocks"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kEmbed; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const WeightLayout* l = c.shapes.layout(1);
    if (l == nullptr || l->kind != WeightLayoutKind::kBlocks) return std::optional<OpSelection>();
    const ir::DType stored = c.op.operand(1)->dtype();
    OpSelection s;
    s.launches.push_back(
        GridStrideLaunch(c.target, kFile, "dequant_rows_f32", Numel(c.shapes.out[0]) / 8, DequantDefines(stored)));
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto ids, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(DeviceMatrix table, c.Matrix(1));
    if (table.layout->kind != WeightLayoutKind::kBlocks || table.cols % 8 != 0)
      return BindError(c.op(), "embed_blocks needs a table of blocks");
    DequantRowsParams p;
    p.w = table.data;
    p.ids = c.In(0);
    p.y = c.Out(0);
    p.row_bytes = table.row_bytes();
    p.cols = table.cols;
    p.n_tok = static_cast<int>(Numel(ids));
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

}  // namespace

Launch DequantBf16Launch(const Target& t, ir::DType stored, int64_t rows, int64_t cols) {
  return GridStrideLaunch(t, kFile, "dequant_bf16", rows * cols / 8, DequantDefines(stored));
}

std::unique_ptr<GpuOpImpl> CreateEmbedBlocks() { return std::make_unique<EmbedBlocksImpl>(); }

}  // namespace memra::kernels::cuda
