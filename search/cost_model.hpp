// The learned cost model over the trace database (issue "Learned prior", docs/prior_study.md 5):
// rows of (candidate, benchmark shape) with cost_features as x and y = log(median time / roofline
// time), centred per (campaign, shape) so the model ranks candidates within a shape; a
// Bayesian linear regression (search/prior) gives the exact posterior that Thompson selection
// draws from. Only real GPU measurements enter it, never replayed or failed ones.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "evaluator/op.hpp"
#include "search/cost_features.hpp"
#include "search/prior/bayes_linear.hpp"
#include "search/prior/selection.hpp"

namespace ptxevo::tracedb {
class TraceDb;
}  // namespace ptxevo::tracedb

namespace ptxevo::search {


struct CostRow {
  std::int64_t campaign_id = 0;
  std::int64_t candidate_id = 0;
  std::int64_t group = 0;      // (campaign, shape) as one id
  std::string created_at;      // of the evaluation, for forward chaining
  std::string gpu, driver, toolchain;
  std::vector<double> x;
  double y = 0;                // log(median ms / roofline ms)
  double analytic = 0;         // FeatureRow::analytic_log_time
};

struct CostDataset {
  std::string op;
  FeatureLayout layout;
  std::vector<CostRow> rows;
  std::size_t skipped = 0;  // rows whose features could not be computed (launch plan rejected)
  std::set<std::int64_t> campaigns_without_config;  // their rows were left out
};

// The op options of each campaign (from its spec): launch plans and bytes depend on them.
using CampaignConfigs = std::map<std::int64_t, evaluator::OpConfig>;

// A campaign's op options, from the spec it was started with: that path (relative to the current
// directory), then the same relative to `db_dir`, then the file name in `db_dir`; none when no
// spec there loads.
std::optional<evaluator::OpConfig> campaign_spec_config(tracedb::TraceDb& db, std::int64_t campaign,
                                                        const std::filesystem::path& db_dir,
                                                        const evaluator::OpRegistry& registry);

// Every passing GPU evaluation of a campaign on `op` in `configs`, one row per benchmark shape
// with a timing. Columns: the union of knob and pass names in those genomes.
// `layout`: the columns to use (a campaign's own); null: the union of knobs and passes seen.
CostDataset cost_dataset(tracedb::TraceDb& db, const evaluator::Op& op, const CampaignConfigs& configs, const GpuLimits& gpu = {},
                         const FeatureLayout* layout = nullptr);

struct HeldOutRank {
  std::size_t train_rows = 0, test_rows = 0, groups = 0;
  double spearman_model = 0;     // mean within-group Spearman of the model's ranking on the test rows
  double spearman_analytic = 0;  // same for the analytic roofline/occupancy guess
  bool ptx_used = false;         // the fit kept the PTX profile's columns (they validated)
  bool evaluated = false;
};

// Forward chaining: fit on the earliest `train_fraction` of rows (by evaluation time), rank
// the later rows within each (campaign, shape).
HeldOutRank held_out_rank(const CostDataset& d, double train_fraction = 0.7);

// A fitted model for scoring new candidates of one campaign.
class CostModel;

// The model a campaign selects with: its own rows, plus earlier campaigns' rows on the same op
// weighted by environment (GPU, driver, toolchain: another is a weaker source) and faded as the
// campaign's own rows arrive; the guard drops the earlier rows when, cross-validated on the
// campaign's own rows, they rank those worse than the own rows alone.
struct CampaignFitInfo {
  std::size_t own_rows = 0, earlier_rows = 0;
  bool earlier_kept = false;
  bool guard_evaluated = false;
  double rho_with_earlier = 0, rho_own_only = 0;
  // The PTX profile's columns (search/ptx_profile.hpp) are used only when 4-fold cross-validation
  // over candidates ranks the rows better with them than without (within-group Spearman).
  bool ptx_evaluated = false, ptx_used = false;
  double rho_with_ptx = 0, rho_without_ptx = 0;
};

class CostModel {
 public:
  // `rows` with weights (same length); fewer than rows_per_feature * columns rows: cold.
  // Decides whether the PTX profile's columns take part (CampaignFitInfo::ptx_used).
  void fit(const std::vector<CostRow>& rows, const std::vector<double>& weights);
  // Zeroes the PTX profile's columns of candidate rows when the fit left them out, so that the
  // posterior's unconstrained weights there add no noise to the draws. Call before scoring.
  void mask(Eigen::MatrixXd& X) const;
  bool ptx_used() const { return ptx_.used; }
  static constexpr std::size_t kMinPtxRows = 60;  // fewer: the PTX columns stay out (no validation)
  // Rows of `d` from campaign `own` and the others, as CampaignFitInfo says.
  CampaignFitInfo fit_for_campaign(const CostDataset& d, std::int64_t own, const std::string& gpu,
                                   const std::string& driver, const std::string& toolchain, std::mt19937_64& rng);
  bool cold() const;
  std::size_t rows() const { return rows_; }
  std::size_t varying_columns() const { return varying_; }  // columns that vary among the fitted rows
  static constexpr std::size_t kMinRows = 12;  // fewer rows: cold (the analytic guess orders picks)
  prior::SelectionOptions selection_options() const;
  const prior::BayesLinear& model() const { return model_; }

 private:
  struct PtxDecision {
    bool evaluated = false, used = false;
    double rho_with = 0, rho_without = 0;
  };
  prior::BayesLinear model_;
  std::size_t rows_ = 0, columns_ = 0, varying_ = 0;
  PtxDecision ptx_;
};

}  // namespace ptxevo::search
