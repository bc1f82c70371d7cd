// The `--arch` option every command that builds takes (campaign, eval, build, universe, export,
// replay export): one meaning and one error everywhere.
#pragma once

#include <ostream>
#include <string>

#include "evaluator/spec.hpp"

namespace ptxevo::cli {

inline constexpr const char* kArchHelp = "Target: sm_90a or sm_100a (sm_90, sm_100 accepted); default: the spec's";

// Sets spec.arch to `given` (normalised; empty keeps the spec's, normalised too). On a target
// ptxevo does not know, prints why on `err` and returns false (the caller exits with status 2).
bool apply_arch_option(const std::string& given, evaluator::Spec& spec, std::ostream& err);
// The same for an arch held apart from a spec: `arch` normalised in place (empty stays empty).
bool normalize_arch_option(std::string& arch, std::ostream& err);

}  // namespace ptxevo::cli
