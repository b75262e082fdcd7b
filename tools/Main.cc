// `memra`: the driver. Dispatches to the subcommand named on the command line.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/PrettyStackTrace.h"
#include "llvm/Support/raw_ostream.h"
#include "tools/Command.h"
#include "tools/Options.h"

namespace {

llvm::cl::opt<bool> ListNumericOptions("list-numeric-options",
                                       llvm::cl::desc("Print every numeric option of every command (for tests)"),
                                       llvm::cl::Hidden, llvm::cl::init(false));

// An allocation that fails despite the checks before allocating (runtime/StateMemory.h): say so
// plainly and exit, instead of LLVM's "LLVM ERROR: out of memory" abort.
void OnBadAlloc(void*, const char* reason, bool) {
  static const char kMessage[] =
      "memra: out of host memory (an allocation failed); lower --ctx-size or use a smaller model\n";
  (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)reason;
  _exit(1);
}

// The exit status once the command returned `rc`: a write to stdout that failed (a full disk, a
// closed or broken pipe) is reported and fails the run, instead of LLVM's fatal error when the
// stream is destroyed with its error unread ("memra crashed").
int Finish(int rc) {
  llvm::outs().flush();
  if (llvm::outs().has_error()) {
    const std::string why = llvm::outs().error().message();
    llvm::outs().clear_error();
    const std::string msg = "memra: cannot write the output (stdout): " + why + "\n";
    (void)!write(STDERR_FILENO, msg.data(), msg.size());
    if (rc == 0) rc = 1;
  }
  // stderr closed (2>&-): its messages are lost, not a crash.
  llvm::errs().clear_error();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  llvm::InitLLVM init(argc, argv);
  // A crash is memra's bug, not LLVM's (the banner LLVM prints above its stack trace).
  llvm::setBugReportMsg(
      "memra crashed: this is a bug in memra. Please report it with the command line and the stack trace "
      "below.\n");
  llvm::install_bad_alloc_error_handler(OnBadAlloc);
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream& os) { os << "memra " << MEMRA_VERSION << "\n"; });
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "memra: an inference compiler for hybrid LLMs (GGUF -> op-graph IR -> CUDA plan)\n\n"
      "  memra <command> --help   shows a command's options, their defaults and ranges\n");
  if (ListNumericOptions) {
    for (const auto& o : memra::tools::NumericOptions())
      llvm::outs() << o.subcommand << " " << o.name << " " << o.kind << "\n";
    return 0;
  }
  for (const auto& cmd : memra::tools::CommandRegistry())
    if (*cmd.sub) return Finish(cmd.run());
  llvm::cl::PrintHelpMessage(false, true);
  return 2;
}
