// Semantic checks after parsing: every register declared, every name defined, guards are
// predicates, labels unique. Each problem comes back with its line and column.
#pragma once

#include <vector>

#include "ir/diagnostic.hpp"
#include "ir/module.hpp"

namespace ptxevo::ir {

std::vector<Diagnostic> verify(const Module& m);

}  // namespace ptxevo::ir
