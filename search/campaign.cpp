#include "search/campaign.hpp"

#include <tbb/concurrent_queue.h>

#include <algorithm>
#include <numeric>
#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "evaluator/build_cache.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/ir_checks.hpp"
#include "search/entry_abi_check.hpp"
#include "search/genome_build.hpp"
#include "search/llm_evidence.hpp"
#include "search/prior/selection.hpp"

namespace ptxevo::search {

using evaluator::EvalReport;
using nlohmann::json;

std::string normalize_arch(const std::string& arch) {
  if (arch == "sm_90" || arch == "sm_90a") return "sm_90a";
  if (arch == "sm_100" || arch == "sm_100a") return "sm_100a";
  return "";
}

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Geometric means of the per-shape speedup CI bounds: what noise-aware selection compares.
std::pair<double, double> fitness_bounds(const EvalReport& r) {
  double lo = 0, hi = 0;
  int n = 0;
  for (const auto& s : r.shapes)
    if (s.speedup) {
      lo += std::log(std::max(s.speedup->ci_low, 1e-12));
      hi += std::log(std::max(s.speedup->ci_high, 1e-12));
      ++n;
    }
  if (n == 0) return {0, 0};
  return {std::exp(lo / n), std::exp(hi / n)};
}

std::string resources_json(const evaluator::BuildResult& b) {
  json res = json::array();
  for (const auto& f : b.resources)
    res.push_back({{"function", f.name}, {"registers", f.registers}, {"spill_stores", f.spill_stores},
                   {"spill_loads", f.spill_loads}, {"stack_frame", f.stack_frame}, {"shared_bytes", f.shared_bytes}});
  return res.dump();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read seed template " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

struct CampaignEngine::Item {
  Proposal proposal;
  std::int64_t candidate_id = 0;
  std::string purpose = "candidate";  // or "remeasure", "final"
  MeasureItem measure;
  EvalReport report;
  // Cost-model columns averaged over the benchmark shapes (the model is linear, so the mean
  // row's prediction is the mean of the per-shape predictions, i.e. minus the log fitness).
  std::vector<double> features;
  double analytic = 0;
};

struct CampaignEngine::Batch {
  int generation = 0;
  evaluator::EvalRequest common;
  std::vector<Item> items;
  double measure_s = 0;
  double prep_s = 0;  // of measure_s, the worker's shared host-side work (GPU idle)
  double gpu_s = 0;   // of measure_s, time the worker held its GPU
  std::string error;  // the measurer threw
};

CampaignEngine::CampaignEngine(const evaluator::Spec& spec, const evaluator::Op& op, const evaluator::Builder& builder,
                               TraceDb& db, std::vector<Measurer*> measurers, CampaignOptions opt, std::ostream& log,
                               const std::atomic<bool>& stop)
    : spec_(spec),
      op_(op),
      builder_(builder),
      db_(db),
      measurers_(std::move(measurers)),
      opt_(std::move(opt)),
      log_(log),
      stop_(stop),
      passes_(std::make_shared<const mutators::PassRegistry>(mutators::builtin_passes())),
      proposer_(spec_, *passes_),
      policy_(op_family(spec.op), opt_.arch.empty() ? spec.arch : opt_.arch),
      population_(PopulationOptions{opt_.islands, opt_.island_size, 3, 0.01}) {
  if (opt_.arch.empty()) opt_.arch = spec_.arch;
  for (const auto& o : proposer_.operators()) policy_ops_.insert(o);
  for (const auto& s : spec_.seeds) sources_[s.name] = read_text(s.source_path);
  std::set<std::string> knobs;
  for (const auto& s : spec_.seeds)
    for (const auto& k : s.knobs) knobs.insert(k.name);
  layout_.knobs.assign(knobs.begin(), knobs.end());
  layout_.passes = passes_->names();
  model_rng_.seed(opt_.seed * 0x9e3779b97f4a7c15ULL + 17);
}

CampaignEngine::~CampaignEngine() = default;

int CampaignEngine::gpu_count() const {
  std::set<int> devices;
  for (const auto* m : measurers_) devices.insert(m->device());
  return std::max<int>(1, static_cast<int>(devices.size()));
}

std::string CampaignEngine::mode() const { return measurers_.empty() ? "static" : measurers_.front()->mode(); }

evaluator::BuildRequest CampaignEngine::build_request(const Genome& g) const {
  evaluator::BuildRequest r;
  const auto* seed = proposer_.seed(g.seed);
  r.name = g.seed;
  r.source_path = seed ? seed->source_path : g.seed + ".cu";
  r.source = g.source.empty() ? (sources_.count(g.seed) ? sources_.at(g.seed) : std::string()) : g.source;
  r.defines = op_.template_defines(spec_.config);
  r.knobs = g.knobs;
  r.arch = opt_.arch;
  // Agent-written source goes to NVRTC with the engine's options only: nothing that admits
  // host code (-default-device) and nothing taken from a reply.
  if (!g.source.empty()) r.nvrtc_options.clear();
  if (!g.edits.empty()) r.ptx_pass = edit_pass(g.edits, passes_);
  return r;
}

std::string CampaignEngine::instruction_mix_of(const Genome& g) const {
  const auto b = builder_.build(build_request(g));
  return b.ok && b.module ? instruction_mix_line(*b.module) : std::string();
}

evaluator::EvalRequest CampaignEngine::common_request(std::uint64_t input_seed) const {
  evaluator::EvalRequest req;
  req.op = spec_.op;
  req.config = spec_.config;
  req.shapes = shapes_;
  const auto* base = evaluator::baseline_seed(spec_);
  req.baseline_knobs = evaluator::default_knobs(*base);
  req.tolerances = spec_.tolerances;
  req.seed = input_seed;
  req.baseline_cubin = baseline_.cubin;
  // Candidates see one input distribution per benchmark shape (four on every correctness and
  // held-out shape): the host-side fp64 references of the largest shapes dominate a batch's
  // cost. The winner's final check and `ptxevo eval` use the evaluator's defaults (two).
  req.gate.distributions_benchmark = opt_.benchmark_distributions;
  req.timing.min_samples = opt_.timing_min_samples;
  req.timing.stop_rel_ci = opt_.timing_ci_width;
  return req;
}

void CampaignEngine::rebuild_population() {
  // The population of a resumed campaign: each island's best measured candidates.
  auto measured = db_.measured_candidates(campaign_id_);
  std::sort(measured.begin(), measured.end(), [](const auto& a, const auto& b) { return a.fitness > b.fitness; });
  for (const auto& m : measured) {
    Member mem;
    mem.candidate_id = m.candidate.id;
    try {
      mem.genome = genome_from_json(json::parse(m.candidate.genome_json));
    } catch (const std::exception&) {
      continue;  // a row this build cannot read back is not worth breeding from
    }
    mem.fitness = m.fitness;
    mem.fitness_low = m.fitness_low;
    mem.fitness_high = m.fitness_high;
    mem.measurements = m.measurements;
    measured_[mem.candidate_id] = mem;
    if (static_cast<int>(population_.members(m.island % population_.islands()).size()) < opt_.island_size)
      population_.offer(m.island % population_.islands(), mem, std::nullopt);
  }
}

std::vector<Proposal> CampaignEngine::propose(int generation, std::mt19937_64& rng, bool allow_llm) {
  std::vector<Proposal> out;
  const int islands = population_.islands();
  if (population_.empty()) {
    // A fresh population: the seeds at their defaults, then random valid knob assignments.
    int k = 0;
    for (const auto& g : proposer_.seeds()) {
      Proposal p;
      p.genome = g;
      p.operator_id = "seed";
      p.detail = "seed defaults";
      p.island = k++ % islands;
      out.push_back(std::move(p));
    }
    // Warm start: what did well on this op before, in place of some of the random genomes.
    // Fitness from another campaign is against another baseline, so each is measured again here
    // (and charged to the budget) like any candidate.
    int warm = 0;
    const int cap = (static_cast<int>(out.size()) + opt_.initial) / 2;
    const int want = opt_.warm_start < 0 ? cap : std::min(opt_.warm_start, cap);
    if (want > 0) {
      // A deep list: the very best of an earlier campaign may all lie outside this spec's space.
      std::set<std::string> have;
      for (const auto& p : out) have.insert(p.genome.hash());
      for (const auto& e : db_.earlier_best(campaign_id_, spec_.op, std::max(64, want * 16))) {
        if (warm >= want || warm >= opt_.initial) break;
        Genome g;
        try {
          g = genome_from_json(json::parse(e.genome_json));
        } catch (const std::exception&) {
          continue;
        }
        if (!proposer_.admits(g).empty() || !have.insert(g.hash()).second) continue;
        Proposal p;
        p.genome = std::move(g);
        p.operator_id = "warm_start";
        char fit[32];
        std::snprintf(fit, sizeof fit, "%.4f", e.fitness);
        p.detail = "candidate " + std::to_string(e.candidate_id) + " of campaign " + std::to_string(e.campaign_id) +
                   " (" + e.arch + (e.gpu.empty() ? "" : ", " + e.gpu) + "): fitness " + fit + " there";
        p.island = k++ % islands;
        log_ << "warm_start: " << p.genome.describe() << " from " << p.detail << "\n";
        out.push_back(std::move(p));
        ++warm;
      }
    }
    for (int i = warm; i < opt_.initial; ++i) {
      const auto& seeds = spec_.seeds;
      const auto& s = seeds[static_cast<std::size_t>(i) % seeds.size()];
      if (auto g = proposer_.random_genome(s.name, rng)) {
        Proposal p;
        p.genome = *g;
        p.operator_id = "random";
        p.detail = "random knobs";
        p.island = k++ % islands;
        out.push_back(std::move(p));
      }
    }
    return out;
  }
  for (int i = 0; i < opt_.batch; ++i) {
    const int island = (generation * opt_.batch + i) % islands;
    const Member* parent = population_.select(island, rng);
    if (!parent) parent = population_.best();
    const Member* mate = population_.select(island, rng);
    if (mate == parent) mate = population_.select((island + 1) % islands, rng);
    const bool has_mate = mate && mate != parent && mate->genome.seed == parent->genome.seed;
    // A few tries: an operator may find no legal move for this parent.
    bool llm_tried = false;  // one LLM attempt per slot; after that the rule agents fill it
    for (int attempt = 0; attempt < 6; ++attempt) {
      auto ops = proposer_.applicable(parent->genome, has_mate);
      const bool llm_open = allow_llm && llm_ && !llm_tried && !stop_.load() && llm_->available();
      if (llm_open) ops.push_back(LlmProposer::kOperator);
      std::string op;
      if (llm_open && std::uniform_real_distribution<double>(0, 1)(rng) < llm_->share()) {
        op = LlmProposer::kOperator;  // the configured minimum share, outside the posterior's draw
      } else {
        op = policy_.choose(ops, rng);
      }
      if (op.empty()) break;
      if (op == LlmProposer::kOperator) {
        llm_tried = true;
        auto r = llm_->propose(*parent, island);
        if (!r.proposal) {
          // Down or out of budget is not the operator's fault; a rejected answer is a miss.
          if (r.handed_back) policy_.release(op);
          else policy_.credit(op, Outcome::Failed);
          continue;
        }
        out.push_back(std::move(*r.proposal));
        break;
      }
      std::string detail;
      auto child = proposer_.apply(op, parent->genome, has_mate ? &mate->genome : nullptr, rng, &detail);
      if (!child || *child == parent->genome) {
        policy_.release(op);  // no legal move: the operator did not apply, nothing to charge
        continue;
      }
      Proposal p;
      p.genome = std::move(*child);
      p.parent_id = parent->candidate_id;
      p.operator_id = op;
      p.detail = detail;
      p.island = island;
      out.push_back(std::move(p));
      break;
    }
  }
  return out;
}

std::unique_ptr<CampaignEngine::Batch> CampaignEngine::prepare(int generation, std::vector<Proposal> proposals,
                                                               bool remeasure_best, std::set<std::int64_t>& in_flight) {
  auto batch = std::make_unique<Batch>();
  batch->generation = generation;
  // Fresh inputs for every batch: a candidate can never have seen them.
  std::random_device rd;
  batch->common = common_request((static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ static_cast<std::uint64_t>(generation));

  std::vector<Item> fresh;
  for (auto& p : proposals) {
    NewCandidate nc;
    nc.genome_hash = p.genome.hash();
    nc.genome_json = p.genome.canonical();
    nc.parent_id = p.parent_id;
    nc.operator_name = p.operator_id;
    nc.generation = generation;
    nc.island = p.island;
    const auto rc = db_.record_candidate(campaign_id_, nc);
    if ((!rc.inserted && rc.done()) || !in_flight.insert(rc.id).second) {
      // Seen before, or already on its way to a measurer: never built or measured twice.
      if (is_policy_op(p.operator_id)) policy_.release(p.operator_id);
      continue;
    }
    if (rc.inserted && is_llm(p)) llm_->recorded(p.genome, rc.id);
    Item it;
    it.proposal = std::move(p);
    it.candidate_id = rc.id;
    fresh.push_back(std::move(it));
  }
  std::vector<evaluator::BuildRequest> reqs;
  for (const auto& it : fresh) reqs.push_back(build_request(it.proposal.genome));
  const auto built = builder_.build_all(reqs);
  std::map<std::string, std::int64_t> keys_in_batch;
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    Item& it = fresh[i];
    const auto& b = built[i];
    ++result_.built_this_run;
    BuildResult rec;
    rec.ok = b.ok;
    rec.stage = b.ok ? "done" : b.stage;
    rec.log = b.ok ? b.nvrtc_log + b.link_log : b.error;
    rec.ptx_hash = b.ptx.empty() ? "" : evaluator::sha256_hex(b.ptx);
    rec.resources_json = resources_json(b);
    // Static screen: what would waste a GPU slot.
    if (b.ok) {
      std::int64_t spills = 0;
      for (const auto& f : b.resources) spills += f.spill_stores;
      std::vector<std::string> why;
      if (spills > opt_.max_spill_bytes)
        why.push_back("screen-spills: " + std::to_string(spills) + " B of spill stores (bound " +
                      std::to_string(opt_.max_spill_bytes) + " B)");
      for (const auto& sc : shapes_) {
        evaluator::LaunchPlan plan;
        try {
          plan = op_.launch_plan(sc.shape, spec_.config, it.proposal.genome.knobs);
        } catch (const std::invalid_argument& e) {
          why.push_back(std::string("launch-plan: ") + e.what());
          break;
        }
        auto violations = evaluator::check_ir(*b.module, plan);
        if (!it.proposal.genome.source.empty())
          for (auto& v : check_entry_params(*b.module, plan)) violations.push_back(std::move(v));
        for (const auto& v : violations) {
          const std::string r = v.rule + ": " + v.message;
          if (std::find(why.begin(), why.end(), r) == why.end()) why.push_back(r);
        }
      }
      if (!why.empty()) {
        rec.ok = false;
        rec.stage = "screen";
        for (const auto& w : why) rec.log += w + "\n";
      }
    }
    db_.record_build(it.candidate_id, rec);
    const std::string& op_id = it.proposal.operator_id;
    if (!rec.ok && is_policy_op(op_id)) {
      // A pass that refused this parent could not apply: not charged. Anything else failed.
      if (rec.stage == "pass" && rec.log.rfind("pass-refused", 0) == 0) policy_.release(op_id);
      else policy_.credit(op_id, Outcome::Failed);
    }
    if (!rec.ok && is_llm(it.proposal)) llm_->failed(it.proposal.genome, it.candidate_id, rec.stage, rec.log);
    if (!rec.ok) {
      ++result_.failures_this_run;
      const std::string code = rec.stage == "screen" ? evaluator::reason_code(rec.log) : "build-" + rec.stage;
      ++failure_codes_[code];
      continue;
    }
    // Two genomes that build the same PTX with the same launch knobs are one measurement.
    const std::string key =
        evaluator::sha256_hex(rec.ptx_hash + "\n" + evaluator::knobs_to_json(it.proposal.genome.knobs).dump());
    db_.set_build_key(it.candidate_id, key);
    std::optional<std::int64_t> twin = db_.measured_with_build_key(campaign_id_, key);
    if (!twin && keys_in_batch.count(key)) twin = keys_in_batch.at(key);
    if (twin && *twin != it.candidate_id) {
      db_.settle_candidate(it.candidate_id, "duplicate", twin);
      if (is_policy_op(op_id)) policy_.release(op_id);
      continue;
    }
    keys_in_batch[key] = it.candidate_id;
    if (measurers_.empty()) {
      if (is_policy_op(op_id)) policy_.release(op_id);
      db_.settle_candidate(it.candidate_id, "unmeasured");
      ++result_.unmeasured_this_run;
      continue;
    }
    it.measure.genome_hash = it.proposal.genome.hash();
    it.measure.ptx_hash = rec.ptx_hash;
    it.measure.knobs = it.proposal.genome.knobs;
    it.measure.cubin = b.cubin;
    if (opt_.cost_model) {
      int n = 0;
      for (const auto& sc : shapes_) {
        if (sc.cls != evaluator::ShapeClass::Benchmark) continue;
        const FeatureRow f = cost_features(layout_, op_, spec_.config, sc.shape, it.proposal.genome, b.resources);
        if (it.features.empty()) it.features.assign(f.x.size(), 0.0);
        for (std::size_t j = 0; j < f.x.size(); ++j) it.features[j] += f.x[j];
        it.analytic += f.analytic_log_time;
        ++n;
      }
      for (auto& v : it.features) v /= std::max(1, n);
      it.analytic /= std::max(1, n);
    }
    batch->items.push_back(std::move(it));
  }
  // Only what goes to a measurer stays in flight.
  for (const auto& it : fresh) in_flight.erase(it.candidate_id);
  for (const auto& it : batch->items) in_flight.insert(it.candidate_id);
  if (remeasure_best && !measurers_.empty()) {
    const Member* best = population_.best();
    // Counting the ones in flight: two batches queued before the first answers must not both
    // re-measure a best that needs only one more figure.
    if (best && best->measurements + remeasures_in_flight_[best->candidate_id] >= opt_.max_measurements) best = nullptr;
    if (best) {
      auto b = builder_.build(build_request(best->genome));
      if (b.ok) {
        Item it;
        it.proposal.genome = best->genome;
        it.proposal.operator_id = "remeasure";
        it.candidate_id = best->candidate_id;
        it.purpose = "remeasure";
        it.measure.genome_hash = best->genome.hash();
        it.measure.ptx_hash = evaluator::sha256_hex(b.ptx);
        it.measure.knobs = best->genome.knobs;
        it.measure.cubin = b.cubin;
        batch->items.push_back(std::move(it));
        ++remeasures_in_flight_[best->candidate_id];
      }
    }
  }
  return batch;
}

void CampaignEngine::refit_model() {
  if (!model_dirty_) return;
  model_dirty_ = false;
  // Op options per campaign: this one's spec; earlier campaigns of the same spec file content
  // share them; others only through earlier_config_ (their spec found on disk).
  CampaignConfigs configs{{campaign_id_, spec_.config}};
  {
    std::string own_hash;
    std::vector<std::pair<std::int64_t, std::string>> others;
    auto q = db_.connection().prepare("SELECT id, spec_hash FROM campaigns WHERE op = ?");
    q.bind(1, spec_.op);
    while (q.step()) {
      if (q.column_int(0) == campaign_id_) own_hash = q.column_text(1);
      else others.emplace_back(q.column_int(0), q.column_text(1));
    }
    for (const auto& [id, hash] : others) {
      if (hash == own_hash) configs.emplace(id, spec_.config);
      else if (earlier_config_)
        if (auto c = earlier_config_(id)) configs.emplace(id, *c);
    }
  }
  const CostDataset d = cost_dataset(db_, op_, configs, GpuLimits{}, &layout_);
  const Environment env = measurers_.front()->environment();
  result_.last_fit = model_.fit_for_campaign(d, campaign_id_, env.gpu, env.driver, env.cuda, model_rng_);
}

void CampaignEngine::select_for_gpu(Batch& b, std::set<std::int64_t>& in_flight, std::int64_t budget_left) {
  std::vector<Item> others;
  for (auto& it : b.items) (it.purpose == "candidate" ? reserve_ : others).push_back(std::move(it));
  b.items = std::move(others);
  if (reserve_.empty()) return;
  refit_model();
  const auto n = static_cast<Eigen::Index>(reserve_.size());
  const auto cols = static_cast<Eigen::Index>(layout_.size());
  Eigen::MatrixXd X = Eigen::MatrixXd::Zero(n, cols);
  Eigen::VectorXd p_valid = Eigen::VectorXd::Ones(n), analytic(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const Item& it = reserve_[static_cast<std::size_t>(i)];
    for (Eigen::Index j = 0; j < cols && j < static_cast<Eigen::Index>(it.features.size()); ++j)
      X(i, j) = it.features[static_cast<std::size_t>(j)];
    analytic(i) = it.analytic;
  }
  const std::size_t slots = std::min<std::size_t>(
      {static_cast<std::size_t>(std::max(1, opt_.batch)), reserve_.size(), static_cast<std::size_t>(budget_left)});
  if (slots == 0) return;
  const auto picks = prior::select_batch(model_.model(), X, p_valid, analytic, slots, model_rng_, model_.selection_options());
  std::vector<bool> taken(reserve_.size(), false);
  for (const auto& p : picks) {
    taken[p.index] = true;
    b.items.push_back(std::move(reserve_[p.index]));
    if (p.reason == prior::PickReason::Thompson) ++result_.model_picks;
    else if (p.reason == prior::PickReason::Random) ++result_.random_picks;
    else ++result_.analytic_picks;
  }
  std::vector<Item> rest;
  std::vector<double> score;  // predicted log time (lower is better) of what waits
  const bool cold = model_.cold();
  for (std::size_t i = 0; i < reserve_.size(); ++i) {
    if (taken[i]) continue;
    const auto row = static_cast<Eigen::Index>(i);
    score.push_back(cold ? analytic(row) : model_.model().mean(X.row(row).transpose()));
    rest.push_back(std::move(reserve_[i]));
  }
  reserve_ = std::move(rest);
  // A bounded reserve: the ones the model likes least give way (recorded as not selected; their
  // operator is not charged: the child was never judged).
  const std::size_t cap = static_cast<std::size_t>(std::max(1, opt_.reserve_factor * opt_.batch));
  if (reserve_.size() > cap) {
    std::vector<std::size_t> order(reserve_.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t c) { return score[a] < score[c]; });
    std::vector<Item> kept;
    for (std::size_t k = 0; k < order.size(); ++k) {
      Item& it = reserve_[order[k]];
      if (k < cap) {
        kept.push_back(std::move(it));
        continue;
      }
      db_.settle_candidate(it.candidate_id, "not-selected");
      in_flight.erase(it.candidate_id);
      if (is_policy_op(it.proposal.operator_id)) policy_.release(it.proposal.operator_id);
    }
    reserve_ = std::move(kept);
  }
}

void CampaignEngine::absorb(Batch& b) {
  for (auto& it : b.items) {
    EvalReport& r = it.report;
    if (it.purpose == "remeasure" && --remeasures_in_flight_[it.candidate_id] <= 0) remeasures_in_flight_.erase(it.candidate_id);
    const std::string& op_id = it.proposal.operator_id;
    const bool credited = it.purpose == "candidate" && is_policy_op(op_id);
    if (credited && (r.verdict == "unmeasured" || r.verdict == "not-run")) policy_.release(op_id);
    if (credited && r.verdict != "unmeasured" && r.verdict != "not-run") {
      if (r.verdict != "pass" || !r.fitness) {
        policy_.credit(op_id, Outcome::Failed);
      } else {
        // The paired comparison with the parent, through their fitness bounds.
        const auto [lo, hi] = fitness_bounds(r);
        Member child;
        child.fitness = *r.fitness;
        child.fitness_low = lo;
        child.fitness_high = hi;
        const Member* best = population_.best();
        auto parent = it.proposal.parent_id ? measured_.find(*it.proposal.parent_id) : measured_.end();
        if (best && significantly_better(child, *best, 0.01))
          policy_.credit(op_id, Outcome::NewBest);
        else if (parent != measured_.end() && significantly_better(child, parent->second, 0.01))
          policy_.credit(op_id, Outcome::Faster, child.fitness / parent->second.fitness);
        else
          policy_.credit(op_id, Outcome::NotFaster);
      }
    }
    if (r.verdict == "unmeasured") {
      if (it.purpose == "candidate") db_.settle_candidate(it.candidate_id, "unmeasured");
      ++result_.unmeasured_this_run;
      continue;
    }
    if (r.verdict == "not-run") continue;  // stays built: a resumed campaign measures it
    EvaluationMeta meta;
    meta.mode = mode();
    meta.purpose = it.purpose;
    const auto [lo, hi] = fitness_bounds(r);
    if (r.fitness) {
      meta.fitness_low = lo;
      meta.fitness_high = hi;
    }
    db_.record_evaluation(it.candidate_id, env_id_, r, meta);
    if (it.purpose == "candidate") ++result_.evaluations_this_run;
    if (it.purpose == "candidate" && is_llm(it.proposal)) {
      if (r.verdict == "pass" && r.fitness) {
        llm_->measured(it.proposal.genome);
      } else {
        std::string reasons;
        for (const auto& x : r.reasons) reasons += (reasons.empty() ? "" : "; ") + x;
        llm_->failed(it.proposal.genome, it.candidate_id, "gate", r.verdict + (reasons.empty() ? "" : ": " + reasons));
      }
    }
    if (r.verdict != "pass" || !r.fitness) {
      if (it.purpose == "candidate") {
        ++result_.failures_this_run;
        const std::string code = r.reasons.empty() ? r.verdict : evaluator::reason_code(r.reasons.front());
        ++failure_codes_[code];
      }
      continue;
    }
    model_dirty_ = true;
    if (it.purpose == "remeasure") {
      population_.remeasured(it.candidate_id, *r.fitness, lo, hi);
      continue;
    }
    Member m;
    m.candidate_id = it.candidate_id;
    m.genome = it.proposal.genome;
    m.fitness = *r.fitness;
    m.fitness_low = lo;
    m.fitness_high = hi;
    measured_[m.candidate_id] = m;
    population_.offer(it.proposal.island, m, it.proposal.parent_id);
  }
}

void CampaignEngine::progress(bool force) {
  const double t = now_s();
  if (!force && opt_.progress_every_s > 0 && t - last_progress_ < opt_.progress_every_s) return;
  last_progress_ = t;
  const double wall = t - started_;
  const std::int64_t evals = db_.count_candidate_evaluations(campaign_id_);
  char line[512];
  const Member* best = population_.best();
  std::string left;
  if (opt_.max_minutes > 0) left = ", " + std::to_string(static_cast<int>(std::max(0.0, opt_.max_minutes * 60 - wall))) + " s left";
  const double busy = wall > 0 && !measurers_.empty() ? result_.gpu_s / (wall * static_cast<double>(gpu_count())) : 0;
  const std::string busy_text = mode() == "gpu" ? ", GPU busy " + std::to_string(static_cast<int>(100 * busy)) + "%" : "";
  std::snprintf(line, sizeof line, "[%6.0f s] %s: %lld/%lld evaluations, best %s%s, %lld failed, %lld unmeasured%s",
                wall, mode().c_str(), static_cast<long long>(evals), static_cast<long long>(budget_),
                best ? (std::to_string(best->fitness).substr(0, 6) + " (candidate " + std::to_string(best->candidate_id) + ")").c_str()
                     : "none yet",
                busy_text.c_str(), static_cast<long long>(result_.failures_this_run),
                static_cast<long long>(result_.unmeasured_this_run), left.c_str());
  log_ << line;
  if (llm_) {
    const LlmSpend s = db_.llm_spend(campaign_id_);
    log_ << "; LLM " << s.calls << " calls, " << s.input_tokens << "+" << s.output_tokens << " tokens, $" << s.usd
         << (s.unpriced_calls > 0 ? " + " + std::to_string(s.unpriced_calls) + " unpriced calls" : std::string())
         << (llm_->available() ? "" : " (endpoint down: rule agents only)");
  }
  log_ << std::endl;
}

CampaignResult CampaignEngine::run() {
  started_ = now_s();
  result_.mode = mode();
  // ---- the campaign row: one per (spec file name, spec content, mode) ----
  std::ifstream in(spec_.path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  CampaignKey key;
  key.spec_path = std::filesystem::path(spec_.path).filename().string() + "#" + opt_.arch + "#" + mode();
  key.spec_hash = evaluator::sha256_hex(ss.str());
  key.op = spec_.op;
  key.arch = opt_.arch;
  key.config_json = json{{"mode", mode()}, {"islands", opt_.islands}, {"island_size", opt_.island_size},
                         {"batch", opt_.batch}, {"seed", opt_.seed}, {"spec", spec_.path}}
                        .dump();
  const Campaign c = db_.open_campaign(key);
  campaign_id_ = c.id;
  result_.campaign_id = c.id;
  result_.resumed = c.resumed;
  db_.set_campaign_status(campaign_id_, "running");
  budget_ = opt_.max_evaluations > 0 ? opt_.max_evaluations
                                     : (spec_.budget_evaluations > 0 ? spec_.budget_evaluations : 200);
  // A replay can measure no more than it recorded: its default budget is that.
  if (opt_.max_evaluations == 0 && !measurers_.empty() && measurers_.front()->capacity() > 0)
    budget_ = std::min(budget_, measurers_.front()->capacity());
  evaluator::ShapeSelection sel;
  sel.max_benchmark_shapes = opt_.max_benchmark_shapes;
  shapes_ = evaluator::select_shapes(spec_, sel);
  if (!measurers_.empty()) env_id_ = db_.record_environment(measurers_.front()->environment());

  // ---- the baseline, built once ----
  const auto* base_seed = evaluator::baseline_seed(spec_);
  Genome base_genome;
  base_genome.seed = base_seed->name;
  base_genome.knobs = evaluator::default_knobs(*base_seed);
  baseline_ = builder_.build(build_request(base_genome));
  if (!baseline_.ok) {
    result_.stop_reason = "baseline-build-failed";
    log_ << "error: the baseline (seed '" << base_seed->name << "' at its defaults) does not build for " << opt_.arch
         << " at stage " << baseline_.stage << ":\n"
         << baseline_.error << "\n";
    db_.set_campaign_status(campaign_id_, "stopped");
    return result_;
  }
  // What earlier campaigns in this database learned about the operators (capped per key).
  policy_.load(db_);
  if (llm_agents_) {
    llm_ = std::make_unique<LlmProposer>(
        *llm_agents_, db_, campaign_id_, spec_, op_, opt_.arch,
        [this](const Genome& g) { return build_request(g).source; },
        [this](const Genome& g) { return instruction_mix_of(g); }, log_);
    policy_ops_.insert(LlmProposer::kOperator);
  }
  if (c.resumed) {
    rebuild_population();
    log_ << "resuming campaign " << campaign_id_ << " from " << db_.path().string() << ": "
         << db_.count_candidates(campaign_id_) << " candidates, " << db_.count_candidate_evaluations(campaign_id_)
         << " evaluations, population " << population_.size() << std::endl;
  } else {
    log_ << "campaign " << campaign_id_ << " (" << spec_.op << ", " << opt_.arch << ", " << mode() << ") in "
         << db_.path().string() << std::endl;
  }

  std::mt19937_64 rng(opt_.seed ^ static_cast<std::uint64_t>(db_.count_candidates(campaign_id_)));
  int generation = db_.max_generation(campaign_id_) + 1;

  // ---- measurement threads, one per measurer ----
  tbb::concurrent_bounded_queue<Batch*> work, done;
  std::vector<std::thread> threads;
  for (Measurer* m : measurers_)
    threads.emplace_back([m, &work, &done] {
      while (true) {
        Batch* b = nullptr;
        work.pop(b);
        if (!b) return;
        const double t0 = now_s();
        try {
          std::vector<MeasureItem> items;
          for (const auto& it : b->items) items.push_back(it.measure);
          auto reports = m->measure(b->common, items);
          for (std::size_t i = 0; i < b->items.size() && i < reports.size(); ++i) b->items[i].report = std::move(reports[i]);
        } catch (const std::exception& e) {
          b->error = e.what();
        }
        b->measure_s = now_s() - t0;
        // A replay's reports carry the recording's GPU times: they are not this run's.
        if (m->mode() == "gpu")
          for (const auto& it : b->items) {
            b->prep_s += it.report.prep_seconds;
            b->gpu_s += it.report.gpu_seconds;
          }
        done.push(b);
      }
    });

  // A resumed campaign first finishes what was in flight when it stopped.
  std::vector<Proposal> pending;
  for (const auto& row : db_.pending_candidates(campaign_id_)) {
    Proposal p;
    try {
      p.genome = genome_from_json(json::parse(row.genome_json));
    } catch (const std::exception& e) {
      db_.record_build(row.id, BuildResult{false, "", "genome", std::string("unreadable genome: ") + e.what(), "{}"});
      continue;
    }
    p.parent_id = row.parent_id;
    p.operator_id = row.operator_name;
    pending.push_back(std::move(p));
  }

  int in_flight = 0, batches = 0, empty_rounds = 0;
  std::set<std::int64_t> candidates_in_flight;
  std::int64_t queued = 0;  // candidate items handed to measurers and not yet absorbed
  // A replayed candidate the record lacks still spends budget: on a GPU it would have cost an
  // evaluation, and a replay campaign stands in for one of equal budget.
  auto evaluations_done = [&] {
    std::int64_t n = db_.count_candidate_evaluations(campaign_id_);
    if (mode() == "replay") {
      auto s = db_.connection().prepare("SELECT count(*) FROM candidates WHERE campaign_id = ? AND outcome = 'unmeasured'");
      s.bind(1, campaign_id_);
      s.step();
      n += s.column_int(0);
    }
    return n;
  };
  auto out_of_budget = [&]() -> std::string {
    if (stop_.load()) return "interrupted";
    if (opt_.max_minutes > 0 && now_s() - started_ > opt_.max_minutes * 60) return "time";
    if (opt_.target_fitness > 0 && population_.best() && population_.best()->fitness >= opt_.target_fitness) return "target";
    if (measurers_.empty() ? result_.built_this_run >= budget_ : evaluations_done() + queued >= budget_) return "budget";
    return "";
  };
  std::string stop_reason;
  double yield_estimate = 0.5;  // candidates that reach a measurer per proposal (duplicates, failed builds, screens)
  while (true) {
    // Keep every measurer fed, plus one batch ready: the GPU never waits for the compiler.
    while (in_flight < static_cast<int>(measurers_.size()) + 1 || measurers_.empty()) {
      stop_reason = out_of_budget();
      if (!stop_reason.empty()) break;
      // The first population is in flight and nothing has come back: another batch now would be
      // another first population (seeds and random genomes again), not children.
      if (!measurers_.empty() && population_.empty() && in_flight > 0 && pending.empty()) break;
      // The next proposals: what was in flight when the last run stopped first, a batch at a
      // time; never more than the budget has left (the rest waits, unrecorded, for a later batch).
      // Only a batch's first call asks the LLM agents: filling a batch with more children is the
      // cheap rule agents' job, and LLM calls cost money and seconds each.
      auto next_proposals = [&](std::int64_t extra_queued, bool allow_llm = false) -> std::optional<std::vector<Proposal>> {
        std::vector<Proposal> props;
        if (!pending.empty()) {
          const std::size_t take = std::min<std::size_t>(pending.size(), static_cast<std::size_t>(std::max(1, opt_.batch)));
          props.assign(std::make_move_iterator(pending.begin()), std::make_move_iterator(pending.begin() + static_cast<std::ptrdiff_t>(take)));
          pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(take));
        } else {
          props = propose(generation, rng, allow_llm);
        }
        const std::int64_t left =
            budget_ - (measurers_.empty() ? result_.built_this_run : evaluations_done() + queued + extra_queued);
        if (left <= 0) {
          pending.insert(pending.begin(), std::make_move_iterator(props.begin()), std::make_move_iterator(props.end()));
          return std::nullopt;
        }
        if (static_cast<std::int64_t>(props.size()) > left) {
          pending.insert(pending.begin(), std::make_move_iterator(props.begin() + left), std::make_move_iterator(props.end()));
          props.resize(static_cast<std::size_t>(left));
        }
        return props;
      };
      const double prep_t0 = now_s();
      auto props = next_proposals(0, true);
      if (!props) {
        stop_reason = "budget";
        break;
      }
      // Candidates to build and screen for this batch: `batch`, or with the cost model enough
      // that it has a choice (build_factor x batch, counting those waiting in the reserve).
      const bool choosing = opt_.cost_model && !measurers_.empty();
      const std::int64_t target =
          choosing ? std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(opt_.batch * opt_.build_factor)) -
                                                   static_cast<std::int64_t>(reserve_.size()))
                   : opt_.batch;
      // As many proposals as the yield of earlier batches says it takes to fill this one, built
      // together: one parallel round instead of several rounds, each as slow as its slowest build.
      // (Not for the first population: it is the seeds and `initial` random genomes, no more.)
      if (!measurers_.empty() && !population_.empty()) {
        const double rounds = static_cast<double>(target) / std::max(1, opt_.batch) / std::max(0.25, yield_estimate);
        const int extra = std::clamp(static_cast<int>(std::ceil(rounds)) - 1, 0, 7);
        for (int k = 0; k < extra; ++k) {
          ++generation;
          auto p = next_proposals(static_cast<std::int64_t>(props->size()));
          if (!p) break;
          for (auto& x : *p) props->push_back(std::move(x));
        }
      }
      const bool remeasure = opt_.remeasure_every > 0 && batches > 0 && batches % opt_.remeasure_every == 0;
      const std::size_t proposed = props->size();
      auto batch = prepare(generation, std::move(*props), remeasure, candidates_in_flight);
      ++generation;
      // Top up: children that were duplicates, failed to build or were screened out leave room,
      // and a batch of one or two candidates spends most of its GPU time on per-batch set-up
      // (input pools, references). Enough proposals for the yield seen so far are built at
      // once (the builder runs them in parallel). Proposals come from the same population.
      auto candidates_in = [](const Batch& b) {
        return static_cast<std::int64_t>(
            std::count_if(b.items.begin(), b.items.end(), [](const Item& it) { return it.purpose == "candidate"; }));
      };
      std::size_t tried = proposed;
      for (int round = 0; round < opt_.top_up_rounds && !measurers_.empty() && !population_.empty() &&
                          candidates_in(*batch) < target &&
                          out_of_budget().empty();
           ++round) {
        const double yield = std::max(0.2, static_cast<double>(candidates_in(*batch)) / static_cast<double>(std::max<std::size_t>(tried, 1)));
        const double want = static_cast<double>(target - candidates_in(*batch)) / yield;
        const int calls = std::clamp(static_cast<int>(std::ceil(want / std::max(1, opt_.batch))), 1, 8);
        std::vector<Proposal> more_props;
        for (int k = 0; k < calls; ++k) {
          auto p = next_proposals(candidates_in(*batch) + static_cast<std::int64_t>(more_props.size()));
          if (!p) break;
          for (auto& x : *p) more_props.push_back(std::move(x));
          ++generation;
        }
        if (more_props.empty()) break;
        tried += more_props.size();
        auto more = prepare(generation, std::move(more_props), false, candidates_in_flight);
        for (auto& it : more->items) batch->items.push_back(std::move(it));
      }
      result_.prepare_s += now_s() - prep_t0;
      if (tried > 0)
        yield_estimate = 0.7 * yield_estimate + 0.3 * static_cast<double>(candidates_in(*batch)) / static_cast<double>(tried);
      if (choosing)
        select_for_gpu(*batch, candidates_in_flight, std::max<std::int64_t>(0, budget_ - (evaluations_done() + queued)));
      ++batches;
      if (opt_.migrate_every > 0 && batches % opt_.migrate_every == 0) population_.migrate();
      if (batch->items.empty()) {
        // Everything was a duplicate, failed to build or was screened out.
        if (++empty_rounds > 50) {
          stop_reason = "no-proposals";
          break;
        }
        if (measurers_.empty()) progress(false);
        continue;
      }
      empty_rounds = 0;
      for (const auto& it : batch->items) queued += it.purpose == "candidate" ? 1 : 0;
      work.push(batch.release());
      ++in_flight;
    }
    if (in_flight == 0) break;
    Batch* raw = nullptr;
    done.pop(raw);
    std::unique_ptr<Batch> b(raw);
    --in_flight;
    for (const auto& it : b->items) {
      queued -= it.purpose == "candidate" ? 1 : 0;
      if (it.purpose == "candidate") candidates_in_flight.erase(it.candidate_id);
    }
    result_.measure_s += b->measure_s;
    result_.prep_s += b->prep_s;
    result_.gpu_s += b->gpu_s;
    if (!b->error.empty()) {
      log_ << "error: the measurer failed on a batch: " << b->error << "\n";
      stop_reason = "measurer-failed";
      // What was in flight stays built; a resumed campaign measures it.
      continue;
    }
    absorb(*b);
    policy_.save(db_);
    progress(false);
    if (stop_reason == "measurer-failed") break;
  }
  for (std::size_t i = 0; i < threads.size(); ++i) work.push(nullptr);
  for (auto& t : threads) t.join();

  // ---- the winner, re-measured against the baseline ----
  if (const Member* best = population_.best()) {
    result_.best = *best;
    if (opt_.final_check && mode() == "gpu" && stop_reason != "measurer-failed" && !stop_.load()) {
      auto b = builder_.build(build_request(best->genome));
      if (b.ok) {
        MeasureItem mi;
        mi.genome_hash = best->genome.hash();
        mi.ptx_hash = evaluator::sha256_hex(b.ptx);
        mi.knobs = best->genome.knobs;
        mi.cubin = b.cubin;
        std::random_device rd;
        const double t0 = now_s();
        auto final_req = common_request((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
        final_req.gate = evaluator::GateOptions{};
        final_req.timing = evaluator::TimingOptions{};
        auto reports = measurers_.front()->measure(final_req, {mi});
        result_.measure_s += now_s() - t0;
        if (!reports.empty()) {
          EvaluationMeta meta;
          meta.mode = mode();
          meta.purpose = "final";
          const auto [lo, hi] = fitness_bounds(reports.front());
          if (reports.front().fitness) {
            meta.fitness_low = lo;
            meta.fitness_high = hi;
          }
          db_.record_evaluation(best->candidate_id, env_id_, reports.front(), meta);
          result_.final_report = reports.front();
        }
      }
    }
  }
  result_.stop_reason = stop_reason.empty() ? "budget" : stop_reason;
  result_.evaluations = db_.count_candidate_evaluations(campaign_id_);
  result_.wall_s = now_s() - started_;
  if (!measurers_.empty() && result_.wall_s > 0) {
    const double gpus = static_cast<double>(gpu_count());
    result_.gpu_busy = result_.gpu_s / (result_.wall_s * gpus);
    result_.worker_busy = result_.measure_s / (result_.wall_s * static_cast<double>(measurers_.size()));
    result_.candidates_per_gpu_hour =
        static_cast<double>(result_.evaluations_this_run) / (result_.wall_s * gpus / 3600.0);
  }
  db_.set_campaign_status(campaign_id_, result_.stop_reason == "interrupted" ? "stopped" : "done");
  progress(true);
  return result_;
}

}  // namespace ptxevo::search
