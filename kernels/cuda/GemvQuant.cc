// Units of kernels/cuda/GemvQuant.cu: decode products (T <= 8 tokens) read straight from GGUF
// blocks, tried before Gemv.cc's 16-bit GEMV. gemv_q_swiglu fuses matmul_swiglu's gate/up (one
// format); gemv_q_group runs a matmul_group in one launch per format (<= 4 weights each); gemv_q
// a matmul. They apply only when every matrix is on the device as its blocks
// (GemvQuantBlocksOnDevice) in a format GemvQuant.cu reads; otherwise the next unit tries.
#include "kernels/cuda/GemvQuant.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ir/StatusMacros.h"
#include "kernels/cuda/GemvQuantParams.h"
#include "kernels/cuda/Q8Companion.h"
#include "kernels/cuda/WeightLayout.h"

namespace memra::kernels::cuda {
namespace {

// How GemvQuant.cu copies a row's chunk into its ring: one bulk copy of 16-byte multiples; rows
// whose bytes are not a multiple of 16 (q6_K's 210-byte blocks, q8_0 rows of an odd block count)
// from the 16-byte boundary below each chunk (GQ_REALIGN), their slot (kCHP) 16 bytes longer.
struct RingCopy {
  bool realign = false;
  int64_t slot = 0;  // kCHP
};
// A row's slot in a stage (GemvQuant.cu kCHP): the chunk rounded up to 16, +16 for the readers'
// overrun, +16 more for a realigned chunk's shift.
int64_t SlotBytes(int64_t chunk, bool realign) { return (chunk + 15) / 16 * 16 + (realign ? 32 : 16); }
RingCopy RingCopyFor(int64_t chunk, int64_t row_bytes) {
  RingCopy r;
  r.realign = row_bytes % 16 != 0 || chunk % 16 != 0;
  r.slot = SlotBytes(chunk, r.realign);
  return r;
}
// Shared memory of a block's rings: every warp's stages, each with its mbarrier (8 bytes).
constexpr int64_t kStageBarrier = 8;
int64_t RingBytes(int64_t warps, int64_t stages, int64_t stage) { return warps * stages * (stage + kStageBarrier); }
void AddCopyDefines(Defines& defs, const RingCopy& rc) {
  if (rc.realign) defs.push_back(Def("GQ_REALIGN", 1));
}

// GemvQuant.cu's formats: ggml id (GQ_FMT) and lanes per block (its LPB; QK and block bytes
// come from ir::InfoOf).
struct QuantFormat {
  ir::DType dtype;
  int lanes_per_block;
};
constexpr QuantFormat kFormats[] = {
    {ir::DType::kQ8_0, 1},   {ir::DType::kQ4_0, 1},  {ir::DType::kQ4_1, 1}, {ir::DType::kQ5_0, 1},
    {ir::DType::kQ5_1, 1},   {ir::DType::kMXFP4, 1}, {ir::DType::kQ2_K, 4}, {ir::DType::kQ3_K, 4},
    {ir::DType::kQ4_K, 4},   {ir::DType::kQ5_K, 4},  {ir::DType::kQ6_K, 4}, {ir::DType::kIQ4_NL, 1},
    {ir::DType::kIQ4_XS, 8},
};

const QuantFormat* FormatOf(ir::DType t) {
  for (const QuantFormat& f : kFormats)
    if (f.dtype == t) return &f;
  return nullptr;
}

constexpr int kMaxTokens = 8;
constexpr int kWarps = 4;                     // warps per block
constexpr int64_t kRingBytesPerWarp = 12288;  // the ring's budget per warp (stages follow from it)
constexpr int kStagedWarps = 8;               // kQ8Block: warps per block
constexpr int kStagedBlocksPerSm = 2;         // kQ8Block: resident blocks per SM (the grid)
constexpr int kBlocksPerSmCap = 256;          // grid cap (warps then loop over tiles): blocks of 1 tile per
                                              // warp balance best (the block scheduler is dynamic)

// q4_K / q5_K / q6_K (the Q4_K_M mix): 4 rows per plain tile at T = 1 (x loads and the tile's fixed
// work over twice the rows) and at most 4 blocks per SM, each warp then streaming many tiles
// through its ring. Measured with `memra-kernel-bench --section quant --sweep 1` on the H200
// (bench/RESULTS.md, session 15): q4_K head 72 -> 84 %, 12288 x 4096 44 -> 53 %, 27B down
// 42 -> 58 %; q6_K head 79 -> 88 % (q8 x). The other formats keep 2 rows and the dynamic grid.
struct FormatGeometry {
  int plain_rows;     // rows per gemv_q / gemv_q_group tile at T = 1
  int blocks_per_sm;  // grid cap per SM
};
FormatGeometry GeometryOf(ir::DType t) {
  if (t == ir::DType::kQ4_K || t == ir::DType::kQ5_K || t == ir::DType::kQ6_K) return {4, 4};
  return {2, kBlocksPerSmCap};
}

// The weights of one product launch: one format, <= MEMRA_GEMV_QUANT_MAX weights (operand
// indices), in operand order.
struct WeightGroup {
  ir::DType dtype;
  std::vector<unsigned> operands;
};

// matmul (and matmul_add_rms_norm, its one matrix): one group; matmul_swiglu: one group (gate,
// up); matmul_group: a group per format and 4 weights, in the order the formats first appear.
std::vector<WeightGroup> GroupWeights(const ir::Op& op) {
  std::vector<WeightGroup> groups;
  for (unsigned i = 1; i < op.num_operands(); ++i) {
    if (!ir::IsMatrixOperand(op, i)) continue;
    const ir::DType t = op.operand(i)->dtype();
    auto g = std::find_if(groups.begin(), groups.end(), [&](const WeightGroup& w) {
      return w.dtype == t && w.operands.size() < MEMRA_GEMV_QUANT_MAX;
    });
    if (g == groups.end()) {
      groups.push_back({t, {}});
      g = groups.end() - 1;
    }
    g->operands.push_back(i);
  }
  return groups;
}

bool IsProduct(ir::OpKind k) {
  return k == ir::OpKind::kMatMul || k == ir::OpKind::kMatMulGroup || k == ir::OpKind::kMatMulSwiglu ||
         k == ir::OpKind::kMatMulAddRmsNorm;
}

std::optional<int64_t> DefineOf(const Launch& l, const std::string& name) {
  for (const auto& [n, v] : l.kernel.module.defines) {
    int64_t x = 0;
    if (n == name && absl::SimpleAtoi(v, &x)) return x;
  }
  return std::nullopt;
}

// GemvQuant.cu's q8 x of T rows: int8 values, a scale per 32 and a sum per 16.
int64_t ScratchBytesUnpadded(int64_t T, int64_t K) { return T * K + T * (K / 32) * 4 + T * (K / 16) * 4; }
int64_t Pad256(int64_t n) { return (n + 255) / 256 * 256; }
int64_t ScratchBytes(int64_t T, int64_t K) { return Pad256(ScratchBytesUnpadded(T, K)); }

// GQ_STREAM products (GemvQuant.cu): after the q8 x, the arrival counters (one per tile of the
// op's largest streamed launch) and two records of 32 floats per warp of its widest one.
constexpr int64_t kStreamRecordFloats = 32;
struct StreamScratch {
  int64_t counters = 0;  // tiles
  int64_t warps = 0;
  int64_t Bytes() const { return counters == 0 ? 0 : Pad256(counters * 4) + warps * 2 * kStreamRecordFloats * 4; }
};

// Whether a dense product's tiles leave SMs idle while others finish: the static schedule (warp w
// takes tiles w, w + W, ...; block b on SM b mod sm_count, the blocks all resident) against an
// even share per SM. The 31B's ffn down (1,344 tiles of 4 rows in 336 blocks) runs 3 blocks on 72
// SMs and 2 on 60: 0.85.
double StaticBalance(int64_t tiles, int64_t grid, int64_t warps, int64_t sm_count) {
  const int64_t W = grid * warps;
  int64_t busiest = 0;
  for (int64_t sm = 0; sm < std::min(sm_count, grid); ++sm) {
    int64_t work = 0;
    for (int64_t b = sm; b < grid; b += sm_count)
      for (int64_t w = b * warps; w < (b + 1) * warps; ++w) work += w < tiles ? (tiles - 1 - w) / W + 1 : 0;
    busiest = std::max(busiest, work);
  }
  return busiest == 0 ? 1.0 : static_cast<double>(tiles) / static_cast<double>(sm_count) / static_cast<double>(busiest);
}
// GemvQuantOptions::stream = 1 streams below this balance. Not the units' default: on the H100 the
// 31B Q4_K_M decoded at 100.1 tok/s with it against 108.8 without, Step 3.5 at 998 against 1,046
// (session 28, with the x loads moved before the weight wait, since reverted). Per kernel the
// schedule itself loses (session 29, H100, memra-kernel-bench --section quant --only 31B): the
// 31B's ffn down 39.8 us streamed vs 27.9, attn out 22.2 vs 13.0, swiglu 58.5 vs 49.6.
constexpr double kStreamBelowBalance = 0.93;

// Defines that do not fit a selection's budget: the launch is refused rather than failing to compile.
bool FitsSharedMemory(const Launch& l, const Target& target) {
  const int64_t bytes = GemvQuantSmemBytes(l);
  return bytes >= 0 && bytes <= target.smem_per_block;
}

}  // namespace

int64_t GemvQuantSmemBytes(const Launch& l) {
  if (l.kernel.module.file != "GemvQuant.cu") return -1;
  auto def = [&](const char* name, int64_t fallback) { return DefineOf(l, name).value_or(fallback); };
  const int64_t fmt = def("GQ_FMT", -1), K = def("GQ_K", 0);
  const QuantFormat* f = nullptr;
  for (const QuantFormat& q : kFormats)
    if (ir::InfoOf(q.dtype).ggml_id == fmt) f = &q;
  if (f == nullptr || K <= 0) return -1;
  const int64_t pack = def("GQ_PACK", 1);
  const int64_t chunk = (32 / pack / f->lanes_per_block) * ir::InfoOf(f->dtype).block_bytes;  // kCHB
  const int64_t slot = SlotBytes(chunk, def("GQ_REALIGN", 0) != 0);
  const int64_t rows = def("GQ_R", 2), slots = pack * (def("GQ_SWIGLU", 0) ? 2 * rows : rows);
  int64_t bytes = RingBytes(def("GQ_WARPS", 4), def("GQ_ST", 3), slots * slot);
  // x staged per block is 16-aligned after the barriers: an odd count of 8-byte barriers is
  // padded (ptxas: q6_K K = 5376 at 7 warps x 3 stages, 43,520 bytes, not 43,512).
  if (def("GQ_XQ", 0) == 2)
    bytes += ScratchBytesUnpadded(def("GQ_T", 1), K) + (def("GQ_WARPS", 4) * def("GQ_ST", 3) % 2) * kStageBarrier;
  if (def("GQ_SPLIT", 0)) bytes += def("GQ_WARPS", 4) * rows * 4;  // the warps' sums of a tile
  // gemv_q_add_norm's tail (AddNormTail.cuh): the arrival, and past 512 columns 8 warp partials and
  // the total; counted in 16-byte units (up to 12 bytes over ptxas's count).
  if (const int64_t cols = def("GQ_NORM_COLS", 0); cols > 0) bytes += cols > 512 ? 48 : 16;
  return bytes;
}

bool GemvQuantReads(ir::DType dtype) { return FormatOf(dtype) != nullptr; }

bool GemvQuantBlocksOnDevice(ir::DType dtype, const WeightLayout* layout) {
  return GemvQuantReads(dtype) && layout != nullptr && layout->kind == WeightLayoutKind::kBlocks;
}

// x quantized to int8 by a separate launch, then dp4a: measured on the H200 (bench/RESULTS.md,
// 2026-12-01) 1.3-3.2x faster than the exact f32 path on every format and 9B/27B shape, and
// faster than staging x per block (kQ8Block) on all but the q4_K head. Its error (~1e-4 nmse) is
// llama.cpp's mmvq's; kF32 stays selectable (GemvQuantOptions::x) and measured.
GemvQuantX DefaultGemvQuantX(ir::DType) { return GemvQuantX::kQ8; }

std::optional<OpSelection> SelectGemvQuant(const ir::Op& op, const OpShapes& shapes, const Target& target,
                                           const GemvQuantOptions& options) {
  if (!IsProduct(op.kind()) || shapes.in.size() < 2 || shapes.in[0].empty()) return std::nullopt;
  const int64_t K = shapes.in[0].back();
  if (K <= 0) return std::nullopt;
  const int64_t T = Numel(shapes.in[0]) / K;
  if (T < 1 || T > kMaxTokens) return std::nullopt;
  for (unsigned i = 1; i < op.num_operands(); ++i) {
    if (!ir::IsMatrixOperand(op, i)) continue;
    const ir::DType t = op.operand(i)->dtype();
    if (!GemvQuantReads(t) || K % ir::InfoOf(t).block_elems != 0) return std::nullopt;
    if (shapes.in[i].size() != 2 || shapes.in[i][1] != K) return std::nullopt;
  }
  const bool swiglu = op.kind() == ir::OpKind::kMatMulSwiglu;
  const std::vector<WeightGroup> groups = GroupWeights(op);
  if (swiglu && (groups.size() != 1 || groups[0].operands.size() != 2)) return std::nullopt;
  if ((op.kind() == ir::OpKind::kMatMul || op.kind() == ir::OpKind::kMatMulAddRmsNorm) && groups.size() != 1)
    return std::nullopt;

  const GemvQuantX wanted = options.x.value_or(DefaultGemvQuantX(groups[0].dtype));
  const int64_t x_bytes = ScratchBytesUnpadded(T, K);  // q8 x staged per block (GQ_XQ = 2)
  // x's producer writes it as q8 too (Q8Companion.h): no quantizing launch of our own.
  const std::optional<Q8Companion> companion = Q8CompanionOfValue(*op.operand(0));
  const bool x_written = companion && companion->elems == T * K;
  OpSelection s;
  s.gemv = true;
  StreamScratch streamed;
  for (const WeightGroup& g : groups) {
    const QuantFormat& f = *FormatOf(g.dtype);
    const ir::DTypeInfo& info = ir::InfoOf(g.dtype);
    const int64_t chunk = (32 / f.lanes_per_block) * info.block_bytes;  // GemvQuant.cu kCHB
    const int64_t row_bytes = K / info.block_elems * info.block_bytes;
    const RingCopy rc = RingCopyFor(chunk, row_bytes);
    const int64_t slot = rc.slot;  // kCHP
    const int max_rows = swiglu ? 2 : 4;
    // Measured for q8 x (the default); the exact and staged paths keep the first geometry.
    const FormatGeometry geometry =
        wanted == GemvQuantX::kQ8 ? GeometryOf(g.dtype) : FormatGeometry{2, kBlocksPerSmCap};
    const int default_rows = swiglu ? 1 : (T == 1 ? geometry.plain_rows : 2);
    GemvQuantX x = wanted;
    int rows = 0, warps = 0, stages = 0, min_blocks = 1;
    if (x == GemvQuantX::kQ8Block) {
      // x staged per block: 8 warps, the ring in what x leaves of the block's shared memory (fewer
      // rows per tile before fewer than 2 stages); 2 blocks per SM guaranteed by the launch bounds.
      warps = options.warps > 0 ? options.warps : kStagedWarps;
      const int64_t ring = target.smem_per_block - x_bytes;
      for (int r : {options.rows > 0 ? options.rows : default_rows, 1}) {
        r = std::clamp(r, 1, max_rows);
        const int64_t stage = (swiglu ? 2 : 1) * r * slot;
        const int64_t st =
            options.stages > 0 ? options.stages : std::min<int64_t>(ring / (warps * (stage + kStageBarrier)), 4);
        if (st >= 2 && RingBytes(warps, st, stage) <= ring) {
          rows = r, stages = static_cast<int>(st);
          break;
        }
      }
      if (rows == 0) x = GemvQuantX::kQ8;  // does not fit: x quantized by a launch of its own
      min_blocks = kStagedBlocksPerSm;
    }
    if (x != GemvQuantX::kQ8Block) {
      rows = std::clamp(options.rows > 0 ? options.rows : default_rows, 1, max_rows);
      const int64_t stage = (swiglu ? 2 : 1) * rows * slot;
      warps = options.warps > 0 ? options.warps : kWarps;
      stages =
          options.stages > 0 ? options.stages : static_cast<int>(std::clamp<int64_t>(kRingBytesPerWarp / stage, 2, 4));
      while (RingBytes(warps, stages, stage) > target.smem_per_block && stages > 2) --stages;
      while (RingBytes(warps, stages, stage) > target.smem_per_block && warps > 1) --warps;
      if (RingBytes(warps, stages, stage) > target.smem_per_block) return std::nullopt;
      min_blocks = 1;
      // GemvQuantOptions::min_blocks (select-kernels{gemv-q-blocks-per-sm}): as many as the rings'
      // shared memory lets an SM hold (the driver keeps 1 KiB a block).
      if (options.min_blocks > 0) {
        const int64_t per_block = RingBytes(warps, stages, stage) + 1024;
        const int64_t fit = target.smem_per_sm > 0 ? target.smem_per_sm / per_block : options.min_blocks;
        min_blocks = static_cast<int>(std::clamp<int64_t>(fit, 1, options.min_blocks));
      }
    }
    int64_t tiles = 0;
    for (unsigned i : g.operands) tiles += (shapes.in[i][0] + rows - 1) / rows;
    if (swiglu) tiles = (shapes.in[g.operands[0]][0] + rows - 1) / rows;
    if (tiles == 0) return std::nullopt;
    int64_t cap = options.max_blocks > 0 ? options.max_blocks : int64_t{target.sm_count} * geometry.blocks_per_sm;
    if (x != GemvQuantX::kQ8Block && options.min_blocks > 0 && options.max_blocks <= 0 &&
        geometry.blocks_per_sm < kBlocksPerSmCap)
      cap = int64_t{target.sm_count} * min_blocks;
    if (x == GemvQuantX::kQ8Block && options.max_blocks <= 0) cap = int64_t{target.sm_count} * min_blocks;
    int64_t grid = std::min<int64_t>((tiles + warps - 1) / warps, cap);
    // Streamed (GQ_STREAM): x quantized by this op's launch (which zeroes the counters), a grid of
    // `cap` blocks (every resident slot the geometry allows) and at least two chunks per warp.
    const int64_t chunks = (K / info.block_elems + (chunk / info.block_bytes) - 1) / (chunk / info.block_bytes);
    const bool can_stream =
        x == GemvQuantX::kQ8 && !x_written && cap <= int64_t{target.sm_count} * 8 && tiles * chunks >= 2 * cap * warps;
    const bool stream =
        can_stream &&
        (options.stream == 2 ||
         (options.stream == 1 && StaticBalance(tiles, grid, warps, target.sm_count) < kStreamBelowBalance));
    if (stream) {
      grid = cap;
      streamed.counters = std::max(streamed.counters, tiles);
      streamed.warps = std::max(streamed.warps, cap * warps);
    }
    Launch l;
    l.kernel.module.file = "GemvQuant.cu";
    Defines defs = {Def("GQ_FMT", info.ggml_id),
                    Def("GQ_K", K),
                    Def("GQ_T", T),
                    Def("GQ_R", rows),
                    Def("GQ_WARPS", warps),
                    Def("GQ_ST", stages),
                    Def("GQ_XQ", static_cast<int>(x)),
                    Def("GQ_SWIGLU", swiglu ? 1 : 0),
                    Def("GQ_MINB", min_blocks)};
    if (stream) defs.push_back(Def("GQ_STREAM", 1));
    if (options.x_early && T == 1 && x != GemvQuantX::kF32) defs.push_back(Def("GQ_XPRE", 1));
    if (!options.pair_dot && x != GemvQuantX::kF32 && (g.dtype == ir::DType::kQ4_K || g.dtype == ir::DType::kQ5_K))
      defs.push_back(Def("GQ_PAIR_DOT", 0));
    if (options.one_scale_form && (g.dtype == ir::DType::kQ4_K || g.dtype == ir::DType::kQ5_K))
      defs.push_back(Def("GQ_SCALES", 1));
    if (const int64_t l2 = L2PrefetchBytesFor(target, options.l2_prefetch_bytes); l2 > 0)
      defs.push_back(Def("GQ_L2_PREFETCH", l2));
    AddCopyDefines(defs, rc);
    // GeGLU (matmul_swiglu activation gelu): the gate's activation by define; SwiGLU keeps its key.
    if (swiglu && GeluGate(op)) defs.push_back(Def("GQ_GELU", 1));
    l.kernel.module.defines = MakeDefines(std::move(defs));
    if (swiglu) AddGluClampDefine(l, op);
    l.kernel.entry = swiglu ? "gemv_q_swiglu" : "gemv_q";
    l.block = static_cast<uint32_t>(warps * 32);
    l.grid = static_cast<uint32_t>(grid);
    if (x == GemvQuantX::kQ8 && !x_written && s.scratch_bytes == 0) {
      Launch q = l;
      q.kernel.entry = "gemv_q_quantize_x";
      q.block = 256;
      q.grid = GridFor(target, T * K, 256);
      s.launches.insert(s.launches.begin(), q);
      s.scratch_bytes = ScratchBytes(T, K);
    }
    if (!FitsSharedMemory(l, target)) return std::nullopt;
    s.launches.push_back(std::move(l));
  }
  if (streamed.counters > 0) s.scratch_bytes += streamed.Bytes();
  return s;
}

Launch GemvQuantXLaunch(const Target& target, int64_t K, int64_t rows) {
  Launch q;
  q.kernel.module.file = "GemvQuant.cu";
  // GQ_FMT and GQ_REALIGN only have to admit K (the quantization works per 32 values): q8_0 rows
  // of any block count.
  q.kernel.module.defines = MakeDefines({Def("GQ_FMT", ir::InfoOf(ir::DType::kQ8_0).ggml_id), Def("GQ_K", K),
                                         Def("GQ_T", 1), Def("GQ_XROWS", rows), Def("GQ_XQ", 1), Def("GQ_REALIGN", 1)});
  q.kernel.entry = "gemv_q_quantize_x";
  q.block = 256;
  q.grid = GridFor(target, rows * K, 256);
  return q;
}

int64_t GemvQuantXBytes(int64_t rows, int64_t K) { return ScratchBytes(rows, K); }

namespace {

// gemv_q_moe_down's sub-tiles a chunk holds side by side (GemvQuant.cu GQ_PACK): the most (a power
// of 2, at most 8) whose rows of K columns fit the warp's lanes together; 1 when a row needs more
// than half the warp.
int64_t DownPack(const QuantFormat& f, int64_t K) {
  const int64_t lanes = K / ir::InfoOf(f.dtype).block_elems * f.lanes_per_block;
  int64_t pack = 1;
  while (pack < 8 && lanes * pack * 2 <= 32) pack *= 2;
  return pack;
}

// The MoE forms' launch; `subtiles` > 1, `pack` > 1 and `split` only for gemv_q_moe_down (GQ_MOE =
// 2: a tile's sub-tiles, the k choices and the shared down; split: a block a tile).
std::optional<Launch> MoeLaunch(const Target& target, ir::DType dtype, int64_t K, int64_t x_rows, bool swiglu,
                                int64_t slots, int64_t n, int64_t shared_rows, int64_t ns,
                                const GemvQuantOptions& options, int64_t subtiles, int64_t pack, bool split) {
  const QuantFormat* f = FormatOf(dtype);
  if (f == nullptr || K <= 0 || x_rows < 1 || slots * n + shared_rows * ns < 1) return std::nullopt;
  const ir::DTypeInfo& info = ir::InfoOf(dtype);
  if (K % info.block_elems != 0) return std::nullopt;
  // The dense units' geometry (one row per swiglu tile, two per plain one; the ring's budget).
  const int64_t chunk = (32 / pack / f->lanes_per_block) * info.block_bytes;
  const int64_t row_bytes = K / info.block_elems * info.block_bytes;
  const RingCopy rc = RingCopyFor(chunk, row_bytes);
  const int64_t slot = rc.slot;
  // Rows a tile (measured on the H100, memra-kernel-bench --section moe --sweep 1, bench/RESULTS.md
  // session 25): the downs 4 (1.07-1.44x over 2 at every expert shape and format but Gemma 4's q8_0,
  // 1.5 % slower); the gate/up 1, or 4 when a row's last chunk is partial (Gemma 4 26B-A4B's K =
  // 2816: 1.09-1.11x; with whole chunks, Step 3.5's and Qwen3.5-35B-A3B's, 4 rows were up to 8 %
  // slower).
  const bool partial_chunk = K % ((32 / f->lanes_per_block) * info.block_elems) != 0;
  const int rows = std::clamp(options.rows > 0 ? options.rows : (swiglu && !partial_chunk ? 1 : 4), 1, 4);
  const int64_t stage = pack * (swiglu ? 2 : 1) * rows * slot;
  int warps = options.warps > 0 ? options.warps : kWarps;
  int stages =
      options.stages > 0 ? options.stages : static_cast<int>(std::clamp<int64_t>(kRingBytesPerWarp / stage, 2, 4));
  while (RingBytes(warps, stages, stage) > target.smem_per_block && stages > 2) --stages;
  while (RingBytes(warps, stages, stage) > target.smem_per_block && warps > 1) --warps;
  if (RingBytes(warps, stages, stage) > target.smem_per_block) return std::nullopt;
  const int64_t tiles = slots * ((n + rows - 1) / rows) + shared_rows * ((ns + rows - 1) / rows);
  const int64_t cap = options.max_blocks > 0 ? options.max_blocks : int64_t{target.sm_count} * kBlocksPerSmCap;
  const int64_t grid = std::min<int64_t>(split ? tiles : (tiles + warps - 1) / warps, cap);
  if (options.stages <= 0) {
    // No more stages than the items (chunks) a warp runs: a decode step's expert products give a
    // warp one or two tiles, and ring stages it never fills only cost blocks per SM.
    const int64_t chunks = (row_bytes + chunk - 1) / chunk;
    const int64_t groups = (subtiles + pack - 1) / pack;  // a tile's sub-tile groups
    const int64_t per_warp = split ? (groups + warps - 1) / warps * ((tiles + grid - 1) / grid)
                                   : (tiles + grid * warps - 1) / (grid * warps) * groups;
    stages = static_cast<int>(std::clamp<int64_t>(per_warp * chunks, 2, stages));
  }
  const int min_blocks = options.min_blocks > 0 ? options.min_blocks : 1;
  Launch l;
  l.kernel.module.file = "GemvQuant.cu";
  Defines defs = {Def("GQ_FMT", info.ggml_id),
                  Def("GQ_K", K),
                  Def("GQ_T", 1),
                  Def("GQ_XROWS", x_rows),
                  Def("GQ_R", rows),
                  Def("GQ_WARPS", warps),
                  Def("GQ_ST", stages),
                  Def("GQ_XQ", 1),
                  Def("GQ_SWIGLU", swiglu ? 1 : 0),
                  Def("GQ_MOE", 1),
                  Def("GQ_MINB", min_blocks)};
  if (pack > 1) defs.push_back(Def("GQ_PACK", pack));
  if (split) defs.push_back(Def("GQ_SPLIT", 1));
  AddCopyDefines(defs, rc);
  l.kernel.module.defines = MakeDefines(std::move(defs));
  l.kernel.entry = swiglu ? "gemv_q_moe_swiglu" : "gemv_q_moe";
  l.block = static_cast<uint32_t>(warps * 32);
  l.grid = static_cast<uint32_t>(grid);
  if (!FitsSharedMemory(l, target)) return std::nullopt;
  return l;
}

}  // namespace

std::optional<Launch> GemvQuantMoeLaunch(const Target& target, ir::DType dtype, int64_t K, int64_t x_rows, bool swiglu,
                                         int64_t slots, int64_t n, int64_t shared_rows, int64_t ns,
                                         const GemvQuantOptions& options) {
  return MoeLaunch(target, dtype, K, x_rows, swiglu, slots, n, shared_rows, ns, options, 1, 1, false);
}

std::optional<Launch> GemvQuantMoeDownLaunch(const Target& target, ir::DType dtype, int64_t K, int64_t x_rows,
                                             int64_t tokens, int64_t n, const GemvQuantOptions& options) {
  const QuantFormat* f = FormatOf(dtype);
  if (f == nullptr) return std::nullopt;
  // The plain form's geometry over n_tok tiles of n rows (each tile then runs its k + 1 sub-tiles,
  // GQ_PACK of them at a time), each tile's sub-tile groups split over the block's warps
  // (GQ_SPLIT): one warp running all k + 1 in turn left the grid at ~0.4 waves. Measured on the
  // H100 (memra-kernel-bench --section moe, bench/RESULTS.md session 24): split 1.03-1.35x faster
  // at every expert shape and format but q6_K's unpacked rows (Step 3.5's F = 1280: 0.92x).
  const int64_t pack = options.pack > 0 ? std::min<int64_t>(options.pack, DownPack(*f, K)) : DownPack(*f, K);
  const bool split = options.split > 0 ? options.split == 2 : !(dtype == ir::DType::kQ6_K && pack == 1);
  // Sub-tiles a tile runs: at most the x rows a token has (its k slots and the shared row).
  const int64_t subtiles = std::max<int64_t>(1, x_rows / std::max<int64_t>(tokens, 1));
  std::optional<Launch> l = MoeLaunch(target, dtype, K, x_rows, false, tokens, n, 0, 0, options, subtiles, pack, split);
  if (!l) return l;
  for (auto& [name, value] : l->kernel.module.defines)
    if (name == "GQ_MOE") value = "2";
  l->kernel.entry = "gemv_q_moe_down";
  return l;
}

absl::Status BindGemvQuant(const BindContext& c, DeviceWork& w, const AddNormTailParams* tail) {
  const ir::Op& op = c.op();
  const OpSelection& s = c.selection();
  MEMRA_ASSIGN_OR_RETURN(auto xs, c.InShape(0));
  const int64_t K = xs.empty() ? 0 : xs.back();
  const int64_t n_tok = K > 0 ? Numel(xs) / K : 0;
  const bool q8 = !s.launches.empty() && s.launches[0].kernel.entry == "gemv_q_quantize_x";
  const std::vector<WeightGroup> groups = GroupWeights(op);
  if (s.launches.size() != groups.size() + (q8 ? 1 : 0)) return BindError(op, "gemv_q: stale selection (launches)");
  const int64_t T = DefineOf(s.launches.back(), "GQ_T").value_or(0);
  if (n_tok < 1 || n_tok > T) return BindError(op, absl::StrCat("gemv_q: ", n_tok, " tokens, selected for <= ", T));
  // q8 x without a launch of ours: the producer's companion (the same layout, T rows of K).
  uint64_t x_companion = 0;
  const bool reads_q8 = std::any_of(s.launches.begin(), s.launches.end(),
                                    [](const Launch& l) { return DefineOf(l, "GQ_XQ").value_or(0) == 1; });
  if (!q8 && reads_q8) {  // (a group staging x itself, GQ_XQ = 2, may sit beside one reading it)
    const std::optional<Q8Companion> companion = Q8CompanionOfValue(*op.operand(0));
    if (!companion || companion->elems != T * K)
      return BindError(op, "gemv_q: stale selection (q8 x without a quantizing launch or a companion of its rows)");
    x_companion = *Q8CompanionAddress(c, 0);
  }
  // The streamed launches' counters and records, after the q8 x (as SelectGemvQuant sized them).
  StreamScratch streamed;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Launch& l = s.launches[g + (q8 ? 1 : 0)];
    if (DefineOf(l, "GQ_STREAM").value_or(0) == 0) continue;
    const int64_t R = DefineOf(l, "GQ_R").value_or(1);
    int64_t tiles = 0;
    for (size_t j = 0; j < groups[g].operands.size(); ++j) {
      MEMRA_ASSIGN_OR_RETURN(auto shape, c.InShape(groups[g].operands[j]));
      if (shape.size() != 2) return BindError(op, "gemv_q: a matrix operand is not 2-D");
      if (op.kind() != ir::OpKind::kMatMulSwiglu || j == 0) tiles += (shape[0] + R - 1) / R;
    }
    streamed.counters = std::max(streamed.counters, tiles);
    streamed.warps = std::max<int64_t>(streamed.warps, int64_t{l.grid} * (l.block / 32));
  }
  if (streamed.counters > 0 && (!q8 || s.scratch_bytes < ScratchBytes(T, K) + streamed.Bytes()))
    return BindError(op, "gemv_q: stale selection (streamed launches without their scratch)");
  const uint64_t counters = c.Scratch() + static_cast<uint64_t>(ScratchBytes(T, K));
  const uint64_t records = counters + static_cast<uint64_t>(Pad256(streamed.counters * 4));
  if (q8) {
    if (s.scratch_bytes < ScratchBytes(T, K) || c.Scratch() == 0) return BindError(op, "gemv_q: no scratch for q8 x");
    GemvQuantXParams qp{};
    qp.x = c.In(0);
    qp.xq = c.Scratch();
    qp.n_tok = static_cast<int>(n_tok);
    if (streamed.counters > 0) {
      qp.zero = counters;
      qp.n_zero = static_cast<int>(streamed.counters);
    }
    w.Kernel(0, qp);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const uint32_t li = static_cast<uint32_t>(g + (q8 ? 1 : 0));
    const Launch& l = s.launches[li];
    const int64_t fmt = DefineOf(l, "GQ_FMT").value_or(-1);
    // Realigned copies need only the blocks' own (2-byte) alignment; the others copy from 16-byte
    // boundaries.
    const int64_t copy = DefineOf(l, "GQ_REALIGN").value_or(0) ? 2 : 16;
    if (fmt != ir::InfoOf(groups[g].dtype).ggml_id || DefineOf(l, "GQ_K").value_or(0) != K)
      return BindError(op, "gemv_q: stale selection (format or K)");
    GemvQuantParams p{};
    p.x = c.In(0);
    p.xq = q8 ? c.Scratch() : x_companion;
    if (DefineOf(l, "GQ_STREAM").value_or(0) != 0) {
      p.part = records;
      p.count = counters;
    }
    p.n_tok = static_cast<int>(n_tok);
    p.n_w = static_cast<int>(groups[g].operands.size());
    for (size_t j = 0; j < groups[g].operands.size(); ++j) {
      const unsigned i = groups[g].operands[j];
      MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, c.Matrix(i));
      const ir::DTypeInfo& info = ir::InfoOf(groups[g].dtype);
      if (m.cols != K || m.stored != groups[g].dtype)
        return BindError(op, absl::StrCat("gemv_q: operand ", i, " is not a ", info.name, " [N, ", K, "] matrix"));
      // The outputs are sized from the IR's rows, the launch's rows come from the device matrix.
      MEMRA_ASSIGN_OR_RETURN(auto ws, c.InShape(i));
      if (ws.empty() || ws[0] != m.rows)
        return BindError(op, absl::StrCat("gemv_q: operand ", i, " has ", m.rows, " rows on the device, ",
                                          ws.empty() ? int64_t{0} : ws[0], " in the module"));
      if (m.bytes != 0 && m.bytes != m.rows * (K / info.block_elems) * info.block_bytes)
        return BindError(op, absl::StrCat("gemv_q: operand ", i, " is not stored as its GGUF blocks"));
      if (m.data % static_cast<uint64_t>(copy) != 0)
        return BindError(op, absl::StrCat("gemv_q: operand ", i, " is not ", copy, "-byte aligned"));
      w.Count(2.0 * static_cast<double>(n_tok * m.rows * m.cols), static_cast<double>(m.bytes));
      p.w[j].w = m.data;
      p.w[j].y = op.kind() == ir::OpKind::kMatMulSwiglu ? c.Out(0) : c.Out(i - 1);
      p.w[j].n_rows = static_cast<int>(m.rows);
    }
    if (tail != nullptr && g + 1 == groups.size()) {
      if (l.kernel.entry != "gemv_q_add_norm" || groups.size() != 1)
        return BindError(op, "gemv_q: stale selection (the norm's tail on a launch that does not run it)");
      GemvQuantAddNormParams tp{};
      tp.q = p;
      tp.norm = *tail;
      w.Kernel(li, tp);
      continue;
    }
    w.Kernel(li, p);
  }
  return absl::OkStatus();
}

namespace {

class GemvQuantImpl : public GpuOpImpl {
 public:
  GemvQuantImpl(absl::string_view name, ir::OpKind kind) : name_(name), kind_(kind) {}
  absl::string_view name() const override { return name_; }
  bool Implements(ir::OpKind k) const override { return k == kind_; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    for (unsigned i = 1; i < c.op.num_operands(); ++i)
      if (!GemvQuantBlocksOnDevice(c.op.operand(i)->dtype(), c.shapes.layout(i))) return std::optional<OpSelection>();
    GemvQuantOptions options;
    options.l2_prefetch_bytes = c.options.l2_prefetch_bytes;
    options.min_blocks = c.options.gemv_q_blocks_per_sm;
    options.x_early = c.options.gemv_q_x_early;
    options.pair_dot = c.options.gemv_q_pair_dot;
    return SelectGemvQuant(c.op, c.shapes, c.target, options);
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override { return BindGemvQuant(c, w); }

 private:
  absl::string_view name_;
  ir::OpKind kind_;
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateGemvQuantSwiglu() {
  return std::make_unique<GemvQuantImpl>("gemv_q_swiglu", ir::OpKind::kMatMulSwiglu);
}
std::unique_ptr<GpuOpImpl> CreateGemvQuantGroup() {
  return std::make_unique<GemvQuantImpl>("gemv_q_group", ir::OpKind::kMatMulGroup);
}
std::unique_ptr<GpuOpImpl> CreateGemvQuant() { return std::make_unique<GemvQuantImpl>("gemv_q", ir::OpKind::kMatMul); }

}  // namespace memra::kernels::cuda
