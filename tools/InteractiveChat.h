// The interactive multi-turn chat of `memra run -i` / `-cnv` (llama-cli's conversation mode): read a
// user line, render the whole conversation with the GGUF's chat template, feed the session only
// the tokens it does not hold yet, stream the reply, repeat until end of input.
//
//   tools::ChatLoopOptions opts;
//   opts.system_prompt = "You are terse.";
//   opts.gen.n_predict = -1;  // until end of generation (or the context is full)
//   opts.interrupted = &g_interrupted;  // set by a SIGINT handler
//   absl::Status st = tools::RunInteractiveChat(*session, opts, std::cin, llvm::outs(), llvm::errs());
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <istream>
#include <string>

#include "absl/status/status.h"
#include "llvm/Support/raw_ostream.h"
#include "runtime/Session.h"

namespace memra::tools {

// What one finished turn did (ChatLoopOptions::on_turn).
struct ChatTurn {
  int turn = 0;                    // 1, 2, ...
  int64_t n_fed = 0;               // prompt tokens fed this turn (the rendered text's new suffix)
  bool re_prefilled = false;       // the session was Reset and the whole conversation fed again
  bool interrupted = false;        // the reply was stopped by ChatLoopOptions::interrupted
  int64_t position = 0;            // the session's position after the turn
  std::string reply;               // the assistant text recorded for the next render
  runtime::GenerationStats stats;  // of this turn's Generate
};

struct ChatLoopOptions {
  std::string system_prompt;  // a "system" message first when not empty (-sys)
  std::string first_message;  // the first user message, before reading `in` (-p); may be empty
  // Per reply. n_predict < 0: until end of generation or a full context (llama.cpp's -n -1);
  // turn k (1-based) samples with seed + k - 1. stop_at_eog (a reply ends there) and exact_stop
  // (no device decode steps past a reply) are forced on.
  runtime::GenerationParams gen;
  // Set by a Ctrl-C handler. During a reply: the reply stops (what was generated is kept and
  // recorded), a newline is printed, the loop clears the flag and reads the next line. Set while
  // waiting for a line (a handler installed without SA_RESTART also makes the read fail): the chat
  // ends cleanly, as llama-cli's Ctrl-C at its prompt. Not const: the loop clears it.
  std::atomic<bool>* interrupted = nullptr;
  bool echo_prompt_marker = true;  // "> " before reading each line (and before -p's message)
  // Called after every turn (timings, tests); may be empty.
  std::function<void(const ChatTurn&)> on_turn;
};

// Runs the chat on `s` (Reset first when it holds anything) until `in` ends (EOF: OK). Empty or
// blank lines are skipped. Replies stream to `out`; notes (a re-prefill) go to `err`. Errors: the
// model has no tokenizer or no chat template; the conversation does not fit the context
// (ResourceExhausted naming the context size and -c/--ctx-size; the reply so far stays printed);
// any error of the session, prefixed with the turn.
absl::Status RunInteractiveChat(runtime::Session& s, const ChatLoopOptions& opts, std::istream& in,
                                llvm::raw_ostream& out, llvm::raw_ostream& err);

}  // namespace memra::tools
