#include "runtime/Scheduler.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ir/StatusMacros.h"
#include "runtime/Logits.h"
#include "runtime/StopStrings.h"

namespace memra::runtime {

struct Scheduler::Seq {
  RequestId id = 0;
  Request req;
  TokenSink sink;
  int slot = -1;                 // -1 while queued
  int64_t pos = 0;               // tokens the slot holds
  int64_t prefilled = 0;         // prompt tokens in the slot
  int64_t generated = 0;         // tokens sampled
  std::vector<int32_t> history;  // prompt + sampled tokens (the penalties' window)
  std::mt19937_64 rng;
  std::unique_ptr<Detokenizer> detok;
  std::unique_ptr<StopStringFilter> stops;
  bool cancelled = false;  // Cancel() inside a step, applied before Step returns
  bool text_done = false;  // a stop string matched: no more text
  // Prefix reuse: prompt positions where prefill stops for a snapshot (ascending), and this
  // sequence's newest snapshot taken past its prompt (replaced as it grows).
  std::vector<int64_t> snapshot_at;
  int decode_row = -1;
  uint64_t decode_serial = 0;
  // When the decoders are more than a step takes (StepRules::max_decode_rows): the decode step
  // that last took this one (-1: none yet; set to the current count when first seen decoding).
  int64_t last_decode_step = -1;

  int64_t prompt_size() const { return static_cast<int64_t>(req.prompt.size()); }
  bool decoding() const { return slot >= 0 && prefilled == prompt_size(); }
  Usage usage() const { return {prompt_size(), generated}; }
};

absl::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "";
}

namespace {

// log_softmax of the raw logits: the chosen token's value and the n largest (n > 0).
void FillLogprobs(const std::vector<float>& logits, int32_t chosen, int n, TokenEvent& e) {
  float mx = -INFINITY;
  for (float x : logits) mx = std::max(mx, x);
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  const double lse = mx + std::log(sum);
  e.logprob = static_cast<float>(logits[chosen] - lse);
  if (n <= 0) return;
  for (const auto& c : kernels::cpu::TopKCandidates(logits.data(), static_cast<int64_t>(logits.size()), n))
    e.top.push_back({c.id, static_cast<float>(c.logit - lse)});
}

}  // namespace

Scheduler::Scheduler(BatchBackend& backend, SchedulerOptions options)
    : backend_(backend), options_(std::move(options)), slot_free_(backend.slots(), true) {
  // A resumed prompt's chunks start at the snapshot: on the scan grid only if the snapshot grid is.
  const int64_t grid = backend.snapshot_grid();
  if (backend.snapshot_rows() > 0 && grid > 0 && grid % options_.prefill_align == 0)
    cache_ = std::make_unique<PrefixCache>(backend.snapshot_rows(), grid);
}

Scheduler::~Scheduler() = default;

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(BatchBackend& backend, SchedulerOptions options) {
  if (backend.slots() < 1) return absl::InvalidArgumentError("the backend has no slots");
  if (options.prefill_align < 1)
    return absl::InvalidArgumentError(absl::StrCat("prefill_align must be >= 1 (got ", options.prefill_align, ")"));
  // A prompt being prefilled shares a step with at most slots - 1 decode rows; the rest must hold
  // an aligned chunk, or a prompt longer than it would wait until some decode ends.
  const int64_t least = MinStepTokens(backend.slots(), options.prefill_align);
  if (options.step_tokens < least)
    return absl::InvalidArgumentError(
        absl::StrCat("step_tokens ", options.step_tokens, " is below ", least, " (the backend's ", backend.slots(),
                     " slots - 1 decode rows + prefill_align ", options.prefill_align, ")"));
  return std::unique_ptr<Scheduler>(new Scheduler(backend, std::move(options)));
}

void Scheduler::LoseSlot(int slot, absl::Status error) {
  slot_free_[slot] = false;
  ++lost_slots_;
  if (slot_error_.ok()) slot_error_ = error;
  // Step returns the first failure it has not returned yet; later ones of the same step are
  // counted in stats().lost_slots.
  if (unreported_slot_error_.ok()) unreported_slot_error_ = std::move(error);
}

absl::Status Scheduler::TakeSlotError() { return std::exchange(unreported_slot_error_, absl::OkStatus()); }

absl::Status Scheduler::AllSlotsLostError() const {
  return absl::UnavailableError(
      absl::StrCat("every KV slot (", backend_.slots(),
                   ") was lost to a failed reset, so no request can run; the first: ", slot_error_.message()));
}

absl::StatusOr<RequestId> Scheduler::Submit(Request request, TokenSink sink) {
  if (lost_slots_ == backend_.slots()) return AllSlotsLostError();
  const int64_t p = static_cast<int64_t>(request.prompt.size());
  // A slot's context, or less when the KV cache cannot hold that much for one sequence.
  const int64_t ctx = std::min(backend_.ctx_per_slot(), backend_.max_sequence_positions());
  const int64_t vocab = backend_.n_vocab();
  if (p == 0) return absl::InvalidArgumentError("the request's prompt is empty");
  // The prompt's positions plus at least one generated token must fit one slot.
  if (p >= ctx)
    return absl::OutOfRangeError(absl::StrCat("the prompt has ", p, " tokens but the per-slot context is ", ctx,
                                              " tokens (at most ", ctx - 1,
                                              " prompt tokens leave room for a generated one)",
                                              ctx < backend_.ctx_per_slot() ? " as the KV cache can hold" : ""));
  for (int64_t i = 0; i < p; ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= vocab)
      return absl::InvalidArgumentError(absl::StrCat("token id ", request.prompt[i], " at prompt position ", i,
                                                     " is outside the vocabulary [0, ", vocab, ")"));
  if (request.max_tokens < 1)
    return absl::InvalidArgumentError(absl::StrCat("max_tokens must be >= 1 (got ", request.max_tokens, ")"));
  MEMRA_RETURN_IF_ERROR(kernels::cpu::CheckSamplingParams(request.sampling));
  if (request.logprobs < -1 || request.logprobs > vocab)
    return absl::InvalidArgumentError(
        absl::StrCat("logprobs must be in [-1, ", vocab, "] (got ", request.logprobs, ")"));
  for (const auto& s : request.stop_strings)
    if (s.empty()) return absl::InvalidArgumentError("a stop string is empty");
  for (const auto& [id, bias] : request.logit_bias)
    if (id < 0 || id >= vocab || !std::isfinite(bias))
      return absl::InvalidArgumentError(absl::StrCat("logit_bias: token ", id, " (bias ", bias,
                                                     ") must be in the vocabulary [0, ", vocab,
                                                     ") with a finite bias"));
  if (!request.stop_strings.empty() && !options_.detokenizer)
    return absl::FailedPreconditionError("stop strings need text: the scheduler has no detokenizer");

  auto seq = std::make_unique<Seq>();
  seq->id = next_id_++;
  seq->req = std::move(request);
  seq->req.max_tokens = std::min(seq->req.max_tokens, ctx - p);
  seq->sink = std::move(sink);
  seq->history = seq->req.prompt;
  seq->rng.seed(seq->req.seed);
  if (options_.detokenizer) seq->detok = options_.detokenizer();
  seq->stops = std::make_unique<StopStringFilter>(seq->req.stop_strings);
  const RequestId id = seq->id;
  queue_.push_back(id);
  seqs_.emplace(id, std::move(seq));
  return id;
}

void Scheduler::Admit() {
  while (!queue_.empty()) {
    if (lost_slots_ == backend_.slots()) {  // nothing can ever run them
      const absl::Status why = AllSlotsLostError();
      Finish(*seqs_.at(queue_.front()), FinishReason::kError, TokenEvent{},
             absl::Status(why.code(), absl::StrCat("request ", queue_.front(), ": ", why.message())));
      continue;
    }
    auto free = std::find(slot_free_.begin(), slot_free_.end(), true);
    if (free == slot_free_.end()) return;
    Seq& seq = *seqs_.at(queue_.front());
    const int slot = static_cast<int>(free - slot_free_.begin());
    const int64_t resume = ResumeFromCache(seq, slot);
    if (resume < 0) continue;  // the slot was lost; try the next
    // The KV room for the whole sequence is promised before it starts (no preemption); snapshots
    // give way to it, least recently used first. A request the cache cannot hold now waits, and
    // the ones behind it wait too (FIFO).
    const int64_t positions = seq.prompt_size() + seq.req.max_tokens;
    absl::StatusOr<bool> room = backend_.Reserve(slot, positions);
    while (room.ok() && !*room && EvictOne()) room = backend_.Reserve(slot, positions);
    if (resume > 0 && !(room.ok() && *room)) {  // give the restored state back
      if (absl::Status st = backend_.ResetSlot(slot); !st.ok()) {
        LoseSlot(slot, absl::Status(st.code(), absl::StrCat("resetting slot ", slot, " after a prefix restore: ",
                                                            st.message(), "; the slot is not reused")));
        if (room.ok()) continue;  // the request waits for another slot
      }
    }
    if (room.ok() && !*room) return;
    if (!room.ok()) {  // Finish takes it off the queue
      Finish(seq, FinishReason::kError, TokenEvent{},
             absl::Status(room.status().code(), absl::StrCat("request ", seq.id, ": ", room.status().message())));
      continue;
    }
    queue_.pop_front();
    // Slots are reset when released, so a fresh one needs no reset here.
    *free = false;
    seq.slot = slot;
    seq.pos = seq.prefilled = resume;
    running_.push_back(seq.id);
    prefix_.prompt_tokens += seq.prompt_size();
    if (cache_ && seq.req.cache_prompt) {
      ++prefix_.prefix_lookups;
      if (resume > 0) {
        ++prefix_.prefix_hits;
        prefix_.prefix_tokens_reused += resume;
        prefix_.prefix_seconds_saved += static_cast<double>(resume) * prompt_row_seconds_;
      }
      // Where the prefill stops for snapshots (each stop costs the request one more step before
      // its first token): the branch point from a cached or remembered prefix, so the next request
      // that shares it (a system prompt, say) resumes there; and, for a chat turn or a prompt that
      // shares a cached prefix at all, its last grid point, so the next turn resumes at its end
      // even when the template re-renders the reply differently (reasoning dropped). Any other
      // prompt runs in one piece; its decode snapshots serve a next turn that repeats the reply
      // verbatim, and that turn then earns the end-of-prompt snapshot.
      const int64_t grid = cache_->grid();
      const int64_t last = (seq.prompt_size() - 1) / grid * grid;
      const int64_t branch = cache_->KnownPrefix(seq.req.prompt, last);
      const bool end_snapshot = seq.req.conversation || resume > 0 || branch > 0;
      for (int64_t at : {branch, end_snapshot ? last : int64_t{0}})
        if (at > resume && (seq.snapshot_at.empty() || at > seq.snapshot_at.back())) seq.snapshot_at.push_back(at);
      cache_->Remember(seq.req.prompt);
    }
  }
}

int64_t Scheduler::ResumeFromCache(Seq& seq, int slot) {
  if (!cache_ || !seq.req.cache_prompt) return 0;
  // At least the prompt's last token runs: its logits give the first generated token.
  const int64_t limit = (seq.prompt_size() - 1) / cache_->grid() * cache_->grid();
  const PrefixCache::Hit hit = cache_->Lookup(seq.req.prompt, limit);
  if (hit.row < 0) return 0;
  absl::StatusOr<int64_t> at = backend_.RestoreSnapshot(hit.row, slot);
  if (!at.ok() || *at != hit.position) {
    ++prefix_.prefix_errors;  // run without reuse: the slot must be fresh again
    if (absl::Status st = backend_.ResetSlot(slot); !st.ok()) {
      // A slot in an unknown state must not run anyone's request.
      LoseSlot(slot, absl::Status(st.code(), absl::StrCat("resetting slot ", slot, " after a failed prefix restore: ",
                                                          st.message(), "; the slot is not reused")));
      return -1;
    }
    return 0;
  }
  cache_->Touch(hit.row);
  return hit.position;
}

void Scheduler::MaybeSnapshot(Seq& seq, const StepEntry& entry) {
  if (!cache_ || !seq.req.cache_prompt || seq.pos % cache_->grid() != 0) return;
  const bool planned = std::find(seq.snapshot_at.begin(), seq.snapshot_at.end(), seq.pos) != seq.snapshot_at.end();
  // A sampled entry that ends on the grid: the newest state of the conversation, which its next
  // turn extends.
  const bool newest = entry.kind != EntryKind::kPromptChunk;
  if (!planned && !newest) return;
  const absl::Span<const int32_t> tokens(seq.history.data(), static_cast<size_t>(seq.pos));
  if (const int held = cache_->Find(tokens, seq.pos); held >= 0) {
    cache_->Touch(held);
    return;
  }
  int row = cache_->FreeRow();
  if (row < 0) {
    row = cache_->LeastRecentlyUsed();
    cache_->Erase(row);  // SaveSnapshot replaces the row's contents
    ++prefix_.prefix_evictions;
  }
  if (!backend_.SaveSnapshot(seq.slot, row).ok()) {
    ++prefix_.prefix_errors;
    (void)backend_.DropSnapshot(row);
    return;
  }
  const uint64_t serial = cache_->Set(row, tokens, seq.pos);
  ++prefix_.prefix_snapshots;
  if (!newest) return;
  if (seq.decode_row >= 0 && cache_->serial(seq.decode_row) == seq.decode_serial) {
    (void)backend_.DropSnapshot(seq.decode_row);
    cache_->Erase(seq.decode_row);
  }
  seq.decode_row = row;
  seq.decode_serial = serial;
}

bool Scheduler::EvictOne() {
  if (!cache_) return false;
  const int row = cache_->LeastRecentlyUsed();
  if (row < 0) return false;
  if (!backend_.DropSnapshot(row).ok()) ++prefix_.prefix_errors;
  cache_->Erase(row);
  ++prefix_.prefix_evictions;
  return true;
}

void Scheduler::PrepareSampling(Seq& s, StepEntry& e) {
  // The draw is taken here whichever side picks, so a request's tokens do not depend on it.
  const float u = s.req.sampling.temperature > 0.0f ? kernels::cpu::DrawU(s.rng) : 0.0f;
  e.sampling = kernels::cpu::MakeRowSampling(s.req.sampling, s.history, u);
  const int64_t cap = backend_.device_sampler_penalties();
  e.device_pick = cap >= 0 && s.req.logprobs < 0 && s.req.logit_bias.empty() &&
                  static_cast<int64_t>(e.sampling.penalty_ids.size()) <= cap;
}

StepBatch Scheduler::BuildBatch() {
  StepBatch b;
  const StepRules rules = backend_.step_rules();
  std::vector<Seq*> decoders;
  bool prompts = false;
  for (RequestId id : running_) {
    Seq& s = *seqs_.at(id);
    if (s.decoding())
      decoders.push_back(&s);
    else
      prompts = true;
  }
  // Separate steps (the exact class): a decode step, then a prompt step, while both wait.
  const bool decode = !decoders.empty() && (!rules.separate_decode || !prompts || !last_step_decoded_);
  if (decode) {
    // Every running request decodes every step (decode rows never wait behind prompts), or, past
    // the backend's decode rows, those that have waited longest since they last decoded (or since
    // they began decoding), oldest admission first among equals: a decoder skipped now goes before
    // every one taken now, whatever joins or leaves in between.
    size_t take = decoders.size();
    if (rules.max_decode_rows > 0 && static_cast<int64_t>(take) > rules.max_decode_rows) {
      take = static_cast<size_t>(rules.max_decode_rows);
      for (Seq* s : decoders)
        if (s->last_decode_step < 0) s->last_decode_step = decode_steps_;
      std::stable_sort(decoders.begin(), decoders.end(),
                       [](const Seq* a, const Seq* b) { return a->last_decode_step < b->last_decode_step; });
      decoders.resize(take);
      std::sort(decoders.begin(), decoders.end(), [&](const Seq* a, const Seq* b) { return a->id < b->id; });
    }
    ++decode_steps_;
    for (Seq* s : decoders) {
      s->last_decode_step = decode_steps_;
      b.entries.push_back({s->slot, s->pos, EntryKind::kDecode, {s->history.back()}, s->id});
      PrepareSampling(*s, b.entries.back());
    }
  }
  last_step_decoded_ = decode;
  if (decode && rules.separate_decode) return b;
  int64_t budget = options_.step_tokens - static_cast<int64_t>(b.entries.size());
  // Prompt chunks in admission order: the oldest prompt takes what it can, then the next.
  for (RequestId id : running_) {
    Seq& s = *seqs_.at(id);
    if (s.decoding()) continue;
    const int64_t left = s.prompt_size() - s.prefilled;
    int64_t n = left <= budget ? left : budget / options_.prefill_align * options_.prefill_align;
    if (n == 0) continue;  // a later prompt may still fit whole in what is left
    // Stop at the next planned snapshot (both on the grid, so the chunk stays aligned).
    for (int64_t at : s.snapshot_at)
      if (at > s.prefilled) {
        n = std::min(n, at - s.prefilled);
        break;
      }
    StepEntry e{s.slot, s.pos, n == left ? EntryKind::kLastPromptChunk : EntryKind::kPromptChunk, {}, s.id};
    if (e.sampled()) PrepareSampling(s, e);
    e.tokens.assign(s.req.prompt.begin() + s.prefilled, s.req.prompt.begin() + s.prefilled + n);
    b.entries.push_back(std::move(e));
    budget -= n;
  }
  return b;
}

absl::Status Scheduler::Step() {
  if (in_step_) return absl::FailedPreconditionError("Step() called from inside a step (a sink)");
  in_step_ = true;
  Admit();
  StepBatch batch = BuildBatch();
  if (batch.entries.empty()) {
    in_step_ = false;
    return TakeSlotError();
  }
  ++steps_;
  rows_ += batch.rows();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<EntryOutput>> out = backend_.Execute(batch);
  // The time a prompt row costs, from steps that are mostly prompt rows (the saved-time estimate).
  if (out.ok() && batch.rows() >= 2 * static_cast<int64_t>(batch.entries.size())) {
    const double per_row = absl::ToDoubleSeconds(absl::Now() - start) / static_cast<double>(batch.rows());
    prompt_row_seconds_ = prompt_row_seconds_ == 0.0 ? per_row : 0.9 * prompt_row_seconds_ + 0.1 * per_row;
  }
  if (!out.ok()) {
    const absl::Status err(out.status().code(), absl::StrCat("step ", steps_, ": ", out.status().message()));
    for (const auto& e : batch.entries)
      if (auto it = seqs_.find(e.request); it != seqs_.end() && !it->second->cancelled)
        Finish(*it->second, FinishReason::kError, TokenEvent{}, err);
    ApplyDeferredCancels();
    in_step_ = false;
    return err;
  }
  for (size_t i = 0; i < batch.entries.size(); ++i) {
    const StepEntry& e = batch.entries[i];
    auto it = seqs_.find(e.request);
    if (it == seqs_.end() || it->second->cancelled) continue;  // cancelled by a sink this step
    Seq& seq = *it->second;
    seq.pos += static_cast<int64_t>(e.tokens.size());
    if (e.kind != EntryKind::kDecode) seq.prefilled += static_cast<int64_t>(e.tokens.size());
    MaybeSnapshot(seq, e);  // before the sampled token joins the history
    if (e.sampled()) SampleAndEmit(seq, e, (*out)[i]);
  }
  ApplyDeferredCancels();
  in_step_ = false;
  return TakeSlotError();
}

void Scheduler::SampleAndEmit(Seq& seq, const StepEntry& entry, const EntryOutput& out) {
  const int64_t vocab = backend_.n_vocab();
  const std::vector<float>& logits = out.logits;
  TokenEvent ev;
  const std::string where = seq.generated == 0 ? absl::StrCat("the prompt (", seq.prompt_size(), " tokens)")
                                               : absl::StrCat("decode step ", seq.generated);
  absl::Status bad;
  if (out.non_finite)
    bad =
        absl::DataLossError(absl::StrCat("the logits of ", where, " are not all finite (found by the backend's pick)"));
  else if (out.token >= 0)
    bad = out.token < vocab ? absl::OkStatus()
                            : absl::InternalError(absl::StrCat("the backend picked token ", out.token,
                                                               " outside the vocabulary of ", vocab));
  else if (static_cast<int64_t>(logits.size()) == vocab)
    bad = CheckFiniteLogits(logits.data(), vocab, where);
  else
    bad = absl::InternalError(
        absl::StrCat("the backend returned ", logits.size(), " logits for a sampled entry (n_vocab ", vocab, ")"));
  if (!bad.ok()) {
    Finish(seq, FinishReason::kError, std::move(ev),
           absl::Status(bad.code(), absl::StrCat("request ", seq.id, ": ", bad.message())));
    return;
  }
  // A backend's pick is SampleRow on the entry's inputs, what the host computes otherwise.
  const kernels::cpu::RowSampling& rs = entry.sampling;
  const float* row = logits.data();
  std::vector<float> biased;
  if (out.token < 0 && !seq.req.logit_bias.empty()) {
    biased = logits;
    for (const auto& [id, bias] : seq.req.logit_bias) biased[static_cast<size_t>(id)] += bias;
    row = biased.data();
  }
  const int32_t token =
      out.token >= 0 ? out.token
                     : kernels::cpu::SampleRow(row, vocab, rs.params, rs.penalty_ids.data(), rs.penalty_counts.data(),
                                               static_cast<int64_t>(rs.penalty_ids.size()));
  seq.history.push_back(token);
  ++seq.generated;
  ev.token = token;
  if (seq.req.logprobs >= 0) FillLogprobs(logits, token, seq.req.logprobs, ev);

  FinishReason reason = FinishReason::kNone;
  const bool stop_id = std::find(seq.req.stop_ids.begin(), seq.req.stop_ids.end(), token) != seq.req.stop_ids.end();
  if (stop_id) {
    reason = FinishReason::kStop;  // the stop token's own text is not shown
  } else if (seq.detok) {
    StopStringFilter::Result r = seq.stops->Push(seq.detok->Push(token));
    ev.text = std::move(r.emit);
    if (r.stopped) {
      reason = FinishReason::kStop;
      seq.text_done = true;
    }
  }
  if (reason == FinishReason::kNone && seq.generated == seq.req.max_tokens) reason = FinishReason::kLength;
  if (reason == FinishReason::kNone) {
    ev.id = seq.id;
    ev.usage = seq.usage();
    if (seq.sink) seq.sink(ev);
    return;
  }
  Finish(seq, reason, std::move(ev));
}

void Scheduler::Finish(Seq& seq, FinishReason reason, TokenEvent ev, absl::Status error) {
  // Text still held back (an incomplete UTF-8 tail, a possible stop-string prefix) ends the
  // stream, unless a stop string already cut it.
  if (seq.detok && !seq.text_done) {
    StopStringFilter::Result r = seq.stops->Push(seq.detok->Flush());
    ev.text += r.emit;
    if (!r.stopped) ev.text += seq.stops->Flush();
    // A stop string completed by the flushed tail ends a max_tokens request as a stop.
    if (r.stopped && reason == FinishReason::kLength) reason = FinishReason::kStop;
  }
  ev.id = seq.id;
  ev.last = true;
  ev.reason = reason;
  ev.error = std::move(error);
  ev.usage = seq.usage();
  if (seq.slot >= 0) {
    running_.erase(std::find(running_.begin(), running_.end(), seq.id));
    // Reset at release, so a cancelled or finished request leaves no state behind.
    absl::Status st = backend_.ResetSlot(seq.slot);
    if (st.ok())
      slot_free_[seq.slot] = true;
    else
      LoseSlot(seq.slot, absl::Status(st.code(), absl::StrCat("resetting slot ", seq.slot, " (its request ", seq.id,
                                                              " ended): ", st.message(), "; the slot is not reused")));
  } else {
    queue_.erase(std::find(queue_.begin(), queue_.end(), seq.id));
  }
  // The sink may Submit or Cancel: forget the request before calling it.
  std::unique_ptr<Seq> owned = std::move(seqs_.at(seq.id));
  seqs_.erase(seq.id);
  if (owned->sink) owned->sink(ev);
}

absl::Status Scheduler::Cancel(RequestId id, absl::Status why) {
  auto it = seqs_.find(id);
  if (it == seqs_.end() || it->second->cancelled)
    return absl::NotFoundError(absl::StrCat("request ", id, " is not queued or running"));
  if (in_step_) {
    it->second->cancelled = true;
    deferred_cancels_.emplace_back(id, std::move(why));
    return absl::OkStatus();
  }
  const FinishReason reason = why.ok() ? FinishReason::kCancelled : FinishReason::kError;
  Finish(*it->second, reason, TokenEvent{}, std::move(why));
  return TakeSlotError();
}

void Scheduler::ApplyDeferredCancels() {
  // Finish may run sinks that cancel more: take the list first.
  while (!deferred_cancels_.empty()) {
    std::vector<std::pair<RequestId, absl::Status>> ids = std::move(deferred_cancels_);
    deferred_cancels_.clear();
    for (auto& [id, why] : ids)
      if (auto it = seqs_.find(id); it != seqs_.end()) {
        const FinishReason reason = why.ok() ? FinishReason::kCancelled : FinishReason::kError;
        Finish(*it->second, reason, TokenEvent{}, std::move(why));
      }
  }
}

absl::Status Scheduler::RunToCompletion() {
  while (!idle()) {
    const int64_t before = steps_;
    MEMRA_RETURN_IF_ERROR(Step());
    // Every step with a request running has a decode or prompt row (step_tokens >=
    // MinStepTokens), so this would be a scheduler bug, not a state to wait out.
    if (steps_ == before && !idle())
      return absl::InternalError(absl::StrCat("the scheduler made no progress with ", queue_.size(), " queued and ",
                                              running_.size(), " running requests"));
  }
  return absl::OkStatus();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = prefix_;
  if (cache_) {
    s.prefix_rows = cache_->rows();
    s.prefix_rows_used = cache_->used();
  }
  s.steps = steps_;
  s.rows = rows_;
  s.queued = static_cast<int>(queue_.size());
  s.running = static_cast<int>(running_.size());
  s.free_slots = static_cast<int>(std::count(slot_free_.begin(), slot_free_.end(), true));
  s.lost_slots = lost_slots_;
  return s;
}

}  // namespace memra::runtime
