#include "search/cost_model.hpp"

#include "search/campaign_files.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "evaluator/spec.hpp"
#include "search/prior/rank_metrics.hpp"
#include "search/prior/selection.hpp"
#include "search/prior/source_weights.hpp"
#include "tracedb/queries.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::search {

using json = nlohmann::json;

std::optional<evaluator::OpConfig> campaign_spec_config(tracedb::TraceDb& db, std::int64_t campaign,
                                                        const std::filesystem::path& db_dir,
                                                        const evaluator::OpRegistry& registry) {
  const auto config = tracedb::campaign_config_json(db.connection(), campaign);
  if (!config) return std::nullopt;
  const auto j = json::parse(*config, nullptr, false);
  if (!j.is_object() || !j.contains("spec") || !j["spec"].is_string()) return std::nullopt;
  // The spec recorded with the campaign first: it is the one the campaign ran.
  try {
    auto r = load_campaign_spec(db.connection(), campaign, "", registry);
    if (r.spec) return r.spec->config;
  } catch (const std::exception&) {
    // an older database: look for the file
  }
  const std::filesystem::path spec = j["spec"].get<std::string>();
  std::error_code ec;
  for (const auto& p : {spec, db_dir / spec, db_dir / spec.filename()}) {
    if (!std::filesystem::exists(p, ec)) continue;
    auto r = evaluator::load_spec(p.string(), registry);
    if (r.spec) return r.spec->config;
  }
  return std::nullopt;
}

CostDataset cost_dataset(tracedb::TraceDb& db, const evaluator::Op& op, const CampaignConfigs& configs, const GpuLimits& gpu,
                         const FeatureLayout* layout) {
  CostDataset d;
  d.op = op.name();
  struct Raw {
    std::int64_t campaign, candidate;
    evaluator::OpConfig cfg;
    Genome genome;
    std::vector<evaluator::FunctionResources> res;
    std::vector<PtxProfile> ptx;
    evaluator::Shape shape;
    std::string shape_key, created_at, gpu, driver, toolchain;
    double median_ms;
  };
  std::vector<Raw> raw;
  for (auto& b : tracedb::benchmark_rows(db.connection(), op.name())) {
    Raw r;
    r.campaign = b.campaign_id;
    auto cfg = configs.find(r.campaign);
    if (cfg == configs.end()) {
      d.campaigns_without_config.insert(r.campaign);
      continue;
    }
    r.cfg = cfg->second;
    try {
      r.genome = genome_from_json(json::parse(b.genome_json), op);
      r.shape = json::parse(b.shape_json).get<evaluator::Shape>();
    } catch (const std::exception&) {
      ++d.skipped;
      continue;
    }
    r.candidate = b.candidate_id;
    r.res = resources_from_json(b.resources_json);
    r.shape_key = std::move(b.shape_json);
    r.median_ms = b.cand_median_ms;
    r.created_at = std::move(b.created_at);
    r.gpu = std::move(b.gpu);
    r.driver = std::move(b.driver);
    r.toolchain = std::move(b.cuda);
    r.ptx = ptx_profile_from_json(b.ptx_profile_json);
    raw.push_back(std::move(r));
  }
  std::set<std::string> knobs, passes;
  for (const auto& r : raw) {
    for (const auto& [k, v] : r.genome.knobs)
      if (std::holds_alternative<std::int64_t>(v)) knobs.insert(k);
    for (const auto& e : r.genome.edits) passes.insert(e.pass);
  }
  if (layout) {
    d.layout = *layout;
  } else {
    d.layout.knobs.assign(knobs.begin(), knobs.end());
    d.layout.passes.assign(passes.begin(), passes.end());
  }
  std::map<std::pair<std::int64_t, std::string>, std::int64_t> groups;
  for (const auto& r : raw) {
    FeatureRow f;
    try {
      f = cost_features(d.layout, op, r.cfg, r.shape, r.genome, r.res, r.ptx, gpu);
    } catch (const std::exception&) {
      ++d.skipped;
      continue;
    }
    CostRow row;
    row.campaign_id = r.campaign;
    row.candidate_id = r.candidate;
    row.group = groups.emplace(std::make_pair(r.campaign, r.shape_key), static_cast<std::int64_t>(groups.size())).first->second;
    row.created_at = r.created_at;
    row.gpu = r.gpu;
    row.driver = r.driver;
    row.toolchain = r.toolchain;
    row.x = std::move(f.x);
    row.y = std::log(r.median_ms / f.roofline_ms);
    row.analytic = f.analytic_log_time;
    d.rows.push_back(std::move(row));
  }
  return d;
}

namespace {

Eigen::MatrixXd matrix_of(const std::vector<const CostRow*>& rows, std::size_t cols) {
  Eigen::MatrixXd X(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(cols));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < cols; ++j) X(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = rows[i]->x[j];
  return X;
}

// Rows as the prior's RowSet (weights default to 1): one conversion for the guard and the fit.
prior::RowSet row_set(const std::vector<CostRow>& rows, const std::vector<double>& w) {
  std::vector<const CostRow*> ptrs;
  for (const auto& r : rows) ptrs.push_back(&r);
  prior::RowSet s;
  s.X = matrix_of(ptrs, rows.empty() ? 0 : rows.front().x.size());
  s.y.resize(static_cast<Eigen::Index>(rows.size()));
  s.w.resize(static_cast<Eigen::Index>(rows.size()));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    s.y(static_cast<Eigen::Index>(i)) = rows[i].y;
    s.w(static_cast<Eigen::Index>(i)) = i < w.size() ? w[i] : 1.0;
    s.groups.push_back(rows[i].group);
  }
  return s;
}

}  // namespace

HeldOutRank held_out_rank(const CostDataset& d, double train_fraction) {
  HeldOutRank h;
  const std::size_t n = d.rows.size();
  const auto cut = static_cast<std::size_t>(std::floor(static_cast<double>(n) * train_fraction));
  if (n < 20 || cut < 10 || cut >= n) return h;
  // The model as campaigns fit it (CostModel: the PTX columns only where they validate).
  const std::vector<CostRow> train(d.rows.begin(), d.rows.begin() + static_cast<std::ptrdiff_t>(cut));
  CostModel m;
  m.fit(train, std::vector<double>(train.size(), 1.0));
  std::vector<const CostRow*> test;
  for (std::size_t i = cut; i < n; ++i) test.push_back(&d.rows[i]);
  Eigen::MatrixXd X = matrix_of(test, d.layout.size());
  m.mask(X);
  std::vector<double> pred, truth, analytic;
  std::vector<prior::GroupId> tg;
  for (std::size_t i = 0; i < test.size(); ++i) {
    pred.push_back(m.model().mean(X.row(static_cast<Eigen::Index>(i)).transpose()));
    truth.push_back(test[i]->y);
    analytic.push_back(test[i]->analytic);
    tg.push_back(test[i]->group);
  }
  const auto sm = prior::spearman_within_groups(pred, truth, tg);
  const auto sa = prior::spearman_within_groups(analytic, truth, tg);
  h.train_rows = train.size();
  h.test_rows = test.size();
  h.groups = sm.groups;
  h.spearman_model = sm.mean;
  h.spearman_analytic = sa.mean;
  h.ptx_used = m.ptx_used();
  h.evaluated = sm.groups > 0;
  return h;
}

namespace {

void zero_columns(Eigen::MatrixXd& X, std::pair<std::size_t, std::size_t> cols) {
  for (auto j = static_cast<Eigen::Index>(cols.first); j < static_cast<Eigen::Index>(cols.second) && j < X.cols(); ++j)
    X.col(j).setZero();
}

// Mean within-group Spearman of out-of-fold predictions; folds by candidate, so a candidate's
// shapes are never split between training and test.
double cross_validated_rank(const prior::RowSet& set, const std::vector<CostRow>& rows, int folds) {
  std::vector<double> pred(rows.size()), truth(rows.size());
  for (int f = 0; f < folds; ++f) {
    std::vector<Eigen::Index> train, test;
    for (std::size_t i = 0; i < rows.size(); ++i)
      (rows[i].candidate_id % folds == f ? test : train).push_back(static_cast<Eigen::Index>(i));
    if (test.empty() || train.size() < 2) return std::numeric_limits<double>::quiet_NaN();
    prior::BayesLinear m;
    std::vector<prior::GroupId> g;
    for (auto i : train) g.push_back(set.groups[static_cast<std::size_t>(i)]);
    m.fit(set.X(train, Eigen::all), set.y(train), set.w(train), g);
    for (auto i : test) pred[static_cast<std::size_t>(i)] = m.mean(set.X.row(i).transpose());
  }
  for (std::size_t i = 0; i < rows.size(); ++i) truth[i] = rows[i].y;
  return prior::spearman_within_groups(pred, truth, set.groups).mean;
}

}  // namespace

void CostModel::fit(const std::vector<CostRow>& rows, const std::vector<double>& weights) {
  rows_ = rows.size();
  ptx_ = {};
  if (rows.empty()) return;
  columns_ = rows.front().x.size();
  prior::RowSet set = row_set(rows, weights);
  const auto ptx_cols = ptx_feature_columns();
  bool ptx_vary = false;
  for (auto j = static_cast<Eigen::Index>(ptx_cols.first); j < static_cast<Eigen::Index>(ptx_cols.second) && j < set.X.cols(); ++j)
    ptx_vary |= set.X.col(j).maxCoeff() > set.X.col(j).minCoeff();
  // On the H200 RMSNorm universes the profile's columns, all given one prior scale with the
  // knobs', ranked held-out members worse (docs/prior_study.md): they enter only when they help.
  if (ptx_vary && rows.size() >= kMinPtxRows) {
    prior::RowSet without = set;
    zero_columns(without.X, ptx_cols);
    ptx_.rho_with = cross_validated_rank(set, rows, 4);
    ptx_.rho_without = cross_validated_rank(without, rows, 4);
    ptx_.evaluated = std::isfinite(ptx_.rho_with) && std::isfinite(ptx_.rho_without);
    ptx_.used = ptx_.evaluated && ptx_.rho_with > ptx_.rho_without + 0.01;
  }
  if (!ptx_.used) zero_columns(set.X, ptx_cols);
  varying_ = 0;
  for (Eigen::Index j = 0; j < set.X.cols(); ++j)
    if (set.X.col(j).maxCoeff() > set.X.col(j).minCoeff()) ++varying_;
  model_.fit(set.X, set.y, set.w, set.groups);
}

void CostModel::mask(Eigen::MatrixXd& X) const {
  if (!ptx_.used) zero_columns(X, ptx_feature_columns());
}

prior::SelectionOptions CostModel::selection_options() const {
  prior::SelectionOptions o;
  // The posterior is exact at any row count: with few rows its draws are wide, which is
  // exploration, so the analytic guess (Spearman 0.02 against 0.56 for the model on the H200
  // RMSNorm rows, `ptxevo prior`) only orders the very first picks.
  if (columns_ > 0) o.rows_per_feature = static_cast<double>(kMinRows) / static_cast<double>(columns_);
  return o;
}

CampaignFitInfo CostModel::fit_for_campaign(const CostDataset& d, std::int64_t own, const std::string& gpu,
                                            const std::string& driver, const std::string& toolchain,
                                            std::mt19937_64& rng) {
  CampaignFitInfo info;
  std::vector<CostRow> own_rows, earlier;
  for (const auto& r : d.rows) (r.campaign_id == own ? own_rows : earlier).push_back(r);
  info.own_rows = own_rows.size();
  info.earlier_rows = earlier.size();
  const prior::Environment target{gpu, driver, toolchain};
  std::vector<double> w_earlier;
  for (const auto& r : earlier)
    w_earlier.push_back(prior::source_row_weight({r.gpu, r.driver, r.toolchain}, target, own_rows.size()));
  if (!earlier.empty() && !own_rows.empty()) {
    const prior::GuardDecision g =
        prior::guard_old_rows(row_set(earlier, w_earlier), row_set(own_rows, {}), rng);
    info.guard_evaluated = g.evaluated;
    info.rho_with_earlier = g.rho_with_old;
    info.rho_own_only = g.rho_new_only;
    info.earlier_kept = g.keep_old;
  } else {
    info.earlier_kept = !earlier.empty();
  }
  std::vector<CostRow> rows = own_rows;
  std::vector<double> w(own_rows.size(), 1.0);
  if (info.earlier_kept) {
    rows.insert(rows.end(), earlier.begin(), earlier.end());
    w.insert(w.end(), w_earlier.begin(), w_earlier.end());
  }
  fit(rows, w);
  info.ptx_evaluated = ptx_.evaluated;
  info.ptx_used = ptx_.used;
  info.rho_with_ptx = ptx_.rho_with;
  info.rho_without_ptx = ptx_.rho_without;
  return info;
}

bool CostModel::cold() const { return rows_ == 0 || prior::is_cold_start(model_, selection_options()); }

}  // namespace ptxevo::search
