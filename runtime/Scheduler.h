// Continuous batching over a BatchBackend's slots (docs/design/sequences.md §11-12, issue 15
// item 3): a FIFO queue of requests, admission into free slots, and steps that decode one token
// for every running request and fill the rest of a token budget with prompt chunks (chunked
// prefill), then take each request's token (the backend's device pick, or the host's sampler on
// its logits when it asks for logprobs or a longer penalty list) and stream it.
//
// No threads and no HTTP inside: the caller loops Step() (or RunToCompletion()) and calls
// Submit/Cancel between steps or from a sink; the class is not thread-safe, a server serializes
// its calls on one thread.
//
// Batch invariance at this level: a request's rows are cut the same way whatever else runs
// (non-final prompt chunks are multiples of prefill_align, so they start on the delta-net grid),
// its tokens are sampled from its own logits, history and RNG (std::mt19937_64 seeded from its
// seed, one draw per sampled token, as Session::Generate) with integer weight sums
// (kernels/cpu/Sampling.h SampleRow, the same on the device), so with a backend whose row results depend only on the
// row and its slot (the CPU's kernels; the GPU's exact decode class, sequences.md §8) a request gives the same tokens
// alone and in any mix. The backend's StepRules say how steps are cut for that: the exact class
// alternates decode steps (at most max_decode_rows entries: those that have waited longest since
// they last decoded) with prompt steps.
//
//   BatchedSlotsOptions o;  o.slots = 4;
//   auto backend = BatchedSlots::Open("model.gguf", o);     // runtime/BatchedSlots.h
//   auto sched = Scheduler::Create(**backend, {});
//   Request r;
//   r.prompt = ids;
//   r.max_tokens = 64;
//   auto id = (*sched)->Submit(std::move(r), [](const TokenEvent& e) { std::cout << e.text; });
//   absl::Status st = (*sched)->RunToCompletion();
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/Sampling.h"
#include "runtime/BatchBackend.h"
#include "runtime/Detokenizer.h"
#include "runtime/PrefixCache.h"

namespace memra::runtime {

using RequestId = int64_t;

enum class FinishReason {
  kNone,       // still generating
  kStop,       // a stop token id or a stop string
  kLength,     // max_tokens (clamped to the slot's context)
  kCancelled,  // Cancel()
  kError,      // the step or the logits failed (TokenEvent::error says why)
};
// "", "stop", "length", "cancelled", "error" (the names OpenAI-style APIs use).
absl::string_view FinishReasonName(FinishReason r);

struct Request {
  std::vector<int32_t> prompt;
  // The sampler chain (kernels/cpu/Sampling.h): temperature 0 = greedy; penalties over the last
  // repeat_last_n tokens of prompt + generated, as Session::Generate.
  kernels::cpu::SamplingParams sampling;
  uint64_t seed = 0;
  // Generated tokens at most; clamped to ctx_per_slot - prompt size (finish reason length).
  int64_t max_tokens = 16;
  // A sampled id in stop_ids ends the request (reason stop): the event carries the id but not its
  // text. Callers that want end-of-generation stops put the tokenizer's eog_ids here.
  std::vector<int32_t> stop_ids;
  // Matched on the detokenized text (needs SchedulerOptions::detokenizer): the text stops before
  // the first occurrence (reason stop); text that could still become one is held back.
  std::vector<std::string> stop_strings;
  // Added to these tokens' logits before sampling (OpenAI's logit_bias; -100 all but bans a
  // token, 100 all but forces it). Logprobs stay those of the raw logits. The host samples such a
  // request (the backend's pick knows no bias).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // -1: none; 0: the chosen token's logprob; n > 0: also the n most likely tokens. Logprobs are of
  // the model's distribution (log_softmax of the raw logits, before penalties and temperature).
  int logprobs = -1;
  // The prefix cache (docs/design/prefix-reuse.md) may resume this request from a snapshot of a
  // matching prefix and keep snapshots of it (llama-server's `cache_prompt`). Outputs are the same
  // either way; false only costs time.
  bool cache_prompt = true;
  // A chat turn: its next turn will likely resend this prompt, so the prefill stops at the
  // prompt's last grid point for a snapshot even when nothing cached shares it (one more step
  // before the first token). Other requests stop there only when they share a cached prefix.
  bool conversation = false;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// One event per generated token; the last one (last = true) carries the finish reason. A request
// that ends without a token (cancelled, error) gets one event with token -1.
struct TokenEvent {
  RequestId id = 0;
  int32_t token = -1;
  std::string text;  // the text this token completed (empty without a detokenizer)
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // most likely first, ties by id
  bool last = false;
  FinishReason reason = FinishReason::kNone;
  absl::Status error;  // reason kError
  Usage usage;
};
// Called inside Step() (and Cancel()); may call Submit and Cancel, must not call Step.
using TokenSink = std::function<void(const TokenEvent&)>;

// The smallest step_tokens a backend of `slots` slots takes: slots - 1 decode rows beside one
// prompt's aligned chunk of prefill_align rows.
inline int64_t MinStepTokens(int64_t slots, int64_t prefill_align) { return slots - 1 + prefill_align; }

struct SchedulerOptions {
  // Rows per step: decode rows of running requests first, prompt chunks in the rest. At least
  // MinStepTokens(slots, prefill_align): with every other slot decoding, a prompt still gets an
  // aligned chunk each step.
  int64_t step_tokens = 512;
  // Prompt chunks that do not end a prompt have a multiple of this many tokens, so every chunk
  // starts on the delta-net scan grid (the grid law of sequences.md §5: a chunked scan equals one
  // call iff its boundaries are multiples of the scan chunk; 64 covers 32 and 64).
  int64_t prefill_align = 64;
  // Text for the events and the stop strings; null: no text, stop strings refused at Submit.
  DetokenizerFactory detokenizer;
};

struct SchedulerStats {
  int64_t steps = 0;  // steps that ran a batch
  int64_t rows = 0;   // rows of all of them
  int queued = 0;
  int running = 0;  // requests holding a slot
  int free_slots = 0;
  int lost_slots = 0;  // slots whose reset failed, never reused
  // The prefix cache (all 0 when the backend keeps no snapshots).
  int prefix_rows = 0, prefix_rows_used = 0;  // snapshot rows, and those holding one
  int64_t prefix_lookups = 0;                 // admissions that looked (cache_prompt requests)
  int64_t prefix_hits = 0;                    // ... and resumed from a snapshot
  int64_t prompt_tokens = 0;                  // prompt tokens admitted (with or without a hit)
  int64_t prefix_tokens_reused = 0;           // prompt tokens not prefilled thanks to a hit
  int64_t prefix_snapshots = 0;               // snapshots saved
  int64_t prefix_evictions = 0;               // snapshots dropped for room (rows or KV blocks)
  int64_t prefix_errors = 0;                  // snapshot saves / restores that failed (then skipped)
  // prefix_tokens_reused x the measured time per prompt row (an estimate of prefill time saved).
  double prefix_seconds_saved = 0.0;
};

class Scheduler {
 public:
  // `backend` must outlive the scheduler. Errors: options that cannot make progress.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(BatchBackend& backend, SchedulerOptions options = {});
  ~Scheduler();

  // Queues a request (never dropped; admitted FIFO when a slot is free). Errors, before anything
  // is queued: an empty prompt or an id outside the vocabulary (InvalidArgument), a prompt that
  // leaves no room in the per-slot context (OutOfRange, naming both numbers), bad sampling
  // parameters, max_tokens < 1, stop strings without a detokenizer.
  absl::StatusOr<RequestId> Submit(Request request, TokenSink sink);
  // Ends a queued or running request at once: its slot is reset and free for the next admission,
  // its sink gets the event with reason cancelled, or, when `why` is an error (a time limit, say),
  // reason error with `why` as the event's error. Inside Step() (from a sink) it takes effect
  // before Step returns, and the request's entries of that step are dropped. NotFound for an id
  // that is unknown or already finished.
  absl::Status Cancel(RequestId id, absl::Status why = absl::OkStatus());

  // One iteration: admit, build the batch, execute it, sample, stream. A step with nothing to
  // run does nothing. Non-finite logits end only their request (reason error, the event's error
  // names the step). An Execute error ends every request of the batch with reason error and is
  // returned (the other requests stay and later steps can run). A slot whose reset failed is
  // never reused; the Step (or Cancel) that sees the failure returns its error, once. When every
  // slot is lost, the queued requests end with an Unavailable error naming the first failure, and
  // Submit refuses new ones the same way.
  absl::Status Step();
  // Steps until no request is queued or running.
  absl::Status RunToCompletion();

  bool idle() const { return queue_.empty() && running_.empty(); }
  SchedulerStats stats() const;

 private:
  struct Seq;
  Scheduler(BatchBackend& backend, SchedulerOptions options);
  void Admit();
  // Draws the step's batch: decode rows, then prompt chunks; sampled entries get their sampler
  // inputs (the request's RNG advances here).
  StepBatch BuildBatch();
  void PrepareSampling(Seq& s, StepEntry& e);
  // Takes seq's next token (the backend's pick or SampleRow on its logits), streams it, and
  // finishes the request when it ends.
  void SampleAndEmit(Seq& seq, const StepEntry& entry, const EntryOutput& out);
  // Sends the last event (with `event`'s token and text), frees the slot, forgets the request.
  void Finish(Seq& seq, FinishReason reason, TokenEvent event, absl::Status error = absl::OkStatus());
  void ApplyDeferredCancels();
  // Prefix reuse at admission: resumes `seq` in `slot` from the longest snapshot of its prompt and
  // plans where its prefill stops to take snapshots. Returns the position it resumes at.
  int64_t ResumeFromCache(Seq& seq, int slot);
  // After a step: a snapshot of `seq`'s state when its position is one worth keeping.
  void MaybeSnapshot(Seq& seq, const StepEntry& entry);
  // Drops the least recently used snapshot; false when none is held.
  bool EvictOne();

  BatchBackend& backend_;
  SchedulerOptions options_;
  RequestId next_id_ = 1;
  std::map<RequestId, std::unique_ptr<Seq>> seqs_;  // queued and running
  std::deque<RequestId> queue_;                     // waiting for a slot, FIFO
  std::vector<RequestId> running_;                  // holding a slot, in admission order
  std::vector<bool> slot_free_;
  std::vector<std::pair<RequestId, absl::Status>> deferred_cancels_;  // (id, why)
  // StepRules: whether the last step decoded (separate steps alternate), and the decode steps so
  // far (each decoder's turn is kept against this count when they are more than a step takes).
  bool last_step_decoded_ = false;
  int64_t decode_steps_ = 0;
  bool in_step_ = false;
  // A failed ResetSlot: that slot is never reused. The first failure (named to requests when
  // every slot is lost), the ones not yet returned by Step or Cancel, and how many slots are lost.
  absl::Status slot_error_;
  absl::Status unreported_slot_error_;
  int lost_slots_ = 0;
  void LoseSlot(int slot, absl::Status error);
  absl::Status TakeSlotError();
  absl::Status AllSlotsLostError() const;
  int64_t steps_ = 0;
  int64_t rows_ = 0;
  std::unique_ptr<PrefixCache> cache_;  // null: the backend keeps no snapshots
  SchedulerStats prefix_;               // the prefix_* counters
  double prompt_row_seconds_ = 0.0;     // a running mean of step time per row, over prefill steps
};

}  // namespace memra::runtime
