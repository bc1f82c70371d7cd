// The files a campaign ran from: its spec's text and the seed templates the spec names, kept in
// the trace database (table campaign_files) beside the campaign, so that export, report and
// replay export work from the database alone, from any directory, after the sources moved or
// changed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/spec.hpp"
#include "tracedb/queries.hpp"
#include "tracedb/sqlite_handle.hpp"

namespace ptxevo::search {


// The spec file, every seed template it names and, for an op declared in a file, the op's
// declaration files (role "op"), read from disk. Throws std::runtime_error naming a file that
// cannot be read.
std::vector<tracedb::CampaignFile> spec_files(const evaluator::Spec& spec, const evaluator::Op* op = nullptr);

// Writes the campaign's files under `root` in their recorded layout and returns the spec's path
// there; nullopt when the database holds none. Throws std::runtime_error for a file whose content
// does not match its recorded hash or whose name leaves `root`.
std::optional<std::filesystem::path> restore_campaign_files(tracedb::sqlite::Connection& db, std::int64_t campaign,
                                                            const std::filesystem::path& root);

// The campaign's spec. `given` non-empty: that file, loaded as it is. Otherwise the recorded
// files, restored under `scratch` (default: the system's temporary folder) in a folder named by
// the spec's hash. Throws std::runtime_error when the campaign has no recorded spec or a
// recorded file is damaged; a spec that does not load is the result's error.
evaluator::SpecResult load_campaign_spec(tracedb::sqlite::Connection& db, std::int64_t campaign, const std::string& given,
                                         const evaluator::OpRegistry& registry,
                                         const std::filesystem::path& scratch = {});

}  // namespace ptxevo::search
