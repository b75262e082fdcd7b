#include "runtime/plan/Plan.h"
#include "kernels/cuda/GpuOpRegistry.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/StatusMacros.h"
#include "ir/Verifier.h"
#include "ir/support/AtomicFile.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/xxhash.h"
#include "passes/MemoryPlan.h"
#include "runtime/plan/KernelTable.h"

namespace memra::runtime {
namespace {

constexpr absl::string_view kMagic = "MEMRAPLAN";

std::string Hex(llvm::ArrayRef<uint8_t> bytes) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s.push_back(d[b >> 4]);
    s.push_back(d[b & 15]);
  }
  return s;
}

absl::Status Corrupt(absl::string_view source, absl::string_view msg) {
  return absl::DataLossError(absl::StrCat(source, ": not a valid memra plan: ", msg));
}

// Section writer: "[name] k=v ... bytes=N\n" + payload + "\n".
void Section(std::string& out, absl::string_view name, absl::string_view attrs, absl::string_view payload) {
  absl::StrAppend(&out, "[", name, "]", attrs.empty() ? "" : " ", attrs, " bytes=", payload.size(), "\n", payload,
                  "\n");
}

// Reads sections in order.
class SectionReader {
 public:
  SectionReader(absl::string_view bytes, absl::string_view source) : s_(bytes), source_(source) {}

  // The next section: name, attributes (k=v), payload.
  struct Sec {
    std::string name;
    std::vector<std::pair<std::string, std::string>> attrs;
    absl::string_view payload;
    std::string Attr(absl::string_view k) const {
      for (const auto& [key, v] : attrs)
        if (key == k) return v;
      return "";
    }
  };
  absl::StatusOr<Sec> Next() {
    size_t eol = s_.find('\n', pos_);
    if (eol == absl::string_view::npos) return Corrupt(source_, absl::StrCat("truncated at byte ", pos_));
    absl::string_view line = s_.substr(pos_, eol - pos_);
    Sec sec;
    if (!absl::ConsumePrefix(&line, "[")) return Corrupt(source_, absl::StrCat("expected a section at byte ", pos_));
    size_t close = line.find(']');
    if (close == absl::string_view::npos) return Corrupt(source_, "unterminated section name");
    sec.name = std::string(line.substr(0, close));
    line.remove_prefix(close + 1);
    for (absl::string_view kv : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      sec.attrs.push_back(p);
    }
    pos_ = eol + 1;
    if (sec.name == "end") return sec;
    uint64_t n = 0;
    if (!absl::SimpleAtoi(sec.Attr("bytes"), &n))
      return Corrupt(source_, absl::StrCat("section [", sec.name, "] has no byte count"));
    if (n > s_.size() - pos_ || s_.size() - pos_ - n < 1)
      return Corrupt(source_, absl::StrCat("section [", sec.name, "] is truncated (", n, " bytes announced, ",
                                           s_.size() - pos_, " left)"));
    sec.payload = s_.substr(pos_, n);
    pos_ += n;
    if (s_[pos_] != '\n') return Corrupt(source_, absl::StrCat("section [", sec.name, "] does not end with a newline"));
    ++pos_;
    return sec;
  }

  bool at_end() const { return pos_ >= s_.size(); }

  // "MEMRAPLAN <version>" on the first line.
  absl::Status ReadMagic(int* version) {
    size_t eol = s_.find('\n');
    if (eol == absl::string_view::npos) return Corrupt(source_, "no magic line");
    absl::string_view line = s_.substr(0, eol);
    if (!absl::ConsumePrefix(&line, kMagic) || !absl::ConsumePrefix(&line, " ") || !absl::SimpleAtoi(line, version))
      return Corrupt(source_, absl::StrCat("the file does not start with \"", kMagic, " <version>\""));
    pos_ = eol + 1;
    return absl::OkStatus();
  }

 private:
  absl::string_view s_;
  absl::string_view source_;
  size_t pos_ = 0;
};

std::string Quote(absl::string_view s) { return absl::StrCat("\"", absl::CEscape(s), "\""); }

absl::StatusOr<std::string> Unquote(absl::string_view s) {
  if (s.size() < 2 || s.front() != '"' || s.back() != '"')
    return absl::InvalidArgumentError("expected a quoted string");
  std::string out;
  std::string err;
  if (!absl::CUnescape(s.substr(1, s.size() - 2), &out, &err)) return absl::InvalidArgumentError(err);
  return out;
}

std::string LayoutText(const std::vector<PlanFunction>& fns) {
  std::string out;
  for (const PlanFunction& f : fns) {
    absl::StrAppend(&out, "function ", Quote(f.name), " bucket=", f.bucket, " arena_bytes=", f.arena_bytes,
                    " naive_bytes=", f.naive_bytes, " align=", f.alignment, "\n");
    for (const PlanBuffer& b : f.buffers) {
      if (b.alias_of.empty())
        absl::StrAppend(&out, "  buffer ", Quote(b.value), " offset=", b.offset, " bytes=", b.bytes, "\n");
      else
        absl::StrAppend(&out, "  alias ", Quote(b.value), " offset=", b.offset, " of=", Quote(b.alias_of), "\n");
    }
    for (const PlanSegment& s : f.segments)
      absl::StrAppend(&out, "  segment capturable=", s.capturable ? 1 : 0, " ops=", s.ops,
                      " kv_rung=", s.kv_rung ? 1 : 0, " reason=", Quote(s.reason), "\n");
  }
  return out;
}

// key=value tokens of a layout line (values may be quoted strings with spaces).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Tokens(absl::string_view line) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i == line.size()) break;
    size_t start = i;
    std::string key;
    if (line[i] != '"') {
      while (i < line.size() && line[i] != ' ' && line[i] != '=') ++i;
      key = std::string(line.substr(start, i - start));
      if (i == line.size() || line[i] != '=') {
        out.emplace_back("", key);  // a bare word
        continue;
      }
      ++i;
    }
    std::string value;
    if (i < line.size() && line[i] == '"') {
      size_t vs = i++;
      while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
      if (i >= line.size()) return absl::InvalidArgumentError("unterminated string");
      ++i;
      MEMRA_ASSIGN_OR_RETURN(value, Unquote(line.substr(vs, i - vs)));
    } else {
      size_t vs = i;
      while (i < line.size() && line[i] != ' ') ++i;
      value = std::string(line.substr(vs, i - vs));
    }
    out.emplace_back(key, value);
  }
  return out;
}

absl::StatusOr<std::vector<PlanFunction>> ParseLayout(absl::string_view text, absl::string_view source) {
  std::vector<PlanFunction> fns;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    ++line_no;
    auto bad = [&](absl::string_view msg) {
      return Corrupt(source, absl::StrCat("[layout] line ", line_no, ": ", msg));
    };
    auto toks = Tokens(line);
    if (!toks.ok() || toks->empty()) return bad(toks.ok() ? "empty" : toks.status().message());
    auto get = [&](absl::string_view k) -> std::string {
      for (const auto& [key, v] : *toks)
        if (key == k) return v;
      return "";
    };
    auto num = [&](absl::string_view k, int64_t* v) { return absl::SimpleAtoi(get(k), v); };
    const std::string kind = (*toks)[0].second;
    if (kind == "function") {
      if (toks->size() < 2) return bad("function without a name");
      PlanFunction f;
      f.name = (*toks)[1].second;
      if (!num("bucket", &f.bucket) || !num("arena_bytes", &f.arena_bytes) || !num("naive_bytes", &f.naive_bytes) ||
          !num("align", &f.alignment))
        return bad("function line needs bucket, arena_bytes, naive_bytes, align");
      fns.push_back(std::move(f));
      continue;
    }
    if (fns.empty()) return bad("entry before any function");
    PlanFunction& f = fns.back();
    if (kind == "buffer" || kind == "alias") {
      if (toks->size() < 2) return bad("buffer without a name");
      PlanBuffer b;
      b.value = (*toks)[1].second;
      if (!num("offset", &b.offset)) return bad("buffer needs offset");
      if (kind == "buffer" && !num("bytes", &b.bytes)) return bad("buffer needs bytes");
      if (kind == "alias") b.alias_of = get("of");
      f.buffers.push_back(std::move(b));
    } else if (kind == "segment") {
      PlanSegment s;
      int64_t cap = 0, rung = 0;
      if (!num("capturable", &cap) || !num("ops", &s.ops) || !num("kv_rung", &rung)) return bad("segment fields");
      s.capturable = cap != 0;
      s.kv_rung = rung != 0;
      s.reason = get("reason");
      f.segments.push_back(std::move(s));
    } else {
      return bad(absl::StrCat("unknown entry '", kind, "'"));
    }
  }
  return fns;
}

// xxHash64 as 16 hex digits: each cubin's hash and the whole file's (format 2's last line).
std::string Xxh64Hex(absl::string_view bytes) {
  return absl::StrFormat("%016x", llvm::xxHash64(llvm::StringRef(bytes.data(), bytes.size())));
}

// The kernel table: per kernel a [kernel] section (payload "key = value" lines: name, file,
// constants, sm_90a, source_hash, binaries) followed by its [cubin] arch=... xxh64=... sections.

std::string KernelTableText(const KernelTable& t) {
  std::string out;
  for (const KernelEntry& k : t.kernels) {
    Section(out, "kernel", "",
            absl::StrCat("name = ", Quote(k.name), "\nfile = ", Quote(k.file), "\nconstants = ", Quote(k.constants),
                         "\nsm_90a = ", k.sm_90a ? 1 : 0, "\nsource_hash = ", Quote(k.source_hash),
                         "\nbinaries = ", k.binaries.size(), "\n"));
    for (const KernelBinary& b : k.binaries)
      Section(out, "cubin", absl::StrCat("arch=", b.arch, " xxh64=", Xxh64Hex(b.cubin)), b.cubin);
  }
  return out;
}

absl::StatusOr<KernelTable> ParseKernelTable(absl::string_view text, int version, absl::string_view source) {
  KernelTable t;
  t.version = version;
  if (version != 0 && version != kKernelTableVersion)
    return absl::FailedPreconditionError(absl::StrCat(source, ": kernel table version ", version,
                                                      " is not supported (this memra reads versions 0 and ",
                                                      kKernelTableVersion, "); recompile the plan"));
  SectionReader r(text, source);
  while (!r.at_end()) {
    const std::string after = t.kernels.empty() ? "" : absl::StrCat(" after kernel ", t.kernels.back().name);
    auto sec = r.Next();
    if (!sec.ok()) return Corrupt(source, absl::StrCat("[kernels]", after, ": ", sec.status().message()));
    if (sec->name != "kernel")
      return Corrupt(source, absl::StrCat("[kernels]", after, ": expected [kernel], got [", sec->name, "]"));
    KernelEntry k;
    int64_t n = -1;
    for (absl::string_view line : absl::StrSplit(sec->payload, '\n', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits(" = ", 1));
      if (kv.first == "binaries" || kv.first == "sm_90a") {
        int64_t v = 0;
        if (!absl::SimpleAtoi(kv.second, &v) || v < 0)
          return Corrupt(source, absl::StrCat("[kernel] ", k.name, ": bad ", kv.first));
        if (kv.first == "binaries")
          n = v;
        else
          k.sm_90a = v != 0;
        continue;
      }
      auto v = Unquote(kv.second);
      if (!v.ok()) return Corrupt(source, absl::StrCat("[kernel] ", k.name, " ", kv.first, ": ", v.status().message()));
      if (kv.first == "name")
        k.name = *v;
      else if (kv.first == "file")
        k.file = *v;
      else if (kv.first == "constants")
        k.constants = *v;
      else if (kv.first == "source_hash")
        k.source_hash = *v;
    }
    if (k.name.empty() || n < 0)
      return Corrupt(source, absl::StrCat("[kernels]", after, ": a [kernel] without name or binaries"));
    if (version >= 1 && (k.file.empty() || k.source_hash.empty()))
      return Corrupt(source, absl::StrCat("[kernels]: kernel ", k.name, " lacks its file or source_hash"));
    for (int64_t i = 0; i < n; ++i) {
      auto bin = r.Next();
      if (!bin.ok())
        return Corrupt(source, absl::StrCat("[kernels]: kernel ", k.name, ": cubin ", i + 1, " of ", n, ": ",
                                            bin.status().message()));
      if (bin->name != "cubin")
        return Corrupt(source, absl::StrCat("[kernels]: kernel ", k.name, ": expected [cubin] ", i + 1, " of ", n,
                                            ", got [", bin->name, "]"));
      KernelBinary b{bin->Attr("arch"), std::string(bin->payload)};
      if (b.arch.empty())
        return Corrupt(source, absl::StrCat("[kernels]: kernel ", k.name, ": a [cubin] without arch"));
      if (std::string h = bin->Attr("xxh64"); version >= 1 && h != Xxh64Hex(b.cubin))
        return Corrupt(source, absl::StrCat("[kernels]: kernel ", k.name, ": the ", b.arch, " cubin (", b.cubin.size(),
                                            " bytes) does not match its hash"));
      k.binaries.push_back(std::move(b));
    }
    t.kernels.push_back(std::move(k));
  }
  return t;
}

}  // namespace

namespace {
absl::StatusOr<KernelTable> DefaultKernelTableBuilder(const ir::Module& module, absl::string_view arch) {
  return BuildKernelTable(module, arch);
}
KernelTableBuilder g_kernel_table_builder = nullptr;
}  // namespace

void SetKernelTableBuilder(KernelTableBuilder builder) { g_kernel_table_builder = builder; }
KernelTableBuilder GetKernelTableBuilder() {
  return g_kernel_table_builder != nullptr ? g_kernel_table_builder : &DefaultKernelTableBuilder;
}

const KernelEntry* KernelTable::Find(absl::string_view name) const {
  for (const KernelEntry& k : kernels)
    if (k.name == name) return &k;
  return nullptr;
}

int64_t KernelTable::CubinBytes() const {
  int64_t n = 0;
  for (const KernelEntry& k : kernels)
    for (const KernelBinary& b : k.binaries) n += static_cast<int64_t>(b.cubin.size());
  return n;
}

bool PlanFunction::operator==(const PlanFunction& o) const {
  auto buf_eq = [](const PlanBuffer& a, const PlanBuffer& b) {
    return a.value == b.value && a.offset == b.offset && a.bytes == b.bytes && a.alias_of == b.alias_of;
  };
  auto seg_eq = [](const PlanSegment& a, const PlanSegment& b) {
    return a.capturable == b.capturable && a.ops == b.ops && a.kv_rung == b.kv_rung && a.reason == b.reason;
  };
  return name == o.name && bucket == o.bucket && arena_bytes == o.arena_bytes && naive_bytes == o.naive_bytes &&
         alignment == o.alignment &&
         std::equal(buffers.begin(), buffers.end(), o.buffers.begin(), o.buffers.end(), buf_eq) &&
         std::equal(segments.begin(), segments.end(), o.segments.begin(), o.segments.end(), seg_eq);
}

GgufIdentity IdentifyGguf(const gguf::GgufFile& file) {
  GgufIdentity id;
  id.path = file.path();
  id.size = file.file_size();
  absl::Span<const uint8_t> h = file.header_bytes();
  id.header_sha256 = Hex(llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(h.data(), h.size())));
  return id;
}

std::string GgufIdentityDiff(const GgufIdentity& plan, const GgufIdentity& file) {
  std::vector<std::string> diffs;
  if (plan.size != file.size)
    diffs.push_back(absl::StrCat("size ", plan.size, " bytes in the plan, ", file.size, " in the file"));
  if (plan.header_sha256 != file.header_sha256)
    diffs.push_back(absl::StrCat("header+tensor-table SHA-256 ", plan.header_sha256.substr(0, 16), "... in the plan, ",
                                 file.header_sha256.substr(0, 16), "... in the file"));
  return absl::StrJoin(diffs, "; ");
}

absl::StatusOr<std::vector<PlanFunction>> DescribeFunctions(const ir::Module& module) {
  std::vector<PlanFunction> out;
  for (const auto& f : module.functions()) {
    PlanFunction pf;
    pf.name = f->name();
    pf.bucket = f->attrs().I64Or("bucket", 0);
    MEMRA_ASSIGN_OR_RETURN(std::optional<passes::ArenaPlan> arena, passes::ReadArenaPlan(*f));
    if (arena) {
      MEMRA_RETURN_IF_ERROR(passes::CheckArenaPlan(*arena));
      pf.arena_bytes = arena->arena_bytes;
      pf.naive_bytes = f->attrs().I64Or("arena_naive_bytes", 0);
      pf.alignment = arena->alignment;
      for (const passes::ArenaBuffer& b : arena->buffers) {
        PlanBuffer pb;
        // A scratch buffer is named by its op's program-order step.
        pb.value = b.value ? b.value->name() : absl::StrCat("scratch@", b.first);
        pb.offset = b.offset;
        pb.bytes = b.bytes;
        if (b.alias_of) pb.alias_of = b.alias_of->name();
        pf.buffers.push_back(std::move(pb));
      }
    }
    for (const ir::Op& op : *f->body()) {
      if (!op.is(ir::OpKind::kSegment)) continue;
      PlanSegment s;
      s.capturable = op.attrs().I64Or("capturable", 0) != 0;
      s.ops = static_cast<int64_t>(op.body()->size());
      s.kv_rung = op.attrs().I64Or("kv_rung", 0) != 0;
      s.reason = op.attrs().GetString(s.capturable ? "ends" : "reason").value_or("");
      pf.segments.push_back(std::move(s));
    }
    out.push_back(std::move(pf));
  }
  return out;
}

absl::StatusOr<Plan> MakePlan(const ir::Module& module, const gguf::GgufFile& file, absl::string_view arch,
                              absl::string_view pipeline, absl::string_view memra_version) {
  if (!IsValidArch(arch))
    return absl::InvalidArgumentError(absl::StrCat("target arch \"", arch, "\" is not cpu or sm_NN"));
  Plan p;
  p.memra_version = std::string(memra_version);
  p.arch = std::string(arch);
  p.pipeline = std::string(pipeline);
  p.gguf = IdentifyGguf(file);
  // An absolute path, so the plan runs from any directory.
  llvm::SmallString<256> abs(p.gguf.path);
  if (!llvm::sys::fs::make_absolute(abs)) p.gguf.path = std::string(abs.str());
  p.ir_text = ir::ToText(module);
  // Describe the module as it will be read back (the printer's value names).
  MEMRA_ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> reread, ir::ParseModule(p.ir_text));
  MEMRA_ASSIGN_OR_RETURN(p.functions, DescribeFunctions(*reread));
  if (arch != "cpu") {
    MEMRA_ASSIGN_OR_RETURN(std::optional<kernels::cuda::Target> selected, kernels::cuda::ReadSelectionTarget(*reread));
    kernels::cuda::Target t;
    if (selected) {
      t = *selected;
    } else {
      MEMRA_ASSIGN_OR_RETURN(t, kernels::cuda::TargetPreset(arch));
    }
    p.target = t.Serialize();
    MEMRA_ASSIGN_OR_RETURN(std::optional<kernels::cuda::WeightMode> weights,
                           kernels::cuda::ReadSelectionWeights(*reread));
    p.weights = std::string(kernels::cuda::WeightModeName(weights.value_or(kernels::cuda::WeightMode::kBlocks)));
    MEMRA_ASSIGN_OR_RETURN(p.kernels, GetKernelTableBuilder()(*reread, arch));
  }
  return p;
}

std::string SerializePlan(const Plan& plan) {
  std::string out = absl::StrCat(kMagic, " ", plan.format_version, "\n");
  std::string header = absl::StrCat(
      "format_version = ", plan.format_version, "\n", "memra_version = ", Quote(plan.memra_version), "\n",
      "arch = ", Quote(plan.arch), "\n", plan.target.empty() ? "" : absl::StrCat("target = ", Quote(plan.target), "\n"),
      plan.weights.empty() ? "" : absl::StrCat("weights = ", Quote(plan.weights), "\n"),
      "pipeline = ", Quote(plan.pipeline), "\n", "gguf_path = ", Quote(plan.gguf.path), "\n",
      "gguf_size = ", plan.gguf.size, "\n", "gguf_header_sha256 = ", Quote(plan.gguf.header_sha256), "\n");
  Section(out, "header", "", header);
  Section(out, "ir", "", plan.ir_text);
  Section(out, "layout", "", LayoutText(plan.functions));
  Section(out, "kernels", absl::StrCat("version=", plan.kernels.version), KernelTableText(plan.kernels));
  absl::StrAppend(&out, "[end]\n");
  return plan.format_version >= 2 ? SealPlan(std::move(out)) : out;
}

std::string SealPlan(std::string body) {
  absl::StrAppend(&body, "xxh64 ", Xxh64Hex(body), "\n");
  return body;
}

absl::StatusOr<Plan> ParsePlan(absl::string_view bytes, absl::string_view source) {
  Plan p;
  {
    SectionReader magic(bytes, source);
    MEMRA_RETURN_IF_ERROR(magic.ReadMagic(&p.format_version));
  }
  if (p.format_version > kPlanFormatVersion || p.format_version < 1)
    return absl::FailedPreconditionError(absl::StrCat(source, ": plan format version ", p.format_version,
                                                      " is not supported (this memra reads version ",
                                                      kPlanFormatVersion, "); recompile the plan"));
  if (p.format_version >= 2) {  // the last line: the hash of everything before it
    const size_t last = bytes.size() >= 2 ? bytes.rfind('\n', bytes.size() - 2) : absl::string_view::npos;
    absl::string_view line = last == absl::string_view::npos ? absl::string_view() : bytes.substr(last + 1);
    if (!absl::ConsumePrefix(&line, "xxh64 ") || !absl::ConsumeSuffix(&line, "\n"))
      return Corrupt(source, "no xxh64 line at the end (the file is cut short or was edited)");
    if (line != Xxh64Hex(bytes.substr(0, last + 1)))
      return Corrupt(source,
                     "its xxh64 does not match its bytes: the plan was changed or damaged after it was compiled");
    bytes = bytes.substr(0, last + 1);
  }
  SectionReader r(bytes, source);
  {
    int version = 0;
    MEMRA_RETURN_IF_ERROR(r.ReadMagic(&version));
  }
  bool seen_header = false, seen_ir = false, seen_layout = false;
  while (true) {
    MEMRA_ASSIGN_OR_RETURN(auto sec, r.Next());
    if (sec.name == "end") break;
    if (sec.name == "header") {
      seen_header = true;
      for (absl::string_view line : absl::StrSplit(sec.payload, '\n', absl::SkipEmpty())) {
        std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits(" = ", 1));
        std::string v = kv.second;
        if (!v.empty() && v.front() == '"') {
          auto u = Unquote(v);
          if (!u.ok()) return Corrupt(source, absl::StrCat("[header] ", kv.first, ": ", u.status().message()));
          v = *u;
        }
        if (kv.first == "memra_version")
          p.memra_version = v;
        else if (kv.first == "arch")
          p.arch = v;
        else if (kv.first == "target") {
          if (!kernels::cuda::Target::Parse(v).ok()) return Corrupt(source, "[header] target");
          p.target = v;
        } else if (kv.first == "weights") {
          if (!kernels::cuda::ParseWeightMode(v).ok()) return Corrupt(source, "[header] weights");
          p.weights = v;
        } else if (kv.first == "pipeline")
          p.pipeline = v;
        else if (kv.first == "gguf_path")
          p.gguf.path = v;
        else if (kv.first == "gguf_size" && !absl::SimpleAtoi(v, &p.gguf.size))
          return Corrupt(source, "[header] gguf_size");
        else if (kv.first == "gguf_header_sha256")
          p.gguf.header_sha256 = v;
      }
    } else if (sec.name == "ir") {
      seen_ir = true;
      p.ir_text = std::string(sec.payload);
    } else if (sec.name == "layout") {
      seen_layout = true;
      MEMRA_ASSIGN_OR_RETURN(p.functions, ParseLayout(sec.payload, source));
    } else if (sec.name == "kernels") {
      int v = -1;
      if (!absl::SimpleAtoi(sec.Attr("version"), &v)) return Corrupt(source, "[kernels] has no version");
      MEMRA_ASSIGN_OR_RETURN(p.kernels, ParseKernelTable(sec.payload, v, source));
    }
    // Unknown sections are skipped (room for additions within a format version).
  }
  if (!seen_header || !seen_ir || !seen_layout) return Corrupt(source, "missing [header], [ir] or [layout]");
  if (p.gguf.header_sha256.empty() || p.arch.empty())
    return Corrupt(source, "the header lacks the GGUF identity or arch");
  return p;
}

absl::Status WritePlan(const Plan& plan, const std::string& path) {
  const std::string bytes = SerializePlan(plan);
  MEMRA_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file, AtomicFile::Create(path));
  MEMRA_RETURN_IF_ERROR(file->Write(bytes.data(), bytes.size()));
  return file->Commit();
}

// (stat, not open: opening a FIFO would wait for a writer)
bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

absl::StatusOr<Plan> ReadPlan(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !IsRegularFile(path))
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open the plan ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParsePlan(ss.str(), path);
}

bool IsPlanFile(const std::string& path) {
  if (!IsRegularFile(path)) return false;
  // A file named .plan is read as one, so a damaged or empty plan is called that, not "not a GGUF".
  if (absl::EndsWith(path, ".plan")) return true;
  std::ifstream in(path, std::ios::binary);
  char buf[9] = {};
  in.read(buf, sizeof(buf));
  return in.gcount() == 9 && absl::string_view(buf, 9) == kMagic;
}

absl::Status CheckPlanCompatible(const Plan& plan, const GgufIdentity& file, absl::string_view arch) {
  std::string diff = GgufIdentityDiff(plan.gguf, file);
  if (!diff.empty() && plan.gguf.path == file.path)
    return absl::FailedPreconditionError(
        absl::StrCat("the GGUF ", file.path, " changed since the plan was compiled: ", diff, "; recompile the plan"));
  if (!diff.empty())
    return absl::FailedPreconditionError(absl::StrCat("the plan was compiled for another GGUF (", plan.gguf.path,
                                                      ") than ", file.path, ": ", diff, "; recompile the plan"));
  if (!arch.empty() && arch != plan.arch)
    return absl::FailedPreconditionError(
        absl::StrCat("the plan targets ", plan.arch, " but this run targets ", arch, "; recompile with --arch ", arch));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<kernels::cuda::WeightMode>> PlanWeights(const Plan& plan) {
  if (plan.arch == "cpu") return std::optional<kernels::cuda::WeightMode>();
  if (plan.weights.empty()) return std::optional<kernels::cuda::WeightMode>(kernels::cuda::WeightMode::kBf16);
  MEMRA_ASSIGN_OR_RETURN(kernels::cuda::WeightMode w, kernels::cuda::ParseWeightMode(plan.weights));
  return std::optional<kernels::cuda::WeightMode>(w);
}

absl::Status CheckPlanTarget(const Plan& plan, const kernels::cuda::Target& device) {
  if (plan.target.empty()) return absl::OkStatus();
  MEMRA_ASSIGN_OR_RETURN(kernels::cuda::Target compiled, kernels::cuda::Target::Parse(plan.target));
  const std::vector<std::string> diff = kernels::cuda::SelectionMismatches(compiled, device);
  if (diff.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("the plan's kernels were selected for ", compiled.name,
                                                    " but this GPU is ", device.name, " (", absl::StrJoin(diff, "; "),
                                                    "); recompile the plan for this GPU or run the GGUF"));
}

absl::StatusOr<std::unique_ptr<ir::Module>> LoadPlanModule(const Plan& plan) {
  ir::ParseOptions po;
  po.filename = "<plan IR>";
  MEMRA_ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> m, ir::ParseModule(plan.ir_text, po));
  MEMRA_RETURN_IF_ERROR(ir::VerifyModule(*m));
  MEMRA_ASSIGN_OR_RETURN(std::vector<PlanFunction> fns, DescribeFunctions(*m));
  if (fns.size() != plan.functions.size())
    return absl::DataLossError(
        absl::StrCat("plan: the layout lists ", plan.functions.size(), " functions, the IR has ", fns.size()));
  for (size_t i = 0; i < fns.size(); ++i)
    if (!(fns[i] == plan.functions[i]))
      return absl::DataLossError(absl::StrCat("plan: the layout of @", plan.functions[i].name,
                                              " disagrees with its IR (arena offsets or segments)"));
  if (plan.kernels.version >= 1) MEMRA_RETURN_IF_ERROR(CheckKernelTable(plan.kernels, *m, plan.arch));
  return m;
}

bool IsValidArch(absl::string_view arch) {
  if (arch == "cpu") return true;
  absl::string_view rest = arch;
  if (!absl::ConsumePrefix(&rest, "sm_")) return false;
  absl::ConsumeSuffix(&rest, "a");
  int v = 0;
  return !rest.empty() && absl::SimpleAtoi(rest, &v) && v >= 50;
}

}  // namespace memra::runtime
