// Units of kernels/cuda/Gemv.cu: one token (M = 1; in the exact decode class up to kExactDecodeRows,
// each token's arithmetic that of one: GEMV_T) through 16-bit (or q8) weights, a warp per
// row (decode reads every weight once; cuBLASLt's M = 1 path reached ~55 % of the bandwidth in
// the model). gemv_swiglu fuses matmul_swiglu's gate/up; gemv_group runs a matmul_group of <= 4
// weights of one storage in one launch; gemv is one launch per weight otherwise. f32 weights too
// (the MoE router: f32 in every GGUF, [E, n_embd] per layer per token).
#include <algorithm>

#include "ir/StatusMacros.h"
#include "kernels/cuda/GemvParams.h"
#include "kernels/cuda/GemvQuant.h"
#include "kernels/cuda/GpuOp.h"
#include "kernels/cuda/MoeParams.h"
#include "kernels/cuda/MoeRoute.h"
#include "kernels/cuda/NormParams.h"
#include "kernels/cuda/Q8Companion.h"
#include "kernels/cuda/RowLaunch.h"

namespace memra::kernels::cuda {
namespace {

constexpr int64_t kMaxWarps = 8;  // rows per block

// The weights' GEMV storages when the op is a one-token product every weight can run on; else
// nullopt (M outside what the class takes, K not a multiple of 32, or a weight whose layout has no
// Gemv.cu storage: block formats held as blocks, whose GEMVs are their own units).
// `first`: the first matrix operand (add_rms_norm_matmul's are after a, b and the norm weight).
// M: 1, and in the exact decode class (DecodeClass.h) up to kExactDecodeRows, where a row's product
// must not change kernels with the rows beside it (GEMV_T keeps each token's arithmetic that of one;
// the bucket class keeps cuBLASLt past one token until the two are measured against each other).
// `one_token`: the add_rms_norm prologue's form, M = 1 only.
std::optional<std::vector<int>> GemvStorages(const SelectContext& c, unsigned first = 1, bool one_token = false) {
  const auto& x = c.shapes.in;
  if (x.empty() || x[0].empty() || x[0].back() % 32 != 0) return std::nullopt;
  const int64_t M = Numel(x[0]) / x[0].back();
  const int64_t most = c.options.decode_class == DecodeClass::kExact && !one_token ? kExactDecodeRows : 1;
  if (M < 1 || M > most) return std::nullopt;
  std::vector<int> storage;
  for (unsigned i = first; i < c.op.num_operands(); ++i) {
    const WeightLayout* l = c.shapes.layout(i);
    const int code = l != nullptr ? l->gemv_storage : 0;
    if (code == 0) return std::nullopt;
    storage.push_back(code);
  }
  return storage;
}

// The tokens (rows of x) of the op at these shapes.
int64_t Tokens(const SelectContext& c) { return Numel(c.shapes.in[0]) / c.shapes.in[0].back(); }

bool OneStorage(const std::vector<int>& s) {
  return std::all_of(s.begin(), s.end(), [&](int v) { return v == s[0]; });
}

// A warp per row, up to 8 rows a block; fewer rows per block while that leaves SMs without a block:
// a product of few long rows (the MoE router, 128-288 rows of 2,816-4,096 f32) streams from every
// SM instead of a quarter of them (288 rows in 36 blocks ran at ~430 GB/s on the H200).
// `tokens` > 1: GEMV_T; `rows_per_warp` > 1: GEMV_R (gemv and gemv_splitk only). Modules of their
// own, so one token keeps the modules and geometry of before. A row's arithmetic depends on neither.
Defines WithTokens(Defines d, int64_t tokens, int64_t rows_per_warp) {
  if (tokens > 1) d.push_back(Def("GEMV_T", tokens));
  if (rows_per_warp > 1) d.push_back(Def("GEMV_R", rows_per_warp));
  return d;
}
// gemv / gemv_splitk rows a warp (pair): with several tokens the x loads (GEMV_T x 32 bytes per
// 16-byte weight piece), not the weights, bound a warp of one row, so four rows share each load.
int64_t RowsPerWarpOf(int64_t tokens) { return tokens > 1 ? 4 : 1; }
// One token under select-kernels{gemv-warp-bytes}: the fewest rows (1, 2 or 4) whose weight bytes
// reach `warp_bytes`, so a warp of short rows has more than one row's loads in flight before it
// retires (0: one row).
int64_t RowsPerWarpOf(int64_t tokens, int64_t K, int storage, int warp_bytes) {
  if (tokens > 1) return RowsPerWarpOf(tokens);
  const int64_t row_bytes = K * (storage == 3 ? 1 : storage == 4 ? 4 : 2);
  int64_t R = 1;
  while (R < 4 && R * row_bytes < warp_bytes) R *= 2;
  return R;
}
Launch GemvLaunch(const Target& target, const char* entry, int64_t K, int storage, int64_t rows, int64_t tokens,
                  int64_t rows_per_warp = 1) {
  const int64_t R = rows_per_warp, units = (rows + R - 1) / R;  // a warp's rows
  int64_t warps = kMaxWarps;
  while (warps > 1 && (units + warps - 1) / warps < target.sm_count) warps /= 2;
  Launch l;
  l.kernel.module.file = "Gemv.cu";
  l.kernel.module.defines =
      MakeDefines(WithTokens({Def("GEMV_K", K), Def("GEMV_W", storage), Def("GEMV_WARPS", warps)}, tokens, R));
  l.kernel.entry = entry;
  l.block = static_cast<uint32_t>(warps * 32);
  l.grid = static_cast<uint32_t>((units + warps - 1) / warps);
  return l;
}

// The products with a last-block tail (the router's top-k, the add-norm) split rows up to 4,096
// long, as they were measured.
constexpr int64_t kRowTailSplitKMaxK = 4096;

// gemv_splitk (Gemv.cu: two warps a row, each over half of K) for the products whose warp-per-row
// blocks would not fill two waves (3 blocks of 8 rows an SM): their last partial wave is most of
// their time. Rows of whole 16-byte pieces a lane in two equal halves, K <= max_k
// (select-kernels{gemv-splitk-max-k}, 12,288: the 9B's down product streamed better whole alone,
// session 19, but split in the decode graph, session 39).
std::optional<Launch> SplitKGemvLaunch(const Target& target, int64_t K, int storage, int64_t rows, int64_t tokens,
                                       int64_t max_k) {
  const int64_t per_lane = storage == 4 ? 4 : 8;  // elements a 16-byte piece holds
  const int64_t pieces = K / (32 * per_lane);
  if (storage == 3 || K % (32 * per_lane) != 0 || pieces % 2 != 0 || K > max_k) return std::nullopt;
  if (rows >= 2 * 3 * kMaxWarps * target.sm_count) return std::nullopt;
  Launch l;
  l.kernel.module.file = "Gemv.cu";
  const int64_t R = RowsPerWarpOf(tokens), units = (rows + R - 1) / R;  // a warp pair's rows
  l.kernel.module.defines = MakeDefines(WithTokens(
      {Def("GEMV_K", K), Def("GEMV_W", storage), Def("GEMV_WARPS", kMaxWarps), Def("GEMV_SPLITK", 2)}, tokens, R));
  l.kernel.entry = "gemv_splitk";
  l.block = static_cast<uint32_t>(kMaxWarps * 32);
  l.grid = static_cast<uint32_t>((units + kMaxWarps / 2 - 1) / (kMaxWarps / 2));
  return l;
}

// select-kernels{l2-prefetch-bytes}: the launch asks the L2 for its weights' first bytes before its
// wait (Gemv.cu GEMV_L2_PREFETCH); select-kernels{gemv-evict-first}: its weight loads mark their
// lines first to leave the L2 (GEMV_EVICT_FIRST; the cache policy is sm_80's, every target's).
void AddWeightLoadHints(Launch& l, const SelectContext& c) {
  const int64_t bytes = L2PrefetchBytesFor(c.target, c.options.l2_prefetch_bytes);
  const bool evict_first = c.options.gemv_evict_first;
  if (bytes == 0 && !evict_first) return;
  Defines d = l.kernel.module.defines;
  if (bytes > 0) d.push_back(Def("GEMV_L2_PREFETCH", bytes));
  if (evict_first) d.push_back(Def("GEMV_EVICT_FIRST", 1));
  l.kernel.module.defines = MakeDefines(std::move(d));
}

// A two-row warp (gate and up): 8 pieces of each row in flight before the wait, the registers of
// one 16-piece row.
void TwoRowPrefetch(Launch& l) {
  Defines d = l.kernel.module.defines;
  d.push_back(Def("GEMV_PREFETCH", 8));
  l.kernel.module.defines = MakeDefines(std::move(d));
}

OpSelection GemvSelection(Launch l) {
  OpSelection s;
  s.gemv = true;
  s.launches.push_back(std::move(l));
  return s;
}

// Operand i's matrix, checked against x's K, counted for the profile.
absl::StatusOr<DeviceMatrix> CountedMatrix(const BindContext& c, unsigned i, int64_t K, DeviceWork& w) {
  MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, c.Matrix(i));
  if (m.cols != K) return BindError(c.op(), "K mismatch");
  MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
  const double tokens = static_cast<double>(Numel(x) / std::max<int64_t>(K, 1));
  w.Count(2.0 * tokens * m.rows * m.cols, static_cast<double>(m.bytes));
  return m;
}

GemvWeight WeightOf(const DeviceMatrix& m) {
  GemvWeight g;
  g.w = m.data;
  g.scale = m.scales;
  return g;
}

class GemvSwigluImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "gemv_swiglu"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kMatMulSwiglu; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto storage = GemvStorages(c);
    if (!storage || storage->size() != 2 || !OneStorage(*storage)) return std::optional<OpSelection>();
    Launch l =
        GemvLaunch(c.target, "gemv_swiglu", c.shapes.in[0].back(), (*storage)[0], c.shapes.out[0].back(), Tokens(c));
    TwoRowPrefetch(l);
    AddFlagDefine(l, "GEMV_GELU", GeluGate(c.op));  // GeGLU
    AddGluClampDefine(l, c.op);
    AddWeightLoadHints(l, c);
    return std::optional<OpSelection>(GemvSelection(std::move(l)));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(DeviceMatrix g, CountedMatrix(c, 1, x.back(), w));
    MEMRA_ASSIGN_OR_RETURN(DeviceMatrix u, CountedMatrix(c, 2, x.back(), w));
    GemvSwigluParams p;
    p.gate = WeightOf(g);
    p.up = WeightOf(u);
    p.x = c.In(0);
    p.y = c.Out(0);
    p.n_rows = static_cast<int>(g.rows);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

class GemvGroupImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "gemv_group"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kMatMulGroup; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto storage = GemvStorages(c);
    if (!storage || storage->size() > MEMRA_GEMV_GROUP_MAX || !OneStorage(*storage))
      return std::optional<OpSelection>();
    int64_t rows = 0;
    for (const auto& o : c.shapes.out) rows += o.back();
    // Several tokens: one row a warp (the exact class's modules of before); one token: as many
    // short rows as select-kernels{gemv-warp-bytes} asks.
    const int64_t K = c.shapes.in[0].back(), tokens = Tokens(c);
    const int64_t R = tokens > 1 ? 1 : RowsPerWarpOf(tokens, K, (*storage)[0], c.options.gemv_warp_bytes);
    Launch l = GemvLaunch(c.target, "gemv_group", K, (*storage)[0], rows, tokens, R);
    AddWeightLoadHints(l, c);
    return std::optional<OpSelection>(GemvSelection(std::move(l)));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    GemvGroupParams p{};
    for (unsigned i = 1; i < c.op().num_operands(); ++i) {
      MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, CountedMatrix(c, i, x.back(), w));
      p.w[i - 1] = WeightOf(m);
      p.y[i - 1] = c.Out(i - 1);
      p.n_rows[i - 1] = static_cast<int>(m.rows);
    }
    p.x = c.In(0);
    w.Kernel(0, p);
    return absl::OkStatus();
  }
};

// One launch per weight (a matmul, or a matmul_group of mixed storages or > 4 weights):
// gemv_splitk for few short rows, else gemv.
class GemvImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "gemv"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kMatMul || k == ir::OpKind::kMatMulGroup; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto storage = GemvStorages(c);
    if (!storage) return std::optional<OpSelection>();
    OpSelection s;
    s.gemv = true;
    const int64_t K = c.shapes.in[0].back();
    for (size_t i = 0; i < storage->size(); ++i) {
      const int64_t rows = c.shapes.out[i].back();
      std::optional<Launch> split =
          SplitKGemvLaunch(c.target, K, (*storage)[i], rows, Tokens(c), c.options.gemv_splitk_max_k);
      s.launches.push_back(split ? *split
                                 : GemvLaunch(c.target, "gemv", K, (*storage)[i], rows, Tokens(c),
                                              RowsPerWarpOf(Tokens(c), K, (*storage)[i], c.options.gemv_warp_bytes)));
      AddWeightLoadHints(s.launches.back(), c);
    }
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    for (unsigned i = 1; i < c.op().num_operands(); ++i) {
      MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, CountedMatrix(c, i, x.back(), w));
      GemvParams p;
      p.w = WeightOf(m);
      p.x = c.In(0);
      p.y = c.Out(i - 1);
      p.n_rows = static_cast<int>(m.rows);
      w.Kernel(i - 1, p);
    }
    return absl::OkStatus();
  }
};

// moe_router (fuse-moe-router, one token): the router's product into the step's scratch (the
// logits), then the routing. One launch where gemv_splitk takes the shape (gemv_splitk_route: the
// product's last block routes, with the selection's one ticket word); else gemv, then Moe.cu's
// routing launch.
class MoeRouterImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "moe_router"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kMoeRouter; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const std::vector<int64_t>& x = c.shapes.in[0];
    const WeightLayout* layout = c.shapes.layout(1);
    const int storage = layout != nullptr ? layout->gemv_storage : 0;
    const int64_t K = x.back(), E = c.shapes.in[1][0];
    if (storage == 0 || Numel(x) != K || K % 32 != 0)
      return Unsupported(c.op, "the router product takes one token and an f32, f16 or bf16 weight, K a multiple of 32");
    const bool sigmoid = c.op.attrs().GetString("gate").value_or("softmax") == "sigmoid";
    const bool norm = sigmoid && c.op.attrs().I64Or("norm", 0) != 0;
    const int64_t k = c.op.attrs().I64Or("k", 0);
    MEMRA_ASSIGN_OR_RETURN(Defines route, RouteDefines(c.op, E, k, sigmoid, norm));
    OpSelection s;
    s.gemv = true;
    s.scratch_bytes = E * 4;  // the logits
    if (std::optional<Launch> split = SplitKGemvLaunch(c.target, K, storage, E, 1, kRowTailSplitKMaxK)) {
      Defines d = split->kernel.module.defines;
      d.insert(d.end(), route.begin(), route.end());
      split->kernel.module.defines = MakeDefines(std::move(d));
      split->kernel.entry = "gemv_splitk_route";
      s.launches = {*split};
      s.ticket_words = 1;
    } else {
      MEMRA_ASSIGN_OR_RETURN(Launch r, MoeRouteLaunch(c.op, c.target, E, k, sigmoid, norm, 1));
      s.launches = {GemvLaunch(c.target, "gemv", K, storage, E, 1), r};
    }
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, CountedMatrix(c, 1, x.back(), w));
    if (c.Scratch() == 0 || c.selection().scratch_bytes < m.rows * 4)
      return BindError(c.op(), "moe_router: stale selection (no scratch for the logits)");
    GemvParams g;
    g.w = WeightOf(m);
    g.x = c.In(0);
    g.y = c.Scratch();
    g.n_rows = static_cast<int>(m.rows);
    const uint64_t per_expert = c.op().num_operands() > 2 ? c.In(2) : 0;
    const float scale = RouteScale(c.op(), c.op().attrs().GetString("gate").value_or("softmax") == "sigmoid");
    const std::vector<Launch>& launches = c.selection().launches;
    if (launches.size() == 1) {
      if (launches[0].kernel.entry != "gemv_splitk_route" || c.Tickets() == 0 || c.selection().ticket_words < 1)
        return BindError(c.op(), "moe_router: stale selection (one launch that does not route, or no ticket)");
      GemvRouteParams p;
      p.g = g;
      p.weights = c.Out(0);
      p.ids = c.Out(1);
      p.per_expert = per_expert;
      p.ticket = c.Tickets();
      p.scale = scale;
      p.pad_ = 0;
      w.Kernel(0, p);
      return absl::OkStatus();
    }
    if (launches.size() != 2) return BindError(c.op(), "moe_router: stale selection (launch count)");
    w.Kernel(0, g);
    MoeRouteParams r{};
    r.logits = c.Scratch();
    r.weights = c.Out(0);
    r.ids = c.Out(1);
    r.expert_scale = per_expert;
    r.n_tok = 1;
    r.scale = scale;
    w.Kernel(1, r);
    return absl::OkStatus();
  }
};

// matmul_add_rms_norm (fuse-matmul-add-rmsnorm, one token): the product into the op's sum, then
// add_rms_norm, the norm as the product launch's tail where it can be (its last block adds and
// normalizes, with the selection's one ticket word, as Norm.cu's add_rms_norm does: the same bits
// as the two launches, AddNormTail.cuh): 16-bit and f32 matrices on Gemv.cu (gemv_splitk_add_norm,
// or gemv_add_norm for long rows), matrices in GGUF blocks on GemvQuant.cu (gemv_q_add_norm,
// after gemv_q_quantize_x where x is quantized by a launch of its own). Where the plain GEMV's
// geometry leaves no tail, the product and then Norm.cu's add_rms_norm launch.
class MatMulAddRmsNormImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "matmul_add_rms_norm"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kMatMulAddRmsNorm; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const std::vector<int64_t>& x = c.shapes.in[0];
    const WeightLayout* layout = c.shapes.layout(1);
    const int storage = layout != nullptr ? layout->gemv_storage : 0;
    const int64_t K = x.back(), N = c.shapes.in[1][0];
    if (Numel(x) != K || K % 32 != 0) return Unsupported(c.op, "the product takes one token, K a multiple of 32");
    if (GemvQuantBlocksOnDevice(c.op.operand(1)->dtype(), layout)) {
      MEMRA_ASSIGN_OR_RETURN(std::optional<OpSelection> s, SelectBlocks(c, N));
      if (s) WriteCompanion(c.op, *s);
      return s;
    }
    if (storage == 0)
      return Unsupported(c.op,
                         "the matrix is neither an f32, f16 or bf16 GEMV storage nor GGUF blocks GemvQuant.cu reads");
    OpSelection s;
    s.gemv = true;
    std::optional<Launch> split = SplitKGemvLaunch(c.target, K, storage, N, 1, kRowTailSplitKMaxK);
    Launch product = split ? *split : GemvLaunch(c.target, "gemv", K, storage, N, 1);
    // The tail (AddNormTail.cuh) takes any of the GEMVs' blocks (1 to 8 warps); the plain GEMV's
    // warps return when they have no row, so every warp of its grid must have one (the tail's block
    // barriers).
    const int64_t warps = product.block / 32;
    const bool tail = split.has_value() || N % warps == 0;
    if (tail) {
      Defines d = product.kernel.module.defines;
      d.push_back(Def("GEMV_NORM_COLS", N));
      product.kernel.module.defines = MakeDefines(std::move(d));
      product.kernel.entry = split ? "gemv_splitk_add_norm" : "gemv_add_norm";
      s.launches = {product};
      s.ticket_words = 1;
    } else {
      s.launches = {product, NormRowLaunch("add_rms_norm", 1, N)};
    }
    WriteCompanion(c.op, s);
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    AddNormTailParams tail{};
    tail.b = c.In(2);
    tail.w = c.In(3);
    tail.y = c.Out(1);
    tail.ticket = c.Tickets();
    tail.eps = static_cast<float>(c.op().attrs().F64Or("eps", 0.0));
    MEMRA_ASSIGN_OR_RETURN(auto y, c.Shape(c.op().result(1)));
    MEMRA_RETURN_IF_ERROR(CheckQ8CompanionBinding(c, Numel(y)));
    const std::vector<Launch>& all = c.selection().launches;
    if (!all.empty() && all.back().kernel.entry == "gemv_q_add_norm") {
      if (c.Tickets() == 0 || c.selection().ticket_words < 1)
        return BindError(c.op(), "matmul_add_rms_norm: stale selection (no ticket for the norm's tail)");
      return BindGemvQuant(c, w, &tail);
    }
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, CountedMatrix(c, 1, x.back(), w));
    GemvParams g;
    g.w = WeightOf(m);
    g.x = c.In(0);
    g.y = c.Out(0);  // the product, then the sum in place
    g.n_rows = static_cast<int>(m.rows);
    const std::vector<Launch>& launches = c.selection().launches;
    if (launches.size() == 1) {
      const std::string& entry = launches[0].kernel.entry;
      if ((entry != "gemv_splitk_add_norm" && entry != "gemv_add_norm") || c.Tickets() == 0 ||
          c.selection().ticket_words < 1)
        return BindError(c.op(),
                         "matmul_add_rms_norm: stale selection (one launch without the norm tail, or no ticket)");
      GemvAddNormParams p;
      p.g = g;
      p.norm = tail;
      w.Kernel(0, p);
      return absl::OkStatus();
    }
    if (launches.size() != 2 || launches[1].kernel.entry != "add_rms_norm")
      return BindError(c.op(), "matmul_add_rms_norm: stale selection (launch count)");
    w.Kernel(0, g);
    // add_rms_norm(product, b) in place over the product: a thread reads its columns of both rows
    // before it writes them (Norm.cu).
    NormParams n{};
    n.x = c.Out(0);
    n.z = c.In(2);
    n.w = c.In(3);
    n.sum = c.Out(0);
    n.y = c.Out(1);
    n.n_rows = 1;
    n.eps = tail.eps;
    w.Kernel(1, n);
    return absl::OkStatus();
  }

 private:
  // A companion of the normalized row (select-kernels' pairing, Q8Companion.h): the launch that
  // normalizes writes it (AddNormTail.cuh or Norm.cu), and every launch of that module carries the
  // define (gemv_q_quantize_x shares the product's module). The sum (result 0) has none.
  static void WriteCompanion(const ir::Op& op, OpSelection& s) {
    const std::optional<Q8Companion> q8 = Q8CompanionOf(op);
    if (!q8 || q8->result != 1 || s.launches.empty()) return;
    const std::string norm = s.launches.back().kernel.module.Key();
    for (Launch& l : s.launches)
      if (l.kernel.module.Key() == norm) AddQ8CompanionDefines(*q8, l);
  }

  // GemvQuant.cu's selection for the product (not streamed: the tail needs one launch's blocks),
  // its product launch gemv_q_add_norm (GQ_NORM_COLS; gemv_q_quantize_x before it, the same module,
  // takes the define too).
  static absl::StatusOr<std::optional<OpSelection>> SelectBlocks(const SelectContext& c, int64_t N) {
    GemvQuantOptions options;
    options.stream = 0;
    std::optional<OpSelection> s = SelectGemvQuant(c.op, c.shapes, c.target, options);
    if (!s || s->launches.empty() || s->launches.back().kernel.entry != "gemv_q")
      return Unsupported(c.op, "GemvQuant.cu does not take the product (format, K or shape)");
    const std::string product = s->launches.back().kernel.module.Key();
    for (Launch& l : s->launches) {
      if (l.kernel.module.Key() != product) continue;
      Defines d = l.kernel.module.defines;
      d.push_back(Def("GQ_NORM_COLS", N));
      l.kernel.module.defines = MakeDefines(std::move(d));
    }
    // The tail's static shared memory must fit beside the ring.
    const int64_t smem = GemvQuantSmemBytes(s->launches.back());
    if (smem < 0 || smem > c.target.smem_per_block)
      return Unsupported(c.op, "the norm's tail does not fit beside the product's ring");
    s->launches.back().kernel.entry = "gemv_q_add_norm";
    s->ticket_words = 1;
    return s;
  }
};

// matmul_delta_net_step (fuse-matmul-delta-net-step, one token): gemv_group_delta_step, the four
// input projections a warp a row in key-head order and each value head's step run by the block
// that completes the rows it reads (DeltaNetStepTail.cuh; a ticket word a value head and one a key
// head), one launch where gemv_group and delta_net_step were two. The products go to the step's scratch. A block of 8
// warps holds a head's state in registers up to 64 floats a thread (Dk = Dv = 128); 16 warps where that takes twice the
// threads.
class MatMulDeltaNetStepImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "matmul_delta_net_step"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kMatMulDeltaNetStep; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto& in = c.shapes.in;
    const int64_t K = in[0].back();
    if (Numel(in[0]) != K || K % 32 != 0) return Unsupported(c.op, "the products take one token, K a multiple of 32");
    int storage = 0;
    for (unsigned i = 1; i <= 4; ++i) {
      const WeightLayout* l = c.shapes.layout(i);
      const int code = l != nullptr ? l->gemv_storage : 0;
      if (code == 0 || (storage != 0 && code != storage))
        return Unsupported(c.op, "the four matrices must share one f32, f16 or bf16 GEMV storage");
      storage = code;
    }
    const Geometry g = GeometryOf(c.shapes);
    if (g.dk % 32 != 0 || g.dk > 256) return Unsupported(c.op, "key head dim must be a multiple of 32, <= 256");
    int64_t warps = 0;
    for (int64_t w : {kMaxWarps, 2 * kMaxWarps})
      if (warps == 0 && (g.dv + 4 * w - 1) / (4 * w) * (g.dk / 32) <= 16) warps = w;
    if (warps == 0) return Unsupported(c.op, "a head's state past 64 registers a thread at 512 threads");
    const int64_t unit = 2 * g.dk + (g.hv / g.hk) * (2 * g.dv + 2), rows = g.hk * unit;
    Launch l;
    l.kernel.module.file = "Gemv.cu";
    l.kernel.module.defines =
        MakeDefines({Def("GEMV_K", K), Def("GEMV_W", storage), Def("GEMV_WARPS", warps), Def("DNS_HK", g.hk),
                     Def("DNS_HV", g.hv), Def("DNS_DK", g.dk), Def("DNS_DV", g.dv), Def("CONV_K", g.conv_k)});
    l.kernel.entry = "gemv_group_delta_step";
    l.block = static_cast<uint32_t>(warps * 32);
    l.grid = static_cast<uint32_t>((rows + warps - 1) / warps);
    OpSelection s = GemvSelection(std::move(l));
    s.ticket_words = g.hv + g.hk;  // a value head's rows, then a key head's conv rows
    s.scratch_bytes = ScratchLayout(g).bytes;
    return std::optional<OpSelection>(std::move(s));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    if (c.Tickets() == 0 || c.Scratch() == 0 || c.selection().launches.size() != 1)
      return BindError(c.op(), "matmul_delta_net_step: stale selection (no tickets or no scratch)");
    MEMRA_ASSIGN_OR_RETURN(auto x, c.InShape(0));
    GemvDeltaStepParams p{};
    for (unsigned i = 1; i <= 4; ++i) {
      MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, CountedMatrix(c, i, x.back(), w));
      p.w[i - 1] = WeightOf(m);
    }
    p.x = c.In(0);
    p.ticket = c.Tickets();
    const Scratch at = ScratchLayout(GeometryOf(c.shapes()));
    const uint64_t base = c.Scratch();
    p.step.x = base;
    p.step.z = base + at.z;
    p.step.b = base + at.b;
    p.step.a = base + at.a;
    p.step.conv_w = c.In(5);
    p.step.dt_bias = c.In(6);
    p.step.ssm_a = c.In(7);
    p.step.norm_w = c.In(8);
    p.step.conv_state = c.In(9);
    p.step.delta_state = c.In(10);
    p.step.y = c.Out(0);
    const ir::AttrDict& attrs = c.op().attrs();
    p.step.scale = static_cast<float>(attrs.F64Or("scale", 1.0));
    p.step.qk_eps = static_cast<float>(attrs.F64Or("qk_l2_eps", 0.0));
    p.step.eps = static_cast<float>(attrs.F64Or("eps", 0.0));
    w.Kernel(0, p);
    return absl::OkStatus();
  }

 private:
  struct Geometry {
    int64_t hk, hv, dk, dv, conv_k, channels;
  };
  // Operands: x, w_qkv [C, K], w_z, w_b, w_a, conv_w [C, Kc], dt_bias [Hv], ssm_a, norm_w [Dv],
  // conv_state, delta_state [Hv, Dv, Dk] (the type rules checked C = 2 Hk Dk + Hv Dv).
  static Geometry GeometryOf(const OpShapes& s) {
    Geometry g;
    g.channels = s.in[1][0];
    g.hv = s.in[6][0];
    g.dv = s.in[8][0];
    g.dk = s.in[10][2];
    g.conv_k = s.in[5][1];
    g.hk = (g.channels - g.hv * g.dv) / (2 * g.dk);
    return g;
  }
  // The products in the step's scratch: qkv [C], z [Hv Dv], beta [Hv], alpha [Hv], each 256-aligned.
  struct Scratch {
    uint64_t z, b, a, bytes;
  };
  static Scratch ScratchLayout(const Geometry& g) {
    auto up = [](int64_t bytes) { return static_cast<uint64_t>((bytes + 255) / 256 * 256); };
    Scratch s;
    s.z = up(4 * g.channels);
    s.b = s.z + up(4 * g.hv * g.dv);
    s.a = s.b + up(4 * g.hv);
    s.bytes = s.a + up(4 * g.hv);
    return s;
  }
};

// add_rms_norm_matmul (fuse-add-rmsnorm-matmul, decode): gemv_norm / gemv_group_norm /
// gemv_swiglu_norm, the products of Gemv.cu with the norm as their prologue (every warp sums the
// squares of a + b while its row streams; block 0 writes the sum).
class GemvNormImpl : public GpuOpImpl {
 public:
  absl::string_view name() const override { return "gemv_norm"; }
  bool Implements(ir::OpKind k) const override { return k == ir::OpKind::kAddRmsNormMatMul; }
  absl::StatusOr<std::optional<OpSelection>> Select(const SelectContext& c) const override {
    const auto storage = GemvStorages(c, 3, /*one_token=*/true);
    if (!storage || !OneStorage(*storage) || storage->size() > MEMRA_GEMV_GROUP_MAX)
      return Unsupported(c.op,
                         "the norm prologue needs one Gemv.cu storage for <= 4 matrices and one row of K % 32 == 0, "
                         "outside the exact decode class");
    const int64_t K = c.shapes.in[0].back();
    const bool glu = c.op.attrs().GetString("glu").has_value();
    int64_t rows = 0;
    for (size_t i = 1; i < c.shapes.out.size(); ++i) rows += c.shapes.out[i].back();
    const char* entry = glu ? "gemv_swiglu_norm" : storage->size() == 1 ? "gemv_norm" : "gemv_group_norm";
    Launch l = GemvLaunch(c.target, entry, K, (*storage)[0], rows, 1);
    if (glu) {
      AddFlagDefine(l, "GEMV_GELU", c.op.attrs().GetString("glu").value_or("silu") == "gelu");
      AddGluClampDefine(l, c.op);
      TwoRowPrefetch(l);
    }
    return std::optional<OpSelection>(GemvSelection(std::move(l)));
  }
  absl::Status Bind(const BindContext& c, DeviceWork& w) const override {
    MEMRA_ASSIGN_OR_RETURN(auto a, c.InShape(0));
    const int64_t K = a.back();
    GemvNorm n;
    n.b = c.In(1);
    n.w = c.In(2);
    n.sum = c.Out(0);
    n.eps = static_cast<float>(c.op().attrs().F64Or("eps", 0.0));
    const unsigned matrices = c.op().num_operands() - 3;
    if (c.op().attrs().GetString("glu").has_value()) {
      if (matrices != 2) return BindError(c.op(), "glu takes two matrices");
      MEMRA_ASSIGN_OR_RETURN(DeviceMatrix g, CountedMatrix(c, 3, K, w));
      MEMRA_ASSIGN_OR_RETURN(DeviceMatrix u, CountedMatrix(c, 4, K, w));
      GemvSwigluNormParams p;
      p.g.gate = WeightOf(g);
      p.g.up = WeightOf(u);
      p.g.x = c.In(0);
      p.g.y = c.Out(1);
      p.g.n_rows = static_cast<int>(g.rows);
      p.norm = n;
      w.Kernel(0, p);
    } else if (matrices == 1) {
      MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, CountedMatrix(c, 3, K, w));
      GemvNormParams p;
      p.g.w = WeightOf(m);
      p.g.x = c.In(0);
      p.g.y = c.Out(1);
      p.g.n_rows = static_cast<int>(m.rows);
      p.norm = n;
      w.Kernel(0, p);
    } else {
      GemvGroupNormParams p{};
      for (unsigned i = 0; i < matrices; ++i) {
        MEMRA_ASSIGN_OR_RETURN(DeviceMatrix m, CountedMatrix(c, 3 + i, K, w));
        p.g.w[i] = WeightOf(m);
        p.g.y[i] = c.Out(1 + i);
        p.g.n_rows[i] = static_cast<int>(m.rows);
      }
      p.g.x = c.In(0);
      p.norm = n;
      w.Kernel(0, p);
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<GpuOpImpl> CreateGemvSwiglu() { return std::make_unique<GemvSwigluImpl>(); }
std::unique_ptr<GpuOpImpl> CreateGemvGroup() { return std::make_unique<GemvGroupImpl>(); }
std::unique_ptr<GpuOpImpl> CreateMoeRouter() { return std::make_unique<MoeRouterImpl>(); }
std::unique_ptr<GpuOpImpl> CreateMatMulAddRmsNorm() { return std::make_unique<MatMulAddRmsNormImpl>(); }
std::unique_ptr<GpuOpImpl> CreateMatMulDeltaNetStep() { return std::make_unique<MatMulDeltaNetStepImpl>(); }
std::unique_ptr<GpuOpImpl> CreateGemv() { return std::make_unique<GemvImpl>(); }
std::unique_ptr<GpuOpImpl> CreateGemvNorm() { return std::make_unique<GemvNormImpl>(); }

}  // namespace memra::kernels::cuda
