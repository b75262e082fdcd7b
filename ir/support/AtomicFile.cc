#include "ir/support/AtomicFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/Signals.h"

namespace memra {

AtomicFile::AtomicFile(std::string path, llvm::sys::fs::TempFile temp)
    : path_(std::move(path)), temp_(std::move(temp)) {}

AtomicFile::AtomicFile(std::string path, int direct_fd) : path_(std::move(path)), direct_fd_(direct_fd) {}

absl::StatusOr<std::unique_ptr<AtomicFile>> AtomicFile::Create(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory"));
    // A device or FIFO: written in place (a rename would replace the node with a regular file).
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
    std::signal(SIGXFSZ, SIG_IGN);
    return std::unique_ptr<AtomicFile>(new AtomicFile(path, fd));
  }
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
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

absl::Status AtomicFile::CheckSpace(uint64_t bytes) const {
  if (direct_fd_ >= 0) return absl::OkStatus();  // a device or FIFO: no file system to ask
  struct statvfs vfs;
  if (::fstatvfs(fd(), &vfs) != 0) return absl::OkStatus();  // unknown: the writes will tell
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (free_bytes >= bytes) return absl::OkStatus();
  auto gb = [](uint64_t b) { return absl::StrFormat("%.2f GB", static_cast<double>(b) / 1e9); };
  return absl::ResourceExhaustedError(
      absl::StrCat(path_, ": the file needs ", gb(bytes), " but its file system has ", gb(free_bytes), " free"));
}

absl::Status AtomicFile::Write(const void* data, size_t n) {
  if (fd() < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": written after it was committed"));
  // The temporary removed under us (LLVM's handler on a SIGINT that the process inherited as
  // ignored removes it and goes on): stop now rather than write the rest into an unlinked file.
  struct stat st;
  if (temp_ && ::fstat(fd(), &st) == 0 && st.st_nlink == 0)
    return absl::CancelledError(
        absl::StrCat(path_, ": its temporary ", temp_->TmpName, " was removed (interrupted?); nothing was written"));
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd(), p, std::min<size_t>(n, size_t{1} << 30));
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
  if (direct_fd_ >= 0) {
    const int fd = std::exchange(direct_fd_, -1);
    if (::close(fd) != 0)
      return absl::ResourceExhaustedError(absl::StrCat(path_, ": write failed: ", std::strerror(errno)));
    return absl::OkStatus();
  }
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
