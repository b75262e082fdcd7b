#include "tools/Options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace memra::tools {

int64_t HardwareThreads() { return std::max<int64_t>(1, std::thread::hardware_concurrency()); }

std::vector<NumericOptionInfo>& NumericOptions() {
  static auto* options = new std::vector<NumericOptionInfo>();
  return *options;
}

void RegisterNumericOption(const cl::Option& opt, const char* kind, std::function<bool()> valid) {
  for (const cl::SubCommand* sub : opt.Subs)
    NumericOptions().push_back({std::string(sub->getName()), std::string(opt.ArgStr), kind, valid});
}

std::string RangeText(int64_t lo, int64_t hi) {
  if (hi == std::numeric_limits<int64_t>::max()) return absl::StrCat(">= ", lo);
  return absl::StrCat(lo, " to ", hi);
}

std::string RangeText(double lo, double hi, bool lo_open) {
  return absl::StrFormat("%s %g to %g", lo_open ? "above" : "from", lo, hi);
}

std::string HelpLine(const char* what, const std::string& def, const std::string& limits) {
  return absl::StrCat(what, " (default: ", def, "; ", limits, ")");
}

std::string CheckInt(llvm::StringRef arg, IntRange range, int64_t& out) {
  const std::string text = arg.str();
  const std::string limits = RangeText(range.lo, range.hi);
  // SimpleAtoi allows surrounding whitespace; a flag's value does not (as CheckFloat).
  const bool padded = !text.empty() && (absl::ascii_isspace(text.front()) || absl::ascii_isspace(text.back()));
  if (padded || !absl::SimpleAtoi(text, &out)) {
    // A well-formed integer too large for 64 bits is out of range, anything else not a number.
    absl::string_view digits = absl::StripAsciiWhitespace(text);
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.remove_prefix(1);
    const bool integral = !padded && !digits.empty() && std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit);
    return absl::StrCat("'", text, integral ? "' is out of range: expected " : "' is not an integer: expected ",
                        limits);
  }
  if (out < range.lo || out > range.hi) return absl::StrCat(out, " is out of range: expected ", limits);
  return "";
}

std::string CheckFloat(llvm::StringRef arg, FloatRange range, float& out) {
  const std::string text = arg.str();
  const std::string limits = RangeText(range.lo, range.hi, range.lo_open);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || absl::ascii_isspace(text[0]))
    return absl::StrCat("'", text, "' is not a number: expected ", limits);
  if (!std::isfinite(v) || errno == ERANGE)
    return absl::StrCat("'", text, "' is not a finite number: expected ", limits);
  if (v < range.lo || v > range.hi || (range.lo_open && v == range.lo))
    return absl::StrCat(text, " is out of range: expected ", limits);
  // The value is kept as a float: one that rounds onto an open bound (1e-50 -> 0) is refused too.
  const float f = static_cast<float>(v);
  if (f < range.lo || f > range.hi || (range.lo_open && f == range.lo))
    return absl::StrCat(text, " is out of range as a 32-bit float (", f, "): expected ", limits);
  out = f;
  return "";
}

std::string CheckIntList(llvm::StringRef arg, IntRange range) {
  if (arg.empty()) return absl::StrCat("empty list: expected integers, each ", RangeText(range.lo, range.hi));
  for (absl::string_view part : absl::StrSplit(absl::string_view(arg.data(), arg.size()), ',')) {
    int64_t v = 0;
    if (std::string e = CheckInt(llvm::StringRef(part.data(), part.size()), range, v); !e.empty()) return e;
  }
  return "";
}

std::vector<int64_t> SplitIntList(const std::string& validated) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(validated, ',', absl::SkipEmpty())) {
    int64_t v = 0;
    if (absl::SimpleAtoi(part, &v)) out.push_back(v);
  }
  return out;
}

std::string CheckChoice(llvm::StringRef arg, const std::vector<std::string>& choices) {
  for (const std::string& c : choices)
    if (arg == c) return "";
  return absl::StrCat("'", arg.str(), "' is not one of ", absl::StrJoin(choices, ", "));
}

std::string WeightsForBackend(const std::string& value, absl::string_view backend, std::string& error) {
  const bool cuda = backend == "cuda";
  if (value.empty()) return cuda ? "blocks" : "per-row";
  const bool gpu_word = value == "blocks" || value == "bf16";
  if (gpu_word == cuda) return value;
  error = absl::StrCat("--weights ", value, " applies to the ", cuda ? "cpu" : "cuda", " backend; with --backend ",
                       backend, " use ", cuda ? "blocks or bf16" : "per-row or dequant");
  return "";
}

ModelArgument::ModelArgument(cl::SubCommand& sub, const char* what)
    : positional_(cl::Positional, cl::desc(what), cl::init(""), cl::sub(sub)),
      flag_("model", cl::desc("The model, instead of the positional argument (llama.cpp's -m)"), cl::init(""),
            cl::value_desc("path"), cl::sub(sub)),
      flag_short_("m", cl::desc("Alias for --model"), cl::NotHidden, cl::aliasopt(flag_)) {}

CacheTypeOptions::CacheTypeOptions(cl::SubCommand& sub)
    : k_("cache-type-k", {"f32", "f16", "bf16", "q8_0"},
         "KV cache type for K: f16 / bf16 halve the cache's memory and the bytes a long-context decode streams, "
         "q8_0 (blocks of 32 int8 and an f16 scale, as llama.cpp's) takes 8.5 bits an element",
         cl::init("f32"), cl::sub(sub)),
      v_("cache-type-v", {"f32", "f16", "bf16", "q8_0"}, "KV cache type for V (as --cache-type-k)", cl::init("f32"),
         cl::sub(sub)),
      k_short_("ctk", cl::desc("Alias for --cache-type-k"), cl::NotHidden, cl::aliasopt(k_)),
      v_short_("ctv", cl::desc("Alias for --cache-type-v"), cl::NotHidden, cl::aliasopt(v_)) {}

MemoryBudgetOptions::MemoryBudgetOptions(cl::SubCommand& sub)
    : host_("max-host-memory", {0, int64_t{1} << 30},
            "MiB of host memory the cpu executor's KV cache and state may take, checked before allocating; 0 = what "
            "the machine has available",
            cl::init(0), cl::sub(sub)),
      device_("max-device-memory", {0, int64_t{1} << 30},
              "MiB of device memory the cuda executor may take (weights, KV cache, state, workspace), checked before "
              "uploading; 0 = what the GPU has free",
              cl::init(0), cl::sub(sub)) {}

frontends::KvCacheTypes CacheTypeOptions::Types() const {
  auto type = [](const std::string& w) {
    return w == "f16"    ? ir::DType::kF16
           : w == "bf16" ? ir::DType::kBF16
           : w == "q8_0" ? ir::DType::kQ8_0
                         : ir::DType::kF32;
  };
  return {type(k_.getValue()), type(v_.getValue())};
}

bool ModelArgument::Resolve(std::string& path, std::string& error) const {
  if (!positional_.empty() && !flag_.empty() && positional_ != flag_) {
    error = absl::StrCat("two models given: '", positional_.getValue(), "' and -m '", flag_.getValue(), "'");
    return false;
  }
  path = positional_.empty() ? flag_.getValue() : positional_.getValue();
  if (path.empty()) {
    error = "no model: give it as the first argument or with -m PATH";
    return false;
  }
  return true;
}

absl::StatusOr<runtime::Backend> BackendFromFlag(const std::string& value) {
  if (value.empty()) return runtime::DefaultBackend();
  auto b = runtime::ParseBackend(value);
  if (!b.ok()) return b.status();
  if (*b == runtime::Backend::kCuda)
    if (absl::Status st = runtime::CudaAvailable(); !st.ok())
      return absl::FailedPreconditionError(
          absl::StrCat("--backend cuda: no usable CUDA GPU here (", st.message(), "); use --backend cpu"));
  return *b;
}

}  // namespace memra::tools
