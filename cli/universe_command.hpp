// `ptxevo universe SPEC --out FILE [--vary NAME=v1,v2 ...] [--edits PASS[:k=v] ...] [--stride K]
// [--max N]`: a closed candidate set for the learned prior's replay proof (docs/prior_study.md).
// Every knob assignment of a grid over the spec's first seed (with every subset of the given PTX
// edits) is built and screened as a campaign would, and on a GPU of
// the spec's arch each survivor is gated and timed on every benchmark shape against the baseline
// (a campaign's timing settings), a batch per worker call, the file rewritten after each batch.
// Running the same command again keeps what was measured and measures the rest. Without such a
// GPU it builds and screens only and says that nothing was measured.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ptxevo::cli {

struct UniverseOptions {
  std::string spec;
  std::string out;
  std::string arch;
  std::vector<std::string> vary;  // "NAME=v1,v2,..." or "NAME"
  std::vector<std::string> edits;  // "pass[:key=value...]": every subset goes with each assignment
  int max_edits = -1;
  int stride = 1;
  int max = 0;
  int batch = 24;
  double minutes = 0;
  std::string commit;
  int workers_per_gpu = 2;
  double timeout_s = 300;
  bool fresh = false;
  bool no_cache = false;
  std::string self_exe;
};

// 0: done, built only (no GPU), or stopped by --minutes with the rest left for the next run;
// 1: the spec, the file or the measurer failed (the reason on `err`); 2: bad options.
int run_universe_command(const UniverseOptions& o, std::ostream& out, std::ostream& err);

// Adds the `universe` subcommand; it runs from CLI11's callback (see register_export_command).
void register_universe_command(CLI::App& app, const char* argv0);

}  // namespace ptxevo::cli
