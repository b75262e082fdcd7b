#include "codegen/SelectKernelsPass.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "ir/Function.h"
#include "ir/Module.h"
#include "ir/Op.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/GpuOpRegistry.h"
#include "kernels/cuda/Q8Companion.h"
#include "passes/PassRegistry.h"

namespace memra::codegen {
namespace {

namespace kcu = memra::kernels::cuda;

class SelectKernelsPass : public passes::Pass {
 public:
  absl::string_view name() const override { return "select-kernels"; }
  absl::string_view description() const override {
    return "Records the CUDA kernels, launch geometry and scratch of every op of the static functions";
  }

  absl::StatusOr<bool> Run(ir::Module& m) override {
    auto target = kcu::TargetPreset(*arch_);
    if (!target.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("select-kernels: arch \"", *arch_, "\" is not a CUDA target: ", target.status().message()));
    if (*sm_count_ < 0 || *sm_count_ > 100000)
      return absl::InvalidArgumentError(absl::StrCat("select-kernels: sm-count ", *sm_count_, " is out of range"));
    if (*sm_count_ > 0) target->sm_count = static_cast<int>(*sm_count_);
    auto weights = kcu::ParseWeightMode(*weights_);
    if (!weights.ok())
      return absl::InvalidArgumentError(absl::StrCat("select-kernels: weights: ", weights.status().message()));
    auto decode_class = kcu::ParseDecodeClass(*decode_class_);
    if (!decode_class.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("select-kernels: decode-class: ", decode_class.status().message()));
    // A companion is written by whichever norm precedes a product, with its own per-row arithmetic:
    // the exact class keeps one quantization of x (gemv_q_quantize_x) for every decode row, so
    // `auto` is off there and `true` an error.
    const std::string& companions = *q8_companions_;
    if (companions != "auto" && companions != "true" && companions != "false")
      return absl::InvalidArgumentError(
          absl::StrCat("select-kernels: q8-companions is auto, true or false, not \"", companions, "\""));
    if (*decode_class == kcu::DecodeClass::kExact && companions == "true")
      return absl::InvalidArgumentError("select-kernels: decode-class=exact does not take q8-companions=true");
    const bool pair = companions == "true" || (companions == "auto" && *decode_class != kcu::DecodeClass::kExact);
    const int64_t split = *delta_step_split_;
    if (absl::Status st = kcu::CheckDeltaStepSplit(split); !st.ok())
      return absl::InvalidArgumentError(absl::StrCat("select-kernels: ", st.message()));
    if (absl::Status st = kcu::CheckGemvWarpBytes(*gemv_warp_bytes_); !st.ok())
      return absl::InvalidArgumentError(absl::StrCat("select-kernels: ", st.message()));
    if (absl::Status st = kcu::CheckGemvSplitKMaxK(*gemv_splitk_max_k_); !st.ok())
      return absl::InvalidArgumentError(absl::StrCat("select-kernels: ", st.message()));
    if (absl::Status st = kcu::CheckL2PrefetchBytes(*l2_prefetch_bytes_); !st.ok())
      return absl::InvalidArgumentError(absl::StrCat("select-kernels: ", st.message()));
    if (absl::Status st = kcu::CheckGemvQBlocksPerSm(*gemv_q_blocks_per_sm_); !st.ok())
      return absl::InvalidArgumentError(absl::StrCat("select-kernels: ", st.message()));
    const kcu::SelectOptions options{*decode_class,
                                     *last_block_merge_,
                                     static_cast<int>(split),
                                     static_cast<int>(*gemv_warp_bytes_),
                                     static_cast<int>(*gemv_splitk_max_k_),
                                     *combine_early_loads_,
                                     static_cast<int>(*l2_prefetch_bytes_),
                                     static_cast<int>(*gemv_q_blocks_per_sm_),
                                     *gemv_evict_first_,
                                     *step_early_loads_,
                                     *gemv_q_x_early_,
                                     *gemv_q_pair_dot_};
    bool changed = kcu::WriteSelectionTarget(*target, m);
    changed |= kcu::WriteSelectionWeights(*weights, m);
    changed |= kcu::WriteDecodeClass(*decode_class, m);
    changed |= kcu::WriteSelectOptions(options, m);
    std::set<std::string> modules;
    for (const auto& f : m.functions()) {
      if (!kcu::IsStaticFunction(*f)) {
        ++skipped_;
        continue;
      }
      ++functions_;
      const int64_t bucket = f->attrs().I64Or("bucket", 1);
      auto where = [&](const absl::Status& st) {
        return absl::Status(st.code(), absl::StrCat("select-kernels: @", f->name(), ": ", st.message()));
      };
      std::vector<ir::Op*> ops;
      std::vector<kcu::OpShapes> shapes;
      std::vector<kcu::OpSelection> selections;
      for (ir::Op* op : f->Ops()) {
        if (op->is(ir::OpKind::kSegment)) continue;
        // Pairings are made anew below (a re-run, or q8-companions=false, starts from none).
        if (kcu::HasQ8CompanionRecord(*op)) {  // any part of one, well-formed or not
          kcu::EraseQ8Companion(*op);
          changed = true;
        }
        auto s = kcu::ShapesAt(*op, bucket, *weights);
        if (!s.ok()) return where(s.status());
        auto sel = kcu::SelectGpuOp(*op, *s, *target, options);
        if (!sel.ok()) return where(sel.status());
        ops.push_back(op);
        shapes.push_back(*std::move(s));
        selections.push_back(*std::move(sel));
      }
      if (pair) {
        auto spared = kcu::PairQ8Companions(ops, shapes, selections, *target, options, *q8_companion_rows_);
        if (!spared.ok()) return where(spared.status());
        q8_spared_ += *spared;
      }
      for (size_t i = 0; i < ops.size(); ++i) {
        const kcu::OpSelection& sel = selections[i];
        ++ops_;
        launches_ += static_cast<int64_t>(sel.launches.size());
        for (const kcu::Launch& l : sel.launches) modules.insert(l.kernel.module.Key());
        gemms_ += sel.gemm;
        gemvs_ += sel.gemv;
        scratch_ += sel.scratch_bytes > 0;
        workspace_ += sel.workspace_bytes > 0;
        q8_producers_ += kcu::Q8CompanionOf(*ops[i]).has_value();
        changed |= kcu::WriteSelection(sel, *ops[i]);
      }
    }
    modules_ += static_cast<int64_t>(modules.size());
    return changed;
  }

 private:
  passes::Option<std::string> arch_{this, "arch", "CUDA target preset the kernels are selected for", "sm_90"};
  passes::Option<int64_t> sm_count_{this, "sm-count", "SMs of the target (0: the preset's)", 0, 0, 1 << 16};
  passes::Option<std::string> weights_{this, "weights",
                                       "how block-format matrices are held: blocks (as the GGUF stores them) or bf16 "
                                       "(dequantized at upload)",
                                       "blocks"};
  passes::Option<std::string> decode_class_{
      this, "decode-class",
      "numeric class of the batched engine's rows (kernels/cuda/DecodeClass.h): bucket (products follow each "
      "step's row bucket) or exact (batch-invariant: the 16-bit GEMVs take T <= 8 with each token's "
      "arithmetic that of one, cuBLASLt runs one algorithm per weight shape, so a row's product does not "
      "depend on the rows beside it)",
      "bucket"};
  passes::Option<std::string> q8_companions_{
      this, "q8-companions",
      "auto, true or false: norms, attention merges, delta-net steps (and with q8-companion-rows fused "
      "rows) write their result as q8 too where decode products read it so (kernels/cuda/Q8Companion.h), "
      "sparing those products' gemv_q_quantize_x launches; auto: on except under decode-class=exact "
      "(measured +4.2 % on Qwen3.5 0.8B Q4_K_M, +1.5 % Step 3.5, +0.6 % Gemma 4 26B-A4B, -0.5 % 31B "
      "tg128 without the rows: bench/RESULTS.md session 37)",
      "auto"};
  passes::Option<bool> q8_companion_rows_{
      this, "q8-companion-rows",
      "with q8-companions: fused_rows (row programs: Gemma 4's norms) write companions too (false: only "
      "the norms, attention merges and delta-net steps; Gemma 4's rows measured a loss: -2.7 % on the "
      "31B, bench/RESULTS.md session 37)",
      false};
  passes::Option<bool> last_block_merge_{
      this, "last-block-merge",
      "the split-KV decode attention merges its ranges in each head chunk's last block, one launch (false: "
      "a separate attention_combine launch; measured faster under programmatic dependent launch, "
      "bench/RESULTS.md session 37)",
      false};
  passes::Option<int64_t> delta_step_split_{
      this,
      "delta-step-split",
      "blocks a value head's one-token delta_net_step spreads its state columns over (1, 2, 4 or 8), a "
      "thread-block cluster summing the gated norm through distributed shared memory; a split the shape "
      "cannot take (more than 8 blocks a key head, fewer than 32 columns a block with a q8 companion) "
      "falls back to the largest that fits (1: one block a head)",
      1,
      1,
      8};
  passes::Option<int64_t> gemv_warp_bytes_{
      this,
      "gemv-warp-bytes",
      "weight bytes a one-token gemv / gemv_group warp's rows carry at least (up to 4 rows a warp; a row's "
      "sums do not change): short rows otherwise give a warp a single round trip of loads before it retires "
      "(the 0.8B's input groups, 2 KB rows); 0: one row a warp (measured: 16384 +4.9 % on Qwen3.5 0.8B bf16 "
      "tg128, +0.15 % on the 9B, bench/RESULTS.md session 39)",
      16384,
      0,
      65536};
  passes::Option<int64_t> gemv_splitk_max_k_{
      this,
      "gemv-splitk-max-k",
      "longest rows (K) a one-token product of few rows (under two waves of warp-a-row blocks) runs "
      "split over two warps a row (gemv_splitk); longer rows stream whole, one warp a row (measured: 12288, "
      "the 9B's down split, +0.9 % on Qwen3.5 9B bf16 tg128, bench/RESULTS.md session 39)",
      12288,
      0,
      65536};
  passes::Option<bool> combine_early_loads_{
      this, "combine-early-loads",
      "attention_combine issues its gate loads with the position's and its first ranges' loads together "
      "once the live count is known: two dependent round trips instead of four, the same bits (measured: "
      "tg128 +1.2 % on Qwen3.5 0.8B bf16, +4.0 % on the 9B, +1.5 % on Gemma 4 26B-A4B Q4_K_M, bench/RESULTS.md "
      "session 41; false: the form before)",
      true};
  passes::Option<int64_t> l2_prefetch_bytes_{
      this,
      "l2-prefetch-bytes",
      "bytes of its weights (from their start; at most the target's L2) a one-token product on Gemv.cu or "
      "GemvQuant.cu asks the L2 for before its grid dependency wait, so that under programmatic dependent launch they "
      "stream in while "
      "the kernel before it runs; the sums do not change (0: none; measured a loss, -1.3 to -5.5 % tg128 but "
      "+1.0 % on Qwen3.5 9B bf16 at 4 MiB, bench/RESULTS.md session 41)",
      0,
      0,
      kcu::kMaxL2PrefetchBytes};
  passes::Option<int64_t> gemv_q_blocks_per_sm_{
      this,
      "gemv-q-blocks-per-sm",
      "resident blocks an SM the dense one-token GemvQuant.cu products are built for: launch bounds that "
      "cap their registers so that many fit, and that many blocks an SM where their grid is capped at the "
      "resident ones (the K-quants: 4), as far as their rings' shared memory allows; the sums do not change "
      "(0: the units' choice; 5 measured +2.2 % on Gemma 4 31B Q4_K_M tg128, nothing on the 9B Q4_K_M, "
      "bench/RESULTS.md session 41)",
      0,
      0,
      kcu::kMaxGemvQBlocksPerSm};
  passes::Option<bool> gemv_evict_first_{
      this, "gemv-evict-first",
      "the one-token Gemv.cu products' weight loads mark their lines first to leave the L2, so the "
      "rows read once give way before the lines l2-prefetch-bytes asked for ahead, the KV cache and "
      "activations; the sums do not change (measured +1.3 % on Qwen3.5 0.8B bf16 tg128, -1.3 % on the 9B "
      "beside combine-early-loads, bench/RESULTS.md session 41)",
      false};
  passes::Option<bool> step_early_loads_{
      this, "step-early-loads",
      "the one-token gated attention step's split blocks load their query heads' rows beside the position "
      "instead of after it: one dependent round trip fewer, the same sums (opt-in until measured)",
      false};
  passes::Option<bool> gemv_q_x_early_{
      this, "gemv-q-x-early",
      "the dense one-token GemvQuant.cu products with q8 x load a chunk's x before they wait for its "
      "weights, so the dot products do not stall on those loads; the same sums (opt-in until measured)",
      false};
  passes::Option<bool> gemv_q_pair_dot_{
      this, "gemv-q-pair-dot",
      "the dense GemvQuant.cu q4_K / q5_K products with q8 x dot a 32-element sub-block's two runs into one "
      "integer and scale it once, q4_K's high nibbles read in place: fewer instructions a weight, sums within "
      "the q8 bound (false: run by run, the form before session 42; not yet measured on a GPU)",
      true};
  passes::Statistic functions_{this, "functions", "static functions annotated"};
  passes::Statistic skipped_{this, "skipped-symbolic", "functions with symbolic shapes left alone"};
  passes::Statistic ops_{this, "ops", "ops selected"};
  passes::Statistic launches_{this, "launches", "kernel launches recorded"};
  passes::Statistic gemms_{this, "gemm-ops", "ops whose products run on cuBLASLt"};
  passes::Statistic gemvs_{this, "gemv-ops", "decode ops whose products run on a GEMV (Gemv.cu, GemvQuant.cu)"};
  passes::Statistic scratch_{this, "scratch-ops", "ops given scratch_bytes"};
  passes::Statistic workspace_{this, "workspace-ops", "ops given workspace_bytes (a matrix in blocks dequantized)"};
  passes::Statistic modules_{this, "modules", "distinct kernel modules (file + defines)"};
  passes::Statistic q8_producers_{this, "q8-companions", "ops writing a q8 companion of a result"};
  passes::Statistic q8_spared_{this, "q8-launches-spared", "gemv_q_quantize_x launches the companions spare"};
};

// Registers at static initialization when this object is linked (see the header).
[[maybe_unused]] const bool kRegistered = (RegisterCodegenPasses(), true);

}  // namespace

std::unique_ptr<passes::Pass> CreateSelectKernelsPass() { return std::make_unique<SelectKernelsPass>(); }

void RegisterCodegenPasses() { passes::RegisterBackendPass("select-kernels", &CreateSelectKernelsPass); }

}  // namespace memra::codegen
