#include "search/prior_study.hpp"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

#include "evaluator/evaluation.hpp"
#include "mutators/pass.hpp"
#include "search/search_loop.hpp"
#include "search/strategy.hpp"
#include "search/population.hpp"
#include "search/prior/bayes_linear.hpp"
#include "search/prior/logistic_validity.hpp"
#include "search/prior/rank_metrics.hpp"
#include "search/prior/selection.hpp"
#include "search/proposer.hpp"

namespace ptxevo::search {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kOwnCampaign = 2, kEarlierCampaign = 1;
const char* const kStudyGpu = "study";  // one environment: earlier rows weigh as a same-GPU campaign's

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a * 0x9e3779b97f4a7c15ULL + b + 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// What a member is, as the study sees it.
struct MemberData {
  bool buildable = false;  // built and passed the screen
  bool passes = false;     // passed the gate with a figure on every benchmark shape
  std::vector<double> log_s, sd, cand_ms, log_low, log_high;  // per benchmark shape
  std::vector<FeatureRow> features;                          // per benchmark shape
};

// The universe with the study's fixed parts: the restricted spec, the proposer, the features.
struct Context {
  const Universe* u = nullptr;
  const evaluator::Op* op = nullptr;
  evaluator::Spec spec;  // first seed only, its knob lists cut to the grid
  std::shared_ptr<const mutators::PassRegistry> passes;
  std::unique_ptr<Proposer> proposer;
  FeatureLayout layout;
  std::vector<MemberData> data;
  std::map<std::string, std::size_t> index;  // hash of the genome with canonical edit order -> member
  std::string family;
  // The proposer's operators a campaign over this universe can use: the knob moves, and with PTX
  // edits in the universe, appending one of its passes or dropping one (others always leave it).
  std::set<std::string> ops;
  // The passes a random genome of the first population may carry: the universe's, in the
  // proposer's order, less those that refuse the baseline (as a campaign leaves out passes refusing its baseline's PTX).
  std::vector<std::string> random_passes;
  bool is_policy_op(const std::string& id) const { return ops.count(id) > 0; }
  std::optional<std::size_t> find(const Genome& g) const {
    const auto it = index.find(canonical_edits(g).hash());
    return it == index.end() ? std::nullopt : std::optional<std::size_t>(it->second);
  }
};

// Figures of member i are those of member figure_of[i] (identity, or the shuffled control's
// permutation over the passing members).
struct Landscape {
  std::vector<std::size_t> figure_of;
};

double true_fitness(const Context& c, const Landscape& l, std::size_t member, const std::vector<std::size_t>& shapes) {
  const MemberData& d = c.data[l.figure_of[member]];
  if (!c.data[member].buildable || !d.passes) return 0;
  double s = 0;
  for (const auto j : shapes) s += d.log_s[j];
  return std::exp(s / static_cast<double>(shapes.size()));
}

struct Transfer {
  const std::map<std::string, BetaCounts>* posterior = nullptr;
  const std::vector<CostRow>* rows = nullptr;
  const std::vector<std::size_t>* best = nullptr;  // members, best first, distinct
  // The shuffled control: `best` are random genomes as a cold campaign draws them (duplicates
  // included), taken as they come, so its first population is distributed as cold's.
  bool as_drawn = false;
};

struct SimOutput {
  StudyRun run;
  std::map<std::string, BetaCounts> posterior;
  std::vector<CostRow> rows;              // relabelled as the earlier campaign's
  std::vector<std::size_t> best_members;  // by the best measured fitness, best first
  std::vector<std::size_t> first_random;  // the first population's random genomes, as drawn
  std::vector<std::size_t> measured;      // members in the order measured, re-measurements included
};

// The universe's side of the search loop (search/search_loop.hpp): a "build" is the record of
// the proposal's genome, a "measurement" its stored figures with noise. Builds and measurements
// answer in the order the loop asks, so the loop's schedule (rounds ahead, a batch queued behind
// the one at the measurer, re-measurements) is the campaign's.
class UniversePipeline : public SearchPipeline {
 public:
  struct UniverseRound : Round {
    std::vector<std::pair<Proposal, std::size_t>> members;  // proposal, the member it found
  };

  UniversePipeline(const Context& c, const std::vector<std::size_t>& shapes, const Landscape& land, const Transfer& t,
                   std::uint64_t seed, const StudyOptions& o, EvolutionStrategy& strategy, SimOutput& out)
      : c_(c), shapes_(shapes), land_(land), t_(t), o_(o), strategy_(strategy), out_(out), rng_(seed),
        noise_rng_(mix(seed, 29)) {
    if (t.best)
      for (const auto m : *t.best) warm_.push_back(WarmGenome{c.u->members[m].genome, "warm_start"});
  }

  // Generations count as a campaign's do: one a call for proposals, one a round launched.
  std::vector<Proposal> propose(bool /*allow_llm*/) override {
    if (!strategy_.population().empty()) return strategy_.children(generation_++, rng_, nullptr);
    ++generation_;
    auto props = strategy_.first_population(warm_, std::numeric_limits<int>::max(), t_.as_drawn, rng_);
    out_.run.warm_seeds = strategy_.warm_taken();
    for (const auto& g : strategy_.first_random()) out_.first_random.push_back(*c_.find(g));
    return props;
  }

  // Proposals the universe lacks (only seeds or warm genomes: proposals are restricted to it) and
  // members proposed before are dropped at once, as a campaign drops what it recorded before.
  std::vector<std::unique_ptr<Round>> launch(std::vector<Proposal> props) override {
    auto round = std::make_unique<UniverseRound>();
    round->proposed = props.size();
    for (auto& p : props) {
      const auto found = c_.find(p.genome);
      if (!found) {
        ++outside_;
        strategy_.dropped(p);
        continue;
      }
      if (!seen_.insert(*found).second) {
        ++out_.run.duplicates;
        strategy_.dropped(p);
        continue;
      }
      round->members.emplace_back(std::move(p), *found);
    }
    round->building = round->members.size();
    ++generation_;
    std::vector<std::unique_ptr<Round>> rounds;
    rounds.push_back(std::move(round));
    return rounds;
  }

  std::size_t finish(Round& r) override {
    std::size_t added = 0;
    for (auto& [p, m] : static_cast<UniverseRound&>(r).members) {
      ++built_;
      const UniverseMember& um = c_.u->members[m];
      const bool refused = um.build == "failed" && um.stage == "pass" && um.reason.rfind("pass-refused", 0) == 0;
      strategy_.built(p, refused, um.build == "ok" || um.build == "screened", c_.data[m].buildable, um.reason);
      if (!c_.data[m].buildable) continue;
      Ready ready;
      ready.candidate_id = static_cast<std::int64_t>(m) + 1;
      ready.proposal = std::move(p);
      ready.features.assign(c_.layout.size(), 0.0);
      for (const auto j : shapes_) {
        const FeatureRow& fr = c_.data[m].features[j];
        for (std::size_t k = 0; k < fr.x.size() && k < ready.features.size(); ++k) ready.features[k] += fr.x[k];
        ready.analytic += fr.analytic_log_time;
      }
      for (auto& v : ready.features) v /= static_cast<double>(shapes_.size());
      ready.analytic /= static_cast<double>(shapes_.size());
      strategy_.add_ready(std::move(ready));
      ++added;
    }
    return added;
  }

  Dispatched dispatch(std::int64_t slots, bool remeasure_best) override {
    Batch b;
    const auto n = std::min<std::int64_t>(o_.batch, slots);
    b.picked = strategy_.choose(static_cast<std::size_t>(std::max<std::int64_t>(0, n)),
                                [this](CostModel& model, std::mt19937_64& model_rng) { refit(model, model_rng); })
                   .picked;
    if (remeasure_best)
      if (const Member* best = strategy_.population().best();
          best && best->measurements + remeasures_in_flight_[best->candidate_id] < o_.max_measurements) {
        b.remeasure = best->candidate_id;
        ++remeasures_in_flight_[best->candidate_id];
      }
    Dispatched d;
    d.candidates = b.picked.size();
    d.sent = !b.picked.empty() || b.remeasure;
    if (d.sent) queue_.push_back(std::move(b));
    return d;
  }

  Collected collect() override {
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    StudyRun& run = out_.run;
    for (const auto& r : b.picked) {
      ++run.evaluations;
      const auto m = static_cast<std::size_t>(r.candidate_id - 1);
      const auto fig = measure(m);
      strategy_.measured(r, fig);
      if (!fig) {
        ++run.failed;
      } else {
        auto& bm = best_measured_[m];
        bm = std::max(bm, fig->fitness);
        best_true_ = std::max(best_true_, true_fitness(c_, land_, m, shapes_));
      }
      run.best_true.push_back(best_true_);
    }
    // The best measured again (not charged to the budget, as in a campaign).
    if (b.remeasure) {
      const std::int64_t id = *b.remeasure;
      if (--remeasures_in_flight_[id] <= 0) remeasures_in_flight_.erase(id);
      const auto m = static_cast<std::size_t>(id - 1);
      if (const auto fig = measure(m)) {
        strategy_.remeasured(id, *fig);
        auto& bm = best_measured_[m];
        bm = std::max(bm, fig->fitness);
        ++run.remeasures;
      }
    }
    return Collected{b.picked.size(), false};
  }

  std::int64_t evaluations_done() const override { return out_.run.evaluations; }
  std::int64_t built() const override { return built_; }

  std::int64_t outside() const { return outside_; }
  double best_true() const { return best_true_; }
  std::vector<CostRow>& rows() { return own_rows_; }
  const std::map<std::size_t, double>& best_measured() const { return best_measured_; }

 private:
  struct Batch {
    std::vector<Ready> picked;
    std::optional<std::int64_t> remeasure;
  };

  // A measurement: noisy per-shape speedups around the stored medians, bounds shifted with them.
  std::optional<Figures> measure(std::size_t member) {
    out_.measured.push_back(member);
    const MemberData& d = c_.data[land_.figure_of[member]];
    if (!d.passes) return std::nullopt;
    double f = 0, lo = 0, hi = 0;
    for (const auto j : shapes_) {
      double ls = d.log_s[j];
      if (o_.noise && d.sd[j] > 0) ls += std::normal_distribution<double>(0.0, d.sd[j])(noise_rng_);
      f += ls;
      lo += ls + (d.log_low[j] - d.log_s[j]);
      hi += ls + (d.log_high[j] - d.log_s[j]);
      // The cost row: this member's features, the figures' time (faster by the noisy speedup).
      const FeatureRow& fr = c_.data[member].features[j];
      CostRow row;
      row.campaign_id = kOwnCampaign;
      row.candidate_id = static_cast<std::int64_t>(member) + 1;
      row.group = kOwnCampaign * 1000 + static_cast<std::int64_t>(j);
      row.gpu = kStudyGpu;
      row.x = fr.x;
      row.y = std::log(d.cand_ms[j] * std::exp(d.log_s[j] - ls) / fr.roofline_ms);
      row.analytic = fr.analytic_log_time;
      own_rows_.push_back(std::move(row));
    }
    const double n = static_cast<double>(shapes_.size());
    return Figures{std::exp(f / n), std::exp(lo / n), std::exp(hi / n)};
  }

  void refit(CostModel& model, std::mt19937_64& model_rng) {
    CostDataset d;
    d.layout = c_.layout;
    d.rows = own_rows_;
    if (t_.rows) d.rows.insert(d.rows.end(), t_.rows->begin(), t_.rows->end());
    model.fit_for_campaign(d, kOwnCampaign, kStudyGpu, "", "", model_rng);
  }

  const Context& c_;
  const std::vector<std::size_t>& shapes_;
  const Landscape& land_;
  const Transfer& t_;
  const StudyOptions& o_;
  EvolutionStrategy& strategy_;
  SimOutput& out_;
  std::mt19937_64 rng_, noise_rng_;
  int generation_ = 0;
  std::vector<WarmGenome> warm_;  // the earlier campaign's best genomes (or the shuffled control's, as drawn)
  std::set<std::size_t> seen_;
  std::int64_t outside_ = 0, built_ = 0;
  std::deque<Batch> queue_;
  std::map<std::int64_t, int> remeasures_in_flight_;
  std::vector<CostRow> own_rows_;
  std::map<std::size_t, double> best_measured_;  // member -> its best measured fitness
  double best_true_ = 0;
};

// One campaign over the universe: the campaign's strategy and search loop, told what the universe
// recorded.
SimOutput simulate(const Context& c, const std::vector<std::size_t>& shapes, const Landscape& land, const Transfer& t,
                   std::uint64_t seed, const StudyOptions& o, std::int64_t budget) {
  SimOutput out;
  OperatorPosterior posterior(c.family, c.spec.arch);
  if (t.posterior) posterior.carry(*t.posterior);
  EvolutionStrategy strategy(*c.proposer, std::move(posterior), c.ops,
                             StrategyOptions{o.islands, o.island_size, o.batch, o.initial, o.random_edits,
                                             o.refusals_before_rare, o.reserve_factor, c.layout.size()},
                             strategy_model_seed(seed), nullptr);
  strategy.set_random_passes(c.random_passes);
  strategy.restrict_proposals([&c](const Genome& g) { return c.find(g).has_value(); });
  UniversePipeline pipeline(c, shapes, land, t, seed, o, strategy, out);
  LoopOptions lo;
  lo.budget = budget;
  lo.batch = o.batch;
  lo.measurers = 1;
  lo.choosing = true;
  lo.build_factor = o.build_factor;
  lo.reserve_factor = o.reserve_factor;
  lo.build_rounds = o.build_rounds;
  lo.top_up_rounds = o.top_up_rounds;
  lo.migrate_every = o.migrate_every;
  lo.remeasure_every = o.remeasure_every;
  run_search_loop(strategy, pipeline, lo);

  StudyRun& run = out.run;
  run.outside = pipeline.outside() + strategy.outside();
  run.final_best = pipeline.best_true();
  out.posterior = strategy.posterior().counts();
  out.rows = std::move(pipeline.rows());
  for (auto& r : out.rows) {
    r.campaign_id = kEarlierCampaign;
    r.group = kEarlierCampaign * 1000 + (r.group % 1000);
  }
  std::vector<std::pair<double, std::size_t>> order;
  for (const auto& [m, f] : pipeline.best_measured()) order.emplace_back(f, m);
  // Ties by member index (std::sort: libstdc++ 12's stable_sort trips clang's -Werror).
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (const auto& [f, m] : order) out.best_members.push_back(m);
  return out;
}

double evaluations_to(const StudyRun& r, double target) {
  for (std::size_t i = 0; i < r.best_true.size(); ++i)
    if (r.best_true[i] >= target * (1 - 1e-12)) return static_cast<double>(i + 1);
  return kInf;
}

std::string shapes_text(const std::vector<evaluator::Shape>& shapes) {
  std::string s;
  for (const auto& sh : shapes) {
    auto it = sh.find("N");
    s += (s.empty() ? "" : ",") + (it != sh.end() ? std::to_string(it->second) : evaluator::shape_to_string(sh));
  }
  return "N=" + s;
}

}  // namespace

const ArmSummary* StudyDirection::arm(const std::string& name) const {
  for (const auto& a : arms)
    if (a.arm == name) return &a;
  return nullptr;
}

namespace {

void check_options(const StudyOptions& o) {
  if (o.seeds < 1 || o.batch < 1 || o.islands < 1 || o.island_size < 1 || o.build_factor < 1 || o.build_rounds < 1 ||
      o.top_up_rounds < 0)
    throw std::invalid_argument("seeds, batch, islands, island size and build rounds must be positive, top-up rounds not negative and build factor at least 1");
}

std::vector<std::string> study_arms(const StudyOptions& o) {
  const std::vector<std::string> arms = o.arms.empty() ? kStudyArms : o.arms;
  for (const auto& a : arms)
    if (std::find(kStudyArms.begin(), kStudyArms.end(), a) == kStudyArms.end())
      throw std::invalid_argument("unknown arm '" + a + "'");
  return arms;
}

StudyResult new_result(const Universe& u, const StudyOptions& o) {
  StudyResult res;
  res.options = o;
  res.synthetic = u.synthetic;
  res.members = u.members.size();
  res.seeds = o.seeds;
  res.provenance = u.synthetic ? "SYNTHETIC timings (a test fixture, not measured on a GPU)"
                               : u.gpu + ", driver " + u.driver + ", " + u.toolchain + ", commit " +
                                     (u.commit.empty() ? "?" : u.commit) + ", measured " + u.measured_at;
  if (!u.closed) res.warnings.push_back("the universe is a thinned subset: proposals outside it are drawn again");
  return res;
}

// CostModelCheck: folds by member index (the grid's order cycles through every knob).
CostModelCheck check_cost_model(const Context& c) {
  CostModelCheck out;
  struct Row {
    const FeatureRow* f;
    double y;
    prior::GroupId shape;
    std::size_t fold;
  };
  std::vector<Row> rows;
  for (std::size_t i = 0; i < c.data.size(); ++i) {
    const MemberData& d = c.data[i];
    if (!d.passes || d.features.size() != d.cand_ms.size()) continue;
    if (!c.u->members[i].ptx_profile.empty()) ++out.profiled_rows;
    for (std::size_t j = 0; j < d.features.size(); ++j)
      rows.push_back({&d.features[j], std::log(d.cand_ms[j] / d.features[j].roofline_ms), static_cast<prior::GroupId>(j), i % 5});
  }
  out.rows = rows.size();
  out.profiled_rows *= c.u->benchmark_shapes.size();
  if (rows.size() < 50) return out;
  const auto names = c.layout.names();
  out.columns = names.size();
  const auto first_ptx = static_cast<Eigen::Index>(std::find(names.begin(), names.end(), "ptx_profiled") - names.begin());
  const auto last_ptx = static_cast<Eigen::Index>(std::find(names.begin(), names.end(), "log2_bytes_in_flight_ratio") - names.begin());
  auto cross_validate = [&](bool with_ptx) {
    std::vector<double> pred(rows.size()), truth(rows.size());
    std::vector<prior::GroupId> groups(rows.size());
    for (std::size_t fold = 0; fold < 5; ++fold) {
      std::vector<std::size_t> train;
      for (std::size_t r = 0; r < rows.size(); ++r)
        if (rows[r].fold != fold) train.push_back(r);
      auto x_of = [&](std::size_t r) {
        Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(rows[r].f->x.data(), static_cast<Eigen::Index>(rows[r].f->x.size()));
        if (!with_ptx)
          for (Eigen::Index k = first_ptx; k <= last_ptx && k < x.size(); ++k) x(k) = 0;
        return x;
      };
      Eigen::MatrixXd X(static_cast<Eigen::Index>(train.size()), static_cast<Eigen::Index>(out.columns));
      Eigen::VectorXd y(static_cast<Eigen::Index>(train.size()));
      std::vector<prior::GroupId> g;
      for (std::size_t k = 0; k < train.size(); ++k) {
        X.row(static_cast<Eigen::Index>(k)) = x_of(train[k]).transpose();
        y(static_cast<Eigen::Index>(k)) = rows[train[k]].y;
        g.push_back(rows[train[k]].shape);
      }
      prior::BayesLinear m;
      m.fit(X, y, Eigen::VectorXd::Ones(y.size()), g);
      for (std::size_t r = 0; r < rows.size(); ++r)
        if (rows[r].fold == fold) pred[r] = m.mean(x_of(r));
    }
    for (std::size_t r = 0; r < rows.size(); ++r) {
      truth[r] = rows[r].y;
      groups[r] = rows[r].shape;
    }
    return prior::spearman_within_groups(pred, truth, groups).mean;
  };
  out.spearman_all = cross_validate(true);
  out.spearman_without_ptx = cross_validate(false);
  std::vector<double> analytic, truth;
  std::vector<prior::GroupId> groups;
  for (const auto& r : rows) {
    analytic.push_back(r.f->analytic_log_time);
    truth.push_back(r.y);
    groups.push_back(r.shape);
  }
  out.spearman_analytic = prior::spearman_within_groups(analytic, truth, groups).mean;
  return out;
}

// A third of the passing members, in whole batches (at least two), unless the options give one.
std::int64_t default_budget(const StudyOptions& o, std::size_t passing) {
  if (o.budget > 0) return o.budget;
  const auto third = static_cast<std::int64_t>((passing + 2) / 3);
  return std::max<std::int64_t>(2 * o.batch, (third + o.batch - 1) / o.batch * o.batch);
}

// The universe with the study's fixed parts (built in place: the proposer refers to c.spec).
// Counts the universe's buildable and passing members into *res and notes warnings there.
void make_context(Context& c, const Universe& u, const evaluator::Spec& spec, const evaluator::Op& op, StudyResult* res) {
  if (spec.seeds.empty() || spec.seeds.front().name != u.seed)
    throw std::invalid_argument("the universe is over seed '" + u.seed + "', not the spec's first seed");
  if (u.benchmark_shapes != spec.benchmark_shapes)
    throw std::invalid_argument("the universe's benchmark shapes differ from the spec's");
  if (u.benchmark_shapes.empty()) throw std::invalid_argument("the universe has no benchmark shape");
  const std::size_t nshapes = u.benchmark_shapes.size();
  c.u = &u;
  c.op = &op;
  c.spec = spec;
  c.spec.seeds = {restrict_seed(spec.seeds.front(), u.grid)};
  c.spec.baseline = u.seed;
  c.passes = std::make_shared<const mutators::PassRegistry>(mutators::builtin_passes());
  c.proposer = std::make_unique<Proposer>(c.spec, *c.passes);
  c.family = op_family(spec.op);
  c.ops = {"knob_step", "knob_reset", "knob_crossover"};
  if (!u.edits.empty()) c.ops.insert("ptx_drop");
  for (const auto& e : u.edits) c.ops.insert("ptx:" + e.pass);
  for (const auto& pass : c.proposer->ptx_passes())
    if (c.ops.count("ptx:" + pass)) c.random_passes.push_back(pass);
  std::set<std::string> knobs;
  for (const auto& k : c.spec.seeds.front().knobs) knobs.insert(k.name);
  c.layout.knobs.assign(knobs.begin(), knobs.end());
  c.layout.passes = c.passes->names();
  c.data.resize(u.members.size());
  std::size_t unrecorded = 0;
  for (std::size_t i = 0; i < u.members.size(); ++i) {
    const UniverseMember& m = u.members[i];
    MemberData& d = c.data[i];
    // A member never built, or built but not measured (a partial file), is outside the record:
    // a proposal of it is drawn again, as one outside the universe.
    if (m.build == "pending" || (m.build == "ok" && !m.measured())) {
      ++unrecorded;
      continue;
    }
    c.index[canonical_edits(m.genome).hash()] = i;
    d.buildable = m.build == "ok";
    if (!d.buildable) continue;
    ++res->buildable;
    try {
      for (const auto& sh : u.benchmark_shapes)
        d.features.push_back(cost_features(c.layout, op, spec.config, sh, m.genome, m.resources, m.ptx_profile));
    } catch (const std::exception& e) {
      d.buildable = false;  // no launch plan on some shape: the campaign's screen would have said so
      continue;
    }
    d.passes = m.verdict == "pass" && m.fitness && m.shapes.size() == nshapes;
    for (std::size_t j = 0; d.passes && j < nshapes; ++j) {
      const UniverseShape& s = m.shapes[j];
      if (!(s.speedup > 0) || !(s.candidate_ms > 0) || s.shape != u.benchmark_shapes[j]) {
        d.passes = false;
        break;
      }
      const double ls = std::log(s.speedup);
      const double lo = s.speedup_low > 0 ? std::log(std::min(s.speedup_low, s.speedup)) : ls;
      const double hi = s.speedup_high > 0 ? std::log(std::max(s.speedup_high, s.speedup)) : ls;
      d.log_s.push_back(ls);
      d.log_low.push_back(lo);
      d.log_high.push_back(hi);
      d.sd.push_back((hi - lo) / (2 * 1.96));
      d.cand_ms.push_back(s.candidate_ms);
    }
    if (d.passes) ++res->passing;
  }
  if (unrecorded > 0)
    res->warnings.push_back(std::to_string(unrecorded) + " members are not built or not measured: proposals of them are drawn again");
  if (res->passing < 2) throw std::invalid_argument("the universe has fewer than two measured, passing candidates");
  const auto base = c.find(c.proposer->seeds().front());
  if (!base || !c.data[*base].passes)
    throw std::invalid_argument("the universe lacks a measured baseline (the seed at its defaults)");
  // A pass that refuses the baseline (its member with that one edit, at the universe's
  // parameters) is left out of random genomes, as the campaign leaves out one refusing the
  // baseline's PTX.
  std::erase_if(c.random_passes, [&](const std::string& pass) {
    Genome g = c.proposer->seeds().front();
    for (const auto& e : u.edits)
      if (e.pass == pass) g.edits.push_back(e);
    const auto m = c.find(g);
    if (!m) return false;
    const UniverseMember& um = u.members[*m];
    return um.build == "failed" && um.stage == "pass" && um.reason.rfind("pass-refused", 0) == 0;
  });
}

using Parallel = std::function<void(std::size_t, const std::function<void(std::size_t)>&)>;

// One direction: earlier campaigns on `sshapes` of the source universe, new ones on `tshapes` of
// the target universe (the same context for the shape-set study). What the earlier campaigns
// leave is carried across by genome: their best genomes become the target universe's members
// with the same genome (those it lacks are dropped), their cost rows only when both universes
// have the same feature layout.
StudyDirection run_direction(const Context& tc, const std::vector<std::size_t>& tshapes, const Context& sc,
                             const std::vector<std::size_t>& sshapes, const std::vector<std::string>& arms,
                             const StudyOptions& o, std::int64_t budget, const Parallel& parallel,
                             std::vector<std::string>* warnings) {
  StudyDirection sd;
  for (const auto j : tshapes) sd.target_shapes.push_back(tc.u->benchmark_shapes[j]);
  for (const auto j : sshapes) sd.source_shapes.push_back(sc.u->benchmark_shapes[j]);
  const bool need_source = std::any_of(arms.begin(), arms.end(), [](const auto& a) { return a != "cold" && a != "shuffled"; });
  const bool need_shuffled = std::find(arms.begin(), arms.end(), "shuffled") != arms.end();
  auto identity_of = [](const Context& c) {
    Landscape l;
    l.figure_of.resize(c.u->members.size());
    std::iota(l.figure_of.begin(), l.figure_of.end(), std::size_t{0});
    return l;
  };
  auto passing_of = [](const Context& c) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < c.data.size(); ++i)
      if (c.data[i].passes) out.push_back(i);
    return out;
  };
  const Landscape identity = identity_of(tc), s_identity = identity_of(sc);
  const std::vector<std::size_t> passing = passing_of(tc), s_passing = passing_of(sc);
  const bool same = &tc == &sc;
  auto to_target = [&](const std::vector<std::size_t>& members) {
    if (same) return members;
    std::vector<std::size_t> out;
    for (const auto m : members)
      if (const auto t = tc.find(sc.u->members[m].genome)) out.push_back(*t);
    return out;
  };
  const bool rows_transfer = same || tc.layout.names() == sc.layout.names();
  if (!rows_transfer && warnings)
    warnings->push_back("the two universes' cost features differ in layout: the earlier campaigns' cost rows are not carried");
  const std::size_t S = static_cast<std::size_t>(o.seeds);
  // Earlier campaigns, one per seed: on the true figures and on permuted ones.
  std::vector<SimOutput> sources(S), shuffled(S);
  parallel(2 * S, [&](std::size_t k) {
    const std::size_t s = k % S;
    const std::uint64_t src_seed = mix(o.seed + s, 0x5eed);
    if (k < S) {
      if (need_source) sources[s] = simulate(sc, sshapes, s_identity, {}, src_seed, o, budget);
    } else if (need_shuffled) {
      Landscape perm = s_identity;
      std::vector<std::size_t> to = s_passing;
      std::mt19937_64 prng(mix(o.seed + s, 0x5b0ff1e));
      std::shuffle(to.begin(), to.end(), prng);
      for (std::size_t i = 0; i < s_passing.size(); ++i) perm.figure_of[s_passing[i]] = to[i];
      shuffled[s] = simulate(sc, sshapes, perm, {}, src_seed, o, budget);
    }
  });
  // The shuffled control's warm-start genomes: drawn by labels permuted across the random
  // genomes its earlier campaign drew before it saw any figure. Those are the only genomes of
  // its database that no label chose: the ones it measured later were chosen by the permuted
  // labels and by what its operators reach (on the edits universe they stack PTX edits, and
  // the gains are edits), so even a permuted database's best hand a campaign better starting
  // points than its random genomes. Drawn by permuted labels from random genomes, they are
  // random genomes: the control's first population is distributed as cold's.
  std::vector<std::vector<std::size_t>> shuffled_pool(S);
  if (need_shuffled)
    for (std::size_t s = 0; s < S; ++s) {
      shuffled_pool[s] = to_target(shuffled[s].first_random);
      std::mt19937_64 lrng(mix(o.seed + s, 0x1abe1));
      std::shuffle(shuffled_pool[s].begin(), shuffled_pool[s].end(), lrng);
    }
  // The earlier campaigns' best genomes, as members of the target universe.
  std::vector<std::vector<std::size_t>> source_best(S);
  if (need_source)
    for (std::size_t s = 0; s < S; ++s) source_best[s] = to_target(sources[s].best_members);
  std::vector<ArmSummary> summaries(arms.size());
  for (std::size_t a = 0; a < arms.size(); ++a) {
    summaries[a].arm = arms[a];
    summaries[a].runs.resize(S);
  }
  parallel(arms.size() * S, [&](std::size_t k) {
    const std::size_t a = k / S, s = k % S;
    const std::string& arm = arms[a];
    Transfer t;
    const SimOutput* src = arm == "shuffled" ? &shuffled[s] : &sources[s];
    if (arm == "warm" || arm == "shuffled" || arm == "posterior") t.posterior = &src->posterior;
    if ((arm == "warm" || arm == "shuffled" || arm == "cost_model") && rows_transfer) t.rows = &src->rows;
    if (arm == "warm" || arm == "seeds") t.best = &source_best[s];
    if (arm == "shuffled") {
      t.best = &shuffled_pool[s];
      t.as_drawn = true;
    }
    summaries[a].runs[s] = simulate(tc, tshapes, identity, t, o.seed + s, o, budget).run;
  });

  // ---- the statistics ----
  for (const auto i : passing) sd.optimum = std::max(sd.optimum, true_fitness(tc, identity, i, tshapes));
  auto cold_it = std::find(arms.begin(), arms.end(), "cold");
  std::vector<double> cold_final;
  if (cold_it != arms.end())
    for (const auto& r : summaries[static_cast<std::size_t>(cold_it - arms.begin())].runs) cold_final.push_back(r.final_best);
  else
    for (const auto& r : summaries.front().runs) cold_final.push_back(r.final_best);
  // The lower median: with an even count the mean of the two middle values could lie above
  // half the cold runs, and cold's own median E100 would then be censored.
  std::sort(cold_final.begin(), cold_final.end());
  sd.f_cold = cold_final[(cold_final.size() - 1) / 2];
  sd.target100 = sd.f_cold;
  sd.target95 = sd.f_cold > 1 ? std::exp(0.95 * std::log(sd.f_cold)) : sd.f_cold;
  // Random search without replacement over the members a campaign could measure: with m of n
  // at or above the target, (n + 1) / (m + 1) draws on average.
  auto random_to = [&](double target) {
    double n = 0, m = 0;
    for (std::size_t i = 0; i < tc.data.size(); ++i) {
      if (!tc.data[i].buildable) continue;
      ++n;
      if (true_fitness(tc, identity, i, tshapes) >= target * (1 - 1e-12)) ++m;
    }
    return (n + 1) / (m + 1);
  };
  sd.random95 = random_to(sd.target95);
  sd.random100 = random_to(sd.target100);
  for (auto& a : summaries) {
    for (const auto& r : a.runs) {
      a.e95.push_back(evaluations_to(r, sd.target95));
      a.e100.push_back(evaluations_to(r, sd.target100));
      a.final_best.push_back(r.final_best);
    }
    a.median95 = prior::median(a.e95);
    a.median100 = prior::median(a.e100);
    a.median_final = prior::median(a.final_best);
    auto frac = [](const std::vector<double>& e) {
      return static_cast<double>(std::count_if(e.begin(), e.end(), [](double x) { return std::isfinite(x); })) /
             static_cast<double>(e.size());
    };
    a.reached95 = frac(a.e95);
    a.reached100 = frac(a.e100);
  }
  const ArmSummary* cold = nullptr;
  for (const auto& a : summaries)
    if (a.arm == "cold") cold = &a;
  if (cold)
    for (std::size_t a = 0; a < summaries.size(); ++a) {
      std::mt19937_64 boot(mix(o.seed, 1000 + a));
      summaries[a].r95 = prior::bootstrap_median_ratio(summaries[a].e95, cold->e95, boot, o.resamples);
      summaries[a].r100 = prior::bootstrap_median_ratio(summaries[a].e100, cold->e100, boot, o.resamples);
      summaries[a].final_vs_cold = prior::mann_whitney_greater(summaries[a].final_best, cold->final_best);
    }
  sd.arms = std::move(summaries);
  return sd;
}

}  // namespace

SimulatedCampaign simulate_campaign(const Universe& u, const evaluator::Spec& spec, const evaluator::Op& op,
                                    const StudyOptions& o, std::uint64_t seed, std::int64_t budget) {
  check_options(o);
  if (budget < 1) throw std::invalid_argument("a simulated campaign needs a budget of at least one evaluation");
  StudyResult res = new_result(u, o);
  Context c;
  make_context(c, u, spec, op, &res);
  std::vector<std::size_t> shapes(u.benchmark_shapes.size());
  std::iota(shapes.begin(), shapes.end(), std::size_t{0});
  Landscape identity;
  identity.figure_of.resize(u.members.size());
  std::iota(identity.figure_of.begin(), identity.figure_of.end(), std::size_t{0});
  SimOutput out = simulate(c, shapes, identity, Transfer{}, seed, o, budget);
  SimulatedCampaign sc;
  for (const auto m : out.measured) sc.measured.push_back(u.members[m].genome);
  sc.run = std::move(out.run);
  return sc;
}

StudyResult run_prior_study(const Universe& u, const evaluator::Spec& spec, const evaluator::Op& op,
                            const StudyOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  check_options(o);
  if (u.benchmark_shapes.size() < 2) throw std::invalid_argument("two shape sets need at least two benchmark shapes");
  StudyResult res = new_result(u, o);
  Context c;
  make_context(c, u, spec, op, &res);
  res.budget = default_budget(o, res.passing);
  res.cost_check = check_cost_model(c);
  const std::size_t nshapes = u.benchmark_shapes.size();

  // ---- the shape sets ----
  std::vector<std::size_t> set_a = o.set_a, set_b;
  if (set_a.empty())
    for (std::size_t j = 0; j < nshapes; j += 2) set_a.push_back(j);
  for (const auto j : set_a)
    if (j >= nshapes) throw std::invalid_argument("set A names shape " + std::to_string(j) + " of " + std::to_string(nshapes));
  for (std::size_t j = 0; j < nshapes; ++j)
    if (std::find(set_a.begin(), set_a.end(), j) == set_a.end()) set_b.push_back(j);
  if (set_a.empty() || set_b.empty()) throw std::invalid_argument("both shape sets need a shape");

  const std::vector<std::string> arms = study_arms(o);
  std::optional<tbb::task_arena> arena;
  if (o.threads > 0) arena.emplace(o.threads);
  const Parallel parallel = [&](std::size_t n, const std::function<void(std::size_t)>& f) {
    auto body = [&] { tbb::parallel_for(std::size_t{0}, n, [&](std::size_t i) { f(i); }); };
    if (arena) arena->execute(body);
    else body();
  };
  struct Dir {
    std::string target, source;
    std::vector<std::size_t> tshapes, sshapes;
  };
  std::vector<Dir> dirs = {{"A", "B", set_a, set_b}};
  if (o.both_directions) dirs.push_back({"B", "A", set_b, set_a});
  for (const auto& dir : dirs) {
    StudyDirection sd = run_direction(c, dir.tshapes, c, dir.sshapes, arms, o, res.budget, parallel, &res.warnings);
    sd.target_name = dir.target;
    sd.source_name = dir.source;
    res.directions.push_back(std::move(sd));
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

StudyResult run_prior_study_transfer(const Universe& source, const evaluator::Spec& source_spec, const Universe& target,
                                     const evaluator::Spec& target_spec, const evaluator::Op& op, const StudyOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  check_options(o);
  if (source.seed != target.seed) throw std::invalid_argument("the two universes are over different seeds");
  if (source_spec.op != target_spec.op) throw std::invalid_argument("the two universes' specs are of different ops");
  StudyResult res = new_result(target, o);
  res.provenance = "target: " + res.provenance + "; source: " + new_result(source, o).provenance;
  Context tc, sc;
  make_context(tc, target, target_spec, op, &res);
  res.cost_check = check_cost_model(tc);
  StudyResult source_counts;
  make_context(sc, source, source_spec, op, &source_counts);
  for (const auto& w : source_counts.warnings) res.warnings.push_back("source universe: " + w);
  res.budget = default_budget(o, res.passing);
  std::vector<std::size_t> all_t(target.benchmark_shapes.size()), all_s(source.benchmark_shapes.size());
  std::iota(all_t.begin(), all_t.end(), std::size_t{0});
  std::iota(all_s.begin(), all_s.end(), std::size_t{0});
  const std::vector<std::string> arms = study_arms(o);
  std::optional<tbb::task_arena> arena;
  if (o.threads > 0) arena.emplace(o.threads);
  const Parallel parallel = [&](std::size_t n, const std::function<void(std::size_t)>& f) {
    auto body = [&] { tbb::parallel_for(std::size_t{0}, n, [&](std::size_t i) { f(i); }); };
    if (arena) arena->execute(body);
    else body();
  };
  auto name_of = [](const Universe& u) {
    const std::string f = std::filesystem::path(u.spec_file).filename().string();
    return f.empty() ? std::string("?") : f;
  };
  StudyDirection sd = run_direction(tc, all_t, sc, all_s, arms, o, res.budget, parallel, &res.warnings);
  sd.target_name = name_of(target);
  sd.source_name = name_of(source);
  res.directions.push_back(std::move(sd));
  if (o.both_directions) {
    // The other way: earlier campaigns on the target universe, the new ones on the source.
    const std::int64_t back_budget = default_budget(o, source_counts.passing);
    if (back_budget != res.budget)
      res.warnings.push_back("the way back (on " + name_of(source) + ") runs at budget " + std::to_string(back_budget) +
                             " (a third of its passing members)");
    StudyDirection back = run_direction(sc, all_s, tc, all_t, arms, o, back_budget, parallel, &res.warnings);
    back.target_name = name_of(source);
    back.source_name = name_of(target);
    res.directions.push_back(std::move(back));
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

namespace {

std::string num(double v, int prec = 2) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "n/a";
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(prec);
  s << v;
  return s.str();
}

std::string evals(double v) { return std::isfinite(v) ? num(v, v == std::floor(v) ? 0 : 1) : ">budget"; }

}  // namespace

std::string format_study(const StudyResult& r) {
  std::ostringstream out;
  out << "Prior study: " << r.members << " candidates in the universe, " << r.buildable << " built and screened in, "
      << r.passing << " passing with figures; " << r.provenance << "\n";
  if (r.synthetic) out << "*** SYNTHETIC: these numbers say nothing about the prior on a real GPU ***\n";
  for (const auto& w : r.warnings) out << "warning: " << w << "\n";
  out << "budget " << r.budget << " evaluations per campaign, " << r.seeds << " seeds per arm (seeds " << r.options.seed
      << ".." << r.options.seed + static_cast<std::uint64_t>(r.seeds) - 1 << "), batch " << r.options.batch
      << ", build factor " << r.options.build_factor << ", " << r.options.islands << " islands of "
      << r.options.island_size << "; noise " << (r.options.noise ? "within each shape's stored 95% CI" : "off") << "\n";
  out << "E95, E100: evaluations until the true best reaches 95% / 100% of the cold campaigns' median gain (log "
         "fitness over the baseline); R: median E of the arm / median E of cold, 95% bootstrap CI ("
      << r.options.resamples << " resamples, censored runs count as infinite); best: median true fitness at the "
                                "budget, p: one-sided Mann-Whitney that it beats cold's\n";
  if (r.cost_check.rows > 0) {
    const auto& k = r.cost_check;
    out << "cost model on this universe (5-fold over members, " << k.rows << " rows, " << k.profiled_rows
        << " with a PTX profile, " << k.columns << " columns): within-shape Spearman " << num(k.spearman_all)
        << " with every column, " << num(k.spearman_without_ptx) << " without the PTX profile's, "
        << num(k.spearman_analytic) << " for the analytic guess\n";
  }
  for (const auto& d : r.directions) {
    out << "\ntarget set " << d.target_name << " (" << shapes_text(d.target_shapes) << "), earlier campaigns on set "
        << d.source_name << " (" << shapes_text(d.source_shapes) << ")\n";
    out << "  universe optimum " << num(d.optimum, 4) << "; cold median best at the budget " << num(d.f_cold, 4)
        << "; targets " << num(d.target95, 4) << " (95%) and " << num(d.target100, 4)
        << " (100%); random search would need " << num(d.random95, 1) << " / " << num(d.random100, 1)
        << " evaluations on average\n";
    if (d.f_cold <= 1) out << "  (the cold campaigns found no gain over the baseline: the targets are met at once)\n";
    char line[512];
    std::snprintf(line, sizeof line, "  %-11s %12s %-22s %12s %-22s %-8s %-6s %s\n", "arm", "E95 [reach]", "R95 [95% CI]",
                  "E100 [reach]", "R100 [95% CI]", "best", "p", "warm seeds / outside / dup");
    out << line;
    for (const auto& a : d.arms) {
      const int s = static_cast<int>(a.runs.size());
      auto reach = [&](double f) { return std::to_string(static_cast<int>(std::lround(f * s))) + "/" + std::to_string(s); };
      auto ratio = [&](const prior::RatioInterval& ri) {
        if (a.arm == "cold") return std::string("1 (reference)");
        return num(ri.ratio) + " [" + num(ri.lower) + ", " + num(ri.upper) + "]";
      };
      double warm = 0, outside = 0, dup = 0;
      for (const auto& run : a.runs) {
        warm += static_cast<double>(run.warm_seeds);
        outside += static_cast<double>(run.outside);
        dup += static_cast<double>(run.duplicates);
      }
      std::snprintf(line, sizeof line, "  %-11s %5s [%5s] %-22s %5s [%5s] %-22s %-8s %-6s %.1f / %.1f / %.1f\n",
                    a.arm.c_str(), evals(a.median95).c_str(), reach(a.reached95).c_str(), ratio(a.r95).c_str(),
                    evals(a.median100).c_str(), reach(a.reached100).c_str(), ratio(a.r100).c_str(),
                    num(a.median_final, 4).c_str(), a.arm == "cold" ? "" : num(a.final_vs_cold.p_value, 3).c_str(),
                    warm / s, outside / s, dup / s);
      out << line;
    }
  }
  out << "\n(" << num(r.seconds, 1) << " s)\n";
  return out.str();
}

}  // namespace ptxevo::search
