// The validated options layer every `memra` subcommand declares its flags with (on LLVM cl,
// which already parses subcommands, aliases and multi-letter single-dash names such as -ngl and
// -sys). Each flag carries its valid values: a number its range (and whether nan/inf may pass), a
// list its element range, a choice its accepted words. The parser refuses anything else at parse
// time with an error naming the flag and the limit (exit 1), so no command body sees a nonsense
// value, and --help shows every default and range from the same declaration:
//
//   memra::tools::IntOption Ctx("ctx-size", {0, kMaxContext}, "Context length, 0 = the model's",
//                               cl::init(0), cl::sub(kRun));
//   memra::tools::FloatOption Temp("temp", {0, 100}, "Sampling temperature", cl::init(0.8f), cl::sub(kRun));
//   memra::tools::ChoiceOption Out("o", {"md", "json"}, "Output format", cl::init("md"), cl::sub(kBench));
//
// Every numeric option registers itself (NumericOptions()), so a test can fuzz all of them
// (`memra --list-numeric-options`).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "frontends/LowerOptions.h"
#include "llvm/Support/CommandLine.h"
#include "runtime/Executor.h"

namespace memra::tools {

namespace cl = llvm::cl;

// The most context rows a flag accepts (16M tokens: past every model's trained context; what
// memory allows is checked later, before anything is allocated: runtime/StateMemory.h).
inline constexpr int64_t kMaxContext = int64_t{1} << 24;
// The machine's hardware threads (the --threads limit: more only slows the kernels down).
int64_t HardwareThreads();

// One entry per numeric option, for the fuzz test.
struct NumericOptionInfo {
  std::string subcommand;
  std::string name;
  std::string kind;  // "int", "float" or "int-list"
  // Whether the option's current value is one its declaration allows (the command-line fuzzer's
  // check after every accepted command line: defaults included).
  std::function<bool()> valid;
};
std::vector<NumericOptionInfo>& NumericOptions();
void RegisterNumericOption(const cl::Option& opt, const char* kind, std::function<bool()> valid);

// Text shared by the checks.
std::string RangeText(int64_t lo, int64_t hi);
std::string RangeText(double lo, double hi, bool lo_open);
// The help line: "<what> (default: D; limits)".
std::string HelpLine(const char* what, const std::string& def, const std::string& limits);

struct IntRange {
  int64_t lo = 0, hi = std::numeric_limits<int64_t>::max();
};
struct FloatRange {
  double lo = 0, hi = 0;
  bool lo_open = false;  // lo itself excluded (e.g. a penalty that divides)
};

// The checks: each returns "" when `arg` is valid (and sets `out`), else the reason.
std::string CheckInt(llvm::StringRef arg, IntRange range, int64_t& out);
std::string CheckFloat(llvm::StringRef arg, FloatRange range, float& out);
std::string CheckIntList(llvm::StringRef arg, IntRange range);
std::string CheckChoice(llvm::StringRef arg, const std::vector<std::string>& choices);
std::vector<int64_t> SplitIntList(const std::string& validated);

// The options override cl::opt's (private virtual) handleOccurrence: the value is checked where
// LLVM cl parses it, and the error names the flag as the user typed it.
template <typename T>
class IntOption : public cl::opt<T> {
 public:
  template <typename... Mods>
  IntOption(const char* name, IntRange range, const char* what, const Mods&... mods)
      : cl::opt<T>(llvm::StringRef(name), mods...), range_(range) {
    help_ = HelpLine(what, absl::StrCat(static_cast<int64_t>(this->getValue())), RangeText(range.lo, range.hi));
    this->setDescription(help_);
    this->setValueStr("N");
    this->setNumOccurrencesFlag(cl::ZeroOrMore);  // given twice, the last wins (as in llama.cpp)
    RegisterNumericOption(*this, "int", [this] {
      const auto v = static_cast<int64_t>(this->getValue());
      return v >= range_.lo && v <= range_.hi;
    });
  }

 private:
  bool handleOccurrence(unsigned pos, llvm::StringRef name, llvm::StringRef arg) override {
    int64_t v = 0;
    if (std::string e = CheckInt(arg, range_, v); !e.empty()) return this->error(e, name);
    this->setValue(static_cast<T>(v));
    this->setPosition(pos);
    return false;
  }
  IntRange range_;
  std::string help_;
};

class FloatOption : public cl::opt<float> {
 public:
  template <typename... Mods>
  FloatOption(const char* name, FloatRange range, const char* what, const Mods&... mods)
      : cl::opt<float>(llvm::StringRef(name), mods...), range_(range) {
    help_ = HelpLine(what, absl::StrCat(getValue()), RangeText(range.lo, range.hi, range.lo_open));
    setDescription(help_);
    setValueStr("X");
    setNumOccurrencesFlag(cl::ZeroOrMore);
    RegisterNumericOption(*this, "float", [this] {
      const float v = getValue();
      return std::isfinite(v) && v >= range_.lo && v <= range_.hi && !(range_.lo_open && v == range_.lo);
    });
  }

 private:
  bool handleOccurrence(unsigned pos, llvm::StringRef name, llvm::StringRef arg) override {
    float v = 0;
    if (std::string e = CheckFloat(arg, range_, v); !e.empty()) return error(e, name);
    setValue(v);
    setPosition(pos);
    return false;
  }
  FloatRange range_;
  std::string help_;
};

// A comma-separated list of integers, each in range (kept as text; values() splits it).
class IntListOption : public cl::opt<std::string> {
 public:
  template <typename... Mods>
  IntListOption(const char* name, IntRange range, const char* what, const Mods&... mods)
      : cl::opt<std::string>(llvm::StringRef(name), mods...), range_(range) {
    help_ = HelpLine(what, getValue(), absl::StrCat("each ", RangeText(range.lo, range.hi)));
    setDescription(help_);
    setValueStr("N[,N...]");
    setNumOccurrencesFlag(cl::ZeroOrMore);
    // Its default may be a word ("none") that no command line can give.
    RegisterNumericOption(*this, "int-list", [this, def = getValue()] {
      return getValue() == def || CheckIntList(getValue(), range_).empty();
    });
  }
  std::vector<int64_t> values() const { return SplitIntList(getValue()); }

 private:
  bool handleOccurrence(unsigned pos, llvm::StringRef name, llvm::StringRef arg) override {
    if (std::string e = CheckIntList(arg, range_); !e.empty()) return error(e, name);
    setValue(arg.str());
    setPosition(pos);
    return false;
  }
  IntRange range_;
  std::string help_;
};

// One of a fixed set of words (an empty default shows as "auto").
class ChoiceOption : public cl::opt<std::string> {
 public:
  template <typename... Mods>
  ChoiceOption(const char* name, std::initializer_list<const char*> choices, const char* what, const Mods&... mods)
      : cl::opt<std::string>(llvm::StringRef(name), mods...) {
    for (const char* c : choices) choices_.emplace_back(c);
    help_ = HelpLine(what, getValue().empty() ? std::string("auto") : getValue(),
                     absl::StrCat("one of ", absl::StrJoin(choices_, ", ")));
    setDescription(help_);
    value_str_ = absl::StrJoin(choices_, "|");
    setValueStr(value_str_);
    setNumOccurrencesFlag(cl::ZeroOrMore);
  }

 private:
  bool handleOccurrence(unsigned pos, llvm::StringRef name, llvm::StringRef arg) override {
    if (std::string e = CheckChoice(arg, choices_); !e.empty()) return error(e, name);
    setValue(arg.str());
    setPosition(pos);
    return false;
  }
  std::vector<std::string> choices_;
  std::string help_, value_str_;
};

// `--weights` (run, bench, perplexity): how the executor holds the weights, one flag for both
// backends. The CPU's words: per-row (blocks decoded row by row inside each matmul, the default)
// or dequant (every matrix decoded to f32 at load); the GPU's: blocks (block formats stay in their
// GGUF blocks, the default) or bf16 (dequantized to bf16 at upload). A word of the other backend is
// refused, never silently ignored. Declared as
//   memra::tools::ChoiceOption W("weights", {"blocks", "bf16", "per-row", "dequant"}, kWeightsHelp, cl::init(""), ...)
inline constexpr const char* kWeightsHelp =
    "How the weights are held: cuda blocks (block formats stay in their GGUF blocks) or bf16 (dequantized "
    "to bf16 at upload); cpu per-row (decoded inside each matmul) or dequant (f32 at load); auto = blocks on "
    "cuda, per-row on cpu";
// `--decode-class` (serve, bench --batch, run --prompts-file): the batched engine's numeric class
// (kernels/cuda/DecodeClass.h). Declared as
//   memra::tools::ChoiceOption D("decode-class", {"bucket", "exact"}, kDecodeClassHelp, cl::init("bucket"), ...)
inline constexpr const char* kDecodeClassHelp =
    "Numeric class of the batched engine's rows on cuda: bucket (products follow each step's row count: "
    "fastest; a greedy reply may differ in the last bits under load) or exact (batch-invariant: a greedy "
    "request gives the same tokens alone and in any mix; decode and prompt steps run apart, decode steps of "
    "at most 8 rows; cpu rows are invariant in either)";
// The word for `backend` ("cpu" / "cuda"): `value` itself, the backend's default when empty, or ""
// with `error` set when the word belongs to the other backend.
std::string WeightsForBackend(const std::string& value, absl::string_view backend, std::string& error);

// The model: the positional argument or -m/--model (llama.cpp's habit), exactly one.
class ModelArgument {
 public:
  ModelArgument(cl::SubCommand& sub, const char* what);
  ModelArgument(const ModelArgument&) = delete;
  ModelArgument& operator=(const ModelArgument&) = delete;
  // The path, or an error naming both ways to give it.
  bool Resolve(std::string& path, std::string& error) const;

 private:
  cl::opt<std::string> positional_;
  cl::opt<std::string> flag_;
  cl::alias flag_short_;
};

// The executor a --backend value names: "" = cuda when a usable GPU is present, cpu otherwise;
// "cuda" without a usable GPU is refused before any model is read, pointing at --backend cpu.
absl::StatusOr<runtime::Backend> BackendFromFlag(const std::string& value);

// --cache-type-k / -ctk and --cache-type-v / -ctv (llama.cpp's flags): the KV cache's element
// types (frontends::KvCacheTypes), each f32 (the default), f16, bf16 or q8_0.
class CacheTypeOptions {
 public:
  explicit CacheTypeOptions(cl::SubCommand& sub);
  CacheTypeOptions(const CacheTypeOptions&) = delete;
  CacheTypeOptions& operator=(const CacheTypeOptions&) = delete;
  frontends::KvCacheTypes Types() const;
  bool any_given() const { return k_.getNumOccurrences() > 0 || v_.getNumOccurrences() > 0; }

 private:
  ChoiceOption k_, v_;
  cl::alias k_short_, v_short_;
};

// --max-host-memory / --max-device-memory (MiB, 0 = what the machine has): budgets for the
// executor's allocations, checked before anything is allocated (runtime/StateMemory.h,
// runtime/DeviceMemory.h), so a server sharing a machine stays within its share.
class MemoryBudgetOptions {
 public:
  explicit MemoryBudgetOptions(cl::SubCommand& sub);
  MemoryBudgetOptions(const MemoryBudgetOptions&) = delete;
  MemoryBudgetOptions& operator=(const MemoryBudgetOptions&) = delete;
  uint64_t host_bytes() const { return static_cast<uint64_t>(host_.getValue()) << 20; }
  uint64_t device_bytes() const { return static_cast<uint64_t>(device_.getValue()) << 20; }
  void Apply(runtime::ExecutorOptions& o) const {
    o.cpu.memory_budget = host_bytes();
    o.cuda.memory_budget = device_bytes();
  }

 private:
  IntOption<int64_t> host_, device_;
};

}  // namespace memra::tools
