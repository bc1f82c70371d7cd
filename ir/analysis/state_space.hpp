// PTX state spaces as they appear in instruction modifiers (.global, .shared::cta, .param::func).
// Generic addressing (no state space modifier) is a space of its own: where it lands is only
// known at run time.
#pragma once

#include <string_view>
#include <vector>

#include "ir/module.hpp"

namespace ptxevo::ir {

enum class MemSpace { Generic, Global, Shared, SharedCluster, Local, Param, Const };

const char* to_string(MemSpace s);  // "generic", "global", "shared", "shared::cluster", ...

// The space a modifier names, or false when it names none. .shared and .shared::cta are
// Shared; .shared::cluster is SharedCluster (distributed shared memory of the cluster).
bool parse_state_space(std::string_view modifier, MemSpace* out);

// State-space modifiers of `ins` in order (for copies: destination first, then source).
std::vector<MemSpace> state_spaces(const Instruction& ins);

}  // namespace ptxevo::ir
