// From a recorded genome back to a build: its PTX edits as a builder pass, and genomes read from
// a trace database, so `ptxevo eval` and `ptxevo build` can take a campaign's candidate by id.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "ir/module.hpp"
#include "mutators/pass.hpp"
#include "search/genome.hpp"

namespace ptxevo::search {

// Applies the edits in order; returns "" or why a pass is unknown or refused.
std::function<std::string(ir::Module&)> edit_pass(const std::vector<PtxEdit>& edits,
                                                  std::shared_ptr<const mutators::PassRegistry> passes);

// The genome of candidate `id` in the trace database at `db`; throws std::runtime_error with a
// message naming the file and the id.
Genome load_candidate_genome(const std::filesystem::path& db, std::int64_t id);

}  // namespace ptxevo::search
