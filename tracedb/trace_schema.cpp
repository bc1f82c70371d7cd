#include "tracedb/trace_schema.hpp"

#include <array>

namespace ptxevo::tracedb {

namespace {

// v1: the first schema. Times are UTC ISO-8601 text written by SQLite itself, so no host
// clock code is involved. JSON columns hold the evaluator's own serialisation.
constexpr std::string_view kV1 = R"sql(
CREATE TABLE campaigns (
  id          INTEGER PRIMARY KEY,
  spec_path   TEXT NOT NULL,
  spec_hash   TEXT NOT NULL,
  op          TEXT NOT NULL,
  arch        TEXT NOT NULL,
  created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  status      TEXT NOT NULL DEFAULT 'running',
  config_json TEXT NOT NULL DEFAULT '{}',
  UNIQUE (spec_path, spec_hash)
);

CREATE TABLE environments (
  id             INTEGER PRIMARY KEY,
  gpu            TEXT NOT NULL,
  driver         TEXT NOT NULL,
  cuda           TEXT NOT NULL,
  toolchain_json TEXT NOT NULL,
  clocks_json    TEXT NOT NULL,
  created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (gpu, driver, cuda, toolchain_json, clocks_json)
);

CREATE TABLE candidates (
  id             INTEGER PRIMARY KEY,
  campaign_id    INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  genome_hash    TEXT NOT NULL,
  genome_json    TEXT NOT NULL,
  parent_id      INTEGER REFERENCES candidates(id),
  operator       TEXT NOT NULL,
  ptx_hash       TEXT,
  build_ok       INTEGER,
  build_stage    TEXT,
  build_log      TEXT,
  resources_json TEXT,
  created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  state          TEXT NOT NULL DEFAULT 'proposed'
                 CHECK (state IN ('proposed', 'built', 'measured', 'failed')),
  UNIQUE (campaign_id, genome_hash)
);
CREATE INDEX candidates_by_state ON candidates (campaign_id, state);

CREATE TABLE evaluations (
  id             INTEGER PRIMARY KEY,
  candidate_id   INTEGER NOT NULL REFERENCES candidates(id) ON DELETE CASCADE,
  environment_id INTEGER NOT NULL REFERENCES environments(id),
  verdict        TEXT NOT NULL,
  reasons_json   TEXT NOT NULL,
  fitness        REAL,
  seconds        REAL NOT NULL,
  copy_bandwidth REAL,
  report_json    TEXT NOT NULL,
  shape_count    INTEGER NOT NULL,
  created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX evaluations_by_candidate ON evaluations (candidate_id);

CREATE TABLE shape_results (
  evaluation_id   INTEGER NOT NULL REFERENCES evaluations(id) ON DELETE CASCADE,
  shape_index     INTEGER NOT NULL,
  shape_json      TEXT NOT NULL,
  class           TEXT NOT NULL,
  passed          INTEGER NOT NULL,
  reasons_json    TEXT NOT NULL,
  rel_l2_json     TEXT NOT NULL,
  max_abs_json    TEXT NOT NULL,
  cand_median     REAL,
  cand_ci_low     REAL,
  cand_ci_high    REAL,
  base_median     REAL,
  speedup         REAL,
  speedup_ci_low  REAL,
  speedup_ci_high REAL,
  timing_json     TEXT,
  PRIMARY KEY (evaluation_id, shape_index)
) WITHOUT ROWID;
)sql";

// v2: what the campaign loop needs. Candidates carry their generation and island (a resumed
// campaign rebuilds its population from them), the key of their built PTX and launch knobs
// (two genomes that build the same are measured once), and an outcome for candidates settled
// without an evaluation of their own ('duplicate' of duplicate_of, or 'unmeasured' in a replay
// without data for them). Evaluations say how they were obtained ('gpu' or 'replay'), why
// ('candidate', 'remeasure' of an elite, 'final' check of the winner), and the geometric means
// of the per-shape confidence bounds, which noise-aware selection compares.
constexpr std::string_view kV2 = R"sql(
ALTER TABLE candidates ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE candidates ADD COLUMN island INTEGER NOT NULL DEFAULT 0;
ALTER TABLE candidates ADD COLUMN build_key TEXT;
ALTER TABLE candidates ADD COLUMN outcome TEXT;
ALTER TABLE candidates ADD COLUMN duplicate_of INTEGER REFERENCES candidates(id);
CREATE INDEX candidates_by_build_key ON candidates (campaign_id, build_key);
ALTER TABLE evaluations ADD COLUMN mode TEXT NOT NULL DEFAULT 'gpu';
ALTER TABLE evaluations ADD COLUMN purpose TEXT NOT NULL DEFAULT 'candidate';
ALTER TABLE evaluations ADD COLUMN fitness_low REAL;
ALTER TABLE evaluations ADD COLUMN fitness_high REAL;
)sql";

// v3: the operator posterior (search/operator_posterior.hpp), shared by every campaign of the
// file: keys "family|arch|operator" with "*" for the wider fallbacks.
constexpr std::string_view kV3 = R"sql(
CREATE TABLE operator_stats (
  key        TEXT PRIMARY KEY,
  hits       REAL NOT NULL,
  misses     REAL NOT NULL,
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
)sql";

// v4: the LLM agents (agents/, docs/agents.md). llm_calls: one row per logical chat call with
// its tokens and cost (NULL cost: unpriced, never silently $0), so a resumed campaign restores
// its budget by summing them; the endpoint is stored as its base URL, never with headers or
// keys. agent_rejections: every LLM answer that did not become a measured candidate, with a
// stable code and the reason (reply envelope, lexical screen, budget, endpoint, or the build,
// IR checks and gate of the candidate it became).
constexpr std::string_view kV4 = R"sql(
CREATE TABLE llm_calls (
  id                     INTEGER PRIMARY KEY,
  campaign_id            INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  role                   TEXT NOT NULL,
  turn                   INTEGER NOT NULL,
  model                  TEXT NOT NULL,
  endpoint               TEXT NOT NULL,
  status                 TEXT NOT NULL,
  error                  TEXT,
  stop_reason            TEXT,
  http_status            INTEGER,
  request_bytes          INTEGER NOT NULL,
  reserved_input_tokens  INTEGER NOT NULL,
  reserved_output_tokens INTEGER NOT NULL,
  input_tokens           INTEGER,
  output_tokens          INTEGER,
  cost_usd               REAL,
  latency_ms             INTEGER NOT NULL,
  created_at             TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX llm_calls_by_campaign ON llm_calls (campaign_id);
CREATE TABLE agent_rejections (
  id           INTEGER PRIMARY KEY,
  campaign_id  INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  parent_id    INTEGER REFERENCES candidates(id),
  candidate_id INTEGER REFERENCES candidates(id),
  call_id      INTEGER REFERENCES llm_calls(id),
  role         TEXT NOT NULL,
  stage        TEXT NOT NULL,
  code         TEXT NOT NULL,
  reason       TEXT NOT NULL,
  created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX agent_rejections_by_campaign ON agent_rejections (campaign_id);
)sql";

// v5: what each LLM-written candidate was meant to be: the role that wrote it, the patch kind,
// the model's name and rationale for it and the strategy it implemented. Later prompts show
// these beside the outcomes, so the model sees which of its ideas paid off.
constexpr std::string_view kV5 = R"sql(
CREATE TABLE llm_proposals (
  candidate_id INTEGER PRIMARY KEY REFERENCES candidates(id) ON DELETE CASCADE,
  campaign_id  INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  call_id      INTEGER REFERENCES llm_calls(id),
  role         TEXT NOT NULL,
  kind         TEXT NOT NULL,
  name         TEXT NOT NULL,
  rationale    TEXT NOT NULL,
  strategy     TEXT NOT NULL
);
)sql";

// v6: what the cost model reads from each built candidate's PTX (search/ptx_profile.hpp): the
// instruction mix, global access widths, cache hints and loops of every entry, as JSON. NULL for
// candidates built before v6; the cost model gives those rows ptx_profiled = 0.
constexpr std::string_view kV6 = R"sql(
ALTER TABLE candidates ADD COLUMN ptx_profile_json TEXT;
)sql";

// v7: the files a campaign ran from (search/campaign_files.hpp): its spec's text and the seed
// templates the spec names, each with its path relative to the spec's folder and its sha256, so
// export, report and replay export work from the database alone, from any directory.
constexpr std::string_view kV7 = R"sql(
CREATE TABLE campaign_files (
  campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  role        TEXT NOT NULL CHECK (role IN ('spec', 'seed')),
  name        TEXT NOT NULL,
  sha256      TEXT NOT NULL,
  content     TEXT NOT NULL,
  PRIMARY KEY (campaign_id, name)
);
)sql";

// v8: what evaluations said about held-out shapes (evaluator::redact_heldout), one row per
// evaluation that had any: the search reads evaluations and shape_results, where they are cut out,
// never this table; reports for the user read it.
constexpr std::string_view kV8 = R"sql(
CREATE TABLE heldout_results (
  evaluation_id INTEGER PRIMARY KEY REFERENCES evaluations(id) ON DELETE CASCADE,
  failed        INTEGER NOT NULL,
  detail_json   TEXT NOT NULL
);
)sql";

// v9: a campaign of an op declared in a file records the op's files too (role 'op': the
// declaration and its reference source). SQLite cannot change a CHECK in place: the table is
// rebuilt.
constexpr std::string_view kV9 = R"sql(
CREATE TABLE campaign_files_v9 (
  campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  role        TEXT NOT NULL CHECK (role IN ('spec', 'seed', 'op')),
  name        TEXT NOT NULL,
  sha256      TEXT NOT NULL,
  content     TEXT NOT NULL,
  PRIMARY KEY (campaign_id, name)
);
INSERT INTO campaign_files_v9 SELECT campaign_id, role, name, sha256, content FROM campaign_files;
DROP TABLE campaign_files;
ALTER TABLE campaign_files_v9 RENAME TO campaign_files;
)sql";

constexpr std::array<std::string_view, 9> kMigrations = {kV1, kV2, kV3, kV4, kV5, kV6, kV7, kV8, kV9};

}  // namespace

std::span<const std::string_view> trace_migrations() { return kMigrations; }

}  // namespace ptxevo::tracedb
