#include "tracedb/queries.hpp"

namespace ptxevo::tracedb {

std::optional<std::string> campaign_arch(sqlite::Connection& db, std::int64_t campaign_id) {
  auto q = db.prepare("SELECT arch FROM campaigns WHERE id = ?");
  q.bind(1, campaign_id);
  if (!q.step()) return std::nullopt;
  return q.column_text(0);
}

std::optional<std::string> campaign_config_json(sqlite::Connection& db, std::int64_t campaign_id) {
  auto q = db.prepare("SELECT config_json FROM campaigns WHERE id = ?");
  q.bind(1, campaign_id);
  if (!q.step()) return std::nullopt;
  return q.column_text(0);
}

std::vector<CampaignSpecHash> campaigns_of_op(sqlite::Connection& db, const std::string& op) {
  std::vector<CampaignSpecHash> out;
  auto q = db.prepare("SELECT id, spec_hash FROM campaigns WHERE op = ? ORDER BY id");
  q.bind(1, op);
  while (q.step()) out.push_back({q.column_int(0), q.column_text(1)});
  return out;
}

std::optional<std::int64_t> latest_gpu_campaign(sqlite::Connection& db, const std::string& op, const std::string& arch) {
  auto q = db.prepare(
      "SELECT id FROM campaigns WHERE (? = '' OR (op = ? AND arch = ?)) AND spec_path LIKE '%#gpu' "
      "ORDER BY id DESC LIMIT 1");
  q.bind(1, op).bind(2, op).bind(3, arch);
  if (!q.step()) return std::nullopt;
  return q.column_int(0);
}

std::vector<CampaignSummary> campaign_summaries(sqlite::Connection& db) {
  std::vector<CampaignSummary> out;
  auto q = db.prepare(
      "SELECT k.id, k.op, k.arch, k.spec_path, k.status, "
      "(SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
      " WHERE c.campaign_id = k.id AND e.verdict = 'pass'), "
      "coalesce((SELECT env.gpu || ', driver ' || env.driver || ', ' || env.cuda FROM evaluations e "
      " JOIN candidates c ON c.id = e.candidate_id JOIN environments env ON env.id = e.environment_id "
      " WHERE c.campaign_id = k.id ORDER BY e.id DESC LIMIT 1), 'nothing measured') "
      "FROM campaigns k ORDER BY k.op, k.id");
  while (q.step())
    out.push_back({q.column_int(0), q.column_text(1), q.column_text(2), q.column_text(3), q.column_text(4),
                   q.column_int(5), q.column_text(6)});
  return out;
}

std::optional<std::int64_t> candidate_with_genome(sqlite::Connection& db, std::int64_t campaign_id,
                                                  const std::string& genome_hash) {
  auto q = db.prepare("SELECT id FROM candidates WHERE campaign_id = ? AND genome_hash = ?");
  q.bind(1, campaign_id).bind(2, genome_hash);
  if (!q.step()) return std::nullopt;
  return q.column_int(0);
}

std::vector<std::string> genome_hashes(sqlite::Connection& db, std::int64_t campaign_id) {
  std::vector<std::string> out;
  auto q = db.prepare("SELECT genome_hash FROM candidates WHERE campaign_id = ? ORDER BY id");
  q.bind(1, campaign_id);
  while (q.step()) out.push_back(q.column_text(0));
  return out;
}

std::int64_t count_unmeasured(sqlite::Connection& db, std::int64_t campaign_id) {
  auto q = db.prepare("SELECT count(*) FROM candidates WHERE campaign_id = ? AND outcome = 'unmeasured'");
  q.bind(1, campaign_id);
  q.step();
  return q.column_int(0);
}

std::vector<GateOutcome> gate_outcomes(sqlite::Connection& db, std::int64_t campaign_id) {
  std::vector<GateOutcome> out;
  auto q = db.prepare(
      "SELECT c.genome_json, e.verdict FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
      "WHERE c.campaign_id = ? AND e.purpose = 'candidate' ORDER BY e.id");
  q.bind(1, campaign_id);
  while (q.step()) out.push_back({q.column_text(0), q.column_text(1) == "pass"});
  return out;
}

std::vector<EditBuild> edit_builds(sqlite::Connection& db, std::int64_t campaign_id) {
  std::vector<EditBuild> out;
  auto q = db.prepare(
      "SELECT operator, parent_id, build_ok, build_stage, substr(coalesce(build_log, ''), 1, 200), genome_json "
      "FROM candidates WHERE campaign_id = ? AND (operator LIKE 'ptx:%' OR operator = 'random') "
      "AND build_stage IS NOT NULL ORDER BY id");
  q.bind(1, campaign_id);
  while (q.step())
    out.push_back({q.column_text(0), q.column_opt_int(1), q.column_int(2) != 0, q.column_text(3), q.column_text(4),
                   q.column_text(5)});
  return out;
}

std::optional<std::string> latest_passing_report(sqlite::Connection& db, std::int64_t candidate_id) {
  auto q = db.prepare(
      "SELECT report_json FROM evaluations WHERE candidate_id = ? AND verdict = 'pass' ORDER BY id DESC LIMIT 1");
  q.bind(1, candidate_id);
  if (!q.step()) return std::nullopt;
  return q.column_text(0);
}

std::int64_t count_agent_rejections(sqlite::Connection& db, std::int64_t campaign_id) {
  auto q = db.prepare("SELECT count(*) FROM agent_rejections WHERE campaign_id = ?");
  q.bind(1, campaign_id);
  q.step();
  return q.column_int(0);
}

bool is_trace_database(sqlite::Connection& db) {
  return db.query_int("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'candidates'") > 0;
}

bool campaign_exists(sqlite::Connection& db, std::int64_t campaign_id) {
  auto q = db.prepare("SELECT id FROM campaigns WHERE id = ?");
  q.bind(1, campaign_id);
  return q.step();
}

std::optional<std::int64_t> latest_campaign(sqlite::Connection& db) {
  auto q = db.prepare("SELECT id FROM campaigns ORDER BY id DESC LIMIT 1");
  if (!q.step()) return std::nullopt;
  return q.column_int(0);
}

std::optional<CandidateOrigin> candidate_origin(sqlite::Connection& db, std::int64_t candidate_id) {
  auto q = db.prepare(
      "SELECT k.campaign_id, k.genome_json, k.genome_hash, m.spec_path, m.spec_hash FROM candidates k "
      "JOIN campaigns m ON m.id = k.campaign_id WHERE k.id = ?");
  q.bind(1, candidate_id);
  if (!q.step()) return std::nullopt;
  return CandidateOrigin{q.column_int(0), q.column_text(1), q.column_text(2), q.column_text(3), q.column_text(4)};
}

std::optional<CandidateParent> candidate_parent(sqlite::Connection& db, std::int64_t candidate_id) {
  auto q = db.prepare("SELECT operator, parent_id FROM candidates WHERE id = ?");
  q.bind(1, candidate_id);
  if (!q.step()) return std::nullopt;
  return CandidateParent{q.column_text(0), q.column_opt_int(1)};
}

std::optional<EvaluationRow> latest_passing_evaluation(sqlite::Connection& db, std::int64_t candidate_id) {
  auto q = db.prepare(
      "SELECT e.id, e.verdict, e.fitness, e.created_at, v.gpu, v.driver, v.cuda, v.toolchain_json "
      "FROM evaluations e JOIN environments v ON v.id = e.environment_id "
      "WHERE e.candidate_id = ? AND e.verdict = 'pass' ORDER BY e.id DESC LIMIT 1");
  q.bind(1, candidate_id);
  if (!q.step()) return std::nullopt;
  return EvaluationRow{q.column_int(0),  q.column_text(1), q.column_opt_double(2), q.column_text(3),
                       q.column_text(4), q.column_text(5), q.column_text(6),       q.column_text(7)};
}

std::vector<ShapeResultRow> shape_results(sqlite::Connection& db, std::int64_t evaluation_id) {
  std::vector<ShapeResultRow> out;
  auto q = db.prepare(
      "SELECT shape_json, class, passed, rel_l2_json, max_abs_json, cand_median, base_median, speedup "
      "FROM shape_results WHERE evaluation_id = ? ORDER BY shape_index");
  q.bind(1, evaluation_id);
  while (q.step())
    out.push_back({q.column_text(0), q.column_text(1), q.column_int(2) != 0, q.column_text(3), q.column_text(4),
                   q.column_opt_double(5), q.column_opt_double(6), q.column_opt_double(7)});
  return out;
}

std::optional<std::string> candidate_resources_json(sqlite::Connection& db, std::int64_t candidate_id) {
  auto q = db.prepare("SELECT resources_json FROM candidates WHERE id = ?");
  q.bind(1, candidate_id);
  if (!q.step()) return std::nullopt;
  return q.column_text(0);
}

std::vector<BuildFailure> recent_build_failures(sqlite::Connection& db, std::int64_t campaign_id, int n) {
  std::vector<BuildFailure> out;
  auto q = db.prepare(
      "SELECT operator, build_stage, build_log FROM candidates WHERE campaign_id = ? AND build_ok = 0 ORDER BY id DESC LIMIT ?");
  q.bind(1, campaign_id).bind(2, std::int64_t{n});
  while (q.step()) out.push_back({q.column_text(0), q.column_text(1), q.column_text(2)});
  return out;
}

std::vector<GateFailure> recent_gate_failures(sqlite::Connection& db, std::int64_t campaign_id, int n) {
  std::vector<GateFailure> out;
  auto q = db.prepare(
      "SELECT c.operator, e.reasons_json FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
      "WHERE c.campaign_id = ? AND e.verdict != 'pass' ORDER BY e.id DESC LIMIT ?");
  q.bind(1, campaign_id).bind(2, std::int64_t{n});
  while (q.step()) out.push_back({q.column_text(0), q.column_text(1)});
  return out;
}

std::vector<RecentCandidate> recent_candidates(sqlite::Connection& db, std::int64_t campaign_id, int n) {
  std::vector<RecentCandidate> out;
  auto q = db.prepare(
      "SELECT c.id, c.operator, c.genome_json, c.state, c.build_stage, c.outcome, "
      "(SELECT fitness FROM evaluations e WHERE e.candidate_id = c.id ORDER BY e.id DESC LIMIT 1), "
      "p.name, p.kind FROM candidates c LEFT JOIN llm_proposals p ON p.candidate_id = c.id "
      "WHERE c.campaign_id = ? ORDER BY c.id DESC LIMIT ?");
  q.bind(1, campaign_id).bind(2, std::int64_t{n});
  while (q.step())
    out.push_back({q.column_int(0), q.column_text(1), q.column_text(2), q.column_text(3), q.column_text(4),
                   q.column_text(5), q.column_opt_double(6), q.column_text(7), q.column_text(8)});
  return out;
}

std::vector<OperatorTally> operator_tallies(sqlite::Connection& db, std::int64_t campaign_id, int n) {
  std::vector<OperatorTally> out;
  auto q = db.prepare(
      "SELECT c.operator, count(*), sum(c.build_ok = 0), "
      "sum(EXISTS (SELECT 1 FROM evaluations e WHERE e.candidate_id = c.id AND e.verdict = 'pass')), "
      "max((SELECT max(fitness) FROM evaluations e WHERE e.candidate_id = c.id)) "
      "FROM candidates c WHERE c.campaign_id = ? AND c.operator NOT IN ('seed', 'random') "
      "GROUP BY c.operator ORDER BY count(*) DESC LIMIT ?");
  q.bind(1, campaign_id).bind(2, std::int64_t{n});
  while (q.step()) out.push_back({q.column_text(0), q.column_int(1), q.column_int(2), q.column_int(3), q.column_opt_double(4)});
  return out;
}

std::vector<LlmIdea> llm_ideas(sqlite::Connection& db, std::int64_t campaign_id, int n) {
  std::vector<LlmIdea> out;
  auto q = db.prepare(
      "SELECT p.name, (SELECT max(fitness) FROM evaluations e WHERE e.candidate_id = c.id AND e.verdict = 'pass'), "
      "c.state, c.build_stage FROM llm_proposals p JOIN candidates c ON c.id = p.candidate_id "
      "WHERE p.campaign_id = ? ORDER BY c.id DESC LIMIT ?");
  q.bind(1, campaign_id).bind(2, std::int64_t{n});
  while (q.step()) out.push_back({q.column_text(0), q.column_opt_double(1), q.column_text(2), q.column_text(3)});
  return out;
}

std::vector<OperatorStat> operator_stats_with_prefix(sqlite::Connection& db, const std::string& prefix, int n) {
  std::vector<OperatorStat> out;
  auto q = db.prepare("SELECT key, hits, misses FROM operator_stats WHERE key LIKE ? ORDER BY hits DESC LIMIT ?");
  q.bind(1, prefix + "%").bind(2, std::int64_t{n});
  while (q.step()) out.push_back({q.column_text(0), q.column_double(1), q.column_double(2)});
  return out;
}

std::vector<OperatorStat> operator_stats(sqlite::Connection& db) {
  std::vector<OperatorStat> out;
  auto q = db.prepare("SELECT key, hits, misses FROM operator_stats ORDER BY key");
  while (q.step()) out.push_back({q.column_text(0), q.column_double(1), q.column_double(2)});
  return out;
}

void save_operator_stats(sqlite::Connection& db, const std::vector<OperatorStat>& stats) {
  sqlite::Transaction tx(db);
  auto q = db.prepare(
      "INSERT INTO operator_stats (key, hits, misses) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
      "hits = excluded.hits, misses = excluded.misses, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')");
  for (const auto& s : stats) {
    q.reset();
    q.bind(1, s.key).bind(2, s.hits).bind(3, s.misses).run();
  }
  tx.commit();
}

std::vector<BenchmarkRow> benchmark_rows(sqlite::Connection& db, const std::string& op) {
  std::vector<BenchmarkRow> out;
  auto q = db.prepare(
      "SELECT k.id, k.config_json, c.id, c.genome_json, c.resources_json, s.shape_json, s.cand_median, e.created_at, "
      "coalesce(env.gpu, ''), coalesce(env.driver, ''), coalesce(env.cuda, ''), coalesce(c.ptx_profile_json, '') "
      "FROM shape_results s JOIN evaluations e ON e.id = s.evaluation_id "
      "JOIN candidates c ON c.id = e.candidate_id JOIN campaigns k ON k.id = c.campaign_id "
      "LEFT JOIN environments env ON env.id = e.environment_id "
      "WHERE k.op = ? AND e.verdict = 'pass' AND e.mode = 'gpu' AND s.class = 'benchmark' AND s.cand_median > 0 "
      "ORDER BY e.created_at, e.id, s.shape_index");
  q.bind(1, op);
  while (q.step()) {
    BenchmarkRow r;
    r.campaign_id = q.column_int(0);
    r.campaign_config_json = q.column_text(1);
    r.candidate_id = q.column_int(2);
    r.genome_json = q.column_text(3);
    r.resources_json = q.column_text(4);
    r.shape_json = q.column_text(5);
    r.cand_median_ms = q.column_double(6);
    r.created_at = q.column_text(7);
    r.gpu = q.column_text(8);
    r.driver = q.column_text(9);
    r.cuda = q.column_text(10);
    r.ptx_profile_json = q.column_text(11);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<ReplayRow> replay_rows(sqlite::Connection& db, std::int64_t campaign_id) {
  std::vector<ReplayRow> out;
  auto q = db.prepare(
      "SELECT c.genome_hash, coalesce(c.ptx_hash, ''), c.genome_json, e.report_json, v.gpu, v.driver, v.cuda, "
      "e.created_at FROM candidates c JOIN evaluations e ON e.id = (SELECT max(id) FROM evaluations WHERE "
      "candidate_id = c.id AND purpose = 'candidate' AND mode = 'gpu') JOIN environments v ON v.id = e.environment_id "
      "WHERE c.campaign_id = ? ORDER BY c.id");
  q.bind(1, campaign_id);
  while (q.step())
    out.push_back({q.column_text(0), q.column_text(1), q.column_text(2), q.column_text(3), q.column_text(4),
                   q.column_text(5), q.column_text(6), q.column_text(7)});
  return out;
}

void store_campaign_files(sqlite::Connection& db, std::int64_t campaign_id, const std::vector<CampaignFile>& files) {
  for (const auto& f : files)
    db.prepare("INSERT OR IGNORE INTO campaign_files (campaign_id, role, name, sha256, content) VALUES (?, ?, ?, ?, ?)")
        .bind(1, campaign_id)
        .bind(2, f.role)
        .bind(3, f.name)
        .bind(4, f.sha256)
        .bind(5, f.content)
        .run();
}

std::vector<CampaignFile> campaign_files(sqlite::Connection& db, std::int64_t campaign_id) {
  std::vector<CampaignFile> files;
  if (db.query_int("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'campaign_files'") == 0)
    return files;
  auto q = db.prepare("SELECT role, name, sha256, content FROM campaign_files WHERE campaign_id = ? ORDER BY role DESC, name");
  q.bind(1, campaign_id);
  while (q.step()) files.push_back({q.column_text(0), q.column_text(1), q.column_text(2), q.column_text(3)});
  return files;
}

}  // namespace ptxevo::tracedb
