#include "tools/Command.h"

namespace memra::tools {

std::vector<Command>& CommandRegistry() {
  static std::vector<Command> registry;
  return registry;
}

}  // namespace memra::tools
