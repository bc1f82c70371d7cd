// The RMSNorm forward specs against the op (shapes, seed, constraints that imply a valid plan) and
// NVRTC builds of its template: the seed's entries are all in the module and the cubin for every
// entry a plan can name, for the defaults (sm_90a and sm_100a), for knob/dtype/option
// combinations, for a sample of the constrained knob space (all of it with
// --gtest_also_run_disabled_tests), and every known-bad kernel with its header.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "evaluator/builder.hpp"
#include "evaluator/elf_sections.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/ir_checks.hpp"
#include "evaluator/knob_constraints.hpp"
#include "evaluator/nvrtc_compiler.hpp"
#include "evaluator/ptxas.hpp"
#include "evaluator/spec.hpp"
#include "evaluator/template_source.hpp"
#include "ir/parser.hpp"
#include "kernels/builtin_ops.hpp"
#include "kernels/rmsnorm/rmsnorm_fwd_op.hpp"
#include "kernels/tests/rmsnorm_test_support.hpp"


namespace {

using namespace rmsnorm_test;

// ---------------------------------------------------------------------------------------------
// The specs

ptxevo::evaluator::Spec load_rms_spec(const std::string& file = "rmsnorm_fwd.spec") {
  static const auto registry = ptxevo::kernels::builtin_ops();
  auto r = ptxevo::evaluator::load_spec(kRmsDir + "/" + file, registry);
  if (!r.spec) throw std::runtime_error(r.error ? r.error->format() : "load_spec failed");
  return *r.spec;
}

const std::vector<std::string> kSpecFiles = {"rmsnorm_fwd.spec",          "rmsnorm_fwd_fp16.spec",
                                             "rmsnorm_fwd_fp32.spec",     "rmsnorm_fwd_residual.spec",
                                             "rmsnorm_fwd_decode.spec",   "rmsnorm_fwd_decode_fp16.spec",
                                             "rmsnorm_fwd_decode_residual.spec"};

// Every knob assignment of the seed's space in odometer order; knobs outside `vary` (when given)
// stay at their defaults.
template <class F>
void for_each_assignment(const ptxevo::evaluator::SeedTemplate& seed, F&& f, const std::set<std::string>& vary = {}) {
  std::vector<std::size_t> idx(seed.knobs.size(), 0);
  std::vector<std::size_t> size(seed.knobs.size());
  for (std::size_t i = 0; i < seed.knobs.size(); ++i)
    size[i] = vary.empty() || vary.count(seed.knobs[i].name) ? seed.knobs[i].values.size() : 1;
  while (true) {
    Knobs k;
    for (std::size_t i = 0; i < idx.size(); ++i)
      k[seed.knobs[i].name] = size[i] == 1 && !vary.empty() ? seed.knobs[i].default_value : seed.knobs[i].values[idx[i]];
    f(k);
    std::size_t i = 0;
    for (; i < idx.size(); ++i) {
      if (++idx[i] < size[i]) break;
      idx[i] = 0;
    }
    if (i == idx.size()) return;
  }
}

ptxevo::evaluator::KnobValue seed_default(const ptxevo::evaluator::SeedTemplate& seed, const std::string& name) {
  for (const auto& k : seed.knobs)
    if (k.name == name) return k.default_value;
  throw std::runtime_error("seed has no knob " + name);
}

bool seed_has_knob(const ptxevo::evaluator::SeedTemplate& seed, const std::string& name) {
  return std::any_of(seed.knobs.begin(), seed.knobs.end(), [&](const auto& k) { return k.name == name; });
}

bool admitted(const ptxevo::evaluator::SeedTemplate& seed, const Knobs& k) {
  for (const auto& c : seed.constraints)
    if (!ptxevo::evaluator::constraint_holds(c, k)) return false;
  return true;
}

TEST(RmsNormFwdSpec, LoadsWithTheTargetShapesAndSeed) {
  const auto spec = load_rms_spec();
  EXPECT_EQ(spec.op, "rmsnorm_fwd");
  EXPECT_EQ(spec.arch, "sm_90a");
  EXPECT_EQ(RmsNormFwdOp().validate(spec.config), "");
  EXPECT_EQ(spec.config.at("x_dtype"), "bf16");
  EXPECT_EQ(spec.config.at("w_dtype"), "fp32");
  // docs/targets.md's 11 forward rows, in order.
  const std::vector<std::pair<std::int64_t, std::int64_t>> targets = {
      {32768, 256},   {32768, 512},   {32768, 1024},  {32768, 2048},   {32768, 4096},  {32768, 8192},
      {32768, 16384}, {32768, 32768}, {32768, 65536}, {16384, 131072}, {8192, 262144}};
  ASSERT_EQ(spec.benchmark_shapes.size(), targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i)
    EXPECT_EQ(spec.benchmark_shapes[i], shape(targets[i].first, targets[i].second)) << i;
  for (const auto& [m, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {1, 1}, {3, 7}, {5, 1000}, {7, 4097}, {64, 4096}, {33, 8192}})
    EXPECT_NE(std::find(spec.correctness_shapes.begin(), spec.correctness_shapes.end(), shape(m, n)),
              spec.correctness_shapes.end())
        << m << "x" << n;
  EXPECT_GE(spec.heldout_shapes.size(), 3u);
  // known_bad/spec_shapes_only.cu hard-codes the N values of the benchmark and correctness lists:
  // every held-out shape but one must use an N outside them.
  std::set<std::int64_t> seen_n;
  for (const auto& s : spec.benchmark_shapes) seen_n.insert(s.at("N"));
  for (const auto& s : spec.correctness_shapes) seen_n.insert(s.at("N"));
  const std::string cheat = read_file(kRmsDir + "/known_bad/spec_shapes_only.cu");
  for (std::int64_t n : seen_n) {
    const std::string term = "N == " + std::to_string(n);
    bool found = false;
    for (auto at = cheat.find(term); at != std::string::npos && !found; at = cheat.find(term, at + 1))
      found = at + term.size() < cheat.size() && !std::isdigit(static_cast<unsigned char>(cheat[at + term.size()]));
    EXPECT_TRUE(found) << "known_bad/spec_shapes_only.cu lacks N == " << n;
  }
  int unseen = 0;
  for (const auto& s : spec.heldout_shapes) unseen += seen_n.count(s.at("N")) ? 0 : 1;
  EXPECT_GE(unseen, 3);
  ASSERT_EQ(spec.seeds.size(), 1u);
  EXPECT_EQ(spec.baseline, "rmsnorm_fwd_seed");
  EXPECT_EQ(spec.seeds[0].entry, "rmsnorm_fwd");
  EXPECT_EQ(std::filesystem::path(spec.seeds[0].source_path).filename(), "rmsnorm_fwd.cu");
  // The spec's defaults are the op's (and so the template's) defaults.
  const Knobs defaults = ptxevo::evaluator::default_knobs(spec.seeds[0]);
  // The spec's defaults are the op's but for the measured choices its comments name (CLUSTER,
  // EARLY_LAUNCH, the small entries); the decode specs' other latency knobs are left out (off,
  // as the op's defaults have them).
  Knobs expected = RmsNormFwdOp::knob_defaults(DType::BF16);
  for (const char* k : {"SPREAD_CTAS", "WEIGHT_EARLY", "PERSISTENT_CTAS", "WIDE_ROWS", "SMALL_WEIGHT_PREFETCH", "SMALL_MIN_CTAS",
                      "SMALL_STAGE"}) {
    EXPECT_EQ(expected.at(k), ptxevo::evaluator::KnobValue{std::int64_t{0}}) << k;
    expected.erase(k);
  }
  EXPECT_EQ(expected.at("MIN_CLUSTER"), ptxevo::evaluator::KnobValue{std::int64_t{1}});  // as the plan had it
  expected.erase("MIN_CLUSTER");
  for (const auto& [k, v] : std::vector<std::pair<const char*, std::int64_t>>{
           {"CLUSTER", 8}, {"EARLY_LAUNCH", 1}, {"SMALL_THREADS", 128}, {"SMALL_ITEMS", 2}, {"SMALL_MIN_BLOCKS", 12}})
    expected[k] = v;
  EXPECT_EQ(defaults, expected);
  // One assignment; every benchmark row in registers (a CTA, a small CTA or a cluster holds it),
  // and no row leaves over half its threads idle.
  const RmsNormFwdOp::Config cfg;
  const auto g = RmsNormFwdOp::geometry(cfg, defaults);
  for (const auto& s : spec.benchmark_shapes) {
    const auto d = RmsNormFwdOp::dispatch(cfg, g, s.at("M"), s.at("N"));
    const bool small = d.entry.rfind("rmsnorm_fwd_small", 0) == 0;
    const std::int64_t items = small ? g.small_items : g.items;
    EXPECT_EQ(small, s.at("N") <= 2048) << d.entry;
    EXPECT_LE(s.at("N"), d.cluster * d.threads * items * g.vec) << d.entry;
    EXPECT_GE(s.at("N") * 2, d.tpr * d.cluster * items * g.vec) << "over half the threads idle: " << d.entry;
  }
}

TEST(RmsNormFwdSpec, ResidualSpecLoads) {
  const auto spec = load_rms_spec("rmsnorm_fwd_residual.spec");
  const auto c = RmsNormFwdOp::parse(spec.config);
  EXPECT_TRUE(c.has_residual);
  EXPECT_TRUE(c.has_bias);
  EXPECT_EQ(c.x, DType::BF16);
  EXPECT_EQ(c.b, DType::F32);
  EXPECT_EQ(c.residual_out, DType::BF16);
  EXPECT_GE(spec.benchmark_shapes.size(), 3u);
  ASSERT_EQ(spec.seeds.size(), 1u);
  EXPECT_EQ(spec.baseline, spec.seeds[0].name);
  const auto names = RmsNormFwdOp().tensors(spec.benchmark_shapes.front(), spec.config);
  EXPECT_EQ(names.size(), 6u);  // x, w, b, residual, out, residual_out
}

// For every spec: every assignment the constraints admit is a plan launch_plan accepts for every
// shape (so the search never proposes a candidate the op refuses), and the constraints cut
// something. LOAD_HINT, STORE_HINT and EARLY_LAUNCH appear in no constraint and only pick an
// opcode or a launch attribute: they vary on their own, the rest jointly. WIDE_ROWS varies with the knobs that size a row's share
// (jointly with all it would multiply the test's time by four), and the SMALL_ knobs with what
// their entries' plan and tile read. MIN_BLOCKS enters only the knob
// checks, not the per-shape geometry, so its other values are planned for one shape.
TEST(RmsNormFwdSpec, ConstraintsImplyAValidPlan) {
  RmsNormFwdOp op;
  for (const auto& file : kSpecFiles) {
    SCOPED_TRACE(file);
    const auto spec = load_rms_spec(file);
    const auto& seed = spec.seeds.at(0);
    std::vector<Shape> shapes = spec.benchmark_shapes;
    shapes.insert(shapes.end(), spec.correctness_shapes.begin(), spec.correctness_shapes.end());
    const auto parsed = RmsNormFwdOp::parse(spec.config);
    std::int64_t admits = 0, total = 0;
    auto check = [&](const Knobs& k) {
      ++total;
      if (!admitted(seed, k)) return;
      ++admits;
      const bool one_shape = k.at("MIN_BLOCKS") != seed_default(seed, "MIN_BLOCKS");
      for (const auto& s : shapes) {
        if (one_shape && &s != &shapes.front()) break;
        try {
          op.launch_plan(s, spec.config, k);
          // The small entries have no rest loops: the plan must give them only rows their tile
          // holds (the kernel traps otherwise).
          const auto g = RmsNormFwdOp::geometry(parsed, k);
          const auto d = RmsNormFwdOp::dispatch(parsed, g, s.at("M"), s.at("N"));
          if (d.entry.rfind("rmsnorm_fwd_small", 0) == 0) {
            ASSERT_LE(s.at("N"), d.tpr * g.small_items * g.vec) << knobs_text(k) << " " << d.entry;
          }
        } catch (const std::invalid_argument& e) {
          ADD_FAILURE() << "constraints admit a plan the op rejects (" << knobs_text(k) << "): " << e.what();
          return;
        }
      }
    };
    // Every knob the op's checks combine, jointly; the latency knobs (the decode specs') each
    // with the geometry they interact with, so the walk stays within minutes.
    const std::set<std::string> latency = {"SPREAD_CTAS", "WEIGHT_EARLY", "PERSISTENT_CTAS"};
    std::set<std::string> joint;
    for (const auto& kn : seed.knobs)
      if (kn.name != "LOAD_HINT" && kn.name != "STORE_HINT" && kn.name != "EARLY_LAUNCH" && kn.name != "WIDE_ROWS" &&
          kn.name.rfind("SMALL_", 0) != 0 && !latency.count(kn.name))
        joint.insert(kn.name);
    for_each_assignment(seed, check, joint);
    if (seed_has_knob(seed, "SPREAD_CTAS"))
      for_each_assignment(seed, check, {"SPREAD_CTAS", "THREADS", "TPR", "ITEMS", "CLUSTER", "VEC", "STAGE_KB"});
    if (seed_has_knob(seed, "PERSISTENT_CTAS"))
      for_each_assignment(seed, check, {"PERSISTENT_CTAS", "WEIGHT_EARLY", "THREADS", "TPR", "ITEMS", "VEC", "MIN_BLOCKS"});
    if (seed_has_knob(seed, "WIDE_ROWS"))
      for_each_assignment(seed, check, {"WIDE_ROWS", "THREADS", "ITEMS", "VEC", "CLUSTER"});
    if (seed_has_knob(seed, "SMALL_THREADS"))
      for_each_assignment(seed, check,
                          {"SMALL_THREADS", "SMALL_ITEMS", "SMALL_MIN_BLOCKS", "SMALL_MIN_ROWS", "VEC", "TPR"});
    if (seed_has_knob(seed, "SMALL_STAGE"))
      for_each_assignment(seed, check, {"SMALL_STAGE", "SMALL_THREADS", "SMALL_ITEMS", "SMALL_MIN_BLOCKS", "VEC"});
    EXPECT_GT(admits, 1000);
    EXPECT_LT(admits, total);
    for_each_assignment(seed, check, {"LOAD_HINT"});
    for_each_assignment(seed, check, {"STORE_HINT"});
    if (seed_has_knob(seed, "EARLY_LAUNCH")) for_each_assignment(seed, check, {"EARLY_LAUNCH"});
  }
}

// ---------------------------------------------------------------------------------------------
// NVRTC + ptxas builds

std::vector<std::string> nvrtc_options(const OpConfig& cfg, const Knobs& knobs) {
  std::vector<std::string> opts;
  for (const auto& [k, v] : RmsNormFwdOp().template_defines(cfg)) opts.push_back("-D" + k + "=" + v);
  Knobs all = RmsNormFwdOp::knob_defaults(RmsNormFwdOp::parse(cfg).x);
  for (const auto& [k, v] : knobs) all[k] = v;
  for (const auto& [k, v] : all) opts.push_back("-D" + k + "=" + std::to_string(std::get<std::int64_t>(v)));
  return opts;
}

struct Built {
  std::string ptx;
  ptxevo::evaluator::PtxasResult sass;
};

Built build(const std::string& file, const std::string& arch, const OpConfig& cfg, const Knobs& knobs) {
  Built b;
  // As ptxevo reads a template: a known-bad kernel includes its base from a file beside it.
  std::string why;
  const auto source = ptxevo::evaluator::read_template(file, &why);
  EXPECT_TRUE(source) << why;
  if (!source) return b;
  const auto r = ptxevo::evaluator::compile_to_ptx(source->text, std::filesystem::path(file).filename().string(), arch,
                                                   nvrtc_options(cfg, knobs));
  EXPECT_TRUE(r.ok) << file << " for " << arch << ":\n" << r.log;
  if (!r.ok) return b;
  b.ptx = r.ptx;
  b.sass = ptxevo::evaluator::run_ptxas(r.ptx, arch);
  EXPECT_TRUE(b.sass.ok) << file << " for " << arch << ":\n" << b.sass.log;
  return b;
}

bool has_entry(const ptxevo::evaluator::PtxasResult& r, const std::string& name) {
  return std::any_of(r.functions.begin(), r.functions.end(), [&](const auto& f) { return f.is_entry && f.name == name; });
}

// Every entry the template defines for these knobs is in the ptxas output (and nothing else is).
void expect_entries(const ptxevo::evaluator::PtxasResult& r, const OpConfig& cfg, const Knobs& knobs,
                    const std::string& what) {
  const auto want = RmsNormFwdOp::entries(RmsNormFwdOp::geometry(RmsNormFwdOp::parse(cfg), knobs));
  std::size_t entries = 0;
  for (const auto& f : r.functions) entries += f.is_entry ? 1 : 0;
  EXPECT_EQ(entries, want.size()) << what;
  for (const auto& e : want) EXPECT_TRUE(has_entry(r, e)) << what << " lacks entry " << e;
}

// No device globals, no clocks: what the gate's IR checks reject in a candidate.
void expect_clean_ptx(const std::string& ptx, const std::string& what) {
  std::istringstream in(ptx);
  std::string line;
  while (std::getline(in, line)) {
    EXPECT_NE(line.rfind(".global ", 0), 0u) << what << " declares a device global: " << line;
    EXPECT_EQ(line.find("%globaltimer"), std::string::npos) << what << ": " << line;
    EXPECT_EQ(line.find("%clock"), std::string::npos) << what << ": " << line;
  }
}

// The gate's static checks (evaluator/ir_checks.hpp) on PTX, for the plan of a shape.
std::vector<ptxevo::evaluator::IrViolation> ir_violations(const std::string& ptx, const Knobs& knobs,
                                                          const Shape& s = shape(64, 4096), const OpConfig& cfg = {}) {
  const auto parsed = ptxevo::ir::parse_ptx(ptx);
  EXPECT_TRUE(parsed.ok()) << (parsed.error ? parsed.error->message : std::string("parse failed"));
  if (!parsed.ok()) return {};
  return ptxevo::evaluator::check_ir(*parsed.module, RmsNormFwdOp().launch_plan(s, cfg, knobs));
}

TEST(RmsNormFwdBuild, SeedBuildsForHopperAndBlackwellWithDefaults) {
  const std::string seed = kRmsDir + "/rmsnorm_fwd.cu";
  const auto spec = load_rms_spec();
  for (const char* arch : {"sm_90a", "sm_100a"}) {
    SCOPED_TRACE(arch);
    const Built b = build(seed, arch, {}, {});
    ASSERT_FALSE(b.ptx.empty());
    expect_entries(b.sass, {}, {}, arch);
    expect_clean_ptx(b.ptx, std::string("seed ") + arch);
    // The static checks pass for the plan of every shape of the spec.
    for (const auto& s : spec.benchmark_shapes)
      for (const auto& v : ir_violations(b.ptx, {}, s)) ADD_FAILURE() << ptxevo::evaluator::shape_to_string(s) << ": " << v.rule << ": " << v.message;
    // The inline PTX the template promises.
    for (const char* ins : {"ld.global.nc.v4.u32", "st.global.v4.u32", "rsqrt.approx.ftz.f32", "shfl.sync.bfly.b32",
                            "cvt.rn.bf16x2.f32", ".maxntid 512", ".minnctapersm 2", "barrier.cluster.arrive.relaxed.aligned",
                            "mapa.shared::cluster.u32", "st.shared::cluster.f32"})  // sm_100a PTX omits ", 1, 1"
      EXPECT_NE(b.ptx.find(ins), std::string::npos) << ins << " missing";
    // No stage code without STAGE_KB.
    EXPECT_EQ(b.ptx.find("%dynamic_smem_size"), std::string::npos);
    // Within the campaign's static screen (search::CampaignOptions::max_spill_bytes, 256 B over
    // all entries), or the seed itself would never be measured. ITEMS 8 spills a little in the
    // cluster entry at 64 registers; the H200 measured it faster than the spill-free ITEMS 4.
    std::int64_t spills = 0;
    for (const auto& f : b.sass.functions)
      if (f.is_entry) spills += f.spill_stores;
    EXPECT_LE(spills, 256) << b.sass.log;
  }
}

// WEIGHT_EARLY moves the weight loads of the register tile before the row's reduction: in the
// PTX of one entry, the weight's loads come ahead of the first shuffle with it, not without.
TEST(RmsNormFwdBuild, WeightEarlyLoadsTheWeightBeforeTheReduction) {
  const std::string seed = kRmsDir + "/rmsnorm_fwd.cu";
  auto loads_before_shuffle = [&](std::int64_t early) {
    const Built b = build(seed, "sm_90a", {}, {{"ITEMS", I{2}}, {"TPR", I{512}}, {"WEIGHT_EARLY", I{early}}});
    const auto entry = b.ptx.find(".entry rmsnorm_fwd_tpr512");
    const auto shuffle = b.ptx.find("shfl.sync.bfly", entry);
    if (entry == std::string::npos || shuffle == std::string::npos) return -1;
    int n = 0;
    for (auto p = b.ptx.find("ld.global.nc.v4.u32", entry); p < shuffle; p = b.ptx.find("ld.global.nc.v4.u32", p + 1))
      ++n;
    return n;
  };
  // The count without includes the x loads of the loop past the tile, wherever NVRTC placed it:
  // compare the two. ITEMS 2: two 32-byte weight vectors, 16 bytes a load.
  const int late = loads_before_shuffle(0);
  EXPECT_GE(late, 2);
  EXPECT_EQ(loads_before_shuffle(1), late + 4);
}

// SMALL_WEIGHT_PREFETCH (1, or 2 for the first wave's CTAs) puts one L1 prefetch of the weight per
// tile slot into the small entries, ahead of the row's reduction, and none into the other entries
// or without the knob.
TEST(RmsNormFwdBuild, SmallWeightPrefetchPrefetchesBeforeTheReduction) {
  const std::string seed = kRmsDir + "/rmsnorm_fwd.cu";
  auto prefetches = [&](std::int64_t on, const std::string& entry_name) {
    const Built b = build(seed, "sm_90a", {},
                          {{"SMALL_THREADS", I{256}}, {"SMALL_ITEMS", I{4}}, {"SMALL_WEIGHT_PREFETCH", I{on}}});
    const auto entry = b.ptx.find(".entry " + entry_name + "(");
    if (entry == std::string::npos) return std::make_pair(-1, -1);
    const auto end = b.ptx.find(".entry ", entry + 1);
    const auto shuffle = b.ptx.find("shfl.sync.bfly", entry);
    int before = 0, all = 0;
    for (auto p = b.ptx.find("prefetch.global.L1", entry); p < end; p = b.ptx.find("prefetch.global.L1", p + 1)) {
      ++all;
      if (p < shuffle) ++before;
    }
    return std::make_pair(before, all);
  };
  EXPECT_EQ(prefetches(1, "rmsnorm_fwd_small256"), std::make_pair(4, 4));  // SMALL_ITEMS slots
  EXPECT_EQ(prefetches(2, "rmsnorm_fwd_small256"), std::make_pair(4, 4));  // behind a grid-size test
  EXPECT_EQ(prefetches(0, "rmsnorm_fwd_small256"), std::make_pair(0, 0));
  EXPECT_EQ(prefetches(1, "rmsnorm_fwd_tpr512").second, 0);
}

// SMALL_STAGE 1: the small entries take their rows by bulk copies on an mbarrier (x's, and the
// residual's with a residual), keep no register tile (32 registers, no spills at 8 CTAs an SM of
// 256 threads x 4 vectors, where the tile spills), and the other entries are unchanged; sm_90+.
TEST(RmsNormFwdBuild, SmallStageCopiesTheRowsInBulkWithoutSpills) {
  const std::string seed = kRmsDir + "/rmsnorm_fwd.cu";
  const Knobs staged = {{"SMALL_THREADS", I{256}}, {"SMALL_ITEMS", I{4}}, {"SMALL_MIN_BLOCKS", I{8}}, {"SMALL_STAGE", I{1}}};
  for (const bool residual : {false, true}) {
    SCOPED_TRACE(residual ? "residual" : "no residual");
    OpConfig cfg;
    if (residual) cfg = {{"has_residual", "true"}};
    const Built b = build(seed, "sm_90a", cfg, staged);
    ASSERT_FALSE(b.ptx.empty());
    expect_entries(b.sass, cfg, staged, "staged");
    const auto entry = b.ptx.find(".entry rmsnorm_fwd_small256(");
    ASSERT_NE(entry, std::string::npos);
    const auto end = b.ptx.find(".entry ", entry + 1);
    int copies = 0;
    for (auto p = b.ptx.find("cp.async.bulk.shared::cluster.global", entry); p < end;
         p = b.ptx.find("cp.async.bulk.shared::cluster.global", p + 1))
      ++copies;
    EXPECT_EQ(copies, residual ? 2 : 1);
    for (const char* ins : {"mbarrier.init.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64",
                            "mbarrier.try_wait.parity.shared::cta.b64"}) {
      const auto p = b.ptx.find(ins, entry);
      EXPECT_TRUE(p < end) << ins << " missing";
    }
    const auto tpr = b.ptx.find(".entry rmsnorm_fwd_tpr512(");
    ASSERT_NE(tpr, std::string::npos);
    EXPECT_TRUE(b.ptx.find("cp.async.bulk", tpr) >= b.ptx.find(".entry ", tpr + 1)) << "a bulk copy in a tpr entry";
    expect_clean_ptx(b.ptx, "staged");
    // The gate's IR checks pass on the plans that take the staged entries (their dynamic shared
    // memory included) and on one that does not.
    for (const auto& s : {shape(4096, 4096), shape(1024, 8192), shape(16384, 7168), shape(4099, 7001), shape(8, 4096)})
      for (const auto& v : ir_violations(b.ptx, staged, s, cfg))
        ADD_FAILURE() << ptxevo::evaluator::shape_to_string(s) << ": " << v.rule << ": " << v.message;
    for (const auto& f : b.sass.functions)
      if (f.is_entry && f.name == "rmsnorm_fwd_small256") {
        EXPECT_LE(f.registers, 32);
        EXPECT_EQ(f.spill_stores, 0) << b.sass.log;
      }
  }
  // Without the knob the same small entries have no bulk copy.
  const Built tile = build(seed, "sm_90a", {}, {{"SMALL_THREADS", I{256}}, {"SMALL_ITEMS", I{4}}});
  EXPECT_EQ(tile.ptx.find("cp.async.bulk"), std::string::npos);
}

TEST(RmsNormFwdBuild, SeedBuildsForKnobAndDtypeCombinations) {
  const std::string seed = kRmsDir + "/rmsnorm_fwd.cu";
  struct Case {
    const char* arch;
    OpConfig cfg;
    Knobs knobs;
    const char* expect_in_ptx;
  };
  const std::vector<Case> cases = {
      {"sm_90a", {}, {{"VEC", I{2}}, {"THREADS", I{32}}, {"TPR", I{1}}, {"ITEMS", I{1}}}, "ld.global.nc.u32"},
      {"sm_90a", {}, {{"VEC", I{4}}, {"THREADS", I{128}}, {"TPR", I{32}}, {"ITEMS", I{4}}}, "ld.global.nc.v2.u32"},
      {"sm_90a", {}, {{"VEC", I{1}}, {"THREADS", I{64}}, {"TPR", I{64}}}, "ld.global.nc.u16"},
      {"sm_90a", {}, {{"THREADS", I{1024}}, {"ITEMS", I{8}}, {"MIN_BLOCKS", I{1}}, {"CLUSTER", I{8}}}, "bar.sync"},
      {"sm_90a", {}, {{"THREADS", I{512}}, {"TPR", I{128}}, {"ITEMS", I{16}}, {"MIN_BLOCKS", I{2}}}, ".minnctapersm 2"},
      {"sm_90a", {}, {{"LOAD_HINT", I{1}}, {"STORE_HINT", I{1}}, {"TPR", I{512}}}, "st.global.cs.v4.u32"},
      {"sm_90a", {}, {{"LOAD_HINT", I{2}}, {"TPR", I{512}}}, "ld.global.nc.L1::no_allocate.v4.u32"},
      {"sm_90a", {}, {{"LOAD_HINT", I{3}}, {"TPR", I{512}}}, "ld.global.nc.L2::256B.v4.u32"},
      {"sm_90a", {}, {{"LOAD_HINT", I{1}}, {"TPR", I{512}}}, "ld.global.cg.v4.u32"},
      {"sm_90a", {}, {{"CLUSTER", I{1}}, {"STAGE_KB", I{64}}, {"TPR", I{128}}}, "%dynamic_smem_size"},
      {"sm_90a", {}, {{"CLUSTER", I{16}}, {"STAGE_KB", I{112}}, {"VEC", I{4}}}, "st.shared.v2.u32"},
      {"sm_90a", {{"x_dtype", "fp16"}, {"w_dtype", "same"}}, {{"TPR", I{256}}}, "cvt.rn.f16x2.f32"},
      {"sm_90a", {{"x_dtype", "fp16"}, {"store_rstd", "true"}, {"has_weight", "false"}}, {{"TPR", I{32}}}, "rsqrt.approx.ftz.f32"},
      {"sm_90a", {{"x_dtype", "fp32"}}, {{"TPR", I{256}}}, "ld.global.nc.v4.u32"},
      {"sm_90a", {{"x_dtype", "fp32"}, {"w_dtype", "same"}, {"store_rstd", "true"}}, {{"VEC", I{2}}, {"TPR", I{16}}}, "ld.global.nc.v2.u32"},
      {"sm_90a", {{"has_weight", "false"}, {"store_rstd", "true"}}, {{"VEC", I{8}}, {"THREADS", I{256}}, {"TPR", I{64}}}, "st.global.f32"},
      // Bias and residual.
      {"sm_90a", kResidualBias, {{"ITEMS", I{2}}}, "add.f32"},
      {"sm_90a", {{"has_residual", "true"}, {"residual_out_dtype", "fp32"}, {"store_rstd", "true"}},
       {{"CLUSTER", I{1}}, {"STAGE_KB", I{32}}}, "st.global.v4.u32"},
      {"sm_90a", {{"x_dtype", "fp16"}, {"has_bias", "true"}, {"b_dtype", "same"}, {"has_residual", "true"}},
       {{"VEC", I{2}}, {"THREADS", I{32}}, {"TPR", I{1}}}, "cvt.rn.f16x2.f32"},
      {"sm_90a", {{"x_dtype", "fp32"}, {"has_bias", "true"}, {"has_residual", "true"}}, {{"STAGE_KB", I{64}}}, "%dynamic_smem_size"},
      {"sm_90a", kResidualBias, {{"WEIGHT_EARLY", I{1}}, {"ITEMS", I{2}}}, "add.f32"},
      {"sm_90a", {}, {{"EARLY_LAUNCH", I{1}}}, "griddepcontrol.launch_dependents"},
      {"sm_90a", {}, {{"PERSISTENT_CTAS", I{264}}, {"ITEMS", I{2}}, {"EARLY_LAUNCH", I{1}}, {"WEIGHT_EARLY", I{1}}},
       "%nctaid.x"},
      {"sm_90a", kResidualBias, {{"PERSISTENT_CTAS", I{132}}, {"ITEMS", I{2}}}, "%nctaid.x"},
      // The wide entry: 1024 threads, one row each.
      {"sm_90a", {}, {{"WIDE_ROWS", I{128}}, {"ITEMS", I{2}}, {"SPREAD_CTAS", I{132}}}, ".maxntid 1024, 1, 1"},
      {"sm_90a", kResidualBias, {{"WIDE_ROWS", I{32}}, {"ITEMS", I{2}}, {"WEIGHT_EARLY", I{1}}}, ".maxntid 1024, 1, 1"},
      {"sm_100a", {}, {{"EARLY_LAUNCH", I{1}}, {"CLUSTER", I{2}}}, "griddepcontrol.wait"},
      {"sm_90a", {{"x_dtype", "fp16"}, {"w_dtype", "same"}}, {{"WEIGHT_EARLY", I{1}}, {"ITEMS", I{4}}}, "cvt.rn.f16x2.f32"},
      // Blackwell.
      {"sm_100a", kResidualBias, {{"STAGE_KB", I{64}}, {"CLUSTER", I{8}}}, "mapa.shared::cluster.u32"},
      {"sm_100a", {{"x_dtype", "fp16"}}, {{"THREADS", I{1024}}, {"TPR", I{256}}, {"CLUSTER", I{1}}}, "bar.sync"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.arch) + " " + knobs_text(c.knobs));
    const Built b = build(seed, c.arch, c.cfg, c.knobs);
    if (b.ptx.empty()) continue;
    expect_entries(b.sass, c.cfg, c.knobs, c.arch);
    EXPECT_NE(b.ptx.find(c.expect_in_ptx), std::string::npos) << c.expect_in_ptx;
    expect_clean_ptx(b.ptx, "seed");
    // The plans of these knobs pass the static checks (entries, bounds, clusters).
    for (const auto& [m, n] : std::vector<std::pair<I, I>>{{64, 256}, {64, 4096}, {3, 65536}, {4, 262144}, {3, 7}, {4, 8192}})
      for (const auto& v : ir_violations(b.ptx, c.knobs, shape(m, n), c.cfg)) ADD_FAILURE() << v.rule << ": " << v.message;
  }
}

// The engine's own path: prepare_evaluation builds the seed with the Builder (NVRTC, the PTX IR,
// nvJitLink) and runs the static checks on the plan of every shape of the spec; a plan that names
// an entry the module lacks fails there as missing-entry. Every entry is also a code section of
// the cubin.
TEST(RmsNormFwdBuild, EveryPlannedEntryIsInTheModuleAndTheCubin) {
  for (const char* file : {"rmsnorm_fwd.spec", "rmsnorm_fwd_residual.spec"}) {
    SCOPED_TRACE(file);
    const auto spec = load_rms_spec(file);
    const auto registry = ptxevo::kernels::builtin_ops();
    ptxevo::evaluator::Builder builder(nullptr);
    const auto p = ptxevo::evaluator::prepare_evaluation(spec, *registry.find(spec.op), builder, {}, {}, 1);
    ASSERT_TRUE(p.reasons.empty()) << p.reasons.front();
    ASSERT_TRUE(p.candidate.ok);
    std::set<std::string> sections;
    for (const auto& s : ptxevo::evaluator::read_elf_sections(p.candidate.cubin)) sections.insert(s.name);
    std::set<std::string> planned;
    for (const auto& sc : p.shapes)
      for (const auto& l : RmsNormFwdOp().launch_plan(sc.shape, spec.config, p.candidate_knobs).kernels)
        planned.insert(l.entry);
    EXPECT_GE(planned.size(), 3u);
    const auto all = RmsNormFwdOp::entries(RmsNormFwdOp::geometry(RmsNormFwdOp::parse(spec.config), p.candidate_knobs));
    for (const auto& e : all) {
      EXPECT_TRUE(sections.count(".text." + e)) << "no code section for " << e;
      const auto* f = p.candidate.module->find_function(e);
      EXPECT_TRUE(f && f->is_entry) << "no .entry " << e;
    }
    for (const auto& e : planned) EXPECT_NE(std::find(all.begin(), all.end(), e), all.end()) << e;
    // As the engine links it (nvJitLink takes more registers than plain ptxas): MIN_BLOCKS = 2
    // holds every bf16 entry to 64 registers, two 512-thread CTAs per SM; only the cluster entry
    // spills much, within the campaign screen's bound (see SeedBuildsForHopperAndBlackwellWithDefaults).
    // SMALL_MIN_BLOCKS 12 holds the small entries to 40 registers at a few bytes of spills (so
    // they were measured: bench/results/2026-12-06-h100-rmsnorm-small-defaults-1f0ea26).
    if (std::string(file) == "rmsnorm_fwd.spec") {
      std::size_t entries = 0;
      std::int64_t spills = 0;
      for (const auto& f : p.candidate.resources) {
        if (!f.is_entry) continue;
        ++entries;
        EXPECT_LE(f.registers, 64) << f.name;
        if (f.name.rfind("rmsnorm_fwd_small", 0) == 0) {
          EXPECT_LE(f.registers, 40) << f.name;
          EXPECT_LE(f.spill_stores, 16) << f.name;
        } else if (f.name != "rmsnorm_fwd_cluster") {
          EXPECT_EQ(f.spill_stores, 0) << f.name;
        }
        spills += f.spill_stores;
      }
      EXPECT_LE(spills, 256);
      EXPECT_EQ(entries, all.size());
    }
  }
}

// The distinct builds that cover every assignment the constraints admit over `vary` (the other
// knobs at their defaults). An entry's code depends on VEC, THREADS, ITEMS, whether STAGE_KB > 0,
// MIN_BLOCKS, the hints and its own threads per row; TPR and CLUSTER only decide which entries the
// module has (tpr >= TPR; the cluster entry when CLUSTER > 1). So the build with the smallest TPR
// and the largest admitted CLUSTER holds the code of every build that differs from it only there.
std::vector<Knobs> covering_builds(const ptxevo::evaluator::SeedTemplate& seed, const std::set<std::string>& vary) {
  std::vector<I> tprs, clusters;
  for (const auto& k : seed.knobs) {
    if (k.name == "TPR")
      for (const auto& v : k.values) tprs.push_back(std::get<I>(v));
    if (k.name == "CLUSTER")
      for (const auto& v : k.values) clusters.push_back(std::get<I>(v));
  }
  std::sort(tprs.begin(), tprs.end());
  std::sort(clusters.rbegin(), clusters.rend());
  std::set<std::string> seen;
  std::vector<Knobs> out;
  for_each_assignment(
      seed,
      [&](const Knobs& k) {
        if (!admitted(seed, k)) return;
        Knobs cover = k;
        cover["TPR"] = tprs.front();
        for (I c : clusters) {
          cover["CLUSTER"] = c;
          if (admitted(seed, cover)) break;
        }
        EXPECT_TRUE(admitted(seed, cover)) << knobs_text(cover);
        Knobs key = cover;
        key["STAGE_KB"] = I{std::get<I>(k.at("STAGE_KB")) > 0 ? 1 : 0};
        if (seen.insert(knobs_text(key)).second) out.push_back(cover);
      },
      vary);
  return out;
}

// Builds `assignments` with the Builder (parallel, as the engine does) and checks each links and
// holds every entry its plans can name.
void expect_all_build(const ptxevo::evaluator::Spec& spec, const std::vector<Knobs>& assignments) {
  const auto& seed = spec.seeds.at(0);
  const std::string source = read_file(seed.source_path);
  std::vector<ptxevo::evaluator::BuildRequest> reqs;
  for (const auto& k : assignments) {
    ptxevo::evaluator::BuildRequest r;
    r.name = knobs_text(k);
    r.source = source;
    r.source_path = seed.source_path;
    r.defines = RmsNormFwdOp().template_defines(spec.config);
    r.knobs = k;
    r.arch = spec.arch;
    reqs.push_back(std::move(r));
  }
  ptxevo::evaluator::Builder builder(nullptr);
  const auto results = builder.build_all(reqs);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    ASSERT_TRUE(r.ok) << reqs[i].name << ": " << r.stage << ": " << r.error;
    std::set<std::string> sections;
    for (const auto& s : ptxevo::evaluator::read_elf_sections(r.cubin)) sections.insert(s.name);
    for (const auto& e : RmsNormFwdOp::entries(RmsNormFwdOp::geometry(RmsNormFwdOp::parse(spec.config), assignments[i])))
      EXPECT_TRUE(sections.count(".text." + e)) << reqs[i].name << " lacks " << e;
  }
}

const std::set<std::string> kStructuralKnobs = {"VEC", "THREADS", "TPR", "ITEMS", "CLUSTER", "STAGE_KB"};

// An evenly spread sample of the covering builds of the main spec's structural knobs, plus every
// MIN_BLOCKS and cache-hint value (those only change the launch bounds and an opcode suffix),
// within about a minute on two cores. The full sweeps (455 structural builds, about 12 minutes;
// about 2,900 with every hint, over an hour) are too long for a test and are not run.
TEST(RmsNormFwdBuild, ASampleOfTheAdmittedKnobSpaceBuilds) {
  const auto spec = load_rms_spec();
  const auto& seed = spec.seeds.at(0);
  const auto all = covering_builds(seed, kStructuralKnobs);
  EXPECT_GE(all.size(), 100u);
  // Prime: the sample does not alias the knob lists' periods. 61 rather than 41 since the fourteenth
  // session (CI time; the explicit combinations above and the bounds and hints below are all built).
  constexpr std::size_t kStride = 61;
  std::vector<Knobs> sample;
  for (std::size_t i = 0; i < all.size(); i += kStride) sample.push_back(all[i]);
  for (const char* knob : {"MIN_BLOCKS", "LOAD_HINT", "STORE_HINT"})
    for (const auto& k : covering_builds(seed, {knob}))
      if (k.at(knob) != seed_default(seed, knob)) sample.push_back(k);
  const auto t0 = std::chrono::steady_clock::now();
  expect_all_build(spec, sample);
  std::printf("built %zu of %zu covering builds (+ bounds and hints) in %.0f s\n", sample.size(), all.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// The header of a known-bad kernel: "// expect: CODE[|CODE...]" and "// loophole: ...".
std::vector<std::string> expected_reasons(const std::string& source, std::string* error) {
  static const std::set<std::string> kCodes = {"unwritten-output",   "nonfinite-output", "tolerance",
                                               "trivial-output",     "nondeterministic", "input-mutated",
                                               "out-of-bounds-write", "persistent-global", "clock-read",
                                               "launch-resources",   "timed-output-mismatch", "heldout-shape",
                                               "out-of-bounds"};
  std::istringstream in(source);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  const std::string tag = "// expect: ";
  if (first.rfind(tag, 0) != 0) {
    *error = "first line is not '// expect: ...': " + first;
    return {};
  }
  if (second.rfind("// loophole: ", 0) != 0 || second.size() < 20) {
    *error = "second line does not name the loophole: " + second;
    return {};
  }
  std::vector<std::string> codes;
  std::string rest = first.substr(tag.size());
  std::size_t start = 0;
  while (true) {
    const std::size_t bar = rest.find('|', start);
    const std::string code = rest.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    if (!kCodes.count(code)) {
      *error = "unknown reason code '" + code + "'";
      return {};
    }
    codes.push_back(code);
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return codes;
}

TEST(RmsNormFwdBuild, KnownBadKernelsHaveHeadersAndBuild) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(kRmsDir + "/known_bad"))
    if (e.path().extension() == ".cu") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  EXPECT_GE(files.size(), 15u);
  std::set<std::string> codes_seen;
  for (const auto& f : files) {
    SCOPED_TRACE(f.filename().string());
    std::string err;
    const auto expanded = ptxevo::evaluator::read_template(f.string(), &err);
    ASSERT_TRUE(expanded) << err;
    const std::string& src = expanded->text;
    const auto codes = expected_reasons(src, &err);
    EXPECT_FALSE(codes.empty()) << err;
    codes_seen.insert(codes.begin(), codes.end());
    EXPECT_NE(src.find("extern \"C\" __global__"), std::string::npos);
    EXPECT_NE(src.find("const XT* __restrict__ x, const WT* __restrict__ w, const BT* __restrict__ b, const XT* "
                       "__restrict__ res,"),
              std::string::npos);
    const Built b = build(f.string(), "sm_90a", {}, {});
    // The seed's entries, so the seed's plans launch it.
    expect_entries(b.sass, {}, {}, f.filename().string());
    // The static cheats must be visible in the PTX; the others must not trip the static checks.
    const bool clock = std::find(codes.begin(), codes.end(), "clock-read") != codes.end();
    const bool global = std::find(codes.begin(), codes.end(), "persistent-global") != codes.end();
    const bool bounds = std::find(codes.begin(), codes.end(), "launch-resources") != codes.end();
    EXPECT_EQ(b.ptx.find("%globaltimer") != std::string::npos, clock);
    EXPECT_EQ(b.ptx.find("\n.global ") != std::string::npos, global);
    EXPECT_EQ(b.ptx.find(".maxntid 512, 1, 1") == std::string::npos, bounds);
    // And the gate's IR checks, with the seed's default plans (a multi-row and a cluster entry),
    // name exactly those rules.
    for (const Shape& s : {shape(64, 4096), shape(4, 262144)}) {
      std::set<std::string> rules;
      for (const auto& v : ir_violations(b.ptx, {}, s)) rules.insert(v.rule);
      std::set<std::string> want;
      for (const char* r : {"clock-read", "persistent-global", "launch-resources"})
        if (std::find(codes.begin(), codes.end(), r) != codes.end()) want.insert(r);
      EXPECT_EQ(rules, want);
    }
  }
  // Every gate reason that a device-code-only candidate can cause is exercised.
  for (const char* c : {"unwritten-output", "nonfinite-output", "tolerance", "nondeterministic", "input-mutated",
                        "out-of-bounds-write", "persistent-global", "clock-read", "launch-resources",
                        "timed-output-mismatch", "heldout-shape", "out-of-bounds"})
    EXPECT_TRUE(codes_seen.count(c)) << c;
}

}  // namespace
