#include "search/campaign.hpp"

#include <tbb/concurrent_queue.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "evaluator/build_cache.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/template_source.hpp"
#include "search/campaign_files.hpp"
#include "search/genome_build.hpp"
#include "search/llm_evidence.hpp"
#include "search/prior/selection.hpp"
#include "search/screen.hpp"
#include "search/search_loop.hpp"
#include "tracedb/queries.hpp"

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

std::string read_seed(const std::string& path) {
  std::string why;
  auto t = evaluator::read_template(path, &why);
  if (!t) throw std::runtime_error("seed template: " + why);
  return std::move(t->text);
}

// The cost model's columns: every knob of the spec's seeds and every registered pass.
FeatureLayout feature_layout(const evaluator::Spec& spec, const mutators::PassRegistry& passes) {
  FeatureLayout layout;
  std::set<std::string> knobs;
  for (const auto& s : spec.seeds)
    for (const auto& k : s.knobs) knobs.insert(k.name);
  layout.knobs.assign(knobs.begin(), knobs.end());
  layout.passes = passes.names();
  return layout;
}

}  // namespace

struct CampaignEngine::Item {
  Ready ready;  // the proposal, its candidate id and its cost-model columns
  std::string purpose = "candidate";  // or "remeasure", "final"
  MeasureItem measure;
  EvalReport report;
  std::string build_key;  // final PTX + launch knobs: twins are one measurement
};

struct CampaignEngine::Round : SearchPipeline::Round {
  int generation = 0;
  double launched_at = 0;
  std::vector<Item> fresh;  // recorded, building
  std::future<std::vector<evaluator::BuildResult>> built;
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
                               tracedb::TraceDb& db, std::vector<Measurer*> measurers, CampaignOptions opt, std::ostream& log,
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
      proposer_(spec_, *passes_, opt_.ptx_passes ? &*opt_.ptx_passes : nullptr),
      strategy_(proposer_, OperatorPosterior(op_family(spec.op), opt_.arch.empty() ? spec.arch : opt_.arch),
                [&] {
                  const auto ops = proposer_.operators();
                  return std::set<std::string>(ops.begin(), ops.end());
                }(),
                StrategyOptions{opt_.islands, opt_.island_size, opt_.batch, opt_.initial, opt_.random_edits,
                                opt_.refusals_before_rare, opt_.reserve_factor, feature_layout(spec_, *passes_).size()},
                strategy_model_seed(opt_.seed), &log_) {
  if (opt_.arch.empty()) opt_.arch = spec_.arch;
  for (const auto& s : spec_.seeds) sources_[s.name] = read_seed(s.source_path);
  layout_ = feature_layout(spec_, *passes_);
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
  // Agent-written source is cited by the compiler as candidate.cu: the agent never saw the seed's
  // file, and the fixer is shown the lines of candidate.cu the errors name.
  r.source_path = !g.source.empty() ? std::string(kAgentSourceName) : seed ? seed->source_path : g.seed + ".cu";
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
  req.op_file = spec_.op_file;
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
  req.gate.determinism_runs = opt_.determinism_runs;
  req.gate.guard_pages = opt_.guard_pages;
  req.gate.degenerate_rows = opt_.degenerate_rows;
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
      mem.genome = genome_from_json(json::parse(m.candidate.genome_json), op_);
    } catch (const std::exception&) {
      continue;  // a row this build cannot read back is not worth breeding from
    }
    mem.fitness = m.fitness;
    mem.fitness_low = m.fitness_low;
    mem.fitness_high = m.fitness_high;
    mem.measurements = m.measurements;
    strategy_.recall_member(m.island, mem);
  }
}

std::unique_ptr<CampaignEngine::Round> CampaignEngine::launch(int generation, std::vector<Proposal> proposals,
                                                             std::set<std::int64_t>& in_flight) {
  auto round = std::make_unique<Round>();
  round->generation = generation;
  round->proposed = proposals.size();
  for (auto& p : proposals) {
    tracedb::NewCandidate nc;
    nc.genome_hash = p.genome.hash();
    nc.genome_json = p.genome.canonical();
    nc.parent_id = p.parent_id;
    nc.operator_name = p.operator_id;
    nc.generation = generation;
    nc.island = p.island;
    const auto rc = db_.record_candidate(campaign_id_, nc);
    if ((!rc.inserted && rc.done()) || !in_flight.insert(rc.id).second) {
      // Seen before, or already built or on its way to a measurer: never built or measured twice.
      strategy_.dropped(p);
      if (is_llm(p)) llm_->dropped(p.genome, "the answer is candidate " + std::to_string(rc.id) + ", already proposed");
      continue;
    }
    if (rc.inserted && is_llm(p)) llm_->recorded(p.genome, rc.id);
    Item it;
    it.ready.proposal = std::move(p);
    it.ready.candidate_id = rc.id;
    round->fresh.push_back(std::move(it));
  }
  round->building = round->fresh.size();
  round->launched_at = now_s();
  std::vector<BuildJob> jobs;
  for (const auto& it : round->fresh) jobs.push_back({build_request(it.ready.proposal.genome), it.ready.proposal.genome.edits});
  // The local builder is const and thread-safe; its TBB tasks share the cores with other rounds.
  round->built = std::async(std::launch::async,
                            [this, jobs = std::move(jobs)] { return builds_->build_all(jobs, &abandon_); });
  return round;
}

std::size_t CampaignEngine::finish(Round& round, std::set<std::int64_t>& in_flight) {
  const double wait_t0 = now_s();
  const auto built = round.built.get();
  result_.build_s += now_s() - wait_t0;
  if (!abandon_.load()) round_build_s_ = round_build_s_ > 0 ? 0.7 * round_build_s_ + 0.3 * (now_s() - round.launched_at)
                                                            : now_s() - round.launched_at;
  const double screen_t0 = now_s();
  std::size_t added = 0;
  std::map<std::string, std::int64_t> keys_in_round;
  for (std::size_t i = 0; i < round.fresh.size(); ++i) {
    Item& it = round.fresh[i];
    const Proposal& proposal = it.ready.proposal;
    const std::int64_t id = it.ready.candidate_id;
    const auto& b = built[i];
    if (b.stage == "cancelled") {
      // Never started: it stays proposed, and a resumed campaign builds it.
      in_flight.erase(id);
      strategy_.dropped(proposal);
      ++result_.abandoned_this_run;
      continue;
    }
    ++result_.built_this_run;
    tracedb::BuildRecord rec;
    rec.ok = b.ok;
    rec.stage = b.ok ? "done" : b.stage;
    rec.log = b.ok ? b.nvrtc_log + b.link_log : b.error;
    rec.ptx_hash = b.ptx.empty() ? "" : evaluator::sha256_hex(b.ptx);
    rec.resources_json = resources_json(b);
    std::vector<PtxProfile> profile;
    if (b.ok) {
      // The cost model's IR columns; PTX our parser rejects (a seed's inline asm it does not
      // know) leaves them empty rather than failing a candidate that built.
      try {
        profile = profile_ptx(b.ptx);
        rec.ptx_profile_json = ptx_profile_json(profile);
      } catch (const std::invalid_argument&) {
      }
    }
    // Static screen: what would waste a GPU slot.
    if (b.ok) {
      const auto why = screen_reasons(op_, spec_.config, shapes_, proposal.genome, b, opt_.max_spill_bytes);
      if (!why.empty()) {
        rec.ok = false;
        rec.stage = "screen";
        for (const auto& w : why) rec.log += w + "\n";
      }
    }
    db_.record_build(id, rec);
    in_flight.erase(id);
    const bool refused = !rec.ok && rec.stage == "pass" && rec.log.rfind("pass-refused", 0) == 0;
    strategy_.built(proposal, refused, b.ok, rec.ok, rec.log);
    if (!rec.ok && is_llm(proposal)) llm_->failed(proposal.genome, id, rec.stage, rec.log);
    if (!rec.ok) {
      ++result_.failures_this_run;
      const std::string code = rec.stage == "screen" ? evaluator::reason_code(rec.log) : "build-" + rec.stage;
      ++failure_codes_[code];
      continue;
    }
    // Two genomes that build the same PTX with the same launch knobs are one measurement.
    const std::string key =
        evaluator::sha256_hex(rec.ptx_hash + "\n" + evaluator::knobs_to_json(proposal.genome.knobs).dump());
    db_.set_build_key(id, key);
    std::optional<std::int64_t> twin = db_.measured_with_build_key(campaign_id_, key);
    if (!twin && keys_in_round.count(key)) twin = keys_in_round.at(key);
    if (!twin)
      for (const auto& [waiting_id, w] : waiting_)
        if (w.build_key == key) twin = waiting_id;
    if (!twin)
      for (const auto& [flying_id, k] : keys_in_flight_)
        if (k == key) twin = flying_id;
    if (twin && *twin != id) {
      db_.settle_candidate(id, "duplicate", twin);
      strategy_.dropped(proposal);
      continue;
    }
    keys_in_round[key] = id;
    if (measurers_.empty()) {
      strategy_.dropped(proposal);
      db_.settle_candidate(id, "unmeasured");
      ++result_.unmeasured_this_run;
      continue;
    }
    Waiting w;
    w.build_key = key;
    w.measure.genome_hash = proposal.genome.hash();
    w.measure.ptx_hash = rec.ptx_hash;
    w.measure.knobs = proposal.genome.knobs;
    w.measure.cubin = b.cubin;
    if (opt_.cost_model) {
      // Cost-model columns averaged over the benchmark shapes (the model is linear, so the mean
      // row's prediction is the mean of the per-shape predictions, i.e. minus the log fitness).
      auto& features = it.ready.features;
      int n = 0;
      for (const auto& sc : shapes_) {
        if (sc.cls != evaluator::ShapeClass::Benchmark || !sc.timed) continue;
        const FeatureRow f = cost_features(layout_, op_, spec_.config, sc.shape, proposal.genome, b.resources, profile);
        if (features.empty()) features.assign(f.x.size(), 0.0);
        for (std::size_t j = 0; j < f.x.size(); ++j) features[j] += f.x[j];
        it.ready.analytic += f.analytic_log_time;
        ++n;
      }
      for (auto& v : features) v /= std::max(1, n);
      it.ready.analytic /= std::max(1, n);
    }
    // Waiting in the reserve keeps it out of later proposals.
    in_flight.insert(id);
    waiting_.emplace(id, std::move(w));
    strategy_.add_ready(std::move(it.ready));
    ++added;
  }
  result_.screen_s += now_s() - screen_t0;
  return added;
}

std::unique_ptr<CampaignEngine::Batch> CampaignEngine::dispatch(int generation, bool remeasure_best,
                                                                std::set<std::int64_t>& in_flight,
                                                                std::int64_t budget_left) {
  auto batch = std::make_unique<Batch>();
  batch->generation = generation;
  // Fresh inputs for every batch: a candidate can never have seen them.
  std::random_device rd;
  batch->common = common_request((static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ static_cast<std::uint64_t>(generation));
  const std::size_t slots = std::min<std::size_t>(static_cast<std::size_t>(std::max(1, opt_.batch)),
                                                  static_cast<std::size_t>(std::max<std::int64_t>(0, budget_left)));
  std::vector<Ready> picked;
  if (opt_.cost_model) {
    Choice c = strategy_.choose(slots, [this](CostModel& model, std::mt19937_64& rng) { refit_model(model, rng); });
    for (const auto reason : c.reasons) {
      if (reason == prior::PickReason::Thompson) ++result_.model_picks;
      else if (reason == prior::PickReason::Random) ++result_.random_picks;
      else ++result_.analytic_picks;
    }
    // Given way in the bounded reserve: recorded as not selected (never judged).
    for (const auto& r : c.evicted) {
      db_.settle_candidate(r.candidate_id, "not-selected");
      in_flight.erase(r.candidate_id);
      waiting_.erase(r.candidate_id);
    }
    picked = std::move(c.picked);
  } else {
    picked = strategy_.take_oldest(slots);  // the order they were proposed in
  }
  for (auto& r : picked) {
    Item it;
    auto w = waiting_.extract(r.candidate_id);
    it.measure = std::move(w.mapped().measure);
    it.build_key = std::move(w.mapped().build_key);
    it.ready = std::move(r);
    keys_in_flight_[it.ready.candidate_id] = it.build_key;
    batch->items.push_back(std::move(it));
  }
  if (remeasure_best) {
    const Member* best = strategy_.population().best();
    // Counting the ones in flight: two batches queued before the first answers must not both
    // re-measure a best that needs only one more figure.
    if (best && best->measurements + remeasures_in_flight_[best->candidate_id] >= opt_.max_measurements) best = nullptr;
    if (best && !cubins_.count(best->candidate_id)) {
      // A best of an earlier run (resumed): built again once.
      auto b = builder_.build(build_request(best->genome));
      if (b.ok) cubins_[best->candidate_id] = std::move(b.cubin);
    }
    const auto cubin = best ? cubins_.find(best->candidate_id) : cubins_.end();
    if (best && cubin != cubins_.end()) {
      Item it;
      it.ready.proposal.genome = best->genome;
      it.ready.proposal.operator_id = "remeasure";
      it.ready.candidate_id = best->candidate_id;
      it.purpose = "remeasure";
      it.measure.genome_hash = best->genome.hash();
      it.measure.knobs = best->genome.knobs;
      it.measure.cubin = cubin->second;
      batch->items.push_back(std::move(it));
      ++remeasures_in_flight_[best->candidate_id];
    }
  }
  return batch;
}

void CampaignEngine::load_applicability() {
  // Gate outcomes of this campaign's candidates, for the validity rates.
  for (const auto& g : tracedb::gate_outcomes(db_.connection(), campaign_id_)) {
    try {
      strategy_.recall_gate(genome_from_json(json::parse(g.genome_json), op_), g.passed);
    } catch (const std::exception&) {
      // An unreadable genome was reported when it was resumed; it teaches nothing here.
    }
  }
  // A resumed campaign remembers which passes refused which parents.
  for (const auto& b : tracedb::edit_builds(db_.connection(), campaign_id_)) {
    const bool refused = b.stage == "pass" && b.log_head.rfind("pass-refused", 0) == 0;
    Genome g;
    if (b.operator_name == "random" && !refused && b.built) {
      try {
        g = genome_from_json(json::parse(b.genome_json));
      } catch (const std::exception&) {
        continue;  // unreadable: reported when resumed
      }
    }
    strategy_.recall_build(b.operator_name, b.parent_id, g, refused, b.built, b.log_head);
  }
}

void CampaignEngine::find_random_passes() {
  if (opt_.random_edits.share <= 0 || !baseline_.module) return;
  std::vector<std::string> applying;
  std::string refused;
  for (const auto& name : proposer_.ptx_passes()) {
    const auto* pass = passes_->find(name);
    if (!pass) continue;
    ir::Module m = *baseline_.module;  // a copy: passes rewrite in place
    mutators::PassResult r;
    try {
      r = pass->apply(m, {});
    } catch (const std::exception&) {
      r.applied = false;
    }
    if (r.applied) applying.push_back(name);
    else refused += " " + name;
  }
  log_ << "random genomes: " << static_cast<int>(opt_.random_edits.share * 100 + 0.5) << "% carry 1-"
       << opt_.random_edits.max_edits << " PTX edits of " << applying.size() << " passes that apply to the baseline"
       << (refused.empty() ? std::string() : "; refusing it:" + refused) << "\n";
  strategy_.set_random_passes(std::move(applying));
}

void CampaignEngine::refit_model(CostModel& model, std::mt19937_64& rng) {
  // Op options per campaign: this one's spec; earlier campaigns of the same spec file content
  // share them; others only through earlier_config_ (their spec found on disk).
  CampaignConfigs configs{{campaign_id_, spec_.config}};
  {
    std::string own_hash;
    std::vector<std::pair<std::int64_t, std::string>> others;
    for (const auto& c : tracedb::campaigns_of_op(db_.connection(), spec_.op)) {
      if (c.id == campaign_id_) own_hash = c.spec_hash;
      else others.emplace_back(c.id, c.spec_hash);
    }
    for (const auto& [id, hash] : others) {
      if (hash == own_hash) configs.emplace(id, spec_.config);
      else if (earlier_config_)
        if (auto c = earlier_config_(id)) configs.emplace(id, *c);
    }
  }
  const CostDataset d = cost_dataset(db_, op_, configs, GpuLimits{}, &layout_);
  const tracedb::Environment env = measurers_.front()->environment();
  result_.last_fit = model.fit_for_campaign(d, campaign_id_, env.gpu, env.driver, env.cuda, rng);
}

void CampaignEngine::absorb(Batch& b) {
  for (auto& it : b.items) {
    EvalReport& r = it.report;
    const std::int64_t id = it.ready.candidate_id;
    const Proposal& proposal = it.ready.proposal;
    if (it.purpose == "candidate") keys_in_flight_.erase(id);
    if (it.purpose == "remeasure" && --remeasures_in_flight_[id] <= 0) remeasures_in_flight_.erase(id);
    const bool judged = r.verdict != "unmeasured" && r.verdict != "not-run";
    const bool passed = r.verdict == "pass" && r.fitness;
    const auto [lo, hi] = fitness_bounds(r);
    if (it.purpose == "candidate") {
      if (!judged) strategy_.dropped(proposal);
      else if (!passed) strategy_.measured(it.ready, std::nullopt);
      // A passing candidate is told below, once it is recorded.
    }
    if (r.verdict == "unmeasured") {
      // A replay answers a re-measurement of the best "unmeasured" too; only candidates count.
      if (it.purpose == "candidate") {
        db_.settle_candidate(id, "unmeasured");
        ++result_.unmeasured_this_run;
      }
      continue;
    }
    if (r.verdict == "not-run") {  // stays built: a resumed campaign measures it
      if (it.purpose == "candidate" && !r.reasons.empty() && r.reasons.front().rfind("abandoned", 0) == 0)
        ++result_.abandoned_this_run;
      continue;
    }
    tracedb::EvaluationMeta meta;
    meta.mode = mode();
    meta.purpose = it.purpose;
    if (r.fitness) {
      meta.fitness_low = lo;
      meta.fitness_high = hi;
    }
    db_.record_evaluation(id, env_id_, r, meta);
    // The database keeps held-out shapes apart; the agents and failure counts below see only this.
    evaluator::redact_heldout(r);
    if (it.purpose == "candidate") ++result_.evaluations_this_run;
    if (it.purpose == "candidate" && is_llm(proposal)) {
      if (passed) {
        llm_->measured(proposal.genome);
      } else {
        std::string reasons;
        for (const auto& x : r.reasons) reasons += (reasons.empty() ? "" : "; ") + x;
        llm_->failed(proposal.genome, id, "gate", r.verdict + (reasons.empty() ? "" : ": " + reasons));
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
    if (it.purpose == "remeasure") {
      strategy_.remeasured(id, Figures{*r.fitness, lo, hi});
      continue;
    }
    strategy_.measured(it.ready, Figures{*r.fitness, lo, hi});
    if (strategy_.population().contains(id)) cubins_[id] = it.measure.cubin;
  }
  std::erase_if(cubins_, [&](const auto& kv) { return !strategy_.population().contains(kv.first); });
}

void CampaignEngine::progress(bool force) {
  const double t = now_s();
  if (!force && opt_.progress_every_s > 0 && t - last_progress_ < opt_.progress_every_s) return;
  last_progress_ = t;
  const double wall = t - started_;
  const std::int64_t evals = db_.count_candidate_evaluations(campaign_id_);
  char line[512];
  const Member* best = strategy_.population().best();
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
    const tracedb::LlmSpend s = db_.llm_spend(campaign_id_);
    log_ << "; LLM " << s.calls << " calls, " << s.input_tokens << "+" << s.output_tokens << " tokens, $" << s.usd
         << (s.unpriced_calls > 0 ? " + " + std::to_string(s.unpriced_calls) + " unpriced calls" : std::string())
         << (llm_->available() ? "" : " (endpoint down: rule agents only)");
  }
  log_ << std::endl;
}

// The campaign's side of the search loop (search/search_loop.hpp): rounds build in the
// background on the build service, batches go to one measurement thread per measurer, and
// everything is recorded in the trace database as it happens.
class CampaignEngine::Pipeline : public SearchPipeline {
 public:
  Pipeline(CampaignEngine& engine, std::mt19937_64 rng, int generation) : e_(engine), rng_(rng), generation_(generation) {
    for (Measurer* m : e_.measurers_)
      threads_.emplace_back([this, m] {
        while (true) {
          Batch* b = nullptr;
          work_.pop(b);
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
          done_.push(b);
        }
      });
  }
  ~Pipeline() override { join(); }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Stops the measurement threads once nothing is in flight.
  void join() {
    for (std::size_t i = 0; i < threads_.size(); ++i) work_.push(nullptr);
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  std::vector<Proposal> propose(bool allow_llm) override {
    auto props = e_.propose(generation_, rng_, allow_llm);
    e_.project_onto_record(props);
    ++generation_;
    return props;
  }

  std::vector<std::unique_ptr<SearchPipeline::Round>> launch(std::vector<Proposal> props) override {
    std::vector<std::unique_ptr<SearchPipeline::Round>> rounds;
    // The LLM's answers build in a round of their own, ahead of the rule agents' round: a
    // failure reaches the fixer when that one build is done, not when the whole round is.
    std::vector<Proposal> answers;
    for (auto it = props.begin(); it != props.end();) {
      if (e_.is_llm(*it)) {
        answers.push_back(std::move(*it));
        it = props.erase(it);
      } else {
        ++it;
      }
    }
    if (!answers.empty()) {
      rounds.push_back(e_.launch(generation_, std::move(answers), in_flight_));
      rounds.back()->agents_only = true;
    }
    if (!props.empty()) rounds.push_back(e_.launch(generation_, std::move(props), in_flight_));
    ++generation_;
    return rounds;
  }

  std::size_t finish(SearchPipeline::Round& r) override { return e_.finish(static_cast<CampaignEngine::Round&>(r), in_flight_); }

  Dispatched dispatch(std::int64_t slots, bool remeasure_best) override {
    auto batch = e_.dispatch(generation_, remeasure_best, in_flight_, slots);
    if (batch->items.empty()) return {};
    Dispatched d;
    d.sent = true;
    for (const auto& it : batch->items) d.candidates += it.purpose == "candidate" ? 1 : 0;
    work_.push(batch.release());
    return d;
  }

  Collected collect() override {
    Batch* raw = nullptr;
    // At the deadline what is in flight is abandoned: the measurers answer at once and the
    // candidates stay built for a resumed campaign.
    while (!done_.try_pop(raw)) {
      if (e_.deadline_ > 0 && !e_.abandon_.load() && now_s() > e_.deadline_) {
        e_.abandon_.store(true);
        for (Measurer* m : e_.measurers_) m->abandon();
        e_.log_ << "deadline: abandoning the batches and builds in flight (they stay recorded; a resumed campaign "
                   "measures them)"
                << std::endl;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::unique_ptr<Batch> b(raw);
    if (!b->items.empty() && b->measure_s > 0 && !e_.abandon_.load()) {
      const double per_item = b->measure_s / static_cast<double>(b->items.size());
      e_.measure_per_item_s_ = e_.measure_per_item_s_ > 0 ? 0.5 * e_.measure_per_item_s_ + 0.5 * per_item : per_item;
      if (b->gpu_s > 0) {
        const double gpu_item = b->gpu_s / static_cast<double>(b->items.size());
        e_.gpu_per_item_s_ = e_.gpu_per_item_s_ > 0 ? 0.5 * e_.gpu_per_item_s_ + 0.5 * gpu_item : gpu_item;
      }
    }
    Collected c;
    for (const auto& it : b->items) {
      if (it.purpose != "candidate") continue;
      ++c.candidates;
      in_flight_.erase(it.ready.candidate_id);
    }
    e_.result_.measure_s += b->measure_s;
    e_.result_.prep_s += b->prep_s;
    e_.result_.gpu_s += b->gpu_s;
    if (!b->error.empty()) {
      e_.log_ << "error: the measurer failed on a batch: " << b->error << "\n";
      c.failed = true;
      return c;
    }
    e_.absorb(*b);
    e_.strategy_.posterior().save(e_.db_);
    return c;
  }

  // A replayed candidate the record lacks still spends budget: on a GPU it would have cost an
  // evaluation, and a replay campaign stands in for one of equal budget.
  std::int64_t evaluations_done() const override {
    std::int64_t n = e_.db_.count_candidate_evaluations(e_.campaign_id_);
    if (e_.mode() == "replay") n += tracedb::count_unmeasured(e_.db_.connection(), e_.campaign_id_);
    return n;
  }
  std::int64_t built() const override { return e_.result_.built_this_run; }

  std::string stop_reason(int batches_in_flight) const override {
    if (e_.stop_.load()) return "interrupted";
    const CampaignOptions& o = e_.opt_;
    if (o.max_minutes > 0 && now_s() - e_.started_ > o.max_minutes * 60) return "time";
    // Nothing in flight and not even one more candidate's measurement fits before the deadline.
    if (e_.deadline_ > 0 && batches_in_flight == 0 && e_.measure_per_item_s_ > 0 &&
        now_s() + e_.measure_per_item_s_ > e_.deadline_)
      return "time";
    const Member* best = e_.strategy_.population().best();
    if (o.target_fitness > 0 && best && best->fitness >= o.target_fitness) return "target";
    return "";
  }
  bool round_fits_deadline() const override {
    return !(e_.deadline_ > 0 && now_s() + e_.round_build_s_ + e_.measure_per_item_s_ > e_.deadline_);
  }
  // Near the deadline a batch shrinks to what the measurers can still finish before it, less
  // what is queued ahead of it: workers sharing a GPU take turns on it, so batches sized on one
  // worker's pace alone ran past the deadline and were abandoned (on an H100, 34 KDA candidates
  // of a 2-minute campaign).
  std::optional<std::int64_t> deadline_capacity(std::int64_t queued) const override {
    if (e_.deadline_ <= 0 || e_.measure_per_item_s_ <= 0) return std::nullopt;
    double per_s = static_cast<double>(e_.measurers_.size()) / e_.measure_per_item_s_;
    if (e_.gpu_per_item_s_ > 0) per_s = std::min(per_s, static_cast<double>(e_.gpu_count()) / e_.gpu_per_item_s_);
    const double can = std::floor(std::max(0.0, e_.deadline_ - now_s()) * per_s) - static_cast<double>(queued);
    return static_cast<std::int64_t>(std::max(0.0, can));
  }
  bool fix_waiting() const override { return e_.llm_ && e_.llm_->fix_queued() && e_.llm_->available(); }
  std::unique_ptr<SearchPipeline::Round> launch_fix() override {
    LlmProposal r = e_.llm_->fix();
    if (!r.proposal) return nullptr;  // the proposer recorded why
    std::vector<Proposal> one;
    one.push_back(std::move(*r.proposal));
    auto round = e_.launch(generation_, std::move(one), in_flight_);
    round->agents_only = true;
    return round;
  }
  // Builds still running finish and are recorded (a resumed campaign measures what passed); past
  // the deadline, those not started yet are left for a resumed campaign.
  void stopping(const std::string& reason) override {
    if (reason == "time" && e_.deadline_ > 0) e_.abandon_.store(true);
  }
  void progress() override { e_.progress(false); }

 private:
  CampaignEngine& e_;
  std::mt19937_64 rng_;
  int generation_;
  std::set<std::int64_t> in_flight_;  // building, waiting in the reserve, or at a measurer
  tbb::concurrent_bounded_queue<Batch*> work_, done_;
  std::vector<std::thread> threads_;
};

CampaignResult CampaignEngine::run() {
  started_ = now_s();
  deadline_ = opt_.max_minutes > 0 ? started_ + opt_.max_minutes * 60 : 0;
  result_.mode = mode();
  // ---- the campaign row: one per (spec file name, spec content, mode) ----
  std::ifstream in(spec_.path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  tracedb::CampaignKey key;
  key.spec_path = std::filesystem::path(spec_.path).filename().string() + "#" + opt_.arch + "#" + mode();
  key.spec_hash = evaluator::sha256_hex(ss.str());
  key.op = spec_.op;
  key.arch = opt_.arch;
  key.config_json = json{{"mode", mode()}, {"islands", opt_.islands}, {"island_size", opt_.island_size},
                         {"batch", opt_.batch}, {"seed", opt_.seed}, {"spec", spec_.path}}
                        .dump();
  const tracedb::Campaign c = db_.open_campaign(key);
  campaign_id_ = c.id;
  result_.campaign_id = c.id;
  result_.resumed = c.resumed;
  db_.set_campaign_status(campaign_id_, "running");
  // The spec and its seed templates go into the database, so export and report need nothing else.
  try {
    tracedb::store_campaign_files(db_.connection(), campaign_id_, spec_files(spec_, &op_));
  } catch (const std::exception& e) {
    log_ << "note: the spec's files are not recorded in the database (" << e.what()
         << "); export and report will need the spec's path\n";
  }
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
  strategy_.posterior().load(db_);
  load_applicability();  // a resumed campaign's refusals and gate outcomes
  find_random_passes();
  if (llm_agents_) {
    llm_ = std::make_unique<LlmProposer>(
        *llm_agents_, db_, campaign_id_, spec_, op_, opt_.arch,
        [this](const Genome& g) { return build_request(g).source; },
        [this](const Genome& g) { return instruction_mix_of(g); }, log_);
    strategy_.add_policy_operator(LlmProposer::kOperator);
  }
  if (c.resumed) {
    rebuild_population();
    log_ << "resuming campaign " << campaign_id_ << " from " << db_.path().string() << ": "
         << db_.count_candidates(campaign_id_) << " candidates, " << db_.count_candidate_evaluations(campaign_id_)
         << " evaluations, population " << strategy_.population().size() << std::endl;
  } else {
    log_ << "campaign " << campaign_id_ << " (" << spec_.op << ", " << opt_.arch << ", " << mode() << ") in "
         << db_.path().string() << std::endl;
  }
  if (opt_.determinism_runs != evaluator::GateOptions{}.determinism_runs || !opt_.guard_pages || !opt_.degenerate_rows)
    log_ << "gate lowered for the candidates (to measure its cost): determinism runs " << opt_.determinism_runs
         << ", guard pages " << (opt_.guard_pages ? "on" : "off") << ", degenerate rows "
         << (opt_.degenerate_rows ? "on" : "off") << "; the winner's final check runs the full gate\n";

  if (projection_) {
    for (auto& h : tracedb::genome_hashes(db_.connection(), campaign_id_)) taken_.insert(std::move(h));
    log_ << "replay: proposals are projected onto the " << projection_->size()
         << " recorded genomes, so every candidate built is scored (" << taken_.size() << " taken already)\n";
  }
  std::mt19937_64 rng(opt_.seed ^ static_cast<std::uint64_t>(db_.count_candidates(campaign_id_)));
  int generation = db_.max_generation(campaign_id_) + 1;

  // A resumed campaign first finishes what was in flight when it stopped.
  std::vector<Proposal> pending;
  for (const auto& row : db_.pending_candidates(campaign_id_)) {
    Proposal p;
    try {
      p.genome = genome_from_json(json::parse(row.genome_json), op_);
    } catch (const std::exception& e) {
      db_.record_build(row.id, tracedb::BuildRecord{false, "", "genome", std::string("unreadable genome: ") + e.what(), "{}", ""});
      continue;
    }
    p.parent_id = row.parent_id;
    p.operator_id = row.operator_name;
    pending.push_back(std::move(p));
  }

  LoopOptions loop_options;
  loop_options.budget = budget_;
  loop_options.batch = opt_.batch;
  loop_options.measurers = static_cast<int>(measurers_.size());
  loop_options.choosing = opt_.cost_model;
  loop_options.build_factor = opt_.build_factor;
  loop_options.reserve_factor = opt_.reserve_factor;
  loop_options.build_rounds = opt_.build_rounds;
  loop_options.top_up_rounds = opt_.top_up_rounds;
  loop_options.migrate_every = opt_.migrate_every;
  loop_options.remeasure_every = opt_.remeasure_every;
  Pipeline pipeline(*this, rng, generation);
  const LoopResult loop = run_search_loop(strategy_, pipeline, loop_options, std::move(pending));
  const std::string& stop_reason = loop.stop_reason;
  result_.prepare_s += loop.prepare_s;
  pipeline.join();

  // ---- the winner, re-measured against the baseline ----
  if (const Member* best = strategy_.population().best()) {
    result_.best = *best;
    if (opt_.final_check && mode() == "gpu" && stop_reason == "time") {
      log_ << "final check skipped: the campaign stopped at its deadline (`ptxevo eval SPEC --db F --candidate "
           << best->candidate_id << "` re-measures the winner)\n";
    } else if (opt_.final_check && mode() == "gpu" && stop_reason != "measurer-failed" && !stop_.load()) {
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
          tracedb::EvaluationMeta meta;
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
  result_.stop_reason = stop_reason;
  if (llm_) llm_->campaign_ended();
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
