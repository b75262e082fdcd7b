// Host side of kernels/cuda/MoeGemm.cu: which storages it reads, its launches, the sort's
// scratch layout and the parameter binding (MoeGemm.h).
#include "kernels/cuda/MoeGemm.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/MoeGemmParams.h"
#include "kernels/cuda/WeightLayout.h"

namespace memra::kernels::cuda {
namespace {

constexpr const char* kFile = "MoeGemm.cu";
constexpr int64_t kBlockCols = 128;  // MoeGemmTile.cuh MG_BN: weight rows per block
constexpr uint32_t kThreads = 256;   // MG_THREADS
constexpr int64_t kMaxExperts = 1024;
constexpr int64_t kSortCountInts = 8192;  // moe_sort's per-warp count table (32 KiB)

int64_t Align(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

// MoeGemm.cu's MG_BK. 32: with 64 the two buffers need 54 KiB of shared memory, past the 48 KiB a
// launch gets without the opt-in attribute (the executor does not set it).
int64_t StepK(int64_t) { return 32; }

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
  const int64_t cols = swiglu ? kBlockCols / 2 : kBlockCols;
  const int64_t m_tiles =
      grouped ? MoeGemmMaxTiles(E, max_slots) : (max_slots + kMoeGemmTileRows - 1) / kMoeGemmTileRows;
  const int64_t grid = std::max<int64_t>(1, m_tiles * ((N + cols - 1) / cols));
  if (grid > std::numeric_limits<int32_t>::max()) return error("grid too large");
  Launch l;
  l.kernel.module.file = kFile;
  l.kernel.module.defines =
      MakeDefines({Def("MG_TYPE", info.ggml_id), Def("MG_SWIGLU", swiglu ? 1 : 0), Def("MG_BK", StepK(K))});
  l.kernel.entry = "moe_gemm";
  l.grid = static_cast<uint32_t>(grid);
  l.block = kThreads;
  return l;
}

void BindMoeSort(DeviceWork& work, uint32_t launch, uint64_t ids, int64_t n_slots, int64_t E, int64_t max_slots,
                 uint64_t scratch) {
  const MoeSortScratchLayout l = MoeSortLayout(E, max_slots);
  MoeSortParams p;
  p.ids = ids;
  p.header = scratch + l.header;
  p.offsets = scratch + l.offsets;
  p.tiles = scratch + l.tiles;
  p.order = scratch + l.order;
  p.n_slots = static_cast<int>(std::min(n_slots, max_slots));
  p.unused = 0;
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
