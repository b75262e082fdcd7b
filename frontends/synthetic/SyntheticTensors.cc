#include "frontends/synthetic/SyntheticTensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "frontends/gguf/GgufWriter.h"
#include "ir/StatusMacros.h"
#include "ir/support/ProgressBar.h"
#include "kernels/formats/Quant.h"

namespace memra::synthetic {
namespace {

using formats::GgmlType;

// ---- deterministic random numbers: one stream per (seed, tensor, chunk) ----

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t HashName(absl::string_view s) {  // FNV-1a
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) { SplitMix64(state_); }
  double Uniform() { return (SplitMix64(state_) >> 11) * 0x1.0p-53; }  // [0, 1)
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = Uniform(), u2 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2 * M_PI * u2);
  }

 private:
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

constexpr int64_t kChunk = 1 << 16;  // elements per random stream (a multiple of every block size)

// Elements [begin, begin + n) of a tensor.
void FillChunk(const Init& init, uint64_t seed, int64_t begin, float* out, int64_t n) {
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    switch (init.kind) {
      case Init::kNormal:
        out[i] = static_cast<float>(init.a + init.b * rng.Normal());
        break;
      case Init::kUniform:
        out[i] = static_cast<float>(init.a + (init.b - init.a) * rng.Uniform());
        break;
      case Init::kNegExpUniform:
        out[i] = static_cast<float>(-std::exp(init.a + (init.b - init.a) * rng.Uniform()));
        break;
      case Init::kConstant:
        out[i] = static_cast<float>(init.a);
        break;
      case Init::kStep:
        out[i] = static_cast<float>(begin + i < init.split ? init.a : init.b);
        break;
      case Init::kValues:
        out[i] = static_cast<float>(init.values[begin + i]);
        break;
    }
  }
}

absl::Status FillTensor(const TensorSpec& t, uint64_t seed, int threads, int64_t tile_elems, absl::Span<uint8_t> out) {
  int64_t n = 1;
  for (int64_t d : t.ne) n *= d;
  if (t.init.kind == Init::kValues && static_cast<int64_t>(t.init.values.size()) != n)
    return absl::InternalError(
        absl::StrCat("synthetic tensor ", t.name, ": ", t.init.values.size(), " initial values for ", n, " elements"));
  const int64_t all_chunks = (n + kChunk - 1) / kChunk;
  // Tiled: only the first tile_chunks streams are drawn; the chunks after them repeat their bytes
  // (a chunk is whole blocks of every format, so each copy is whole blocks).
  const bool tileable = t.init.kind == Init::kNormal || t.init.kind == Init::kUniform;
  const int64_t tile_chunks = tile_elems > 0 && tileable ? (tile_elems + kChunk - 1) / kChunk : all_chunks;
  const int64_t n_chunks = std::min(all_chunks, tile_chunks);
  const uint64_t base = seed * 0x9E3779B97F4A7C15ull ^ HashName(t.name);
  const auto& traits = formats::TraitsOf(t.type);
  std::vector<absl::Status> status(threads);
  auto work = [&](int tid) {
    std::vector<float> buf(kChunk);
    for (int64_t c = tid; c < n_chunks; c += threads) {
      int64_t begin = c * kChunk, len = std::min(kChunk, n - begin);
      FillChunk(t.init, base + static_cast<uint64_t>(c) * 0xD1B54A32D192ED03ull, begin, buf.data(), len);
      const uint64_t bytes_begin = begin / traits.block_elems * traits.block_bytes;
      const uint64_t bytes_len = len / traits.block_elems * traits.block_bytes;
      absl::Span<uint8_t> dst = out.subspan(bytes_begin, bytes_len);
      absl::Status s;
      if (t.type == GgmlType::kF32) {
        std::memcpy(dst.data(), buf.data(), len * 4);
      } else {
        // Block formats start from the bf16 values, as llama-quantize does from the bf16 file.
        if (formats::TraitsOf(t.type).quantized)
          for (int64_t i = 0; i < len; ++i) buf[i] = formats::Bf16ToFloat(formats::FloatToBf16(buf[i]));
        s = formats::Quantize(t.type, absl::MakeConstSpan(buf.data(), len), dst);
      }
      if (!s.ok()) {
        status[tid] = s;
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work, i);
  work(0);
  for (auto& th : pool) th.join();
  for (const auto& s : status) MEMRA_RETURN_IF_ERROR(s);
  if (n_chunks == all_chunks) return absl::OkStatus();
  const uint64_t chunk_bytes = kChunk / traits.block_elems * traits.block_bytes;
  const uint64_t total = static_cast<uint64_t>(n) / traits.block_elems * traits.block_bytes;
  auto repeat = [&](int tid) {
    for (int64_t c = n_chunks + tid; c < all_chunks; c += threads) {
      const uint64_t at = static_cast<uint64_t>(c) * chunk_bytes;
      std::memcpy(out.data() + at, out.data() + static_cast<uint64_t>(c % n_chunks) * chunk_bytes,
                  std::min(chunk_bytes, total - at));
    }
  };
  pool.clear();
  for (int i = 1; i < threads; ++i) pool.emplace_back(repeat, i);
  repeat(0);
  for (auto& th : pool) th.join();
  return absl::OkStatus();
}

}  // namespace

TensorSpec Matrix(std::string name, int64_t in, int64_t out, GgmlType type, double gain) {
  return TensorSpec{std::move(name), {in, out}, type, {Init::kNormal, 0.0, gain / std::sqrt(double(in))}};
}

TensorSpec NormWeight(std::string name, int64_t n, double lo, double hi) {
  return TensorSpec{std::move(name), {n}, GgmlType::kF32, {Init::kUniform, lo, hi}};
}

absl::Status ApplyMix(const QuantMix& mix, const MixModel& model, std::vector<TensorSpec>& specs) {
  std::vector<MixTensor> in;
  in.reserve(specs.size());
  for (const TensorSpec& t : specs) in.push_back({t.name, t.ne, t.type});
  MEMRA_ASSIGN_OR_RETURN(std::vector<GgmlType> types, AssignMixTypes(mix, model, in));
  for (size_t i = 0; i < specs.size(); ++i) specs[i].type = types[i];
  return absl::OkStatus();
}

absl::Status CheckQuantizable(const QuantMix& mix, absl::Span<const TensorSpec> specs) {
  for (const TensorSpec& t : specs) {
    if (t.type == GgmlType::kF32 || formats::CanQuantize(t.type)) continue;
    return absl::UnimplementedError(absl::StrCat(
        "weight dtype ", mix.name, " needs ggml type ", formats::GgmlTypeName(t.type), " (", t.name,
        "), and memra has no quantizer for ", formats::GgmlTypeName(t.type), " yet (kernels/formats: CanQuantize)"));
  }
  return absl::OkStatus();
}

std::vector<SyntheticTensorType> TypesOf(absl::Span<const TensorSpec> specs) {
  std::vector<SyntheticTensorType> out;
  out.reserve(specs.size());
  for (const TensorSpec& t : specs) out.push_back({t.name, t.ne, t.type});
  return out;
}

absl::Status BeginSyntheticFile(gguf::GgufWriter& w, const std::string& arch, const std::string& name,
                                const QuantMix& mix, absl::Span<const TensorSpec> specs, const SyntheticOptions& opt,
                                const std::string& path) {
  MEMRA_RETURN_IF_ERROR(CheckQuantizable(mix, specs));
  MEMRA_RETURN_IF_ERROR(gguf::CheckWritableDestination(path));
  using gguf::Value;
  w.Set("general.architecture", Value::String(arch));
  w.Set("general.name", Value::String(name));
  w.Set("general.description",
        Value::String(absl::StrCat("random weights (seed ", opt.seed,
                                   opt.tile_elems > 0 ? absl::StrCat(", each large tensor repeating its first ",
                                                                     opt.tile_elems, " drawn values")
                                                      : std::string(),
                                   "), written by memra gen")));
  w.Set("general.file_type", Value::U32(mix.file_type));  // llama.cpp's LLAMA_FTYPE of the mix
  if (mix.base_type != GgmlType::kF32) w.Set("general.quantization_version", Value::U32(2));
  return absl::OkStatus();
}

absl::StatusOr<SyntheticStats> WriteSynthetic(gguf::GgufWriter& w, absl::Span<const TensorSpec> specs,
                                              const SyntheticOptions& opt, const std::string& path) {
  const int threads = opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
  SyntheticStats stats;
  for (const TensorSpec& t : specs) {
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    stats.n_params += n;
    ++stats.n_tensors;
    auto spec = std::make_shared<TensorSpec>(t);
    const uint64_t seed = opt.seed;
    const int64_t tile = opt.tile_elems;
    MEMRA_RETURN_IF_ERROR(w.AddTensor(t.name, t.type, t.ne, [spec, seed, threads, tile](absl::Span<uint8_t> out) {
      return FillTensor(*spec, seed, threads, tile, out);
    }));
  }
  stats.data_bytes = w.TotalDataBytes();
  std::unique_ptr<ProgressBar> bar;
  if (opt.progress) bar = std::make_unique<ProgressBar>(absl::StrCat("writing ", path), stats.data_bytes);
  MEMRA_RETURN_IF_ERROR(w.Write(path, [&](uint64_t done, uint64_t) {
    if (bar) bar->Update(done);
  }));
  if (bar) bar->Finish();
  return stats;
}

// GPT-2's reversible byte -> printable code point mapping used by byte-level BPE vocabularies.
std::string ByteLevelToken(int byte) {
  std::vector<int> direct;
  for (int b = 33; b <= 126; ++b) direct.push_back(b);
  for (int b = 161; b <= 172; ++b) direct.push_back(b);
  for (int b = 174; b <= 255; ++b) direct.push_back(b);
  int cp = -1, extra = 0;
  for (int b = 0; b < 256; ++b) {
    bool is_direct = std::find(direct.begin(), direct.end(), b) != direct.end();
    if (b == byte) {
      cp = is_direct ? b : 256 + extra;
      break;
    }
    if (!is_direct) ++extra;
  }
  std::string out;
  if (cp < 0x80)
    out.push_back(static_cast<char>(cp));
  else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 63)));
  }
  return out;
}

}  // namespace memra::synthetic
