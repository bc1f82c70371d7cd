// What `ptxevo report` shows about one campaign, read from the trace database into plain
// values. The text and HTML renderers only format this struct; every query lives here.
// The queries need schema v1 columns only and use later ones (candidates.outcome, evaluations.mode
// and fitness_low/high, campaigns.mode) when a column of that name exists, so v1 and v2 files both
// read. Reading never writes:
// the file is not migrated.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ptxevo::report {

// A report that cannot be made. `kind` lets the command pick its exit status: Usage is something
// the user named that is not there (a file, a campaign), Data a problem with the file itself.
class ReportError : public std::runtime_error {
 public:
  enum class Kind { Usage, Data };
  ReportError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

struct ReportCampaign {
  std::int64_t id = 0;
  std::string spec_path;
  std::string spec_hash;
  std::string op;
  std::string arch;
  std::string status;
  std::string created_at;
  std::string config_json;
  std::string mode;     // "gpu" or "replay": campaigns.mode when present, else config_json's "mode"
  std::int64_t replayed_evaluations = 0;  // evaluations.mode = 'replay' (schema v2)
  bool replay = false;  // timings were replayed from recorded data, not measured
};

// A count per name (candidate state, verdict, reason code), largest first.
struct NamedCount {
  std::string name;
  std::int64_t count = 0;
};

// One evaluation of the campaign, in the order they were recorded.
struct FitnessPoint {
  std::int64_t index = 0;            // 1-based evaluation number within the campaign
  std::int64_t evaluation_id = 0;
  double elapsed_s = 0;              // since the campaign's first evaluation
  std::optional<double> fitness;     // this evaluation's, when it passed
  std::optional<double> best;        // best fitness of any evaluation up to and including this one
};

// A timed shape of the winner's evaluation. Speedup is baseline / candidate, so > 1 is faster.
struct ShapeSpeedup {
  int shape_index = 0;
  std::string shape;  // "M=32768,N=4096"
  double speedup = 0;
  std::optional<double> ci_low, ci_high;
  std::optional<double> candidate_ms, baseline_ms;
  std::optional<double> fraction_of_floor;  // floor / candidate median; 1.0 = at copy bandwidth
};

struct ReportWinner {
  std::int64_t candidate_id = 0;
  std::int64_t evaluation_id = 0;  // its latest passing evaluation, the one ranked
  double fitness = 0;
  std::optional<double> fitness_low, fitness_high;  // geometric means of the shapes' CI bounds (v2)
  std::string operator_name;
  std::string genome_hash;
  std::string genome_json;
  std::vector<ShapeSpeedup> shapes;
};

struct ReportEnvironment {
  std::int64_t id = 0;
  std::string gpu, driver, cuda, toolchain_json, clocks_json;
  std::int64_t evaluations = 0;  // of this campaign
};

struct ReportData {
  std::string db_path;
  int schema_version = 0;
  ReportCampaign campaign;
  std::int64_t candidates = 0;
  std::int64_t evaluations = 0;
  // By state; a candidate settled without an evaluation of its own (schema v2: "duplicate",
  // "unmeasured") counts under that outcome instead of "measured".
  std::vector<NamedCount> candidates_by_state;
  std::vector<NamedCount> evaluations_by_verdict;
  // Reason codes (the text before ':') of evaluations that did not pass, each counted once per
  // evaluation, plus "build:<stage>" for candidates whose build failed.
  std::vector<NamedCount> failures_by_reason;
  // Held-out shapes (schema v8, heldout_results): kept apart from what the search reads, shown
  // to the user here: evaluations that failed one, and up to five distinct reasons.
  std::int64_t heldout_failed = 0;
  std::vector<std::string> heldout_reasons;
  std::vector<FitnessPoint> series;  // every evaluation, in order
  std::string first_evaluation_at, last_evaluation_at;
  double elapsed_s = 0;              // first to last evaluation
  std::optional<ReportWinner> winner;
  std::vector<ReportEnvironment> environments;

  bool empty() const { return evaluations == 0; }
};

// Reads the report of campaign `campaign_id`, or without one of the campaign with the most
// recent activity (its newest candidate or evaluation, else its creation). Throws ReportError:
// Usage for an absent file or campaign; Data for a file that is not a trace database, comes
// from a newer ptxevo, holds no campaign or cannot be read.
ReportData load_report(const std::filesystem::path& db, std::optional<std::int64_t> campaign_id = std::nullopt);

}  // namespace ptxevo::report
