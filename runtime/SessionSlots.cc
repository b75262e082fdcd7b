#include "runtime/SessionSlots.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "ir/StatusMacros.h"

namespace memra::runtime {

absl::StatusOr<std::unique_ptr<SessionSlots>> SessionSlots::Open(const std::string& path, int slots,
                                                                 const SessionOptions& options) {
  if (slots < 1 || slots > 256)
    return absl::InvalidArgumentError(absl::StrCat("slots must be in [1, 256] (got ", slots, ")"));
  std::unique_ptr<SessionSlots> b(new SessionSlots());
  for (int s = 0; s < slots; ++s) {
    auto session = Session::Open(path, options);
    if (!session.ok())
      return absl::Status(session.status().code(),
                          absl::StrCat("slot ", s, " of ", slots, ": ", session.status().message()));
    b->sessions_.push_back(std::move(*session));
  }
  return b;
}

absl::Status SessionSlots::CheckSlot(int slot) const {
  if (slot >= 0 && slot < slots()) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat("slot ", slot, " is outside [0, ", slots(), ")"));
}

absl::Status SessionSlots::ResetSlot(int slot) {
  MEMRA_RETURN_IF_ERROR(CheckSlot(slot));
  return sessions_[slot]->Reset();
}

absl::StatusOr<std::vector<EntryOutput>> SessionSlots::Execute(const StepBatch& batch) {
  std::vector<EntryOutput> out(batch.entries.size());
  for (size_t i = 0; i < batch.entries.size(); ++i) {
    const StepEntry& e = batch.entries[i];
    MEMRA_RETURN_IF_ERROR(CheckSlot(e.slot));
    Session& s = *sessions_[e.slot];
    auto where = [&] { return absl::StrCat("step entry ", i, " (slot ", e.slot, ", request ", e.request, ")"); };
    // A position mismatch means the scheduler and the slot disagree on what the slot holds:
    // running on would silently continue the wrong sequence.
    if (e.first_pos != s.position())
      return absl::FailedPreconditionError(
          absl::StrCat(where(), ": starts at position ", e.first_pos, " but the slot holds ", s.position(), " tokens"));
    if (e.tokens.empty()) return absl::InvalidArgumentError(absl::StrCat(where(), ": no tokens"));
    absl::StatusOr<std::vector<float>> logits;
    if (e.kind == EntryKind::kDecode) {
      if (e.tokens.size() != 1)
        return absl::InvalidArgumentError(
            absl::StrCat(where(), ": a decode entry runs one token (got ", e.tokens.size(), ")"));
      logits = s.Decode(e.tokens[0]);
    } else {
      logits = s.Prefill(e.tokens);
    }
    if (!logits.ok())
      return absl::Status(logits.status().code(), absl::StrCat(where(), ": ", logits.status().message()));
    if (e.sampled()) out[i].logits = std::move(*logits);
  }
  return out;
}

}  // namespace memra::runtime
