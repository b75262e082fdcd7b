#include "codegen/SelectKernelsPass.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "codegen/KernelSelect.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/Op.h"
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"

namespace memra::codegen {
namespace {

// Sets `name` to `v` unless it already holds it; true when it changed.
bool SetAttr(ir::Op& op, absl::string_view name, ir::Attr v) {
  if (const ir::Attr* old = op.attrs().Get(name); old != nullptr && *old == v) return false;
  op.attrs().Set(name, std::move(v));
  return true;
}

class SelectKernelsPass : public passes::Pass {
 public:
  absl::string_view name() const override { return "select-kernels"; }
  absl::string_view description() const override {
    return "Records the CUDA kernels, launch geometry and scratch of every op of the static functions";
  }

  absl::StatusOr<bool> Run(ir::Module& m) override {
    absl::string_view arch = *arch_;
    {
      absl::string_view rest = arch;
      int v = 0;
      if (!absl::ConsumePrefix(&rest, "sm_") || (absl::ConsumeSuffix(&rest, "a"), !absl::SimpleAtoi(rest, &v)) ||
          v < 50)
        return absl::InvalidArgumentError(
            absl::StrCat("select-kernels: arch \"", arch, "\" is not a CUDA architecture (sm_NN)"));
    }
    bool changed = false;
    if (m.attrs().GetString("kernel_arch") != std::string(arch)) {
      m.attrs().Set("kernel_arch", std::string(arch));
      changed = true;
    }
    std::set<std::string> modules;
    for (const auto& f : m.functions()) {
      if (!IsStaticFunction(*f)) {
        ++skipped_;
        continue;
      }
      ++functions_;
      const int64_t bucket = f->attrs().I64Or("bucket", 1);
      for (ir::Op* op : f->Ops()) {
        if (op->is(ir::OpKind::kSegment)) continue;
        auto where = [&](const absl::Status& st) {
          return absl::Status(st.code(), absl::StrCat("select-kernels: @", f->name(), ": ", st.message()));
        };
        auto shapes = ShapesAt(*op, bucket);
        if (!shapes.ok()) return where(shapes.status());
        auto k = SelectKernels(*op, *shapes);
        if (!k.ok()) return where(k.status());
        ++ops_;
        if (!k->launches.empty()) {
          std::vector<std::string> names;
          std::vector<int64_t> grid, block, smem;
          for (const Launch& l : k->launches) {
            names.push_back(l.kernel.ToString());
            grid.push_back(l.grid);
            block.push_back(l.block);
            smem.push_back(l.smem);
            modules.insert(l.kernel.module.Key());
          }
          launches_ += static_cast<int64_t>(names.size());
          changed |= SetAttr(*op, "kernels", ir::Attr(std::move(names)));
          changed |= SetAttr(*op, "grid", ir::Attr(std::move(grid)));
          changed |= SetAttr(*op, "block", ir::Attr(std::move(block)));
          changed |= SetAttr(*op, "smem", ir::Attr(std::move(smem)));
        }
        if (k->gemm) {
          ++gemms_;
          changed |= SetAttr(*op, "gemm", ir::Attr(int64_t{1}));
        }
        if (k->gemv) {
          ++gemvs_;
          changed |= SetAttr(*op, "gemv", ir::Attr(int64_t{1}));
        }
        if (const StepScratch sc = ScratchFor(*op, *shapes, *k); sc.total() > 0) {
          ++scratch_;
          changed |= SetAttr(*op, "scratch_bytes", ir::Attr(sc.total()));
        }
      }
    }
    modules_ += static_cast<int64_t>(modules.size());
    return changed;
  }

 private:
  passes::Option<std::string> arch_{this, "arch", "CUDA architecture the kernels are selected for", "sm_90"};
  passes::Statistic functions_{this, "functions", "static functions annotated"};
  passes::Statistic skipped_{this, "skipped-symbolic", "functions with symbolic shapes left alone"};
  passes::Statistic ops_{this, "ops", "ops selected"};
  passes::Statistic launches_{this, "launches", "kernel launches recorded"};
  passes::Statistic gemms_{this, "gemm-ops", "ops whose products run on cuBLASLt"};
  passes::Statistic gemvs_{this, "gemv-ops", "one-token ops whose products run on Gemv.cu"};
  passes::Statistic scratch_{this, "scratch-ops", "ops given scratch_bytes"};
  passes::Statistic modules_{this, "modules", "distinct kernel modules (file + defines)"};
};

// Registers at static initialization when this object is linked (see the header).
[[maybe_unused]] const bool kRegistered = (RegisterCodegenPasses(), true);

}  // namespace

std::unique_ptr<passes::Pass> CreateSelectKernelsPass() { return std::make_unique<SelectKernelsPass>(); }

void RegisterCodegenPasses() { passes::RegisterBackendPass("select-kernels", &CreateSelectKernelsPass); }

}  // namespace memra::codegen
