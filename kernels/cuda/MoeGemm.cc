// Host side of kernels/cuda/MoeGemm.cu: which storages it reads, its launches, the sort's
// scratch layout and the parameter binding (MoeGemm.h).
#include "kernels/cuda/MoeGemm.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/MoeGemmParams.h"
#include "kernels/cuda/WeightLayout.h"

namespace memra::kernels::cuda {
namespace {

constexpr const char* kFile = "MoeGemm.cu";
constexpr uint32_t kThreads = 256;  // MG_THREADS
constexpr int64_t kMaxExperts = 1024;
constexpr int64_t kSortCountInts = 8192;    // moe_sort's per-warp count table (32 KiB)
constexpr int64_t kStepK = 32;              // MoeGemmTile.cuh MG_BK
constexpr int64_t kStaticSmem = 48 * 1024;  // static shared memory a launch gets without the opt-in
constexpr int64_t kMaxStages = 4;

int64_t Align(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

// MoeGemm.cu's weight ring: MG_BN rows per block (128; 64 for the 256-element block formats, whose
// chunk of one block per row would not fit twice at 128 rows: q6_K 2 x 26.9 KB), MG_CK elements
// per chunk (whole blocks, whole 32-element steps), MG_CW bytes per copy piece (the widest power
// of two <= 16 dividing row_bytes), MG_ST stages (as many as fit beside the bf16 tiles, <= 4).
struct RingGeometry {
  int64_t bn = 128, ck = 64, cw = 1, stages = 2;
  int64_t smem = 0;  // the kernel's static shared memory
};
std::optional<RingGeometry> Geometry(const ir::DTypeInfo& info, int64_t K) {
  const bool wide = info.block_elems == 1;
  const int64_t qk = wide ? 8 : info.block_elems, bb = wide ? 8 * info.block_bytes : info.block_bytes;
  const int64_t row_bytes = K / info.block_elems * info.block_bytes;
  std::optional<RingGeometry> best;
  for (int64_t ck : {int64_t{256}, int64_t{64}, int64_t{32}}) {
    if (ck < qk || ck % qk != 0 || K % ck != 0) continue;
    if (qk == 32 && ck == 256) continue;  // 32-element blocks: chunks of 64 (or 32)
    if (wide && ck != 32) continue;
    RingGeometry g;
    g.bn = qk == 256 ? 64 : 128;
    g.ck = ck;
    const int64_t seg = ck / qk * bb;
    const int64_t fixed = g.bn * (kStepK + 8) * 2 + kMoeGemmTileRows * (kStepK + 8) * 2 + kMoeGemmTileRows * 4;
    for (int64_t cw = 16; cw >= 1; cw /= 2) {
      if (row_bytes % cw != 0) continue;
      const int64_t low = seg & -seg, gcd = std::min(low, cw);
      const int64_t maxp = (seg + cw - gcd + cw - 1) / cw;
      const int64_t segp = Align(maxp * cw, 16);
      const int64_t stages = std::min(kMaxStages, (kStaticSmem - fixed) / (g.bn * segp));
      if (stages < 2) continue;
      // The most chunks in flight (up to 2), then the widest pieces, then the most stages.
      auto key = [](const RingGeometry& r) { return std::make_tuple(std::min<int64_t>(r.stages, 3), r.cw, r.stages); };
      RingGeometry c = g;
      c.cw = cw;
      c.stages = stages;
      c.smem = fixed + stages * g.bn * segp;
      if (!best || key(c) > key(*best)) best = c;
    }
    if (best) return best;
  }
  return best;
}

}  // namespace

bool MoeGemmReads(ir::DType w) {
  return w == ir::DType::kF32 || w == ir::DType::kF16 || w == ir::DType::kBF16 || HasGpuDequantizer(w);
}

int64_t MoeGemmMaxTiles(int64_t E, int64_t max_slots) {
  return (max_slots + kMoeGemmTileRows - 1) / kMoeGemmTileRows + std::min(E, max_slots);
}

MoeSortScratchLayout MoeSortLayout(int64_t E, int64_t max_slots) {
  MoeSortScratchLayout l;
  l.header = 0;
  l.offsets = 16;
  l.tiles = Align(l.offsets + (E + 1) * 4, 16);
  l.order = l.tiles + MoeGemmMaxTiles(E, max_slots) * 16;
  l.bytes = Align(l.order + max_slots * 4, 256);
  return l;
}

absl::StatusOr<Launch> MoeSortLaunch(const Target&, int64_t E, int64_t max_slots) {
  if (E < 1 || E > kMaxExperts)
    return absl::InvalidArgumentError(absl::StrCat("moe_sort: E = ", E, " not in [1, 1024]"));
  if (max_slots < 0 || max_slots > std::numeric_limits<int32_t>::max())
    return absl::InvalidArgumentError(absl::StrCat("moe_sort: max_slots = ", max_slots, " out of range"));
  const int64_t warps = std::min<int64_t>(32, kSortCountInts / E);
  Launch l;
  l.kernel.module.file = kFile;
  l.kernel.module.defines = MakeDefines({Def("MS_E", E), Def("MS_WARPS", warps)});
  l.kernel.entry = "moe_sort";
  l.grid = 1;
  l.block = static_cast<uint32_t>(warps * 32);
  return l;
}

absl::StatusOr<Launch> MoeGemmLaunch(const Target&, ir::DType w, int64_t K, int64_t N, int64_t E, int64_t max_slots,
                                     bool swiglu, bool grouped) {
  const ir::DTypeInfo& info = ir::InfoOf(w);
  auto error = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("moe_gemm (", ir::DTypeName(w), ", K = ", K, ", N = ", N,
                                                   ", E = ", E, ", max_slots = ", max_slots, "): ", why));
  };
  if (!MoeGemmReads(w)) return error("MoeGemm.cu does not read this storage");
  if (K < 32 || K % 32 != 0 || K % info.block_elems != 0)
    return error(absl::StrCat("K must be a multiple of 32 and of the block (", info.block_elems, ")"));
  if (N < 1 || N > std::numeric_limits<int32_t>::max()) return error("N out of range");
  if (grouped && (E < 1 || E > kMaxExperts)) return error("E not in [1, 1024]");
  if (max_slots < 0 || max_slots > std::numeric_limits<int32_t>::max()) return error("max_slots out of range");
  const std::optional<RingGeometry> g = Geometry(info, K);
  if (!g) return error("no weight ring fits the static shared memory");
  const int64_t cols = swiglu ? g->bn / 2 : g->bn;
  const int64_t m_tiles =
      grouped ? MoeGemmMaxTiles(E, max_slots) : (max_slots + kMoeGemmTileRows - 1) / kMoeGemmTileRows;
  const int64_t grid = std::max<int64_t>(1, m_tiles * ((N + cols - 1) / cols));
  if (grid > std::numeric_limits<int32_t>::max()) return error("grid too large");
  Launch l;
  l.kernel.module.file = kFile;
  l.kernel.module.defines =
      MakeDefines({Def("MG_TYPE", info.ggml_id), Def("MG_SWIGLU", swiglu ? 1 : 0), Def("MG_BN", g->bn),
                   Def("MG_CK", g->ck), Def("MG_CW", g->cw), Def("MG_ST", g->stages)});
  l.kernel.entry = "moe_gemm";
  l.grid = static_cast<uint32_t>(grid);
  l.block = kThreads;
  return l;
}

void BindMoeSort(DeviceWork& work, uint32_t launch, uint64_t ids, int64_t n_slots, int64_t E, int64_t max_slots,
                 uint64_t scratch, int64_t first_expert) {
  const MoeSortScratchLayout l = MoeSortLayout(E, max_slots);
  MoeSortParams p;
  p.ids = ids;
  p.header = scratch + l.header;
  p.offsets = scratch + l.offsets;
  p.tiles = scratch + l.tiles;
  p.order = scratch + l.order;
  p.n_slots = static_cast<int>(std::min(n_slots, max_slots));
  p.first_expert = static_cast<int>(first_expert);
  work.Kernel(launch, p);
}

void BindMoeGemm(DeviceWork& work, uint32_t launch, const MoeGemmArgs& a) {
  MoeGemmParams p;
  p.a = a.a;
  p.w0 = a.w0;
  p.w1 = a.w1;
  p.y = a.y;
  if (a.sort_scratch != 0) {
    const MoeSortScratchLayout l = MoeSortLayout(a.E, a.max_slots);
    p.header = a.sort_scratch + l.header;
    p.tiles = a.sort_scratch + l.tiles;
    p.order = a.sort_scratch + l.order;
  }
  p.a_row_div = std::max<int64_t>(1, a.a_row_div);
  p.expert_bytes = a.expert_bytes;
  p.row_bytes = a.row_bytes;
  p.n_slots = a.n_slots;
  p.N = a.N;
  p.K = a.K;
  work.Kernel(launch, p);
  const int64_t matrices = a.w1 != 0 ? 2 : 1;
  const int64_t experts = a.sort_scratch != 0 ? std::min(a.E, a.n_slots) : 1;
  work.Count(2.0 * static_cast<double>(a.n_slots) * static_cast<double>(a.N) * static_cast<double>(a.K) * matrices,
             static_cast<double>(experts) * static_cast<double>(a.N * a.row_bytes) * matrices);
}

}  // namespace memra::kernels::cuda
