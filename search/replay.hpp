// Replay data: measurements recorded on a real GPU, exported from a campaign's trace database,
// shipped next to a spec (e.g. kernels/rmsnorm/rmsnorm_fwd.replay.json) so that a machine
// without a GPU can run a campaign whose candidates are really built but whose timings come from
// the record. A candidate the record lacks is unmeasured and never counts. Format
// "ptxevo-replay-1": JSON with the provenance (GPU, driver, toolchain, commit, date), the spec's
// op, arch and benchmark shapes, and one record per genome hash: its PTX hash and gate report.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "evaluator/eval_types.hpp"
#include "evaluator/spec.hpp"

namespace ptxevo::search {

class TraceDb;

struct ReplayRecord {
  std::string genome_hash;
  std::string ptx_hash;
  nlohmann::json genome;
  evaluator::EvalReport report;
};

struct ReplayData {
  std::string op, arch;
  std::vector<evaluator::Shape> benchmark_shapes;
  std::string gpu, driver, toolchain, commit, recorded_at;
  std::map<std::string, ReplayRecord> records;  // by genome hash
};

// Throws std::runtime_error naming the file and the problem.
ReplayData load_replay(const std::filesystem::path& path);
void write_replay(const std::filesystem::path& path, const ReplayData& data);

// Every candidate of the campaign with a GPU evaluation (its latest one with purpose
// "candidate"), with provenance from its environment row.
ReplayData export_replay(TraceDb& db, std::int64_t campaign_id, const evaluator::Spec& spec, const std::string& commit);

// "" when the data fits the spec (same op, arch and benchmark shapes); otherwise why not.
std::string replay_mismatch(const ReplayData& data, const evaluator::Spec& spec, const std::string& arch);

}  // namespace ptxevo::search
