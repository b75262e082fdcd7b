#include "ir/support/AtomicFile.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/Signals.h"

namespace memra {

AtomicFile::AtomicFile(std::string path, llvm::sys::fs::TempFile temp)
    : path_(std::move(path)), temp_(std::move(temp)) {}

absl::StatusOr<std::unique_ptr<AtomicFile>> AtomicFile::Create(const std::string& path) {
  llvm::Expected<llvm::sys::fs::TempFile> temp = llvm::sys::fs::TempFile::create(path + ".tmp-%%%%%%");
  if (!temp)
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot create a file beside it: ", llvm::toString(temp.takeError())));
  // Past a file-size limit (ulimit -f) write() raises SIGXFSZ, which LLVM's handlers (installed by
  // TempFile) report as a crash: ignored, the write fails with EFBIG and names the file instead.
  std::signal(SIGXFSZ, SIG_IGN);
  return std::unique_ptr<AtomicFile>(new AtomicFile(path, std::move(*temp)));
}

AtomicFile::~AtomicFile() {
  if (temp_) llvm::consumeError(temp_->discard());
}

absl::Status AtomicFile::Write(const void* data, size_t n) {
  if (!temp_) return absl::FailedPreconditionError(absl::StrCat(path_, ": written after it was committed"));
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(temp_->FD, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::ResourceExhaustedError(absl::StrCat(path_, ": write failed: ", std::strerror(errno)));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::Commit() {
  if (!temp_) return absl::FailedPreconditionError(absl::StrCat(path_, ": committed twice"));
  // Data the kernel could not write shows at close on some file systems (NFS, quotas).
  if (::fsync(temp_->FD) != 0 && errno != EINVAL && errno != EROFS)
    return absl::ResourceExhaustedError(absl::StrCat(path_, ": write failed: ", std::strerror(errno)));
  const std::string temp_name = temp_->TmpName;
  if (llvm::Error e = temp_->keep(path_)) {
    const std::string why = llvm::toString(std::move(e));
    // keep() leaves the temporary when the rename fails.
    ::unlink(temp_name.c_str());
    llvm::sys::DontRemoveFileOnSignal(temp_name);
    temp_.reset();
    return absl::PermissionDeniedError(absl::StrCat(path_, ": cannot rename the finished file into place: ", why));
  }
  temp_.reset();
  return absl::OkStatus();
}

}  // namespace memra
