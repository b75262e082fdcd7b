// `memra`: the driver. Dispatches to the subcommand named on the command line.
#include <cstdio>

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"
#include "tools/Command.h"

namespace memra::tools {
std::vector<Command>& CommandRegistry() {
  static std::vector<Command> registry;
  return registry;
}
}  // namespace memra::tools

int main(int argc, char** argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream& os) { os << "memra " << MEMRA_VERSION << "\n"; });
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "memra: an inference compiler for hybrid LLMs (GGUF -> op-graph IR -> CUDA plan)\n\n"
      "  memra <command> --help   shows a command's options and their defaults\n");
  for (const auto& cmd : memra::tools::CommandRegistry())
    if (*cmd.sub) return cmd.run();
  llvm::cl::PrintHelpMessage(false, true);
  return 2;
}
