#include "ir/support/ProgressBar.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_format.h"

namespace memra {
namespace {
std::string Amount(uint64_t v, bool bytes) {
  if (!bytes) return absl::StrFormat("%d", v);
  if (v >= (1ull << 30)) return absl::StrFormat("%.2f GiB", v / double(1ull << 30));
  if (v >= (1ull << 20)) return absl::StrFormat("%.1f MiB", v / double(1ull << 20));
  return absl::StrFormat("%.1f KiB", v / 1024.0);
}
}  // namespace

ProgressBar::ProgressBar(std::string label, uint64_t total, bool bytes)
    : label_(std::move(label)),
      total_(total),
      bytes_(bytes),
      tty_(isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(uint64_t done) {
  if (finished_) return;
  double frac = total_ ? std::min(1.0, double(done) / double(total_)) : 1.0;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = secs > 0 ? done / secs : 0;
  std::string rate_s = bytes_ ? Amount(uint64_t(rate), true) + "/s" : absl::StrFormat("%.0f/s", rate);
  if (tty_) {
    int permille = int(frac * 1000);
    if (permille == last_permille_) return;
    last_permille_ = permille;
    const int width = 30;
    int filled = int(frac * width);
    std::string bar(filled, '#');
    bar.append(width - filled, '.');
    std::fprintf(stderr, "\r%s [%s] %5.1f%%  %s / %s  %s   ", label_.c_str(), bar.c_str(), frac * 100,
                 Amount(done, bytes_).c_str(), Amount(total_, bytes_).c_str(), rate_s.c_str());
    std::fflush(stderr);
  } else {
    int decile = int(frac * 10);
    if (decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(stderr, "%s: %3d%%  %s / %s  %s\n", label_.c_str(), decile * 10, Amount(done, bytes_).c_str(),
                 Amount(total_, bytes_).c_str(), rate_s.c_str());
  }
}

void ProgressBar::Finish() {
  if (finished_) return;
  Update(total_);
  finished_ = true;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_) std::fprintf(stderr, "\n");
  std::fprintf(stderr, "%s: done in %.1f s\n", label_.c_str(), secs);
}

}  // namespace memra
