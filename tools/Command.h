// The `memra` driver's subcommands. Each tools/*Command.cc defines an llvm::cl::SubCommand with
// its options and registers a function that runs it.
#pragma once

#include <vector>

#include "llvm/Support/CommandLine.h"

namespace memra::tools {

struct Command {
  llvm::cl::SubCommand* sub;
  int (*run)();
};

std::vector<Command>& CommandRegistry();

struct CommandRegistration {
  CommandRegistration(llvm::cl::SubCommand& sub, int (*run)()) { CommandRegistry().push_back({&sub, run}); }
};

}  // namespace memra::tools

#define MEMRA_REGISTER_COMMAND(sub, fn) \
  static ::memra::tools::CommandRegistration memra_command_registration_##fn(sub, fn)
