// A terminal progress bar for long work (weight upload, file generation, compilation).
// On a TTY it redraws one line; otherwise it prints a line at every 10 %.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace memra {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total, bool bytes = true);
  ~ProgressBar();
  void Update(uint64_t done);
  void Finish();

 private:
  std::string label_;
  uint64_t total_;
  bool bytes_;
  bool tty_;
  bool finished_ = false;
  int last_decile_ = -1;
  int last_permille_ = -1;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace memra
