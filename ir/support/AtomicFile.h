// An output file that appears whole or not at all (memra gen's GGUFs, compile's plans, the
// logits dumps): written to a temporary beside it (`<path>.tmp-XXXXXX`), renamed over `path` by
// Commit(). Dropped uncommitted (an error half way: a full disk, a failed write), the temporary is
// removed; on SIGINT / SIGTERM or a crash, LLVM's signal handlers remove it
// (llvm::sys::fs::TempFile), so no partial file is ever left behind. A path that names an existing
// device or FIFO (`/dev/null`, a pipe) is written in place, as any Unix tool would: renaming over it
// would replace the device node with a regular file.
//
//   MEMRA_ASSIGN_OR_RETURN(auto file, AtomicFile::Create(path));
//   MEMRA_RETURN_IF_ERROR(file->Write(bytes.data(), bytes.size()));
//   MEMRA_RETURN_IF_ERROR(file->Commit());
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "llvm/Support/FileSystem.h"

namespace memra {

class AtomicFile {
 public:
  // Fails, naming `path`, when its folder is missing or not writable.
  static absl::StatusOr<std::unique_ptr<AtomicFile>> Create(const std::string& path);
  ~AtomicFile();  // removes the temporary unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // ResourceExhausted, naming both sizes, when the file system has less than `bytes` free for the
  // file (checked before a long write: a 140 GB model should not fill the disk and then fail).
  absl::Status CheckSpace(uint64_t bytes) const;
  // All n bytes, or an error naming the file and the cause ("no space left on device").
  absl::Status Write(const void* data, size_t n);
  // Closes the temporary and renames it over `path`. Once only.
  absl::Status Commit();

  const std::string& path() const { return path_; }

 private:
  AtomicFile(std::string path, llvm::sys::fs::TempFile temp);
  AtomicFile(std::string path, int direct_fd);
  int fd() const { return temp_ ? temp_->FD : direct_fd_; }
  std::string path_;
  std::optional<llvm::sys::fs::TempFile> temp_;
  int direct_fd_ = -1;  // a device or FIFO written in place (no temporary)
};

}  // namespace memra
