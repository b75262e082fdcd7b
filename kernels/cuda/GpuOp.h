// One GPU implementation of an IR op ("op unit"): for each op kind and each of its variants
// (one-token GEMV vs cuBLASLt GEMM, split-KV vs grouped attention, ...) one class owns when the
// variant applies (Select: shapes, bucket, dtypes, target), its launch geometry and scratch (the
// OpSelection it returns) and its argument binding (Bind: typed parameter structs from the
// *Params.h header its kernels include). Units live beside their kernels (Norm.cu + Norm.cc,
// ggml-cuda's habit adapted to NVRTC) and are listed, in the order they are tried, in GpuOps.def.
//
// The selection record is what select-kernels writes on an op (`impl`, `kernels`, `grid`,
// `block`, `smem`, `gemm`, `gemv`, `scratch_bytes`, `workspace_bytes`; GpuOpRegistry.h) and what the CUDA executor
// reads back, so a plan's kernel table and the executor use the same records. Bind runs in the
// executor: it turns device addresses (BindContext) into device work (DeviceWork: kernel calls
// with their parameter blocks, cuBLASLt products, copies); the executor issues that work without
// knowing any op.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/DType.h"
#include "ir/Op.h"
#include "kernels/cuda/DecodeClass.h"
#include "kernels/cuda/KernelSpec.h"
#include "kernels/cuda/Target.h"
#include "kernels/cuda/WeightLayout.h"
#include "llvm/ADT/SmallVector.h"

namespace memra::kernels::cuda {

// Concrete shapes of an op's operands and results at T = bucket (every symbol bound to it).
// Common.cuh's storage codes (load_as_f32, store_from_f32, PackedElems): 0 f32, 1 f16, 2 bf16;
// -1 for any other type.
inline int StorageCode(ir::DType d) {
  return d == ir::DType::kF32 ? 0 : d == ir::DType::kF16 ? 1 : d == ir::DType::kBF16 ? 2 : -1;
}

struct OpShapes {
  int64_t bucket = 1;
  std::vector<std::vector<int64_t>> in, out;
  std::vector<ir::DType> in_dtypes;  // device dtypes (a matrix weight: its layout's compute dtype)
  // Per operand: a matrix operand's device layout under the selection's weight mode
  // (WeightLayout.h), nullptr for every other operand. Units decide by it, never by the dtype alone.
  std::vector<const WeightLayout*> in_layouts;
  const WeightLayout* layout(unsigned i) const { return i < in_layouts.size() ? in_layouts[i] : nullptr; }
};
// Errors: an unbound dim, or a matrix weight whose type has no layout under `weights` (naming the
// weight, its type and --weights bf16 where that holds it).
absl::StatusOr<OpShapes> ShapesAt(const ir::Op& op, int64_t bucket, WeightMode weights);

// What a unit chose for one op at one bucket.
struct OpSelection {
  std::string impl;              // the unit's name (GpuOps.def)
  std::vector<Launch> launches;  // the kernels Bind issues, by index
  int64_t scratch_bytes = 0;     // device scratch live during this step only (the unit lays it out)
  // Device memory this step uses while it runs from the executor's one workspace, shared by every
  // step of every program (one stream runs them in order): a kBlocks matrix's bf16 copy, sized for
  // the largest one. Unlike scratch_bytes it is not placed in each bucket's arena, so a 2 GB head
  // matrix costs 2 GB once, not once per bucket. Must not depend on the token bucket.
  int64_t workspace_bytes = 0;
  // 32-bit device words of this op's own, zero before each launch of its kernels, which leave them
  // zero (a last-block ticket: the blocks count their arrivals, the last one does the rest and
  // zeroes the count). The executor zeroes them once; unlike scratch they persist between steps.
  int64_t ticket_words = 0;
  bool gemm = false;  // products on cuBLASLt
  bool gemv = false;  // one-token products on Gemv.cu
};

// The module-wide choices select-kernels makes for every unit (its options, recorded as module
// attributes so a plan's kernel table re-derives the same selections: GpuOpRegistry.h
// ReadSelectOptions).
struct SelectOptions {
  // The module's numeric class (DecodeClass.h): under kExact the one-token GEMVs decline.
  DecodeClass decode_class = DecodeClass::kBucket;
  // select-kernels{last-block-merge}: the split-KV decode attention merges its ranges in its last
  // blocks (one launch); false: a separate attention_combine launch (the form before, measured
  // against it).
  bool last_block_merge = false;
  // select-kernels{delta-step-split}: blocks a value head's delta_net_step spreads its state
  // columns over (1, 2, 4 or 8; DeltaNet.cu DNS_SPLIT), as a cluster that sums the gated norm's
  // squares through distributed shared memory. 1: one block a head.
  int delta_step_split = 1;
  // select-kernels{gemv-warp-bytes}: the weight bytes a one-token gemv / gemv_group warp's rows
  // carry at least (1, 2 or 4 rows a warp, Gemv.cu GEMV_R; a row's arithmetic does not depend on
  // it). Short rows (the 0.8B's input groups: 2 KB) otherwise give each warp one round trip of loads
  // before it retires. 0: one row a warp. 16 KB measured +4.9 % on the 0.8B bf16 tg128, +0.15 % on
  // the 9B (bench/RESULTS.md session 39).
  int gemv_warp_bytes = 16384;
  // select-kernels{gemv-splitk-max-k}: the longest rows (K) a one-token matmul of few rows runs as
  // gemv_splitk (two warps a row) rather than gemv. 12,288 takes the 9B's down (4,096 rows of
  // K = 12,288): faster whole alone (session 19), but split in the decode graph, where it was at
  // ~81 % of the bandwidth: 9B bf16 tg128 +0.9 % (bench/RESULTS.md session 39).
  int gemv_splitk_max_k = 12288;
  // select-kernels{combine-early-loads}: attention_combine issues its gate loads with pos's and its
  // first ranges' loads together once the live count is known (Attention.cu ATT_MERGE_EARLY; the
  // same bits). Measured on an H100 (bench/RESULTS.md session 41): tg128 +1.2 % on Qwen3.5 0.8B bf16,
  // +4.0 % on the 9B bf16, +0.9 % on its Q4_K_M, +1.5 % on Gemma 4 26B-A4B and +0.9 % on the 31B
  // (Q4_K_M). false: the two passes' loads one round trip after another (the form before).
  bool combine_early_loads = true;
  // select-kernels{l2-prefetch-bytes}: the bytes of its weights (from their start) a Gemv.cu or
  // GemvQuant.cu product asks the L2 for before its grid dependency wait (GEMV_L2_PREFETCH /
  // GQ_L2_PREFETCH; at most the target's L2).
  // Under programmatic dependent launch its first blocks are resident while the kernel before it runs,
  // so the weights beyond what the resident blocks hold in registers stream into the L2 during small
  // kernels that leave the memory idle (attention, norms, the delta-net step). 0: none. Measured a
  // loss (bench/RESULTS.md session 41: -1.3 to -5.5 % tg128; +1.0 % only on the 9B bf16 at 4 MiB).
  int l2_prefetch_bytes = 0;
  // select-kernels{gemv-q-blocks-per-sm}: the resident blocks an SM the dense one-token GemvQuant.cu
  // products (gemv_q, gemv_q_swiglu, a group's; not the MoE forms) are built for: their launch bounds
  // cap the registers so that many fit (GQ_MINB) and a grid capped at the resident blocks (the K-quants':
  // 4 an SM) takes that many, as far as their rings' shared memory allows. The 31B's q4_K products ran
  // at 115 registers, 4 blocks (16 warps) an SM, issue-latency bound at ~60 % of the bandwidth (ncu,
  // bench/RESULTS.md session 28). 0: the units' choice. 5 measured +2.2 % on the 31B Q4_K_M tg128,
  // nothing on the 9B Q4_K_M (session 41): opt-in until measured per shape.
  int gemv_q_blocks_per_sm = 0;
  // select-kernels{gemv-evict-first}: the one-token Gemv.cu products' weight loads mark their lines
  // first to leave the L2 (GEMV_EVICT_FIRST), so the rows read once give way before the lines
  // l2_prefetch_bytes asked for ahead, the KV cache and activations. Measured +1.3 % on the 0.8B bf16
  // tg128, -1.3 % on the 9B beside combine_early_loads (session 41): opt-in.
  bool gemv_evict_first = false;
  // select-kernels{step-early-loads}: the gated attention step's split blocks load their query
  // heads' rows beside pos, one dependent round trip fewer (Attention.cu ATT_STEP_EARLY; the same
  // sums). Opt-in until measured.
  bool step_early_loads = false;
  // select-kernels{gemv-q-x-early}: the dense one-token GemvQuant.cu products with q8 x load a chunk's
  // x (values, scales, sums) before they wait for its weights (GQ_XPRE), so the loads' latency is not
  // met by the dot products that use them (ncu on the 31B's q4_K products: half the warps' stalls were
  // those loads, bench/RESULTS.md session 28). The same sums. Opt-in until measured alone.
  bool gemv_q_x_early = false;
  // select-kernels{gemv-q-pair-dot}: the dense GemvQuant.cu q4_K / q5_K products with q8 x dot a
  // 32-element sub-block's two runs into one integer and scale it once, q4_K's high nibbles read in
  // place (GQ_PAIR_DOT: 608 -> 568 instructions in the 31B down's loop). false: run by run (the form
  // before session 42). The MoE forms always dot pairs.
  bool gemv_q_pair_dot = true;
};

struct SelectContext {
  const ir::Op& op;
  const OpShapes& shapes;
  const Target& target;
  SelectOptions options;  // the module's (select-kernels'), every unit sees all of them
};

// A kernel's parameter struct as bytes (cuLaunchKernel gets a pointer to them as its one
// argument).
struct ParamBlock {
  static constexpr size_t kCapacity = 192;  // the largest: gemv_q_add_norm's 176 bytes
  alignas(16) std::array<unsigned char, kCapacity> bytes{};
  uint32_t size = 0;
  template <typename P>
  static ParamBlock Of(const P& p) {
    static_assert(std::is_trivially_copyable_v<P> && std::is_standard_layout_v<P>, "kernel params are plain structs");
    static_assert(sizeof(P) <= kCapacity, "kernel params exceed ParamBlock::kCapacity");
    ParamBlock b;
    std::memcpy(b.bytes.data(), &p, sizeof(P));
    b.size = sizeof(P);
    return b;
  }
};

struct KernelCall {
  uint32_t launch = 0;  // index into OpSelection::launches
  ParamBlock params;
};
// y[m, n] = x[m, k] . w[n, k]^T on cuBLASLt, f32 accumulation; x has w's compute dtype.
struct GemmCall {
  uint64_t x = 0, w = 0, y = 0;
  int64_t m = 0, n = 0, k = 0;
  ir::DType w_dtype = ir::DType::kF32;
};
struct CopyCall {
  uint64_t dst = 0, src = 0;
  int64_t bytes = 0;
};
// A collective over the tensor-parallel ranks (ir/Ops.def all_reduce / all_gather), f32: the
// executor issues it through its communicator (NCCL) on its stream; without one (a module of one
// rank) all_reduce is a copy and all_gather of one part a copy.
struct CollectiveCall {
  enum Kind : uint8_t { kAllReduceSum, kAllGather } kind = kAllReduceSum;
  uint64_t send = 0, recv = 0;
  int64_t count = 0;  // f32 elements each rank sends
};
using DeviceAction = std::variant<KernelCall, GemmCall, CopyCall, CollectiveCall>;

// The device work of one step, in order, plus its FLOPs and weight bytes (memra --profile).
class DeviceWork {
 public:
  template <typename P>
  void Kernel(uint32_t launch, const P& params) {
    actions_.push_back(KernelCall{launch, ParamBlock::Of(params)});
  }
  void Gemm(const GemmCall& g) { actions_.push_back(g); }
  void Copy(uint64_t dst, uint64_t src, int64_t bytes) { actions_.push_back(CopyCall{dst, src, bytes}); }
  void Collective(const CollectiveCall& c) { actions_.push_back(c); }
  void Count(double flops, double weight_bytes) {
    flops_ += flops;
    bytes_ += weight_bytes;
  }
  void Clear() {
    actions_.clear();
    flops_ = bytes_ = 0;
  }
  const std::vector<DeviceAction>& actions() const { return actions_; }
  double flops() const { return flops_; }
  double weight_bytes() const { return bytes_; }

 private:
  std::vector<DeviceAction> actions_;
  double flops_ = 0, bytes_ = 0;
};

// What Bind sees of the executor: device addresses and the call's shapes.
class BindContext {
 public:
  BindContext(const ir::Op& op, const OpSelection& selection, const OpShapes& shapes)
      : op_(op), selection_(selection), shapes_(shapes) {}
  virtual ~BindContext() = default;
  const ir::Op& op() const { return op_; }
  const OpSelection& selection() const { return selection_; }
  // The shapes at the bucket the selection was made for (its scratch layout follows them).
  const OpShapes& shapes() const { return shapes_; }
  // A value's shape at this call (a generic function: the call's token count; a bucket
  // function: its bucket).
  virtual absl::StatusOr<llvm::SmallVector<int64_t, 4>> Shape(const ir::Value* v) const = 0;
  absl::StatusOr<llvm::SmallVector<int64_t, 4>> InShape(unsigned i) const { return Shape(op_.operand(i)); }
  // Operand i: an activation's arena slot, a state buffer, or a weight (a matrix operand's layout
  // storage, a value operand's f32 values).
  virtual uint64_t In(unsigned i) const = 0;
  // A matrix operand's device form (the `matrix` role of ir/Ops.def, ir::IsMatrixOperand); an
  // error for any other operand.
  virtual absl::StatusOr<DeviceMatrix> Matrix(unsigned i) const = 0;
  virtual uint64_t Out(unsigned i) const = 0;
  // The step's scratch (selection().scratch_bytes bytes; 0 when none was requested).
  virtual uint64_t Scratch() const = 0;
  // The executor's workspace (at least selection().workspace_bytes bytes; 0 when none was requested).
  virtual uint64_t Workspace() const = 0;
  // The step's tickets (selection().ticket_words words, zero at each launch; 0 when none was
  // requested).
  virtual uint64_t Tickets() const { return 0; }
  // The executor's place in a tensor-parallel group (runtime/TensorParallelExecutor.h): rank 0 of
  // 1 when it runs alone. Expert parallelism picks this rank's experts from it.
  virtual int tp_rank() const { return 0; }
  virtual int tp_size() const { return 1; }

 private:
  const ir::Op& op_;
  const OpSelection& selection_;
  const OpShapes& shapes_;
};

class GpuOpImpl {
 public:
  virtual ~GpuOpImpl() = default;
  virtual absl::string_view name() const = 0;
  virtual bool Implements(ir::OpKind kind) const = 0;
  // False for ops that only alias memory (reshape, return): their selection is not recorded.
  virtual bool DoesDeviceWork() const { return true; }
  // The selection when this variant applies; nullopt lets the next unit of GpuOps.def try; an
  // error means the op cannot run on the GPU (the message says why).
  virtual absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const = 0;
  virtual absl::Status Bind(const BindContext& c, DeviceWork& work) const = 0;
};

// Helpers the units share.
int64_t Numel(const std::vector<int64_t>& shape);
int64_t Numel(llvm::ArrayRef<int64_t> shape);
// Whether a gated product's gate activation is GELU (matmul_swiglu / moe_experts `activation =
// "gelu"`: Gemma's MLPs and experts) rather than SiLU.
bool GeluGate(const ir::Op& op);
// `name=1` added to the launch's defines when `on` (a variant's define, so the other variant keeps
// its module and cache key).
void AddFlagDefine(Launch& l, const char* name, bool on = true);
// select-kernels{l2-prefetch-bytes} for a launch on `target`: `requested` capped at its L2; 0
// before sm_90 (no bulk prefetch) or when none is requested.
int64_t L2PrefetchBytesFor(const Target& target, int64_t requested);
// A clamped SwiGLU op's limit (ir/Ops.def swiglu / matmul_swiglu / moe_experts clamp) on the launch
// that computes its gated products: MEMRA_GLU_LIMIT_BITS, the f32 bits Common.cuh's glu_ reads.
// Nothing without a clamp (the module keeps its cache key).
void AddGluClampDefine(Launch& l, const ir::Op& op);
// A grid-stride launch over n elements (at most 16 blocks per SM of the target).
uint32_t GridFor(const Target& t, int64_t n, uint32_t block = 256);
// An Elementwise.cu-style launch (256 threads, grid-stride over n) of `entry` in `file`.
Launch GridStrideLaunch(const Target& t, const std::string& file, const std::string& entry, int64_t n,
                        Defines defines = {});
// Dequant.cc: the launch of Dequant.cu's dequant_bf16 for a kBlocks [rows, cols] matrix stored as
// `stored` (its parameters: DequantParams with a row range; y 16-byte aligned).
Launch DequantBf16Launch(const Target& t, ir::DType stored, int64_t rows, int64_t cols);
absl::Status Unsupported(const ir::Op& op, absl::string_view why);
absl::Status BindError(const ir::Op& op, absl::string_view why);
// The storage code of a KV cache's element type: StorageCode's, and 3 for q8_0 blocks (-ctk /
// -ctv q8_0; Common.cuh kv_store_warp, load_as_f32, PackedElems); -1 for any other type.
inline int KvStorageCode(ir::DType d) { return d == ir::DType::kQ8_0 ? 3 : StorageCode(d); }
// The storage codes (KvStorageCode) of a KV cache's K and V operands (indices k, v), or an error
// naming the op and the type the kernels do not store.
absl::StatusOr<std::pair<int, int>> KvCacheCodes(const SelectContext& c, unsigned k, unsigned v);

}  // namespace memra::kernels::cuda
