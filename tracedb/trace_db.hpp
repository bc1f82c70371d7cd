// The campaign engine's trace database: one SQLite file (WAL mode, versioned schema) holding
// campaigns, the candidates they proposed and built, every evaluation with its per-shape
// results, and the environments they ran on. Running the same campaign again resumes it from
// here; after a kill -9 at any moment it loses at most the candidates in flight.
// See docs/trace_db.md for the schema, the durability choices and the resume rules.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/eval_types.hpp"
#include "tracedb/sqlite_handle.hpp"

namespace ptxevo::tracedb {

// What identifies a campaign: re-running the same spec file with the same content resumes it.
struct CampaignKey {
  std::string spec_path;
  std::string spec_hash;    // sha256_hex of the spec text
  std::string op;
  std::string arch;         // e.g. "sm_90a"
  std::string config_json;  // engine settings, for the record (not part of the key)
};

struct Campaign {
  std::int64_t id = 0;
  CampaignKey key;
  std::string status;       // "running", "done", "stopped"
  std::string created_at;
  bool resumed = false;     // true when open_campaign found it already there
};

// Where evaluations ran. Identical environments share a row.
struct Environment {
  std::string gpu;
  std::string driver;
  std::string cuda;
  std::string toolchain_json = "{}";  // nvrtc / ptxas / nvJitLink versions
  std::string clocks_json = "{}";     // SM and memory clocks, power limit
};

enum class CandidateState { Proposed, Built, Measured, Failed };
const char* to_string(CandidateState s);
CandidateState candidate_state_from(const std::string& s);  // throws on an unknown name

struct NewCandidate {
  std::string genome_hash;  // identity within a campaign (see docs/design.md, Genome and identity)
  std::string genome_json;
  std::optional<std::int64_t> parent_id;
  std::string operator_name;  // mutator or agent that made it
  int generation = 0;
  int island = 0;
};

struct RecordedCandidate {
  std::int64_t id = 0;
  bool inserted = false;  // false: the genome was already in this campaign
  CandidateState state = CandidateState::Proposed;
  // Measured or failed to build: the engine must not spend a GPU on it again.
  bool done() const { return state == CandidateState::Measured || state == CandidateState::Failed; }
};

// What a candidate's build left in the database (the builder's own result is evaluator::BuildResult).
struct BuildRecord {
  bool ok = false;
  std::string ptx_hash;         // empty when the build stopped before PTX existed
  std::string stage;            // stage that failed ("nvrtc", "edit", "ptxas", "link"), or "done"
  std::string log;
  std::string resources_json = "{}";  // registers, spills, shared memory per function
  std::string ptx_profile_json;       // search/ptx_profile.hpp; empty: none (stored as NULL)
};

struct CandidateRow {
  std::int64_t id = 0;
  std::string genome_hash;
  std::string genome_json;
  std::optional<std::int64_t> parent_id;
  std::string operator_name;
  std::string ptx_hash;
  CandidateState state = CandidateState::Proposed;
};

// How an evaluation came to be (schema v2).
struct EvaluationMeta {
  std::string mode = "gpu";         // "gpu" or "replay"
  std::string purpose = "candidate";  // "candidate", "remeasure", "final"
  std::optional<double> fitness_low, fitness_high;  // geometric means of the per-shape CI bounds
};

// A candidate with its latest passing evaluation: what a resumed campaign rebuilds its
// population from.
struct MeasuredCandidate {
  CandidateRow candidate;
  int generation = 0;
  int island = 0;
  double fitness = 0;
  double fitness_low = 0;
  double fitness_high = 0;
  int measurements = 0;  // passing evaluations of this candidate
};

struct RankedCandidate {
  CandidateRow candidate;
  std::int64_t evaluation_id = 0;
  double fitness = 0;
};

// A genome that did well in an earlier campaign (TraceDb::earlier_best).
struct EarlierBest {
  std::int64_t campaign_id = 0;
  std::int64_t candidate_id = 0;
  std::string arch;
  std::string gpu;
  std::string genome_hash;
  std::string genome_json;
  double fitness = 0;  // against that campaign's baseline
};

// One LLM chat call (schema v4); see agents::CallRecord.
struct LlmCallRow {
  std::string role;
  int turn = 0;
  std::string model;
  std::string endpoint;
  std::string status;
  std::string error;
  std::string stop_reason;
  int http_status = 0;
  std::int64_t request_bytes = 0;
  std::int64_t reserved_input_tokens = 0;
  std::int64_t reserved_output_tokens = 0;
  std::optional<std::int64_t> input_tokens, output_tokens;
  std::optional<double> cost_usd;
  std::int64_t latency_ms = 0;
};

// An LLM answer that did not become a measured candidate, and why (schema v4).
struct AgentRejection {
  std::optional<std::int64_t> parent_id;
  std::optional<std::int64_t> candidate_id;  // set when a built candidate failed
  std::optional<std::int64_t> call_id;       // the call whose answer was rejected
  std::string role;
  std::string stage;  // "reply", "screen", "endpoint", "budget", "build", "gate"
  std::string code;
  std::string reason;
};

// What an LLM-written candidate was meant to be (schema v5).
struct LlmProposalRow {
  std::int64_t candidate_id = 0;
  std::optional<std::int64_t> call_id;
  std::string role;  // coder or fixer
  std::string kind;  // source, edits, knobs
  std::string name;
  std::string rationale;
  std::string strategy;
};

// What a campaign's LLM calls spent, summed over llm_calls.
struct LlmSpend {
  std::int64_t calls = 0;
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  double usd = 0;
  std::int64_t unpriced_calls = 0;
};

class TraceDb {
 public:
  // The schema version this build writes; migrations bring older files up to it.
  static int latest_version();

  // Creates the file or migrates it to latest_version(); throws std::runtime_error with a
  // message a user can act on for a file from a newer ptxevo, or sqlite::SqliteError.
  static TraceDb open(const std::filesystem::path& path);

  int schema_version();
  const std::filesystem::path& path() const { return path_; }

  // Finds the campaign by (spec_path, spec_hash) or creates it (status "running").
  Campaign open_campaign(const CampaignKey& key);
  std::optional<Campaign> find_campaign(const std::string& spec_path, const std::string& spec_hash);
  void set_campaign_status(std::int64_t campaign_id, const std::string& status);

  std::int64_t record_environment(const Environment& env);

  // Idempotent on (campaign, genome_hash): a duplicate returns the existing row unchanged.
  RecordedCandidate record_candidate(std::int64_t campaign_id, const NewCandidate& c);
  // Moves a candidate to "built", or "failed" when !b.ok.
  void record_build(std::int64_t candidate_id, const BuildRecord& b);
  // One transaction: the evaluation, one row per shape, and the candidate's state "measured".
  std::int64_t record_evaluation(std::int64_t candidate_id, std::int64_t environment_id,
                                 const evaluator::EvalReport& report, const EvaluationMeta& meta = {});
  // The key of a built candidate's PTX and launch knobs (two genomes building the same share it).
  void set_build_key(std::int64_t candidate_id, const std::string& build_key);
  // A measured candidate of the campaign with this build key, if any.
  std::optional<std::int64_t> measured_with_build_key(std::int64_t campaign_id, const std::string& build_key);
  // Settles a candidate without an evaluation of its own: outcome "duplicate" (of duplicate_of)
  // or "unmeasured" (replay data has nothing for it). It is never measured again.
  void settle_candidate(std::int64_t candidate_id, const std::string& outcome,
                        std::optional<std::int64_t> duplicate_of = std::nullopt);
  // Every candidate with a passing evaluation, with its latest figures.
  std::vector<MeasuredCandidate> measured_candidates(std::int64_t campaign_id);
  int max_generation(std::int64_t campaign_id);  // -1 when the campaign has no candidates
  // GPU (or replay) evaluations of proposed candidates: what the evaluation budget counts.
  std::int64_t count_candidate_evaluations(std::int64_t campaign_id);

  // Candidates ranked by the fitness of their latest passing evaluation, best first.
  std::vector<RankedCandidate> best_candidates(std::int64_t campaign_id, int n);
  // Warm start: the best passing candidates of the other campaigns on `op` in this database,
  // best first, at most `n` (one row per genome hash, its best campaign). Each row's campaign,
  // arch and GPU say where the figure was measured.
  std::vector<EarlierBest> earlier_best(std::int64_t exclude_campaign_id, const std::string& op, int n);
  std::int64_t count_evaluations(std::int64_t campaign_id);
  std::int64_t count_candidates(std::int64_t campaign_id);
  // Proposed or built but not measured: what a resumed campaign must build and measure again.
  std::vector<CandidateRow> pending_candidates(std::int64_t campaign_id);
  std::optional<CandidateRow> candidate(std::int64_t candidate_id);

  // The LLM agents' record (schema v4).
  std::int64_t record_llm_call(std::int64_t campaign_id, const LlmCallRow& call);
  std::int64_t record_agent_rejection(std::int64_t campaign_id, const AgentRejection& rejection);
  // Once per candidate (a resumed campaign re-proposing it keeps the first row).
  void record_llm_proposal(std::int64_t campaign_id, const LlmProposalRow& proposal);
  // Calls that reached the endpoint (sent, whatever came back): what the budget counts.
  LlmSpend llm_spend(std::int64_t campaign_id);

  // PRAGMA integrity_check returned "ok".
  bool integrity_ok();

  // For tests and ad-hoc queries; the schema is documented in docs/trace_db.md.
  sqlite::Connection& connection() { return db_; }

 private:
  TraceDb(std::filesystem::path path, sqlite::Connection db) : path_(std::move(path)), db_(std::move(db)) {}
  void refuse_newer(int version) const;  // throws for a file written by a newer ptxevo
  void migrate();

  std::filesystem::path path_;
  sqlite::Connection db_;
};

}  // namespace ptxevo::tracedb
