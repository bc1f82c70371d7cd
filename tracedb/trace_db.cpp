#include "tracedb/trace_db.hpp"

#include <set>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "tracedb/trace_schema.hpp"

namespace ptxevo::tracedb {

using nlohmann::json;

const char* to_string(CandidateState s) {
  switch (s) {
    case CandidateState::Proposed: return "proposed";
    case CandidateState::Built: return "built";
    case CandidateState::Measured: return "measured";
    case CandidateState::Failed: return "failed";
  }
  return "?";
}

CandidateState candidate_state_from(const std::string& s) {
  if (s == "proposed") return CandidateState::Proposed;
  if (s == "built") return CandidateState::Built;
  if (s == "measured") return CandidateState::Measured;
  if (s == "failed") return CandidateState::Failed;
  throw std::runtime_error("trace database: unknown candidate state '" + s + "'");
}

namespace {

constexpr const char* kCandidateColumns =
    "id, genome_hash, genome_json, parent_id, operator, ptx_hash, state";

CandidateRow candidate_from(const sqlite::Statement& s, int first = 0) {
  CandidateRow r;
  r.id = s.column_int(first);
  r.genome_hash = s.column_text(first + 1);
  r.genome_json = s.column_text(first + 2);
  r.parent_id = s.column_opt_int(first + 3);
  r.operator_name = s.column_text(first + 4);
  r.ptx_hash = s.column_text(first + 5);
  r.state = candidate_state_from(s.column_text(first + 6));
  return r;
}

Campaign campaign_from(const sqlite::Statement& s) {
  Campaign c;
  c.id = s.column_int(0);
  c.key.spec_path = s.column_text(1);
  c.key.spec_hash = s.column_text(2);
  c.key.op = s.column_text(3);
  c.key.arch = s.column_text(4);
  c.key.config_json = s.column_text(5);
  c.status = s.column_text(6);
  c.created_at = s.column_text(7);
  return c;
}

// The figures of a shape that queries rank and filter by get their own columns; the whole
// timing record (floor, pool, launches) rides along as JSON.
json timing_json(const evaluator::ShapeReport& s) {
  json j = json::object();
  if (s.candidate_ms) j["candidate_ms"] = evaluator::to_json(*s.candidate_ms);
  if (s.baseline_ms) j["baseline_ms"] = evaluator::to_json(*s.baseline_ms);
  if (s.speedup) j["speedup"] = evaluator::to_json(*s.speedup);
  if (j.empty()) return j;
  j["floor_ms"] = s.floor_ms;
  j["fraction_of_floor"] = s.fraction_of_floor;
  j["pool_sets"] = s.pool_sets;
  j["launches_per_batch"] = s.launches_per_batch;
  return j;
}

}  // namespace

int TraceDb::latest_version() { return static_cast<int>(trace_migrations().size()); }

TraceDb TraceDb::open(const std::filesystem::path& path) {
  TraceDb db(path, sqlite::Connection::open(path.string()));
  auto& c = db.db_;
  // Another engine process or a reader may hold the lock briefly; wait rather than fail.
  c.exec("PRAGMA busy_timeout = 10000");
  // Refuse a newer file before switching its journal mode, so it is left exactly as it was.
  // migrate() checks again under the write lock.
  db.refuse_newer(db.schema_version());
  // WAL: readers never block the writer, and a commit is one append to the log.
  const std::string mode = c.query_text("PRAGMA journal_mode = WAL");
  if (mode != "wal")
    throw std::runtime_error("trace database " + path.string() + ": cannot switch to WAL mode (got '" + mode +
                             "'); is it on a network file system?");
  // FULL, not NORMAL: in WAL mode NORMAL skips the fsync at commit, so a power loss or OS crash
  // can roll back transactions that were reported committed. FULL syncs the log on every commit,
  // so whatever record_* returned is on disk. The cost is one fsync per candidate step, tiny next
  // to a build or a GPU evaluation.
  c.exec("PRAGMA synchronous = FULL");
  c.exec("PRAGMA foreign_keys = ON");
  db.migrate();
  return db;
}

int TraceDb::schema_version() { return static_cast<int>(db_.query_int("PRAGMA user_version")); }

void TraceDb::refuse_newer(int version) const {
  const int latest = latest_version();
  if (version > latest)
    throw std::runtime_error("trace database " + path_.string() + " has schema version " + std::to_string(version) +
                             ", newer than this ptxevo understands (" + std::to_string(latest) +
                             "); use a newer ptxevo or another database file");
  if (version < 0) throw std::runtime_error("trace database " + path_.string() + " has a negative schema version");
}

void TraceDb::migrate() {
  const auto migrations = trace_migrations();
  const int latest = latest_version();
  // Reading the version inside the write transaction: two processes opening a fresh file at once
  // serialise here, and the second sees the first's result instead of migrating twice.
  sqlite::Transaction tx(db_);
  const int version = schema_version();
  refuse_newer(version);
  for (int v = version; v < latest; ++v) {
    db_.exec(migrations[static_cast<std::size_t>(v)]);
    // user_version lives in the file header and commits with the transaction, so a crash leaves
    // either the old schema and version or the new ones, never a mix.
    db_.exec("PRAGMA user_version = " + std::to_string(v + 1));
  }
  tx.commit();
}

Campaign TraceDb::open_campaign(const CampaignKey& key) {
  sqlite::Transaction tx(db_);
  if (auto found = find_campaign(key.spec_path, key.spec_hash)) {
    tx.commit();
    found->resumed = true;
    return *found;
  }
  db_.prepare("INSERT INTO campaigns (spec_path, spec_hash, op, arch, config_json) VALUES (?, ?, ?, ?, ?)")
      .bind(1, key.spec_path)
      .bind(2, key.spec_hash)
      .bind(3, key.op)
      .bind(4, key.arch)
      .bind(5, key.config_json.empty() ? std::string("{}") : key.config_json)
      .run();
  auto created = find_campaign(key.spec_path, key.spec_hash);
  tx.commit();
  if (!created) throw std::logic_error("trace database: campaign vanished after insert");
  return *created;
}

std::optional<Campaign> TraceDb::find_campaign(const std::string& spec_path, const std::string& spec_hash) {
  auto s = db_.prepare(
      "SELECT id, spec_path, spec_hash, op, arch, config_json, status, created_at FROM campaigns "
      "WHERE spec_path = ? AND spec_hash = ?");
  s.bind(1, spec_path).bind(2, spec_hash);
  if (!s.step()) return std::nullopt;
  return campaign_from(s);
}

void TraceDb::set_campaign_status(std::int64_t campaign_id, const std::string& status) {
  db_.prepare("UPDATE campaigns SET status = ? WHERE id = ?").bind(1, status).bind(2, campaign_id).run();
}

std::int64_t TraceDb::record_environment(const Environment& env) {
  sqlite::Transaction tx(db_);
  db_.prepare(
         "INSERT INTO environments (gpu, driver, cuda, toolchain_json, clocks_json) VALUES (?, ?, ?, ?, ?) "
         "ON CONFLICT DO NOTHING")
      .bind(1, env.gpu)
      .bind(2, env.driver)
      .bind(3, env.cuda)
      .bind(4, env.toolchain_json)
      .bind(5, env.clocks_json)
      .run();
  auto s = db_.prepare(
      "SELECT id FROM environments WHERE gpu = ? AND driver = ? AND cuda = ? AND toolchain_json = ? AND "
      "clocks_json = ?");
  s.bind(1, env.gpu).bind(2, env.driver).bind(3, env.cuda).bind(4, env.toolchain_json).bind(5, env.clocks_json);
  if (!s.step()) throw std::logic_error("trace database: environment vanished after insert");
  const auto id = s.column_int(0);
  tx.commit();
  return id;
}

RecordedCandidate TraceDb::record_candidate(std::int64_t campaign_id, const NewCandidate& c) {
  sqlite::Transaction tx(db_);
  db_.prepare(
         "INSERT INTO candidates (campaign_id, genome_hash, genome_json, parent_id, operator, generation, island) "
         "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (campaign_id, genome_hash) DO NOTHING")
      .bind(1, campaign_id)
      .bind(2, c.genome_hash)
      .bind(3, c.genome_json)
      .bind(4, c.parent_id)
      .bind(5, c.operator_name)
      .bind(6, static_cast<std::int64_t>(c.generation))
      .bind(7, static_cast<std::int64_t>(c.island))
      .run();
  RecordedCandidate r;
  r.inserted = db_.changes() == 1;
  auto s = db_.prepare("SELECT id, state FROM candidates WHERE campaign_id = ? AND genome_hash = ?");
  s.bind(1, campaign_id).bind(2, c.genome_hash);
  if (!s.step()) throw std::logic_error("trace database: candidate vanished after insert");
  r.id = s.column_int(0);
  r.state = candidate_state_from(s.column_text(1));
  tx.commit();
  return r;
}

void TraceDb::record_build(std::int64_t candidate_id, const BuildRecord& b) {
  // A measured candidate keeps its state: rebuilding it (e.g. for export) does not unmeasure it.
  db_.prepare(
         "UPDATE candidates SET ptx_hash = ?, build_ok = ?, build_stage = ?, build_log = ?, resources_json = ?, "
         "state = CASE WHEN state = 'measured' THEN state WHEN ? THEN 'built' ELSE 'failed' END, "
         "ptx_profile_json = coalesce(?, ptx_profile_json) WHERE id = ?")
      .bind(1, b.ptx_hash.empty() ? std::optional<std::string>() : std::optional<std::string>(b.ptx_hash))
      .bind(2, b.ok)
      .bind(3, b.stage)
      .bind(4, b.log)
      .bind(5, b.resources_json)
      .bind(6, b.ok)
      .bind(7, b.ptx_profile_json.empty() ? std::optional<std::string>() : std::optional<std::string>(b.ptx_profile_json))
      .bind(8, candidate_id)
      .run();
  if (db_.changes() != 1)
    throw std::invalid_argument("trace database: no candidate with id " + std::to_string(candidate_id));
}

std::int64_t TraceDb::record_evaluation(std::int64_t candidate_id, std::int64_t environment_id,
                                        const evaluator::EvalReport& full, const EvaluationMeta& meta) {
  // What the search reads (evaluations, shape_results) never holds a held-out shape; what the
  // evaluation said about them goes to heldout_results.
  evaluator::EvalReport report = full;
  const evaluator::HeldoutResults held = evaluator::redact_heldout(report);
  sqlite::Transaction tx(db_);
  db_.prepare(
         "INSERT INTO evaluations (candidate_id, environment_id, verdict, reasons_json, fitness, seconds, "
         "copy_bandwidth, report_json, shape_count, mode, purpose, fitness_low, fitness_high) "
         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
      .bind(1, candidate_id)
      .bind(2, environment_id)
      .bind(3, report.verdict)
      .bind(4, json(report.reasons).dump())
      .bind(5, report.fitness)
      .bind(6, report.seconds)
      .bind(7, report.copy_bandwidth)
      .bind(8, evaluator::to_json(report).dump())
      .bind(9, static_cast<std::int64_t>(report.shapes.size()))
      .bind(10, meta.mode)
      .bind(11, meta.purpose)
      .bind(12, meta.fitness_low)
      .bind(13, meta.fitness_high)
      .run();
  const std::int64_t evaluation_id = db_.last_insert_rowid();

  auto insert = db_.prepare(
      "INSERT INTO shape_results (evaluation_id, shape_index, shape_json, class, passed, reasons_json, rel_l2_json, "
      "max_abs_json, cand_median, cand_ci_low, cand_ci_high, base_median, speedup, speedup_ci_low, speedup_ci_high, "
      "timing_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  // The report's own JSON already maps non-finite error figures to null; reuse it per shape.
  const json shapes = evaluator::to_json(report).at("shapes");
  for (std::size_t i = 0; i < report.shapes.size(); ++i) {
    const auto& s = report.shapes[i];
    const json& js = shapes.at(i);
    const json timing = timing_json(s);
    insert.reset();
    insert.bind(1, evaluation_id)
        .bind(2, static_cast<std::int64_t>(i))
        .bind(3, js.at("shape").dump())
        .bind(4, evaluator::to_string(s.cls))
        .bind(5, s.passed)
        .bind(6, js.at("reasons").dump())
        .bind(7, js.at("rel_l2").dump())
        .bind(8, js.at("max_abs").dump());
    if (s.candidate_ms)
      insert.bind(9, s.candidate_ms->median).bind(10, s.candidate_ms->ci_low).bind(11, s.candidate_ms->ci_high);
    if (s.baseline_ms) insert.bind(12, s.baseline_ms->median);
    if (s.speedup) insert.bind(13, s.speedup->ratio).bind(14, s.speedup->ci_low).bind(15, s.speedup->ci_high);
    if (!timing.empty()) insert.bind(16, timing.dump());
    insert.run();
  }

  db_.prepare("UPDATE candidates SET state = 'measured' WHERE id = ?").bind(1, candidate_id).run();
  if (db_.changes() != 1)
    throw std::invalid_argument("trace database: no candidate with id " + std::to_string(candidate_id));
  if (!held.empty())
    db_.prepare("INSERT INTO heldout_results (evaluation_id, failed, detail_json) VALUES (?, ?, ?)")
        .bind(1, evaluation_id)
        .bind(2, held.failed)
        .bind(3, evaluator::to_json(held).dump())
        .run();
  tx.commit();
  return evaluation_id;
}

std::vector<RankedCandidate> TraceDb::best_candidates(std::int64_t campaign_id, int n) {
  // Latest passing evaluation per candidate: elites are re-measured, and the newest figure,
  // taken alongside a fresh baseline, is the one to trust.
  auto s = db_.prepare("SELECT c.id, c.genome_hash, c.genome_json, c.parent_id, c.operator, "
                       "c.ptx_hash, c.state, e.id, e.fitness FROM candidates c "
                       "JOIN evaluations e ON e.id = (SELECT max(id) FROM evaluations WHERE candidate_id = c.id "
                       "AND verdict = 'pass' AND fitness IS NOT NULL) "
                       "WHERE c.campaign_id = ? ORDER BY e.fitness DESC, c.id LIMIT ?");
  s.bind(1, campaign_id).bind(2, n);
  std::vector<RankedCandidate> out;
  while (s.step()) {
    RankedCandidate r;
    r.candidate = candidate_from(s);
    r.evaluation_id = s.column_int(7);
    r.fitness = s.column_double(8);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<EarlierBest> TraceDb::earlier_best(std::int64_t exclude_campaign_id, const std::string& op, int n) {
  auto s = db_.prepare(
      "SELECT c.campaign_id, c.id, k.arch, coalesce(env.gpu, ''), c.genome_hash, c.genome_json, max(e.fitness) AS f "
      "FROM candidates c JOIN campaigns k ON k.id = c.campaign_id "
      "JOIN evaluations e ON e.candidate_id = c.id AND e.verdict = 'pass' AND e.fitness IS NOT NULL "
      "LEFT JOIN environments env ON env.id = e.environment_id "
      "WHERE k.op = ? AND k.id != ? "
      "GROUP BY c.id ORDER BY f DESC, c.id LIMIT ?");
  s.bind(1, op).bind(2, exclude_campaign_id).bind(3, static_cast<std::int64_t>(n) * 4);
  std::vector<EarlierBest> out;
  std::set<std::string> seen;
  while (s.step() && static_cast<int>(out.size()) < n) {
    EarlierBest b;
    b.campaign_id = s.column_int(0);
    b.candidate_id = s.column_int(1);
    b.arch = s.column_text(2);
    b.gpu = s.column_text(3);
    b.genome_hash = s.column_text(4);
    b.genome_json = s.column_text(5);
    b.fitness = s.column_double(6);
    if (seen.insert(b.genome_hash).second) out.push_back(std::move(b));
  }
  return out;
}

std::int64_t TraceDb::count_evaluations(std::int64_t campaign_id) {
  auto s = db_.prepare(
      "SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id WHERE c.campaign_id = ?");
  s.bind(1, campaign_id);
  s.step();
  return s.column_int(0);
}

std::int64_t TraceDb::count_candidates(std::int64_t campaign_id) {
  auto s = db_.prepare("SELECT count(*) FROM candidates WHERE campaign_id = ?");
  s.bind(1, campaign_id);
  s.step();
  return s.column_int(0);
}

std::vector<CandidateRow> TraceDb::pending_candidates(std::int64_t campaign_id) {
  auto s = db_.prepare(std::string("SELECT ") + kCandidateColumns +
                       " FROM candidates WHERE campaign_id = ? AND state IN ('proposed', 'built') ORDER BY id");
  s.bind(1, campaign_id);
  std::vector<CandidateRow> out;
  while (s.step()) out.push_back(candidate_from(s));
  return out;
}

std::optional<CandidateRow> TraceDb::candidate(std::int64_t candidate_id) {
  auto s = db_.prepare(std::string("SELECT ") + kCandidateColumns + " FROM candidates WHERE id = ?");
  s.bind(1, candidate_id);
  if (!s.step()) return std::nullopt;
  return candidate_from(s);
}

void TraceDb::set_build_key(std::int64_t candidate_id, const std::string& build_key) {
  db_.prepare("UPDATE candidates SET build_key = ? WHERE id = ?").bind(1, build_key).bind(2, candidate_id).run();
}

std::optional<std::int64_t> TraceDb::measured_with_build_key(std::int64_t campaign_id, const std::string& build_key) {
  auto s = db_.prepare(
      "SELECT c.id FROM candidates c WHERE c.campaign_id = ? AND c.build_key = ? AND c.state = 'measured' "
      "AND c.outcome IS NULL AND EXISTS (SELECT 1 FROM evaluations e WHERE e.candidate_id = c.id) ORDER BY c.id LIMIT 1");
  s.bind(1, campaign_id).bind(2, build_key);
  if (!s.step()) return std::nullopt;
  return s.column_int(0);
}

void TraceDb::settle_candidate(std::int64_t candidate_id, const std::string& outcome,
                               std::optional<std::int64_t> duplicate_of) {
  db_.prepare("UPDATE candidates SET state = 'measured', outcome = ?, duplicate_of = ? WHERE id = ?")
      .bind(1, outcome)
      .bind(2, duplicate_of)
      .bind(3, candidate_id)
      .run();
  if (db_.changes() != 1)
    throw std::invalid_argument("trace database: no candidate with id " + std::to_string(candidate_id));
}

std::vector<MeasuredCandidate> TraceDb::measured_candidates(std::int64_t campaign_id) {
  auto s = db_.prepare(
      "SELECT c.id, c.genome_hash, c.genome_json, c.parent_id, c.operator, c.ptx_hash, c.state, c.generation, "
      "c.island, e.fitness, coalesce(e.fitness_low, e.fitness), coalesce(e.fitness_high, e.fitness), "
      "(SELECT count(*) FROM evaluations WHERE candidate_id = c.id AND verdict = 'pass') "
      "FROM candidates c JOIN evaluations e ON e.id = (SELECT max(id) FROM evaluations WHERE candidate_id = c.id "
      "AND verdict = 'pass' AND fitness IS NOT NULL) WHERE c.campaign_id = ? ORDER BY c.id");
  s.bind(1, campaign_id);
  std::vector<MeasuredCandidate> out;
  while (s.step()) {
    MeasuredCandidate m;
    m.candidate = candidate_from(s);
    m.generation = static_cast<int>(s.column_int(7));
    m.island = static_cast<int>(s.column_int(8));
    m.fitness = s.column_double(9);
    m.fitness_low = s.column_double(10);
    m.fitness_high = s.column_double(11);
    m.measurements = static_cast<int>(s.column_int(12));
    out.push_back(std::move(m));
  }
  return out;
}

int TraceDb::max_generation(std::int64_t campaign_id) {
  auto s = db_.prepare("SELECT coalesce(max(generation), -1) FROM candidates WHERE campaign_id = ?");
  s.bind(1, campaign_id);
  s.step();
  return static_cast<int>(s.column_int(0));
}

std::int64_t TraceDb::count_candidate_evaluations(std::int64_t campaign_id) {
  auto s = db_.prepare(
      "SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id WHERE c.campaign_id = ? "
      "AND e.purpose = 'candidate'");
  s.bind(1, campaign_id);
  s.step();
  return s.column_int(0);
}

bool TraceDb::integrity_ok() {
  auto s = db_.prepare("PRAGMA integrity_check");
  // One row "ok" when sound; otherwise one row per problem found.
  return s.step() && s.column_text(0) == "ok" && !s.step();
}

std::int64_t TraceDb::record_llm_call(std::int64_t campaign_id, const LlmCallRow& c) {
  auto s = db_.prepare(
      "INSERT INTO llm_calls (campaign_id, role, turn, model, endpoint, status, error, stop_reason, http_status, "
      "request_bytes, reserved_input_tokens, reserved_output_tokens, input_tokens, output_tokens, cost_usd, latency_ms) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, campaign_id).bind(2, c.role).bind(3, c.turn).bind(4, c.model).bind(5, c.endpoint).bind(6, c.status);
  s.bind(7, c.error).bind(8, c.stop_reason).bind(9, c.http_status).bind(10, c.request_bytes);
  s.bind(11, c.reserved_input_tokens).bind(12, c.reserved_output_tokens).bind(13, c.input_tokens);
  s.bind(14, c.output_tokens).bind(15, c.cost_usd).bind(16, c.latency_ms);
  s.run();
  return db_.last_insert_rowid();
}

std::int64_t TraceDb::record_agent_rejection(std::int64_t campaign_id, const AgentRejection& r) {
  auto s = db_.prepare(
      "INSERT INTO agent_rejections (campaign_id, parent_id, candidate_id, call_id, role, stage, code, reason) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, campaign_id).bind(2, r.parent_id).bind(3, r.candidate_id).bind(4, r.call_id).bind(5, r.role);
  s.bind(6, r.stage).bind(7, r.code).bind(8, r.reason);
  s.run();
  return db_.last_insert_rowid();
}

void TraceDb::record_llm_proposal(std::int64_t campaign_id, const LlmProposalRow& p) {
  auto s = db_.prepare(
      "INSERT OR IGNORE INTO llm_proposals (candidate_id, campaign_id, call_id, role, kind, name, rationale, strategy) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, p.candidate_id).bind(2, campaign_id).bind(3, p.call_id).bind(4, p.role).bind(5, p.kind).bind(6, p.name);
  s.bind(7, p.rationale).bind(8, p.strategy);
  s.run();
}

LlmSpend TraceDb::llm_spend(std::int64_t campaign_id) {
  auto s = db_.prepare(
      "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), coalesce(sum(cost_usd), 0), "
      "coalesce(sum(cost_usd IS NULL), 0) FROM llm_calls WHERE campaign_id = ? "
      "AND status NOT IN ('budget-refused', 'circuit-open')");
  s.bind(1, campaign_id);
  s.step();
  return LlmSpend{s.column_int(0), s.column_int(1), s.column_int(2), s.column_double(3), s.column_int(4)};
}

}  // namespace ptxevo::tracedb
