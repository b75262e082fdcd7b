// The reference BatchBackend: one Session (its own executor and state) per slot, the entries of a
// step run one after another, prompt chunks through Session::Prefill and decode entries through
// Session::Decode, so every row is computed by the one-sequence path. Every slot loads the model on
// its own (weights included): fine for the small models of the tests, which compare the batched
// engine (runtime/BatchedSlots.h, what memra's commands use) with it.
//
//   auto backend = SessionSlots::Open("model.gguf", 4, session_options);
//   auto sched = Scheduler::Create(**backend, {});
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/BatchBackend.h"
#include "runtime/Session.h"

namespace memra::runtime {

class SessionSlots : public BatchBackend {
 public:
  // `slots` Sessions on the GGUF at `path`, each opened with `options` (so each slot's context
  // is options.n_ctx or the model's default). slots in [1, 256].
  static absl::StatusOr<std::unique_ptr<SessionSlots>> Open(const std::string& path, int slots,
                                                            const SessionOptions& options = {});

  int slots() const override { return static_cast<int>(sessions_.size()); }
  int64_t ctx_per_slot() const override { return sessions_[0]->context_length(); }
  int64_t n_vocab() const override { return sessions_[0]->n_vocab(); }
  absl::Status ResetSlot(int slot) override;
  absl::StatusOr<std::vector<EntryOutput>> Execute(const StepBatch& batch) override;

  // Slot `slot`'s session (its tokenizer is the model's; its state is the slot's).
  Session& session(int slot) { return *sessions_[slot]; }

 private:
  SessionSlots() = default;
  absl::Status CheckSlot(int slot) const;
  std::vector<std::unique_ptr<Session>> sessions_;
};

}  // namespace memra::runtime
