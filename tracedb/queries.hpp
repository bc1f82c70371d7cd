// What the rest of ptxevo reads from and writes to a trace database besides the campaign's own
// records (trace_db.hpp): resume state, the operator posterior's rows, the cost model's training
// rows, replay data, the spec files stored with a campaign, and listings for the command line.
// Each call takes a connection, so read-only tools (export, report) can use it on a file they
// did not migrate; rows come back as plain data. The schema is in docs/trace_db.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tracedb/sqlite_handle.hpp"

namespace ptxevo::tracedb {

// ---- campaigns ----
std::optional<std::string> campaign_arch(sqlite::Connection& db, std::int64_t campaign_id);
std::optional<std::string> campaign_config_json(sqlite::Connection& db, std::int64_t campaign_id);
struct CampaignSpecHash {
  std::int64_t id = 0;
  std::string spec_hash;
};
std::vector<CampaignSpecHash> campaigns_of_op(sqlite::Connection& db, const std::string& op);
// The newest GPU campaign (on `op` and `arch` when op is not empty).
std::optional<std::int64_t> latest_gpu_campaign(sqlite::Connection& db, const std::string& op, const std::string& arch);
// Every campaign with its passing evaluations and where it last measured, by op then id.
struct CampaignSummary {
  std::int64_t id = 0;
  std::string op, arch, spec_path, status;
  std::int64_t passing = 0;
  std::string environment;  // "GPU, driver D, CUDA" of the latest evaluation, or "nothing measured"
};
std::vector<CampaignSummary> campaign_summaries(sqlite::Connection& db);

// ---- a campaign's candidates, as a resumed campaign and the LLM agents read them back ----
std::optional<std::int64_t> candidate_with_genome(sqlite::Connection& db, std::int64_t campaign_id,
                                                  const std::string& genome_hash);
std::vector<std::string> genome_hashes(sqlite::Connection& db, std::int64_t campaign_id);
std::int64_t count_unmeasured(sqlite::Connection& db, std::int64_t campaign_id);  // outcome "unmeasured"
struct GateOutcome {
  std::string genome_json;
  bool passed = false;
};
std::vector<GateOutcome> gate_outcomes(sqlite::Connection& db, std::int64_t campaign_id);  // candidates' evaluations
// Builds of the campaign's PTX-edit children and random genomes: which passes refused.
struct EditBuild {
  std::string operator_name;
  std::optional<std::int64_t> parent_id;
  bool built = false;
  std::string stage;
  std::string log_head;  // the build log's first 200 characters
  std::string genome_json;
};
std::vector<EditBuild> edit_builds(sqlite::Connection& db, std::int64_t campaign_id);
// The latest passing evaluation's report (JSON) of a candidate.
std::optional<std::string> latest_passing_report(sqlite::Connection& db, std::int64_t candidate_id);
std::int64_t count_agent_rejections(sqlite::Connection& db, std::int64_t campaign_id);

// ---- a candidate's provenance, as an export cites it ----
bool is_trace_database(sqlite::Connection& db);  // has the candidates table
bool campaign_exists(sqlite::Connection& db, std::int64_t campaign_id);
std::optional<std::int64_t> latest_campaign(sqlite::Connection& db);
struct CandidateOrigin {
  std::int64_t campaign_id = 0;
  std::string genome_json, genome_hash, spec_path, spec_hash;
};
std::optional<CandidateOrigin> candidate_origin(sqlite::Connection& db, std::int64_t candidate_id);
struct CandidateParent {
  std::string operator_name;
  std::optional<std::int64_t> parent_id;
};
std::optional<CandidateParent> candidate_parent(sqlite::Connection& db, std::int64_t candidate_id);
struct EvaluationRow {
  std::int64_t id = 0;
  std::string verdict;
  std::optional<double> fitness;
  std::string created_at, gpu, driver, cuda, toolchain_json;
};
std::optional<EvaluationRow> latest_passing_evaluation(sqlite::Connection& db, std::int64_t candidate_id);
struct ShapeResultRow {
  std::string shape_json, cls;
  bool passed = false;
  std::string rel_l2_json, max_abs_json;
  std::optional<double> cand_median, base_median, speedup;
};
std::vector<ShapeResultRow> shape_results(sqlite::Connection& db, std::int64_t evaluation_id);  // in shape order

// ---- what the LLM agents are shown about a campaign ----
std::optional<std::string> candidate_resources_json(sqlite::Connection& db, std::int64_t candidate_id);
struct BuildFailure {
  std::string operator_name, stage, log;
};
std::vector<BuildFailure> recent_build_failures(sqlite::Connection& db, std::int64_t campaign_id, int n);  // newest first
struct GateFailure {
  std::string operator_name, reasons_json;
};
std::vector<GateFailure> recent_gate_failures(sqlite::Connection& db, std::int64_t campaign_id, int n);  // newest first
struct RecentCandidate {
  std::int64_t id = 0;
  std::string operator_name, genome_json, state, build_stage, outcome;
  std::optional<double> latest_fitness;
  std::string idea_name, idea_kind;  // of an LLM proposal; empty otherwise
};
std::vector<RecentCandidate> recent_candidates(sqlite::Connection& db, std::int64_t campaign_id, int n);  // newest first
// Per operator (seeds and random genomes aside), most used first.
struct OperatorTally {
  std::string operator_name;
  std::int64_t children = 0, build_failures = 0, passed = 0;
  std::optional<double> best_fitness;
};
std::vector<OperatorTally> operator_tallies(sqlite::Connection& db, std::int64_t campaign_id, int n);
struct LlmIdea {
  std::string name;
  std::optional<double> best_passing_fitness;
  std::string state, build_stage;
};
std::vector<LlmIdea> llm_ideas(sqlite::Connection& db, std::int64_t campaign_id, int n);  // newest first

// ---- the operator posterior (table operator_stats) ----
struct OperatorStat {
  std::string key;
  double hits = 0, misses = 0;
};
std::vector<OperatorStat> operator_stats(sqlite::Connection& db);
// Keys starting with `prefix`, most hits first, at most n.
std::vector<OperatorStat> operator_stats_with_prefix(sqlite::Connection& db, const std::string& prefix, int n);
void save_operator_stats(sqlite::Connection& db, const std::vector<OperatorStat>& stats);  // one transaction

// ---- the cost model's training rows: per benchmark shape of every passing GPU evaluation on `op` ----
struct BenchmarkRow {
  std::int64_t campaign_id = 0;
  std::string campaign_config_json;
  std::int64_t candidate_id = 0;
  std::string genome_json, resources_json, shape_json;
  double cand_median_ms = 0;
  std::string created_at, gpu, driver, cuda, ptx_profile_json;
};
std::vector<BenchmarkRow> benchmark_rows(sqlite::Connection& db, const std::string& op);

// ---- replay data: each candidate's latest GPU evaluation ----
struct ReplayRow {
  std::string genome_hash, ptx_hash, genome_json, report_json, gpu, driver, cuda, created_at;
};
std::vector<ReplayRow> replay_rows(sqlite::Connection& db, std::int64_t campaign_id);

// ---- the spec and seed templates stored with a campaign (schema v7) ----
struct CampaignFile {
  std::string role;  // "spec", "seed" or "op"
  std::string name;  // the spec's file name; the others' paths relative to the spec's folder
  std::string sha256;
  std::string content;
};
// Files the campaign already holds (by name) are kept as they are.
void store_campaign_files(sqlite::Connection& db, std::int64_t campaign_id, const std::vector<CampaignFile>& files);
// Empty for a database from before schema v7 opened without migrating it.
std::vector<CampaignFile> campaign_files(sqlite::Connection& db, std::int64_t campaign_id);

}  // namespace ptxevo::tracedb
