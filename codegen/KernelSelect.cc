#include "codegen/KernelSelect.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ir/Function.h"
#include "ir/Op.h"
#include "ir/StatusMacros.h"

namespace memra::codegen {

using ir::DType;
using ir::OpKind;

const std::vector<int64_t>& BucketLadder() {
  static const std::vector<int64_t> ladder = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  return ladder;
}

int64_t TokenBucket(int64_t T) {
  if (T <= 1) return 1;
  for (int64_t b : BucketLadder())
    if (T <= b) return b;
  return (T + 4095) / 4096 * 4096;
}

DType DeviceWeightDType(DType stored) {
  if (stored == DType::kF32 || stored == DType::kF16 || stored == DType::kBF16) return stored;
  return DType::kBF16;
}

int StorageCode(DType d) { return d == DType::kF32 ? 0 : d == DType::kF16 ? 1 : 2; }

constexpr bool kGemvQ8Enabled = false;

int64_t AttentionSplits(int64_t q_heads) {
  return std::clamp<int64_t>(264 / std::max<int64_t>(q_heads, 1), 1, 64);
}

int GemvStorage(DType stored) {
  // Q8_0 runs on its bf16 copy: the q8 GEMV reaches only 29-46 % of the roofline (its x traffic
  // from L1 is 4x the weight bytes; bench/RESULTS.md), so at 9B it was no faster (171 vs 173 tok/s)
  // and kept a second copy of every matrix. kGemvQ8 stays for memra-kernel-bench until it is fast.
  if (stored == DType::kQ8_0 && kGemvQ8Enabled) return 3;
  const DType d = DeviceWeightDType(stored);
  return d == DType::kF16 ? 1 : d == DType::kBF16 ? 2 : 0;
}

namespace {

int64_t Numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

uint32_t GridFor(int64_t n, uint32_t block = 256) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<uint32_t>(std::clamp<int64_t>(blocks, 1, 132 * 16));
}

Launch Ew(const std::string& entry, int64_t n, Defines defines = {}, const std::string& file = "Elementwise.cu") {
  Launch l;
  l.kernel.module.file = file;
  l.kernel.module.defines = MakeDefines(std::move(defines));
  l.kernel.entry = entry;
  l.block = 256;
  l.grid = GridFor(n);
  return l;
}

Launch RowKernel(const std::string& entry, int64_t rows, int64_t cols, int64_t max_block) {
  Launch l;
  l.kernel.module.file = "Norm.cu";
  int64_t block = 32;  // a power of two (the argmax tree reduction needs one)
  while (block < cols && block < max_block) block *= 2;
  l.kernel.module.defines = MakeDefines({Def("NORM_COLS", cols), Def("NORM_BLOCK", block)});
  l.kernel.entry = entry;
  l.block = static_cast<uint32_t>(block);
  l.grid = static_cast<uint32_t>(std::clamp<int64_t>(rows, 1, 1 << 20));
  return l;
}

// One token through 16-bit or q8 weights: Gemv.cu (a matmul_group of <= 4 weights of one storage in
// one `gemv_group` launch) (decode reads every weight once; cuBLASLt's M = 1
// path reached ~55 % of the bandwidth in the model, 59-93 % alone). Not when a weight is f32 or the
// weights' storages differ in a matmul_swiglu.
std::optional<OpKernels> GemvKernels(const ir::Op& op, const OpShapes& s) {
  if (s.in.empty() || s.in[0].empty() || Numel(s.in[0]) != s.in[0].back()) return std::nullopt;  // M != 1
  const int64_t K = s.in[0].back();
  if (K % 32 != 0) return std::nullopt;
  std::vector<int> storage;
  for (unsigned i = 1; i < op.num_operands(); ++i) {
    const int code = GemvStorage(op.operand(i)->dtype());
    if (code == 0) return std::nullopt;
    storage.push_back(code);
  }
  OpKernels k;
  k.gemv = true;
  auto launch = [&](const char* entry, int code, int64_t N) {
    Launch l;
    l.kernel.module.file = "Gemv.cu";
    l.kernel.module.defines = MakeDefines({Def("GEMV_K", K), Def("GEMV_W", code), Def("GEMV_WARPS", 8)});
    l.kernel.entry = entry;
    l.block = 8 * 32;
    l.grid = static_cast<uint32_t>((N + 7) / 8);
    return l;
  };
  const bool one_storage = std::all_of(storage.begin(), storage.end(), [&](int c) { return c == storage[0]; });
  if (op.is(OpKind::kMatMulSwiglu)) {
    if (storage.size() != 2 || !one_storage) return std::nullopt;
    k.launches.push_back(launch("gemv_swiglu", storage[0], s.out[0].back()));
  } else if (op.is(OpKind::kMatMulGroup) && storage.size() <= 4 && one_storage) {
    int64_t rows = 0;
    for (const auto& o : s.out) rows += o.back();
    k.launches.push_back(launch("gemv_group", storage[0], rows));
  } else {
    for (size_t i = 0; i < storage.size(); ++i) k.launches.push_back(launch("gemv", storage[i], s.out[i].back()));
  }
  return k;
}

absl::Status Unsupported(const ir::Op& op, absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat("cuda: ", op.Summary(), ": ", why));
}

}  // namespace

bool IsStaticFunction(const ir::Function& fn) {
  for (unsigned i = 0; i < fn.num_arguments(); ++i)
    if (!fn.argument(i)->shape().IsStatic()) return false;
  for (const ir::Op* op : fn.Ops())
    for (const ir::Value* r : op->results())
      if (!r->shape().IsStatic()) return false;
  return true;
}

absl::StatusOr<OpShapes> ShapesAt(const ir::Op& op, int64_t bucket) {
  OpShapes s;
  s.bucket = bucket;
  ir::SymbolBindings b;
  auto bind = [&](const ir::Shape& sh) {
    for (const ir::Dim& d : sh.dims())
      if (d.IsSymbolic()) b[d.symbol()] = bucket;
  };
  for (unsigned i = 0; i < op.num_operands(); ++i) bind(op.operand(i)->shape());
  for (unsigned i = 0; i < op.num_results(); ++i) bind(op.result(i)->shape());
  auto concrete = [&](const ir::Shape& sh) -> absl::StatusOr<std::vector<int64_t>> {
    std::vector<int64_t> out;
    for (const ir::Dim& d : sh.dims()) {
      auto v = d.Evaluate(b);
      if (!v) return absl::InvalidArgumentError(absl::StrCat(op.Summary(), ": unbound dim ", d.ToString()));
      out.push_back(*v);
    }
    return out;
  };
  for (unsigned i = 0; i < op.num_operands(); ++i) {
    const ir::Value* v = op.operand(i);
    MEMRA_ASSIGN_OR_RETURN(auto sh, concrete(v->shape()));
    s.in.push_back(std::move(sh));
    s.in_dtypes.push_back(v->kind() == ir::Value::Kind::kWeight ? DeviceWeightDType(v->dtype()) : v->dtype());
  }
  for (unsigned i = 0; i < op.num_results(); ++i) {
    MEMRA_ASSIGN_OR_RETURN(auto sh, concrete(op.result(i)->shape()));
    s.out.push_back(std::move(sh));
  }
  return s;
}

absl::StatusOr<OpKernels> SelectKernels(const ir::Op& op, const OpShapes& s) {
  OpKernels k;
  const ir::AttrDict& at = op.attrs();
  auto last = [](const std::vector<int64_t>& v) { return v.empty() ? int64_t{1} : v.back(); };
  if (op.is(OpKind::kMatMul) || op.is(OpKind::kMatMulGroup) || op.is(OpKind::kMatMulSwiglu))
    if (std::optional<OpKernels> g = GemvKernels(op, s)) return *g;
  switch (op.kind()) {
    case OpKind::kEmbed: {
      const int64_t E = s.in[1][1];
      k.launches.push_back(Ew("embed", Numel(s.out[0]),
                              {Def("EMBED_DIM", E), Def("EMBED_TYPE", StorageCode(s.in_dtypes[1]))}));
      break;
    }
    case OpKind::kRmsNorm:
    case OpKind::kL2Norm:
    case OpKind::kGatedRmsNorm:
    case OpKind::kAddRmsNorm: {
      const int64_t cols = last(s.in[0]), rows = Numel(s.in[0]) / std::max<int64_t>(cols, 1);
      const char* entry = op.is(OpKind::kRmsNorm) ? "rms_norm"
                          : op.is(OpKind::kL2Norm) ? "l2_norm"
                          : op.is(OpKind::kGatedRmsNorm) ? "gated_rms_norm"
                                                         : "add_rms_norm";
      k.launches.push_back(RowKernel(entry, rows, cols, 256));
      break;
    }
    case OpKind::kSoftmax:
    case OpKind::kArgmax: {
      const int64_t cols = last(s.in[0]), rows = Numel(s.in[0]) / std::max<int64_t>(cols, 1);
      k.launches.push_back(RowKernel(op.is(OpKind::kSoftmax) ? "softmax" : "argmax", rows, cols, 1024));
      break;
    }
    case OpKind::kAdd: k.launches.push_back(Ew("add_f32", Numel(s.in[0]))); break;
    case OpKind::kMul: k.launches.push_back(Ew("mul_f32", Numel(s.in[0]))); break;
    case OpKind::kScale: k.launches.push_back(Ew("scale_f32", Numel(s.in[0]))); break;
    case OpKind::kSigmoid: k.launches.push_back(Ew("sigmoid_f32", Numel(s.in[0]))); break;
    case OpKind::kSilu: k.launches.push_back(Ew("silu_f32", Numel(s.in[0]))); break;
    case OpKind::kSoftplus: k.launches.push_back(Ew("softplus_f32", Numel(s.in[0]))); break;
    case OpKind::kExp: k.launches.push_back(Ew("exp_f32", Numel(s.in[0]))); break;
    case OpKind::kSwiglu: k.launches.push_back(Ew("swiglu_f32", Numel(s.in[0]))); break;
    case OpKind::kMatMul:
    case OpKind::kMatMulGroup: {
      k.gemm = true;
      // One cast of the activations per distinct 16-bit weight type (usually one).
      std::set<DType> casts;
      for (size_t i = 1; i < s.in_dtypes.size(); ++i)
        if (s.in_dtypes[i] != DType::kF32) casts.insert(s.in_dtypes[i]);
      for (DType d : casts)
        k.launches.push_back(Ew(d == DType::kBF16 ? "cast_f32_bf16" : "cast_f32_f16", Numel(s.in[0])));
      break;
    }
    case OpKind::kMatMulSwiglu: {
      // Two cuBLASLt products (gate into the step's scratch, up into y), then y = silu(g) * y.
      k.gemm = true;
      std::set<DType> casts;
      for (size_t i = 1; i < s.in_dtypes.size(); ++i)
        if (s.in_dtypes[i] != DType::kF32) casts.insert(s.in_dtypes[i]);
      for (DType d : casts)
        k.launches.push_back(Ew(d == DType::kBF16 ? "cast_f32_bf16" : "cast_f32_f16", Numel(s.in[0])));
      k.launches.push_back(Ew("swiglu_f32", Numel(s.out[0])));
      break;
    }
    case OpKind::kQkNormRope: {
      // rms_norm of q into the step's scratch, rope into q_out; then the same for k.
      const auto& q = s.in[0];
      const auto& kk = s.in[1];
      if (q.size() != 3 || kk.size() != 3) return Unsupported(op, "qk_norm_rope expects q, k: [T, H, D]");
      if (at.GetString("mode").value_or("neox") != "neox") return Unsupported(op, "only neox rope");
      for (const auto* x : {&q, &kk}) {
        k.launches.push_back(RowKernel("rms_norm", (*x)[0] * (*x)[1], (*x)[2], 256));
        k.launches.push_back(Ew("rope_neox", Numel(*x),
                                {Def("ROPE_HEADS", (*x)[1]), Def("ROPE_DIM", (*x)[2]),
                                 Def("ROPE_NROT", at.I64Or("n_rot", (*x)[2]))},
                                "Rope.cu"));
      }
      break;
    }
    case OpKind::kQGateSplit: {
      const int64_t H = at.I64Or("n_head", 0), D = at.I64Or("head_dim", 0);
      k.launches.push_back(Ew("q_gate_split", Numel(s.out[0]), {Def("QG_HEADS", H), Def("QG_DIM", D)}));
      break;
    }
    case OpKind::kRope: {
      const auto& x = s.in[0];
      if (x.size() != 3) return Unsupported(op, "rope expects x: [T, H, D]");
      if (at.GetString("mode").value_or("neox") != "neox") return Unsupported(op, "only neox rope");
      k.launches.push_back(Ew("rope_neox", Numel(x),
                              {Def("ROPE_HEADS", x[1]), Def("ROPE_DIM", x[2]),
                               Def("ROPE_NROT", at.I64Or("n_rot", x[2]))},
                              "Rope.cu"));
      break;
    }
    case OpKind::kPositions: k.launches.push_back(Ew("positions", s.out[0][0])); break;
    case OpKind::kAdvancePositions: k.launches.push_back(Ew("advance_positions", 1)); break;
    case OpKind::kKvAppend: {
      const int64_t width = s.in[0][1] * s.in[0][2];
      k.launches.push_back(Ew("kv_append", Numel(s.in[0]), {Def("KV_WIDTH", width)}));
      break;
    }
    case OpKind::kAttention:
    case OpKind::kAttentionGated: {
      const auto& q = s.in[0];
      const auto& kc = s.in[1];
      const int64_t warps = s.bucket == 1 ? 8 : 4;
      Launch l;
      l.kernel.module.file = "Attention.cu";
      l.kernel.module.defines =
          MakeDefines({Def("ATT_HQ", q[1]), Def("ATT_HKV", kc[1]), Def("ATT_D", q[2]),
                       Def("ATT_BUCKET", s.bucket), Def("ATT_WARPS", warps)});
      l.block = static_cast<uint32_t>(warps * 32);
      if (s.bucket == 1 && q[0] == 1) {
        // Decode: split-KV over AttentionSplits(Hq) ranges of the live keys, then the merge.
        const int64_t splits = AttentionSplits(q[1]);
        l.kernel.module.defines =
            MakeDefines({Def("ATT_HQ", q[1]), Def("ATT_HKV", kc[1]), Def("ATT_D", q[2]), Def("ATT_BUCKET", 1),
                         Def("ATT_WARPS", warps), Def("ATT_SPLITS", splits)});
        l.kernel.entry = "attention_split";
        l.grid = static_cast<uint32_t>(q[1] * splits);
        k.launches.push_back(l);
        Launch c = l;
        c.kernel.entry = "attention_combine";
        c.block = 32;
        c.grid = static_cast<uint32_t>(q[1]);
        k.launches.push_back(c);
      } else if (s.bucket >= 16 && q[1] % kc[1] == 0 && q[1] / kc[1] >= 2 && q[1] / kc[1] <= 8) {
        // Prefill with GQA: one block per (token, kv head) for all the query heads sharing it.
        l.kernel.entry = "attention_group";
        l.grid = static_cast<uint32_t>(q[0] * kc[1]);
        k.launches.push_back(l);
      } else {
        l.kernel.entry = "attention";
        l.grid = static_cast<uint32_t>(q[0] * q[1]);
        k.launches.push_back(l);
      }
      // attention_gated: o = attention * sigmoid(gate), in place on o.
      if (op.is(OpKind::kAttentionGated)) k.launches.push_back(Ew("mul_sigmoid_f32", Numel(q)));
      break;
    }
    case OpKind::kConv1dCausal: {
      const int64_t C = s.in[0][1], K = s.in[2][1] + 1;
      Launch l;
      l.kernel.module.file = "DeltaNet.cu";
      l.kernel.module.defines = MakeDefines({Def("CONV_CHANNELS", C), Def("CONV_K", K)});
      l.block = 128;
      if (s.bucket == 1) {  // one token: the sequential kernel, one launch
        l.kernel.entry = "conv1d_causal";
        l.grid = static_cast<uint32_t>((C + 127) / 128);
        k.launches.push_back(l);
      } else {  // many: one thread per (t, c), then the state update
        l.kernel.entry = "conv1d_causal_tokens";
        l.block = 256;
        l.grid = GridFor(s.in[0][0] * C);
        k.launches.push_back(l);
        Launch u = l;
        u.kernel.entry = "conv1d_state_update";
        u.block = 128;
        u.grid = static_cast<uint32_t>((C + 127) / 128);
        k.launches.push_back(u);
      }
      break;
    }
    case OpKind::kDeltaNetGates:
      k.launches.push_back(Ew("delta_net_gates", Numel(s.in[0]), {Def("GATE_HEADS", s.in[0][1])}));
      break;
    case OpKind::kGatedDeltaScan: {
      const int64_t Hk = s.in[0][1], Dk = s.in[0][2], Hv = s.in[2][1], Dv = s.in[2][2];
      if (Dk > 256 || Dk % 2 != 0) return Unsupported(op, "key head dim must be even and <= 256");
      const int64_t cols = Dv % 32 == 0 ? 32 : Dv;
      // GDN_SPLIT lanes per state column (a power of two dividing the lanes and Dk / 2), so the
      // per-token dependency chain is Dk / SPLIT long.
      int64_t split = 4;
      while (split > 1 && (Dk % (2 * split) != 0 || (cols * split) % 32 != 0 || cols * split > 1024)) split /= 2;
      Launch l;
      l.kernel.module.file = "DeltaNet.cu";
      l.kernel.module.defines = MakeDefines({Def("GDN_HK", Hk), Def("GDN_HV", Hv), Def("GDN_DK", Dk),
                                             Def("GDN_DV", Dv), Def("GDN_COLS", cols), Def("GDN_SPLIT", split),
                                             Def("GDN_BUCKET", s.bucket)});
      l.kernel.entry = "gated_delta_scan";
      l.block = static_cast<uint32_t>(cols * split);
      l.grid = static_cast<uint32_t>(Hv * (Dv / cols));
      k.launches.push_back(l);
      break;
    }
    case OpKind::kConcat:
      for (size_t i = 0; i < s.in.size(); ++i) k.launches.push_back(Ew("copy_axis_32", Numel(s.in[i])));
      break;
    case OpKind::kSplit:
    case OpKind::kView:
      for (size_t i = 0; i < s.out.size(); ++i) k.launches.push_back(Ew("copy_axis_32", Numel(s.out[i])));
      break;
    case OpKind::kConstant:
      k.launches.push_back(Ew(op.result(0)->dtype() == DType::kI32 ? "fill_i32" : "fill_f32", Numel(s.out[0])));
      break;
    case OpKind::kCast:
      if (at.GetString("dtype").value_or("") != "f32" || op.operand(0)->dtype() != DType::kF32)
        return Unsupported(op, "the CUDA executor keeps activations in f32 (casts to f32 only)");
      break;
    case OpKind::kTakeLastRow:
    case OpKind::kReshape:
    case OpKind::kReturn:
    case OpKind::kSegment:
      break;  // copies / aliases done by the executor
    case OpKind::kTopK:
    case OpKind::kSample:
      return Unsupported(op, "not implemented on the GPU yet (sampling runs on the host)");
    default:  // fused ops without a CUDA kernel yet
      return Unsupported(op, "no CUDA kernel for this op yet (run the unfused module)");
  }
  return k;
}

StepScratch ScratchFor(const ir::Op& op, const OpShapes& s, const OpKernels& k) {
  auto bytes = [](DType d, const std::vector<int64_t>& shape) {
    return ir::StorageBytes(d, Numel(shape)).value_or(Numel(shape) * 4);
  };
  StepScratch r;
  bool cast = false;
  for (const Launch& l : k.launches) cast |= absl::StartsWith(l.kernel.entry, "cast_f32_");
  if (k.gemm && cast && !s.in.empty()) r.cast = (bytes(op.operand(0)->dtype(), s.in[0]) / 2 + 255) / 256 * 256;
  if (op.is(OpKind::kMatMulSwiglu) && k.gemm && !s.out.empty()) {
    r.aux = bytes(op.result(0)->dtype(), s.out[0]);
  } else if ((op.is(OpKind::kAttention) || op.is(OpKind::kAttentionGated)) && !k.launches.empty() &&
             k.launches[0].kernel.entry == "attention_split") {
    const int64_t hq = s.in[0][1], d = s.in[0][2];
    r.aux = hq * AttentionSplits(hq) * (d + 2) * 4;  // the per-range partials
  } else if (op.is(OpKind::kQkNormRope) && s.in.size() >= 2) {
    r.aux = std::max(bytes(op.operand(0)->dtype(), s.in[0]), bytes(op.operand(1)->dtype(), s.in[1]));
  }
  return r;
}

absl::StatusOr<std::vector<ModuleSpec>> ModulesForFunction(const ir::Function& fn, int64_t bucket) {
  std::set<std::string> seen;
  std::vector<ModuleSpec> out;
  for (const ir::Op* op : fn.Ops()) {
    MEMRA_ASSIGN_OR_RETURN(OpShapes s, ShapesAt(*op, bucket));
    MEMRA_ASSIGN_OR_RETURN(OpKernels k, SelectKernels(*op, s));
    for (const Launch& l : k.launches)
      if (seen.insert(l.kernel.module.Key()).second) out.push_back(l.kernel.module);
  }
  if (fn.name() == "decode") {
    auto greedy = GreedyNextKernel(fn);
    if (greedy.ok() && seen.insert(greedy->kernel.module.Key()).second) out.push_back(greedy->kernel.module);
  }
  return out;
}

absl::StatusOr<Launch> GreedyNextKernel(const ir::Function& decode) {
  const ir::Op* ret = nullptr;
  for (const ir::Op* op : decode.Ops())
    if (op->is(OpKind::kReturn)) ret = op;
  if (ret == nullptr || ret->num_operands() != 1 || ret->operand(0)->dtype() != ir::DType::kF32 ||
      ret->operand(0)->shape().rank() != 2 || !ret->operand(0)->shape().IsStatic() ||
      ret->operand(0)->shape()[0].value() != 1)
    return absl::FailedPreconditionError(absl::StrCat("@", decode.name(),
                                                      " does not return one row of f32 logits [1, V]: no greedy decode loop"));
  return RowKernel("greedy_next", 1, ret->operand(0)->shape()[1].value(), 1024);
}

}  // namespace memra::codegen
