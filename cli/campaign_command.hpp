// `ptxevo [--arch ARCH] SPEC`: run (or resume) the evolutionary campaign for SPEC. On a machine
// with a GPU of the target arch it measures for real; otherwise it replays recorded measurements
// when replay data for the spec exists, and otherwise builds and screens only. Every mode says
// which one it is. `ptxevo replay export`: write replay data from a campaign's database.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <filesystem>
#include <string>

namespace CLI {
class App;
}

namespace ptxevo::cli {

// `--agents llm` and the endpoint it talks to (docs/agents.md). The key is never an option:
// only the name of the environment variable that holds it.
struct LlmCliOptions {
  std::string agents = "rules";  // "rules" or "llm"
  std::string api = "openai";    // "openai" (chat completions) or "anthropic" (messages)
  std::string url;               // openai: up to and including /v1; anthropic: the host root
  std::string model;
  std::string key_env;           // empty: no auth header (local servers)
  std::string max_tokens_field = "max_tokens";  // or "max_completion_tokens" (api.openai.com)
  int max_tokens = 8192;
  int max_tokens_cap = 0;  // growth after truncated replies stops here; 0: twice max_tokens
  int planner_max_tokens = 1024;
  bool no_planner = false;
  int fix_turns = 2;
  double share = 0.25;
  double deadline_s = 900;
  double attempt_timeout_s = 600;
  std::int64_t max_calls = 0;          // 0: no cap
  std::int64_t max_input_tokens = 0;
  std::int64_t max_output_tokens = 0;
  double max_usd = 0;
  std::string price;                   // "IN,OUT" USD per million tokens; empty: unpriced
  std::optional<double> temperature;
  bool insecure_endpoint = false;
};

}  // namespace ptxevo::cli

namespace ptxevo::cluster {
class Session;
}

namespace ptxevo::cli {

struct CampaignCliOptions {
  std::string spec;
  std::string arch;    // sm_90a, sm_100a (sm_90, sm_100 accepted); default: the spec's
  std::string db;      // default: ptxevo-runs/<spec stem>/campaign.db in the current directory (default_run_dir)
  std::string replay;  // replay data file; default when no GPU: <stem>.replay.json beside the spec or in the nearest data/replay/ above it
  bool replay_only = false;  // --replay given without a GPU attempt
  std::int64_t budget = 0;   // candidate evaluations (0: the spec's)
  double minutes = 0;
  double target = 0;
  int islands = 4;
  int island_size = 6;
  int batch = 16;
  std::int64_t max_spill_bytes = 256;
  int min_samples = 10;
  bool no_cost_model = false;
  double build_factor = 1.5;
  double random_edit_share = 0.5;  // search::RandomEdits: random first-population genomes with PTX edits
  int random_max_edits = 2;
  int build_rounds = 2;
  std::string passes;  // PTX passes the campaign uses, comma-separated; "none": knob moves only; "": all
  double ci_width = 0.01;
  int warm_start = -1;
  int initial = 12;
  std::uint64_t seed = 1;
  int max_benchmark_shapes = -1;
  int gpus = 1;
  int workers_per_gpu = 2;
  double timeout_s = 300;
  bool no_final = false;
  // Candidates' gate checks lowered, only to measure what they cost (search::CampaignOptions).
  int determinism_runs = 3;
  bool no_guard_pages = false;
  bool no_degenerate_rows = false;
  bool no_cache = false;
  bool quiet = false;
  std::string self_exe;
  LlmCliOptions llm;
  // Under mpirun: this process's place in the job (nullptr when run alone), and how long a rank
  // may stay silent before it counts as lost.
  cluster::Session* mpi = nullptr;
  double rank_timeout_s = 60;
};

// Registers the --agents / --llm-* options of the main command (cli/agent_options.cpp).
void add_agent_options(CLI::App& app, CampaignCliOptions& o);

int run_campaign(const CampaignCliOptions& o, std::ostream& out, std::ostream& err);

struct ReplayExportOptions {
  std::string db;
  std::string spec;
  std::string out;
  std::string commit;
  std::string arch;
  std::int64_t campaign = 0;  // 0: the latest GPU campaign (of SPEC's op and arch, when SPEC is given)
};

// Where a campaign keeps its trace database and report unless --db says otherwise: a run folder
// outside the sources, ./ptxevo-runs/<spec stem>/.
std::filesystem::path default_run_dir(const std::string& spec);
// The replay data a campaign of `spec` takes without a GPU: `<stem>.replay.json` beside the spec,
// else in the nearest data/replay/ of the spec's folder or one above it (relative to the current
// directory when below it); the path beside the spec when neither exists.
std::filesystem::path default_replay(const std::string& spec);

int run_replay_export(const ReplayExportOptions& o, std::ostream& out, std::ostream& err);

}  // namespace ptxevo::cli
