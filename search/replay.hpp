// Replay data: measurements recorded on a real GPU, exported from a campaign's trace database,
// shipped in the repository (data/replay/rmsnorm_fwd.replay.json, found for kernels/rmsnorm/rmsnorm_fwd.spec) so that a machine
// without a GPU can run a campaign whose candidates are really built but whose timings come from
// the record. A candidate the record lacks is unmeasured and never counts. Format
// "ptxevo-replay-1": JSON with the provenance (GPU, driver, toolchain, commit, date), the spec's
// op, arch and benchmark shapes, and one record per genome hash: its PTX hash and gate report.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "evaluator/eval_types.hpp"
#include "evaluator/spec.hpp"
#include "search/genome.hpp"

namespace ptxevo::tracedb {
class TraceDb;
}  // namespace ptxevo::tracedb

namespace ptxevo::search {


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
// Records whose genome names knobs by the op's old names, re-keyed under the genome with the
// current names (evaluator::canonical_knobs): a campaign proposes, and looks records up by, current
// names only. A record whose genome does not parse, or names a knob both ways, is left as it is.
void canonicalize_replay(ReplayData& data, const evaluator::Op& op);
void write_replay(const std::filesystem::path& path, const ReplayData& data);

// Every candidate of the campaign with a GPU evaluation (its latest one with purpose
// "candidate"), with provenance from its environment row.
ReplayData export_replay(tracedb::TraceDb& db, std::int64_t campaign_id, const evaluator::Spec& spec, const std::string& commit);

// "" when the data fits the spec (same op, arch and benchmark shapes); otherwise why not.
std::string replay_mismatch(const ReplayData& data, const evaluator::Spec& spec, const std::string& arch);

// What a replay campaign may propose: only genomes the record can score (as Kernel Tuner's
// simulation mode searches only its cache). A proposal outside the record is projected onto the
// nearest recorded genome the campaign has not taken yet: same seed, fewest knob steps (a step
// is one place in the knob's list of values), then fewest PTX edits added or dropped; ties go to
// the record's order (by genome hash), so a campaign with a fixed seed is repeatable.
class ReplayProjection {
 public:
  ReplayProjection(const ReplayData& data, const evaluator::Spec& spec);
  std::size_t size() const { return genomes_.size(); }
  bool recorded(const Genome& g) const { return hashes_.count(g.hash()) > 0; }
  // `g` itself when recorded and not taken; else the nearest recorded genome not in `taken`
  // (genome hashes); nullopt once every recorded genome is taken.
  std::optional<Genome> project(const Genome& g, const std::set<std::string>& taken) const;
  // Knob steps plus edits added or dropped from `a` to `b`; a different seed is far.
  double distance(const Genome& a, const Genome& b) const;

 private:
  std::vector<Genome> genomes_;  // the record's genomes that parse, in hash order
  std::vector<std::string> genome_hashes_;
  std::set<std::string> hashes_;
  std::map<std::string, std::map<std::string, std::vector<evaluator::KnobValue>>> values_;  // seed -> knob -> values
};

}  // namespace ptxevo::search
