// `ptxevo [--arch ARCH] SPEC`: run (or resume) the evolutionary campaign for SPEC. On a machine
// with a GPU of the target arch it measures for real; otherwise it replays recorded measurements
// when replay data for the spec exists, and otherwise builds and screens only. Every mode says
// which one it is. `ptxevo replay export`: write replay data from a campaign's database.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace ptxevo::cli {

struct CampaignCliOptions {
  std::string spec;
  std::string arch;    // sm_90a, sm_100a (sm_90, sm_100 accepted); default: the spec's
  std::string db;      // default: SPEC's directory, <stem>.ptxevo.db
  std::string replay;  // replay data file; default when no GPU: <stem>.replay.json beside the spec
  bool replay_only = false;  // --replay given without a GPU attempt
  std::int64_t budget = 0;   // candidate evaluations (0: the spec's)
  double minutes = 0;
  double target = 0;
  int islands = 4;
  int island_size = 6;
  int batch = 8;
  int initial = 12;
  std::uint64_t seed = 1;
  int max_benchmark_shapes = -1;
  int gpus = 1;
  int workers_per_gpu = 2;
  double timeout_s = 300;
  bool no_final = false;
  bool no_cache = false;
  bool quiet = false;
  std::string self_exe;
};

int run_campaign(const CampaignCliOptions& o, std::ostream& out, std::ostream& err);

struct ReplayExportOptions {
  std::string db;
  std::string spec;
  std::string out;
  std::string commit;
  std::string arch;
  std::int64_t campaign = 0;  // 0: the GPU campaign of SPEC in the database
};

int run_replay_export(const ReplayExportOptions& o, std::ostream& out, std::ostream& err);

}  // namespace ptxevo::cli
