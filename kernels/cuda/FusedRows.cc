// Unit of kernels/cuda/FusedRows.cu: fused_rows, its program compiled into the kernel as defines
// (one module per program, width and block; a model's layers share a few).
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ir/RowProgram.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/FusedRowsParams.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/Q8Companion.h"

namespace memra::kernels::cuda {
namespace {

static_assert(sizeof(FusedRowsParams::x) / sizeof(FusedRowsParams::x[0]) == ir::kMaxRowInputs);
static_assert(sizeof(FusedRowsParams::y) / sizeof(FusedRowsParams::y[0]) == ir::kMaxRowYields);

// The widest row a block holds in registers (FR_PT values a thread at 1,024 threads): wider
// programs with an rms_norm are refused (fuse-rows{max-norm-width}, the same default, keeps
// them unfused).
constexpr int64_t kMaxNormCols = 16 * 1024;

int RefCode(const ir::RowRef& r) {
  switch (r.kind) {
    case ir::RowRef::kInput:
      return 1 + r.index;
    case ir::RowRef::kTemp:
      return 64 + r.index;
    case ir::RowRef::kNone:
      break;
  }
  return 0;
}

class FusedRowsImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "fused_rows"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kFusedRows; }

  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    MEMRA_ASSIGN_OR_RETURN(ir::RowProgram prog, ir::RowProgram::Parse(c.op.attrs().GetString("program").value_or(""),
                                                                      static_cast<int>(c.op.num_operands())));
    const std::vector<int64_t>& y = c.shapes.out.at(0);
    const int64_t cols = y.empty() ? 1 : y.back(), rows = Numel(y) / std::max<int64_t>(cols, 1);
    bool norm = false;
    for (const ir::RowInstr& in : prog.instrs) norm |= in.opcode == ir::RowOpcode::kRmsNorm;
    if (norm && cols > kMaxNormCols)
      return Unsupported(c.op, absl::StrCat("rows of ", cols, " with an rms_norm (a block holds at most ", kMaxNormCols,
                                            " in registers)"));
    int64_t act = 0, scalar = 0;
    for (unsigned i = 0; i < c.op.num_operands(); ++i) {
      const ir::Value* v = c.op.operand(i);
      if (v->kind() != ir::Value::Kind::kWeight)
        act |= int64_t{1} << i;
      else if (Numel(c.shapes.in.at(i)) == 1 && cols != 1)
        scalar |= int64_t{1} << i;
    }
    std::vector<std::pair<std::string, std::string>> defs = {Def("FR_COLS", cols), Def("FR_NIN", c.op.num_operands()),
                                                             Def("FR_ACT", act), Def("FR_SCALAR", scalar)};
    for (size_t k = 0; k < prog.instrs.size(); ++k) {
      const ir::RowInstr& in = prog.instrs[k];
      const int code = static_cast<int>(in.opcode) << 16 | RefCode(in.a) << 8 | RefCode(in.b);
      defs.push_back(Def(absl::StrCat("FR_I", k), code));
      defs.push_back(Def(absl::StrCat("FR_C", k), std::bit_cast<uint32_t>(static_cast<float>(in.constant))));
    }
    for (size_t k = 0; k < prog.yields.size(); ++k)
      defs.push_back(Def(absl::StrCat("FR_Y", k), RefCode(prog.yields[k])));
    Launch l;
    l.kernel.module.file = "FusedRows.cu";
    if (norm) {
      // ~4 values a thread: a decode row of 2,816 is 1,024 threads of 3 (latency: few serial loads).
      int64_t block = 32;
      while (block * 4 < cols && block < 1024) block *= 2;
      defs.push_back(Def("FR_BLOCK", block));
      l.kernel.entry = "fused_rows";
      l.block = static_cast<uint32_t>(block);
      l.grid = static_cast<uint32_t>(std::clamp<int64_t>(rows, 1, 1 << 20));
    } else {
      defs.push_back(Def("FR_POINTWISE", 1));
      l.kernel.entry = "fused_rows_pointwise";
      l.block = 256;
      l.grid = GridFor(c.target, rows * cols);
    }
    // A companion (select-kernels' pairing): written by the warps holding each group.
    const std::optional<Q8Companion> q8 = Q8CompanionOf(c.op);
    if (q8 && q8->cols == cols) defs.push_back(Def("FR_Q8Y", q8->result));
    l.kernel.module.defines = MakeDefines(std::move(defs));
    if (q8 && q8->cols == cols) AddQ8CompanionDefines(*q8, l);
    OpSelection s;
    s.launches.push_back(std::move(l));
    return std::optional<OpSelection>(std::move(s));
  }

  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto y, c.Shape(c.op().result(0)));
    const int64_t cols = y.empty() ? 1 : y.back();
    FusedRowsParams p;
    std::memset(&p, 0, sizeof(p));
    if (c.op().num_operands() > ir::kMaxRowInputs || c.op().num_results() > ir::kMaxRowYields)
      return BindError(c.op(), "more operands or results than FusedRowsParams holds");
    for (unsigned i = 0; i < c.op().num_operands(); ++i) p.x[i] = c.In(i);
    for (unsigned i = 0; i < c.op().num_results(); ++i) p.y[i] = c.Out(i);
    p.n_rows = Numel(y) / std::max<int64_t>(cols, 1);
    MEMRA_RETURN_IF_ERROR(CheckQ8CompanionBinding(c, Numel(y)));
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateFusedRows() { return std::make_unique<FusedRowsImpl>(); }

}  // namespace memra::kernels::cuda
