// fuse-delta-net-inputs: the element-wise steps between the delta net's conv and its scan move
// into those two ops, as attributes (one kernel fewer each, and no tensor written and re-read):
//
//   %c = conv1d_causal(%x, @w, @state)                %c = conv1d_causal(%x, @w, @state)
//   %s = silu(%c)                               ->           {activation = "silu"}
//   (seq_conv1d_causal, a step's per-slot conv, the same way)
//
//   %qn = l2_norm(%q) {eps}
//   %kn = l2_norm(%k) {eps}                     ->    %o = gated_delta_scan(%q, %k, ...)
//   %o = gated_delta_scan(%qn, %kn, ...)                      {qk_l2_eps = eps, scale}
//
// The conv fuses when its result has the silu as its only user; the scan when both q and k come
// from l2_norms of one eps that have no other user and it scans one token (decode) or a bucket of
// 64 or more (the chunked prefill scan, whose preparation computes the norms in parallel; the
// CUDA pipeline runs this pass again after bucket-shapes for them). A decode step of a Qwen3.5
// delta-net layer goes from conv, silu, split, 2 l2_norms, scan to conv, scan (the [1, C] split is free: its slices
// alias the conv output). Numerics: the CPU executor runs the same kernels as before (conv then silu, l2_norm then
// scan); the CUDA scan folds the two norms into its dot products (scaling the sums instead of the inputs), equal up to
// f32 rounding.
#include "ir/StatusMacros.h"
#include "passes/PassRegistry.h"
#include "passes/PassUtil.h"
#include "passes/RewritePattern.h"

namespace memra::passes {
namespace {

using ir::Op;
using ir::OpKind;

struct ConvSiluMatch {
  Op* silu;
  Op* conv;
};

class ConvSiluPattern : public RewritePattern<ConvSiluMatch> {
 public:
  explicit ConvSiluPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kSilu, "conv-silu", "silu fused into conv1d_causal") {}

  MatchResult<ConvSiluMatch> Match(Op& silu, const PatternRewriter&) override {
    Op* conv = DefOf(silu.operand(0), OpKind::kConv1dCausal);
    if (conv == nullptr) conv = DefOf(silu.operand(0), OpKind::kSeqConv1dCausal);  // a step's per-slot conv
    if (conv == nullptr || conv->attrs().Has("activation")) return NoMatch();
    if (!HasSingleUse(conv->result(0))) return Skip(skipped_uses_);
    return ConvSiluMatch{&silu, conv};
  }

  absl::Status Rewrite(const ConvSiluMatch& m, PatternRewriter& rw) override {
    ir::AttrDict attrs = m.conv->attrs();
    attrs.Set("activation", std::string("silu"));
    // Where the conv was: it writes the conv state, so it keeps its place among state ops.
    std::vector<ir::Value*> operands(m.conv->operands().begin(), m.conv->operands().end());
    MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(m.conv, m.conv->kind(), operands, std::move(attrs)));
    rw.Replace(m.silu->result(0), fused->result(0));
    rw.Erase(m.silu);
    rw.Erase(m.conv);
    return absl::OkStatus();
  }

 private:
  Statistic skipped_uses_{pass(), "skipped-conv-uses", "convs whose result has users besides the silu"};
};

struct ScanNormMatch {
  Op* scan;
  Op* q_norm;
  Op* k_norm;
};

// The scan (of its own kind) with q and k taken before their norms, the norms' eps as qk_l2_eps.
absl::Status FuseScanNorms(const ScanNormMatch& m, PatternRewriter& rw) {
  ir::AttrDict attrs = m.scan->attrs();
  attrs.Set("qk_l2_eps", m.q_norm->attrs().F64Or("eps", 0));
  std::vector<ir::Value*> operands(m.scan->operands().begin(), m.scan->operands().end());
  operands[0] = m.q_norm->operand(0);
  operands[1] = m.k_norm->operand(0);
  MEMRA_ASSIGN_OR_RETURN(Op * fused, rw.Create(m.scan, m.scan->kind(), operands, std::move(attrs)));
  rw.Replace(m.scan->result(0), fused->result(0));
  rw.Erase(m.scan);
  rw.Erase(m.q_norm);
  rw.Erase(m.k_norm);
  return absl::OkStatus();
}

// Both operands l2_norms of one eps with no other user, or why not.
enum class NormPair { kFuse, kNone, kUses, kEps };

// The smallest bucket the CUDA backend scans in chunks (kernels/cuda/DeltaNetChunked.cc).
constexpr int64_t kChunkedScanMinTokens = 64;
NormPair ScanNorms(Op& scan, Op*& qn, Op*& kn) {
  qn = DefOf(scan.operand(0), OpKind::kL2Norm);
  kn = DefOf(scan.operand(1), OpKind::kL2Norm);
  if (qn == nullptr || kn == nullptr || scan.attrs().Has("qk_l2_eps")) return NormPair::kNone;
  if (qn == kn || !HasSingleUse(qn->result(0)) || !HasSingleUse(kn->result(0))) return NormPair::kUses;
  if (qn->attrs().F64Or("eps", 0) != kn->attrs().F64Or("eps", 0)) return NormPair::kEps;
  return NormPair::kFuse;
}

class ScanL2NormPattern : public RewritePattern<ScanNormMatch> {
 public:
  explicit ScanL2NormPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kGatedDeltaScan, "scan-l2", "q/k l2_norms fused into gated_delta_scan") {}

  MatchResult<ScanNormMatch> Match(Op& scan, const PatternRewriter&) override {
    Op* qn = nullptr;
    Op* kn = nullptr;
    const NormPair pair = ScanNorms(scan, qn, kn);
    if (pair == NormPair::kNone) return NoMatch();
    // One token (decode), or a bucket of at least kChunkedScanMinTokens (after bucket-shapes): the
    // chunked scan computes the norms in its per-chunk preparation, off the sequential path. In
    // between (and for a symbolic T) the sequential scan would carry the norms' reductions on its
    // per-token path (9B Q8_0 pp512 measured 17.7k -> 15.3k tok/s with them there).
    const ir::Dim& tokens = scan.operand(0)->shape()[0];
    if (!tokens.IsConstant() || (tokens.value() != 1 && tokens.value() < kChunkedScanMinTokens))
      return Skip(skipped_tokens_);
    if (pair == NormPair::kUses) return Skip(skipped_uses_);
    if (pair == NormPair::kEps) return Skip(skipped_eps_);
    return ScanNormMatch{&scan, qn, kn};
  }

  absl::Status Rewrite(const ScanNormMatch& m, PatternRewriter& rw) override { return FuseScanNorms(m, rw); }

 private:
  Statistic skipped_uses_{pass(), "skipped-norm-uses", "scans whose q or k norm has other users (or is one norm)"};
  Statistic skipped_tokens_{pass(), "skipped-tokens", "scans of T tokens or of 2..63 (sequential prefill)"};
  Statistic skipped_eps_{pass(), "skipped-eps", "scans whose q and k norms differ in eps"};
};

// A step's per-slot scan in a bucket of at most kSeqScanMaxRows rows (after bucket-shapes: a
// batched decode, whose entries are one row each or short): the same fusion. Larger buckets hold
// prompt chunks, whose scans keep their norms outside (the reason above).
constexpr int64_t kSeqScanMaxRows = 8;
class SeqScanL2NormPattern : public RewritePattern<ScanNormMatch> {
 public:
  explicit SeqScanL2NormPattern(Pass* pass)
      : RewritePattern(pass, OpKind::kSeqGatedDeltaScan, "seq-scan-l2",
                       "q/k l2_norms fused into seq_gated_delta_scan (step buckets of <= 8 rows)") {}

  MatchResult<ScanNormMatch> Match(Op& scan, const PatternRewriter&) override {
    Op* qn = nullptr;
    Op* kn = nullptr;
    const NormPair pair = ScanNorms(scan, qn, kn);
    if (pair == NormPair::kNone) return NoMatch();
    const ir::Dim& rows = scan.operand(0)->shape()[0];
    if (!rows.IsConstant() || rows.value() > kSeqScanMaxRows) return Skip(skipped_rows_);
    if (pair != NormPair::kFuse) return NoMatch();
    return ScanNormMatch{&scan, qn, kn};
  }
  absl::Status Rewrite(const ScanNormMatch& m, PatternRewriter& rw) override { return FuseScanNorms(m, rw); }

 private:
  Statistic skipped_rows_{pass(), "skipped-seq-rows", "per-slot scans of a symbolic or > 8-row step"};
};

class FuseDeltaNetInputsPass : public PatternPass {
 public:
  FuseDeltaNetInputsPass() {
    AddPattern<ConvSiluPattern>();
    AddPattern<ScanL2NormPattern>();
    AddPattern<SeqScanL2NormPattern>();
  }
  absl::string_view name() const override { return "fuse-delta-net-inputs"; }
  absl::string_view description() const override {
    return "Fuses silu(conv1d_causal) into the conv and the q/k l2_norms into gated_delta_scan";
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFuseDeltaNetInputsPass() { return std::make_unique<FuseDeltaNetInputsPass>(); }

}  // namespace memra::passes
