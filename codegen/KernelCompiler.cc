#include "codegen/KernelCompiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codegen/KernelSources.h"
#include "codegen/Nvrtc.h"
#include "ir/StatusMacros.h"
#include "ir/support/AtomicFile.h"
#include "llvm/Support/xxhash.h"

namespace memra::codegen {

std::string CompileStats::ToString() const {
  return absl::StrFormat(
      "%d kernel modules: %d from the plan, %d compiled (%.2f s of NVRTC), %d from the disk "
      "cache, %d already loaded; %.2f s wall",
      requested, plan_hits, compiled, compile_seconds, disk_hits, memory_hits, wall_seconds);
}

namespace {
// Two independent 64-bit hashes of `blob`, as hex.
std::string Hash128(const std::string& blob) {
  const uint64_t h1 = llvm::xxHash64(llvm::StringRef(blob.data(), blob.size()));
  uint64_t h2 = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : blob) h2 = (h2 ^ ch) * 1099511628211ull;
  return absl::StrFormat("%016x%016x", h1, h2);
}
}  // namespace

absl::StatusOr<std::string> ModuleSourceHash(const ModuleSpec& m) {
  MEMRA_ASSIGN_OR_RETURN(absl::string_view src, KernelSource(m.file));
  std::string blob = absl::StrCat("memra-source-v1\n", m.Key(), "\n", src);
  for (const auto& [n, t] : KernelHeaders()) absl::StrAppend(&blob, "\n#header ", n, "\n", t);
  return Hash128(blob);
}

void KernelCompiler::AddPrecompiled(const std::string& key, CubinBytes cubin) {
  if (!cubin) return;
  std::lock_guard<std::mutex> lock(mu_);
  precompiled_[key] = std::move(cubin);
}

void KernelCompiler::AddPrecompiled(const PrecompiledCubins& cubins) {
  for (const auto& [key, cubin] : cubins) AddPrecompiled(key, cubin);
}

absl::StatusOr<std::unique_ptr<KernelCompiler>> KernelCompiler::Create(const CompileOptions& options) {
  std::unique_ptr<KernelCompiler> c(new KernelCompiler());
  c->options_ = options;
  if (c->options_.cache_dir.empty()) c->options_.cache_dir = DefaultCacheDir();
  MEMRA_ASSIGN_OR_RETURN(c->nvrtc_, Nvrtc::Load(options.nvrtc_library));
  return c;
}

std::string KernelCompiler::DefaultCacheDir() {
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == 0) return "/tmp/memra-cache";
  return absl::StrCat(home, "/.cache/memra");
}

std::string KernelCompiler::nvrtc_version() const { return nvrtc_->VersionString(); }

std::vector<std::string> KernelCompiler::OptionsFor(const ModuleSpec& m) const {
  std::vector<std::string> o = {
      m.sm_90a ? absl::StrCat("-arch=sm_", options_.arch, "a") : absl::StrCat("-arch=sm_", options_.arch), "-std=c++17",
      "-default-device", "-DMEMRA_NVRTC=1"};
  for (const auto& [n, v] : m.defines) o.push_back(absl::StrCat("-D", n, "=", v));
  for (const std::string& e : options_.extra_options) o.push_back(e);
  return o;
}

absl::StatusOr<std::string> KernelCompiler::CacheKey(const ModuleSpec& m) const {
  MEMRA_ASSIGN_OR_RETURN(absl::string_view src, KernelSource(m.file));
  std::string blob = absl::StrCat("memra-cubin-v1\n", nvrtc_->VersionString(), "\nsm_", options_.arch, "\n",
                                  absl::StrJoin(OptionsFor(m), " "), "\n", m.file, "\n", src);
  for (const auto& [n, t] : KernelHeaders()) absl::StrAppend(&blob, "\n#header ", n, "\n", t);
  return Hash128(blob);
}

namespace {
// A cache entry is the cubin, then 8 bytes of magic and its xxHash64 (little-endian): an entry cut
// short (a full disk, a crash in an older version) or changed on disk is a miss, compiled again and
// rewritten, never loaded.
constexpr char kEntryMagic[8] = {'m', 'e', 'm', 'r', 'a', 'c', 'u', '1'};
constexpr size_t kEntryTrailer = sizeof(kEntryMagic) + 8;

uint64_t EntryHash(const std::vector<uint8_t>& cubin) { return llvm::xxHash64(llvm::ArrayRef<uint8_t>(cubin)); }

// The entry's cubin, or false when it is missing or does not check.
bool ReadEntry(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  if (out->size() <= kEntryTrailer) return false;
  const size_t n = out->size() - kEntryTrailer;
  if (std::memcmp(out->data() + n, kEntryMagic, sizeof(kEntryMagic)) != 0) return false;
  uint64_t stored = 0;
  for (int i = 7; i >= 0; --i) stored = (stored << 8) | (*out)[n + sizeof(kEntryMagic) + static_cast<size_t>(i)];
  out->resize(n);
  return EntryHash(*out) == stored;
}

void WriteEntry(const std::string& path, const std::vector<uint8_t>& cubin) {
  uint8_t trailer[kEntryTrailer];
  std::memcpy(trailer, kEntryMagic, sizeof(kEntryMagic));
  const uint64_t h = EntryHash(cubin);
  for (int i = 0; i < 8; ++i)
    trailer[sizeof(kEntryMagic) + static_cast<size_t>(i)] = static_cast<uint8_t>(h >> (8 * i));
  // A temporary renamed into place: concurrent processes never see a partial file, and a full
  // disk leaves no entry (the cache is best effort: the cubin is used either way).
  auto file = AtomicFile::Create(path);
  if (file.ok() && (*file)->Write(cubin.data(), cubin.size()).ok() && (*file)->Write(trailer, sizeof(trailer)).ok())
    (void)(*file)->Commit();
}
}  // namespace

absl::StatusOr<std::shared_ptr<const std::vector<uint8_t>>> KernelCompiler::CompileOne(const ModuleSpec& m,
                                                                                       double* seconds,
                                                                                       bool* disk_hit) {
  *seconds = 0;
  *disk_hit = false;
  MEMRA_ASSIGN_OR_RETURN(std::string key, CacheKey(m));
  const bool use_disk = options_.cache_dir != "-";
  const std::string dir = absl::StrCat(options_.cache_dir, "/nvrtc-", nvrtc_->VersionString(), "-sm_", options_.arch);
  const std::string path = absl::StrCat(dir, "/", key, ".cubin");
  if (use_disk) {
    auto bytes = std::make_shared<std::vector<uint8_t>>();
    if (ReadEntry(path, bytes.get())) {
      *disk_hit = true;
      return std::shared_ptr<const std::vector<uint8_t>>(bytes);
    }
  }
  MEMRA_ASSIGN_OR_RETURN(absl::string_view src, KernelSource(m.file));
  if (options_.fail_compile_at > 0 && ++compiles_started_ == options_.fail_compile_at)
    return absl::InternalError(
        absl::StrCat("NVRTC compile of ", m.Key(), ": an injected fault (compile ", options_.fail_compile_at, ")"));
  const auto t0 = std::chrono::steady_clock::now();
  MEMRA_ASSIGN_OR_RETURN(std::vector<uint8_t> cubin,
                         nvrtc_->CompileToCubin(src, m.file, OptionsFor(m), KernelHeaders()));
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (use_disk) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (!ec) WriteEntry(path, cubin);
  }
  return std::make_shared<const std::vector<uint8_t>>(std::move(cubin));
}

absl::StatusOr<std::vector<std::shared_ptr<const std::vector<uint8_t>>>> KernelCompiler::CompileAll(
    const std::vector<ModuleSpec>& modules) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<const std::vector<uint8_t>>> out(modules.size());
  std::vector<std::string> keys(modules.size());
  std::map<std::string, size_t> todo_index;  // module key -> first index needing work
  std::vector<size_t> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < modules.size(); ++i) {
      keys[i] = modules[i].Key();
      if (auto it = memory_.find(keys[i]); it != memory_.end()) {
        out[i] = it->second;
        ++stats_.memory_hits;
        continue;
      }
      if (auto it = precompiled_.find(keys[i]); it != precompiled_.end()) {
        out[i] = memory_[keys[i]] = it->second;
        ++stats_.plan_hits;
        ++stats_.requested;
        continue;
      }
      if (todo_index.emplace(keys[i], i).second) todo.push_back(i);
    }
    stats_.requested += static_cast<int64_t>(todo.size());
  }
  std::vector<absl::Status> errors(todo.size());
  std::vector<double> secs(todo.size(), 0);
  std::vector<char> disk(todo.size(), 0);
  std::atomic<size_t> next{0};
  int jobs = options_.jobs > 0 ? options_.jobs : static_cast<int>(std::thread::hardware_concurrency());
  jobs = std::max(1, std::min<int>(jobs, static_cast<int>(todo.size())));
  auto worker = [&] {
    for (size_t j; (j = next.fetch_add(1)) < todo.size();) {
      bool hit = false;
      auto r = CompileOne(modules[todo[j]], &secs[j], &hit);
      disk[j] = hit;
      if (!r.ok())
        errors[j] = absl::Status(r.status().code(), absl::StrCat(keys[todo[j]], ": ", r.status().message()));
      else
        out[todo[j]] = *r;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < jobs; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  std::vector<std::string> msgs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t j = 0; j < todo.size(); ++j) {
      if (!errors[j].ok()) {
        msgs.push_back(std::string(errors[j].message()));
        continue;
      }
      memory_[keys[todo[j]]] = out[todo[j]];
      if (disk[j])
        ++stats_.disk_hits;
      else {
        ++stats_.compiled;
        stats_.compile_seconds += secs[j];
      }
    }
    for (size_t i = 0; i < modules.size(); ++i)
      if (!out[i]) out[i] = memory_.count(keys[i]) ? memory_[keys[i]] : nullptr;
    stats_.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (!msgs.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(msgs.size(), " kernel module(s) failed to compile:\n", absl::StrJoin(msgs, "\n")));
  return out;
}

}  // namespace memra::codegen
