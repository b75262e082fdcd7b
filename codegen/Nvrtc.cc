#include "codegen/Nvrtc.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/DynamicLibrary.h"

namespace memra::codegen {

namespace {
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;
}  // namespace

struct Nvrtc::Api {
  const char* (*GetErrorString)(nvrtcResult);
  nvrtcResult (*Version)(int*, int*);
  nvrtcResult (*CreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
  nvrtcResult (*DestroyProgram)(nvrtcProgram*);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char*);
};

std::vector<std::string> CudaLibraryCandidates(const std::string& soname, const std::string& wheel_subdir) {
  std::vector<std::string> c = {soname};
#ifdef MEMRA_CUDA_LIBDIR
  c.push_back(absl::StrCat(MEMRA_CUDA_LIBDIR, "/", soname));
#endif
  for (const char* dir : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib"})
    c.push_back(absl::StrCat(dir, "/", soname));
  if (!wheel_subdir.empty())
    for (const char* py : {"/opt/torch/.venv/lib/python3.12/site-packages", "/usr/local/lib/python3.12/dist-packages",
                           "/usr/lib/python3/dist-packages"})
      c.push_back(absl::StrCat(py, "/nvidia/", wheel_subdir, "/", soname));
  return c;
}

absl::StatusOr<const Nvrtc*> Nvrtc::Load(const std::string& path) {
  static std::mutex mu;
  static Nvrtc* loaded = nullptr;
  static absl::Status failure;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded != nullptr) return loaded;
  if (!failure.ok() && path.empty()) return failure;
  std::vector<std::string> candidates =
      path.empty() ? CudaLibraryCandidates("libnvrtc.so.13", "cu13/lib") : std::vector<std::string>{path};
  if (path.empty())
    for (const std::string& p : CudaLibraryCandidates("libnvrtc.so.12", "cuda_nvrtc/lib")) candidates.push_back(p);
  absl::StatusOr<DynamicLibrary> lib =
      DynamicLibrary::Open(candidates, "NVRTC", "install the CUDA toolkit's NVRTC to compile GPU kernels");
  if (!lib.ok()) {
    if (path.empty()) failure = lib.status();
    return lib.status();
  }
  const std::string from = lib->path();
  auto* api = new Api();
  lib->Bind(api->GetErrorString, "nvrtcGetErrorString");
  lib->Bind(api->Version, "nvrtcVersion");
  lib->Bind(api->CreateProgram, "nvrtcCreateProgram");
  lib->Bind(api->DestroyProgram, "nvrtcDestroyProgram");
  lib->Bind(api->CompileProgram, "nvrtcCompileProgram");
  lib->Bind(api->GetProgramLogSize, "nvrtcGetProgramLogSize");
  lib->Bind(api->GetProgramLog, "nvrtcGetProgramLog");
  lib->Bind(api->GetCUBINSize, "nvrtcGetCUBINSize");
  lib->Bind(api->GetCUBIN, "nvrtcGetCUBIN");
  if (absl::Status st = lib->Check(); !st.ok()) {
    delete api;
    return st;
  }
  auto* n = new Nvrtc();
  n->api_ = api;
  n->library_ = from;
  api->Version(&n->major_, &n->minor_);
  loaded = n;
  return loaded;
}

std::string Nvrtc::VersionString() const { return absl::StrCat(major_, ".", minor_); }

absl::StatusOr<std::vector<uint8_t>> Nvrtc::CompileToCubin(
    absl::string_view source, const std::string& name, const std::vector<std::string>& options,
    const std::vector<std::pair<std::string, std::string>>& headers) const {
  const Api& a = *api_;
  std::string src(source);
  std::vector<const char*> hdr_src, hdr_names;
  for (const auto& [n, s] : headers) {
    hdr_names.push_back(n.c_str());
    hdr_src.push_back(s.c_str());
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = a.CreateProgram(&prog, src.c_str(), name.c_str(), static_cast<int>(headers.size()), hdr_src.data(),
                                  hdr_names.data());
  if (r != 0) return absl::InternalError(absl::StrCat("nvrtcCreateProgram(", name, "): ", a.GetErrorString(r)));
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());
  r = a.CompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  std::string log;
  size_t log_size = 0;
  if (a.GetProgramLogSize(prog, &log_size) == 0 && log_size > 1) {
    log.resize(log_size);
    a.GetProgramLog(prog, log.data());
    log.resize(log_size - 1);
  }
  if (r != 0) {
    a.DestroyProgram(&prog);
    return absl::InvalidArgumentError(absl::StrCat("NVRTC failed to compile ", name, " (", absl::StrJoin(options, " "),
                                                   "): ", a.GetErrorString(r), "\n", log));
  }
  size_t n = 0;
  std::vector<uint8_t> cubin;
  if ((r = a.GetCUBINSize(prog, &n)) == 0) {
    cubin.resize(n);
    r = a.GetCUBIN(prog, reinterpret_cast<char*>(cubin.data()));
  }
  a.DestroyProgram(&prog);
  if (r != 0 || cubin.empty())
    return absl::InternalError(
        absl::StrCat("NVRTC produced no cubin for ", name, " (an -arch=sm_XX option is needed)"));
  return cubin;
}

}  // namespace memra::codegen
