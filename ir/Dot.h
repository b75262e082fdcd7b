// Graphviz rendering of a function: one node per op (mnemonic, attributes, result types),
// edges along SSA uses labelled with the operand name, weights and states as side nodes,
// segments as clusters. `memra opt --dot` prints it.
#pragma once

#include "ir/Function.h"
#include "llvm/Support/raw_ostream.h"

namespace memra::ir {

void PrintDot(const Function& f, llvm::raw_ostream& os);

}  // namespace memra::ir
