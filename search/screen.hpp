// The static screen a built candidate passes before it may take a GPU slot: spill stores above a
// bound, launch plans the knobs cannot make, and the gate's IR checks (persistent globals, clock
// reads, launches outside the declared resources, missing entries; for agent-written source also
// the entries' parameter lists). The same rules as the campaign's screen (search/campaign.cpp),
// so a closed candidate set measured by `ptxevo universe` was screened as a campaign would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "evaluator/builder.hpp"
#include "evaluator/eval_types.hpp"
#include "evaluator/op.hpp"
#include "evaluator/spec.hpp"
#include "search/genome.hpp"

namespace ptxevo::search {

// Why `b` (a successful build of `g`) must not be measured on `shapes`; empty: it may. Each
// reason is "rule: message", distinct.
std::vector<std::string> screen_reasons(const evaluator::Op& op, const evaluator::OpConfig& cfg,
                                        const std::vector<evaluator::ShapeCase>& shapes, const Genome& g,
                                        const evaluator::BuildResult& b, std::int64_t max_spill_bytes);

}  // namespace ptxevo::search
