#include "runtime/DeviceMemory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/Function.h"
#include "ir/StatusMacros.h"
#include "kernels/cpu/Weight.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "runtime/StateMemory.h"

namespace memra::runtime {
namespace {

std::string Bytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30)) return absl::StrFormat("%.2f GiB", b / 1073741824.0);
  return absl::StrFormat("%.1f MiB", b / 1048576.0);
}

}  // namespace

std::string DescribeDeviceMemory(const DeviceMemoryBytes& b) {
  return absl::StrCat("weights ", Bytes(b.weights), ", KV cache ", Bytes(b.kv_cache), ", recurrent state ",
                      Bytes(b.recurrent + b.other_state), ", arenas ", Bytes(b.arenas), ", workspace ",
                      Bytes(b.workspace), " (total ", Bytes(b.total()), ")");
}

absl::Status CheckDeviceMemoryFits(const DeviceMemoryBytes& need, uint64_t free_bytes, absl::string_view device) {
  if (need.total() <= free_bytes) return absl::OkStatus();
  const uint64_t state = need.kv_cache + need.recurrent + need.other_state;
  const char* advice = state > need.weights ? "lower --ctx-size (the KV cache and state are the largest part)"
                                            : "use a smaller model or quantization, a GPU with more memory, or "
                                              "lower --ctx-size";
  return absl::ResourceExhaustedError(absl::StrCat("the model needs ", Bytes(need.total()), " of device memory (",
                                                   DescribeDeviceMemory(need), "), more than the ", Bytes(free_bytes),
                                                   " free on ", device, ": ", advice));
}

absl::StatusOr<std::vector<PlannedWeight>> PlanWeights(const ir::Module& module, const gguf::GgufFile& file,
                                                       kernels::cuda::WeightMode weights) {
  namespace kcu = memra::kernels::cuda;
  namespace kc = memra::kernels::cpu;
  std::vector<PlannedWeight> out;
  for (const auto& wp : module.weights()) {
    const ir::Weight* w = wp.get();
    const gguf::TensorInfo* t = file.FindTensor(w->name());
    if (t == nullptr)
      return absl::NotFoundError(
          absl::StrCat(file.path(), ": tensor \"", w->name(), "\" (a weight of the module) not found"));
    if (!w->shape().IsStatic())
      return absl::InvalidArgumentError(absl::StrCat("weight @", w->name(), " has a symbolic shape"));
    if (ir::InfoOf(w->dtype()).ggml_id != static_cast<int>(t->type))
      return absl::InvalidArgumentError(absl::StrCat(file.path(), ": tensor \"", w->name(), "\" has type ",
                                                     formats::GgmlTypeName(t->type), ", the module declares ",
                                                     ir::DTypeName(w->dtype())));
    bool matrix_use = false, value_use = false;
    for (const ir::Use& u : w->uses()) (ir::IsMatrixOperand(*u.user, u.operand_index) ? matrix_use : value_use) = true;
    PlannedWeight p;
    p.weight = w;
    p.tensor = t;
    MEMRA_ASSIGN_OR_RETURN(p.shard, ShardOf(*w));
    if (p.shard) {
      // A rank's slice: its sizes from the module's (local) shape; the bytes are cut at upload.
      int64_t rows = 1;
      for (int64_t d = 0; d + 1 < w->rank(); ++d) rows *= w->shape()[d].value();
      const int64_t cols = w->rank() > 0 ? w->shape()[w->rank() - 1].value() : 1;
      if (matrix_use) {
        MEMRA_ASSIGN_OR_RETURN(p.layout,
                               kcu::MatrixLayoutFor(w->dtype(), weights, absl::StrCat("tensor \"", w->name(), "\"")));
        p.rows = rows;
        p.cols = cols;
        p.matrix_bytes = static_cast<uint64_t>(kcu::LayoutBytes(*p.layout, w->dtype(), rows, cols));
      }
      if (value_use) p.value_bytes = static_cast<uint64_t>(rows * cols) * 4;
      out.push_back(p);
      continue;
    }
    if (matrix_use) {
      // A 3-D stack of matrices (MoE experts, ggml ne {cols, rows, E}) lives as E * rows rows.
      MEMRA_ASSIGN_OR_RETURN(kc::WeightView view, t->ne.size() == 3 && t->ne[2] > 1
                                                      ? kc::WeightView::FromStack(t->name, t->type, t->ne, t->data)
                                                      : kc::WeightView::FromTensor(t->name, t->type, t->ne, t->data));
      MEMRA_ASSIGN_OR_RETURN(p.layout,
                             kcu::MatrixLayoutFor(w->dtype(), weights, absl::StrCat("tensor \"", w->name(), "\"")));
      p.rows = view.rows;
      p.cols = view.cols;
      p.matrix_bytes = static_cast<uint64_t>(kcu::LayoutBytes(*p.layout, w->dtype(), view.rows, view.cols));
    }
    if (value_use) {
      if (!kc::CanDecode(t->type))
        return absl::UnimplementedError(absl::StrCat("tensor \"", w->name(), "\": type ",
                                                     formats::GgmlTypeName(t->type), " cannot be read as f32 values"));
      p.value_bytes = static_cast<uint64_t>(t->NumElements()) * 4;
    }
    out.push_back(p);
  }
  return out;
}

absl::StatusOr<DeviceMemoryBytes> PlannedDeviceMemory(const ir::Module& module,
                                                      const std::vector<PlannedWeight>& weights,
                                                      const kernels::cuda::Target& target,
                                                      kernels::cuda::WeightMode mode) {
  namespace kcu = memra::kernels::cuda;
  DeviceMemoryBytes need;
  for (const PlannedWeight& p : weights) need.weights += p.matrix_bytes + p.value_bytes;
  MEMRA_ASSIGN_OR_RETURN(const StateBytes state, StateBytesOf(module));
  need.kv_cache = state.kv;
  need.recurrent = state.recurrent;
  need.other_state = state.other + kDecodeTokenRingBytes;
  MEMRA_ASSIGN_OR_RETURN(std::optional<kcu::Target> recorded, kcu::ReadSelectionTarget(module));
  MEMRA_ASSIGN_OR_RETURN(const int64_t workspace, kcu::WorkspaceBytesOf(module, target, mode, recorded.has_value()));
  need.workspace = static_cast<uint64_t>(workspace);
  for (const auto& f : module.functions())
    need.arenas = std::max<uint64_t>(need.arenas, static_cast<uint64_t>(f->attrs().I64Or("arena_bytes", 0)));
  return need;
}

}  // namespace memra::runtime
