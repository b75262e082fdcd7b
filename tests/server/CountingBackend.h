// A deterministic stand-in for the batched engine (runtime/BatchBackend.h), for the server's tests
// and its HTTP fuzzer: a sampled entry's logits are 10 at (its last token + 1) mod n_vocab and
// `background` (default 0) elsewhere, so a greedy request counts up from its prompt's last token;
// each step sleeps `step_delay` (a slow model). Slot positions are checked as the real engines
// check them. A background of -100 leaves the sampler one weighted candidate instead of the whole
// vocabulary (the HTTP fuzzer: 151,936 candidates a token under ASan held it at ~13 inputs/s).
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/BatchBackend.h"

namespace memra::server {

class CountingBackend : public runtime::BatchBackend {
 public:
  CountingBackend(int slots, int64_t ctx_per_slot, int64_t n_vocab,
                  std::chrono::microseconds step_delay = std::chrono::microseconds(0), float background = 0.0f)
      : ctx_(ctx_per_slot),
        vocab_(n_vocab),
        delay_(step_delay),
        background_(background),
        pos_(static_cast<size_t>(slots), 0) {}

  int slots() const override { return static_cast<int>(pos_.size()); }
  int64_t ctx_per_slot() const override { return ctx_; }
  int64_t n_vocab() const override { return vocab_; }
  absl::Status ResetSlot(int slot) override {
    if (slot < 0 || slot >= slots()) return absl::OutOfRangeError(absl::StrCat("no slot ", slot));
    pos_[static_cast<size_t>(slot)] = 0;
    return absl::OkStatus();
  }
  // Every step from now on fails with `status` (a device failure, say); OkStatus() heals it.
  void FailSteps(absl::Status status) { fail_ = std::move(status); }

  absl::StatusOr<std::vector<runtime::EntryOutput>> Execute(const runtime::StepBatch& batch) override {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (!fail_.ok()) return fail_;
    std::vector<runtime::EntryOutput> out(batch.entries.size());
    for (size_t i = 0; i < batch.entries.size(); ++i) {
      const runtime::StepEntry& e = batch.entries[i];
      if (e.slot < 0 || e.slot >= slots()) return absl::OutOfRangeError(absl::StrCat("no slot ", e.slot));
      int64_t& pos = pos_[static_cast<size_t>(e.slot)];
      if (e.first_pos != pos || e.tokens.empty() || pos + static_cast<int64_t>(e.tokens.size()) > ctx_)
        return absl::InternalError(absl::StrCat("slot ", e.slot, " at ", pos, ": an entry at ", e.first_pos, " of ",
                                                e.tokens.size(), " tokens"));
      pos += static_cast<int64_t>(e.tokens.size());
      if (!e.sampled()) continue;
      out[i].logits.assign(static_cast<size_t>(vocab_), background_);
      out[i].logits[static_cast<size_t>((e.tokens.back() + 1) % vocab_)] = 10.0f;
    }
    return out;
  }

 private:
  int64_t ctx_, vocab_;
  std::chrono::microseconds delay_;
  float background_;
  std::vector<int64_t> pos_;
  absl::Status fail_;
};

}  // namespace memra::server
