// kda_fwd specs and seed builds: every kda_fwd*.spec loads with the shapes the op accepts; the
// seed template builds for sm_90a through the engine's Builder (NVRTC -> PTX IR -> nvJitLink) and
// through ptxas for its defaults under every option combination (gate x state presence), holds the
// inline PTX it promises, spills nothing, passes the gate's static IR checks for the plans of
// every spec shape; prepare_evaluation accepts it; and an evenly spread sample of the knob space
// the constraints admit builds within the campaign's spill screen.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "evaluator/builder.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/ir_checks.hpp"
#include "evaluator/knob_constraints.hpp"
#include "evaluator/ptxas.hpp"
#include "evaluator/spec.hpp"
#include "evaluator/template_source.hpp"
#include "ir/parser.hpp"
#include "kernels/builtin_ops.hpp"
#include "kernels/kda/kda_fwd_op.hpp"

namespace {

using ptxevo::evaluator::Knobs;
using ptxevo::evaluator::OpConfig;
using ptxevo::evaluator::Spec;
using ptxevo::kernels::KdaFwdOp;
using I = std::int64_t;

const std::string kKdaDir = std::string(PTXEVO_SOURCE_DIR) + "/kernels/kda";

// The seed as ptxevo reads it: kda_fwd_chunked.cu with its parts (chunked/, ../common/) expanded.
std::string read_template_text(const std::string& path) {
  std::string why;
  auto t = ptxevo::evaluator::read_template(path, &why);
  if (!t) throw std::runtime_error(why);
  return std::move(t->text);
}

Spec load(const std::string& file) {
  const auto registry = ptxevo::kernels::builtin_ops();
  auto r = ptxevo::evaluator::load_spec(kKdaDir + "/" + file, registry);
  if (!r.spec) throw std::runtime_error(r.error->format());
  return *r.spec;
}

std::string knobs_text(const Knobs& k) {
  std::string s;
  for (const auto& [n, v] : k) {
    const auto* str = std::get_if<std::string>(&v);
    s += (s.empty() ? "" : ",") + n + "=" + (str ? *str : std::to_string(std::get<I>(v)));
  }
  return s;
}

ptxevo::evaluator::BuildRequest request(const Spec& spec, const Knobs& knobs) {
  const auto& seed = spec.seeds.at(0);
  ptxevo::evaluator::BuildRequest r;
  r.name = knobs_text(knobs);
  r.source = read_template_text(seed.source_path);
  r.source_path = seed.source_path;
  r.defines = KdaFwdOp().template_defines(spec.config);
  r.knobs = ptxevo::evaluator::default_knobs(seed);
  for (const auto& [k, v] : knobs) r.knobs[k] = v;
  r.arch = spec.arch;
  return r;
}

const char* const kSpecs[] = {"kda_fwd.spec", "kda_fwd_softplus.spec", "kda_fwd_state_in.spec",
                              "kda_fwd_state_out.spec", "kda_fwd_no_state.spec"};

TEST(KdaFwdSpec, TheMainSpecHoldsTheSixScenarios) {
  const Spec spec = load("kda_fwd.spec");
  EXPECT_EQ(spec.op, "kda_fwd");
  EXPECT_EQ(spec.arch, "sm_90a");
  ASSERT_EQ(spec.benchmark_shapes.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) {
    const auto& s = spec.benchmark_shapes[i];
    EXPECT_EQ(s.at("B"), 1);
    EXPECT_EQ(s.at("T"), 8192);
    EXPECT_EQ(s.at("H"), i < 3 ? 96 : 64);
    EXPECT_EQ(s.at("N"), (std::vector<I>{1, 6, 8})[i % 3]);
  }
  // Correctness covers T in {1, 15, 16, 17, 63, 64, 65, 1000}, H in {1, 4}, batched rows and
  // every packed set but the held-out ones.
  std::set<I> ts, hs, packed;
  for (const auto& s : spec.correctness_shapes) {
    if (s.at("N") == s.at("B")) ts.insert(s.at("T"));
    else packed.insert(s.at("N"));
    hs.insert(s.at("H"));
  }
  for (I t : {1, 15, 16, 17, 63, 64, 65, 1000}) EXPECT_TRUE(ts.count(t)) << t;
  EXPECT_EQ(hs, (std::set<I>{1, 4}));
  EXPECT_EQ(packed, (std::set<I>{2, 3, 4, 5, 7}));
  for (const auto& s : spec.heldout_shapes) EXPECT_FALSE(packed.count(s.at("N")) && s.at("B") == 1);
  EXPECT_EQ(spec.config.at("gate"), "lower_bound");
}

TEST(KdaFwdSpec, EveryVariantLoadsAndCoversTheOptions) {
  std::set<std::string> combos;
  for (const char* file : kSpecs) {
    SCOPED_TRACE(file);
    const Spec spec = load(file);
    const auto c = KdaFwdOp::parse(spec.config);
    combos.insert(std::string(c.gate == ptxevo::kernels::KdaGate::Softplus ? "softplus" : "lower_bound") +
                  (c.initial_state ? "+in" : "") + (c.final_state ? "+out" : ""));
    EXPECT_GE(spec.correctness_shapes.size(), 15u);
    EXPECT_GE(spec.heldout_shapes.size(), 4u);
  }
  EXPECT_EQ(combos, (std::set<std::string>{"lower_bound+in+out", "softplus+in+out", "lower_bound+in",
                                           "softplus+out", "lower_bound"}));
}

// The gate's static checks on the PTX of a build, for the plans of every shape of `spec`.
void expect_ir_clean(const std::string& ptx, const Spec& spec, const Knobs& knobs) {
  const auto parsed = ptxevo::ir::parse_ptx(ptx);
  ASSERT_TRUE(parsed.ok()) << (parsed.error ? parsed.error->message : std::string("parse failed"));
  std::vector<ptxevo::evaluator::Shape> shapes = spec.benchmark_shapes;
  shapes.insert(shapes.end(), spec.correctness_shapes.begin(), spec.correctness_shapes.end());
  for (const auto& s : shapes)
    for (const auto& v : ptxevo::evaluator::check_ir(*parsed.module, KdaFwdOp().launch_plan(s, spec.config, knobs)))
      ADD_FAILURE() << ptxevo::evaluator::shape_to_string(s) << ": " << v.rule << ": " << v.message;
}

TEST(KdaFwdBuild, SeedBuildsForEveryOptionCombination) {
  const ptxevo::evaluator::Builder builder(nullptr);
  for (const char* file : kSpecs) {
    SCOPED_TRACE(file);
    const Spec spec = load(file);
    const auto r = builder.build(request(spec, {}));
    ASSERT_TRUE(r.ok) << r.stage << ": " << r.error;
    for (const char* ins : {"ld.global.nc.v2.u32", "ex2.approx.ftz.f32", "rsqrt.approx.ftz.f32", "shfl.sync.bfly.b32",
                            "cvt.rn.bf16x2.f32", ".maxntid 128"})
      EXPECT_NE(r.ptx.find(ins), std::string::npos) << ins << " missing";
    const auto c = KdaFwdOp::parse(spec.config);
    EXPECT_EQ(r.ptx.find("lg2.approx.ftz.f32") != std::string::npos, c.gate == ptxevo::kernels::KdaGate::Softplus);
    ASSERT_EQ(r.resources.size(), 1u);
    EXPECT_EQ(r.resources[0].name, KdaFwdOp::kEntry);
    EXPECT_EQ(r.resources[0].spill_stores, 0);
    EXPECT_LE(r.resources[0].registers, 168);  // 32 state rows; ptxas spends the rest on loads in flight
    expect_ir_clean(r.ptx, spec, {});
    // Plain ptxas agrees (the test of the printed PTX that the engine would hand to a user).
    const auto sass = ptxevo::evaluator::run_ptxas(r.ptx, spec.arch);
    EXPECT_TRUE(sass.ok) << sass.log;
  }
}

TEST(KdaFwdBuild, PrepareEvaluationAcceptsTheSeed) {
  const Spec spec = load("kda_fwd.spec");
  const auto registry = ptxevo::kernels::builtin_ops();
  const ptxevo::evaluator::Builder builder(nullptr);
  const auto p = ptxevo::evaluator::prepare_evaluation(spec, *registry.find(spec.op), builder, {}, {}, 1);
  ASSERT_TRUE(p.reasons.empty()) << p.reasons.front();
  EXPECT_TRUE(p.candidate.ok);
  EXPECT_EQ(p.shapes.size(), spec.benchmark_shapes.size() + spec.correctness_shapes.size() + spec.heldout_shapes.size());
}

// Every admitted assignment of the main spec, in a fixed order.
// Every admitted assignment of one seed's knobs, in the knobs' order (the last knob fastest).
// Depth first, each constraint checked as soon as the knobs it names are set: the chunked seed's
// full product is about eight million assignments (materialised, ~10 GB of maps), of which
// 178,926 are admitted.
std::vector<Knobs> admitted_for(const ptxevo::evaluator::SeedTemplate& seed) {
  const auto& knobs = seed.knobs;
  // A constraint names a knob when the knob's name appears in it as a whole identifier.
  auto names = [](const std::string& expr, const std::string& name) {
    auto ident = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_'; };
    for (std::size_t at = expr.find(name); at != std::string::npos; at = expr.find(name, at + 1))
      if ((at == 0 || !ident(expr[at - 1])) && (at + name.size() == expr.size() || !ident(expr[at + name.size()])))
        return true;
    return false;
  };
  std::vector<std::vector<const std::string*>> due(knobs.size());  // constraints decidable at depth d
  for (const auto& c : seed.constraints) {
    std::size_t last = 0;
    for (std::size_t d = 0; d < knobs.size(); ++d)
      if (names(c, knobs[d].name)) last = d;
    due[knobs.empty() ? 0 : last].push_back(&c);
  }
  std::vector<Knobs> out;
  Knobs k;
  std::function<void(std::size_t)> walk = [&](std::size_t d) {
    if (d == knobs.size()) {
      out.push_back(k);
      return;
    }
    for (const auto& v : knobs[d].values) {
      k[knobs[d].name] = v;
      bool ok = true;
      for (const std::string* c : due[d]) ok = ok && ptxevo::evaluator::constraint_holds(*c, k);
      if (ok) walk(d + 1);
    }
    k.erase(knobs[d].name);
  };
  walk(0);
  return out;
}

std::vector<Knobs> admitted(const Spec& spec) { return admitted_for(spec.seeds.at(0)); }

// The constraints admit exactly what the op's geometry() accepts.
TEST(KdaFwdBuild, ConstraintsAdmitOnlyValidPlans) {
  const Spec spec = load("kda_fwd.spec");
  const auto ok = admitted(spec);
  EXPECT_GT(ok.size(), 100u);
  EXPECT_LT(ok.size(), 500u);
  for (const auto& k : ok) EXPECT_NO_THROW(KdaFwdOp::geometry(k)) << knobs_text(k);
}

// An evenly spread sample (a prime stride) of the admitted space plus the extremes, built in
// parallel as the engine builds them: each links, stays within the campaign's spill screen and
// passes the static checks.
TEST(KdaFwdBuild, ASampleOfTheAdmittedKnobSpaceBuilds) {
  const Spec spec = load("kda_fwd.spec");
  const auto ok = admitted(spec);
  std::vector<Knobs> sample;
  for (std::size_t i = 0; i < ok.size(); i += 13) sample.push_back(ok[i]);
  sample.push_back({{"BV", I{128}}, {"KSPLIT", I{2}}, {"TB", I{16}}, {"MIN_BLOCKS", I{0}}});  // 64 state rows a thread
  sample.push_back({{"BV", I{16}}, {"KSPLIT", I{32}}, {"TB", I{1}}, {"MIN_BLOCKS", I{0}}});   // 4 state rows, 512 threads
  sample.push_back({{"BV", I{8}}, {"KSPLIT", I{4}}, {"TB", I{16}}, {"MIN_BLOCKS", I{4}}});    // one warp
  std::vector<ptxevo::evaluator::BuildRequest> reqs;
  for (const auto& k : sample) {
    for (const auto& c : spec.seeds.at(0).constraints)
      EXPECT_TRUE(ptxevo::evaluator::constraint_holds(c, k)) << knobs_text(k) << " violates " << c;
    reqs.push_back(request(spec, k));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = ptxevo::evaluator::Builder(nullptr).build_all(reqs);
  for (std::size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(reqs[i].name);
    ASSERT_TRUE(results[i].ok) << results[i].stage << ": " << results[i].error;
    // Within the campaign's static screen (search::CampaignOptions::max_spill_bytes, 256 B): a few
    // bytes of 64-bit indices spill where the launch bounds cap the registers; the state never.
    for (const auto& f : results[i].resources)
      EXPECT_LE(f.spill_stores, 256) << f.name << " uses " << f.registers << " registers";
    expect_ir_clean(results[i].ptx, spec, sample[i]);
  }
  std::printf("built %zu of %zu admitted assignments in %.0f s\n", sample.size(), ok.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

namespace {

// The chunked tensor-core seed (kda_fwd_chunked.cu): registered in kda_fwd.spec as a second seed;
// the other specs get it here, as the GPU test gives it to them.
const ptxevo::evaluator::SeedTemplate& chunked_seed(const Spec& main) {
  for (const auto& s : main.seeds)
    if (s.entry == KdaFwdOp::kChunkedEntry) return s;
  throw std::runtime_error("kda_fwd.spec has no seed with entry kda_fwd_chunked");
}

ptxevo::evaluator::BuildRequest chunked_request(const Spec& spec, const ptxevo::evaluator::SeedTemplate& seed,
                                                const Knobs& knobs) {
  ptxevo::evaluator::BuildRequest r;
  r.name = "chunked:" + knobs_text(knobs);
  r.source = read_template_text(seed.source_path);
  r.source_path = seed.source_path;
  r.defines = KdaFwdOp().template_defines(spec.config);
  r.knobs = ptxevo::evaluator::default_knobs(seed);
  for (const auto& [k, v] : knobs) r.knobs[k] = v;
  r.arch = spec.arch;
  return r;
}


TEST(KdaFwdChunkedBuild, TheMainSpecNamesTheChunkedSeed) {
  const Spec spec = load("kda_fwd.spec");
  ASSERT_EQ(spec.seeds.size(), 2u);
  EXPECT_EQ(spec.seeds[0].entry, KdaFwdOp::kEntry);  // the recurrent seed stays the baseline
  EXPECT_EQ(spec.baseline, spec.seeds[0].name);
  const auto& seed = chunked_seed(spec);
  EXPECT_EQ(std::filesystem::path(seed.source_path).filename(), "kda_fwd_chunked.cu");
  EXPECT_EQ(ptxevo::evaluator::default_knobs(seed), KdaFwdOp::chunked_knob_defaults());
  EXPECT_TRUE(KdaFwdOp::is_chunked(ptxevo::evaluator::default_knobs(seed)));
  EXPECT_FALSE(KdaFwdOp::is_chunked(ptxevo::evaluator::default_knobs(spec.seeds[0])));
  // Both sets of defaults the tests and bench scripts build name every knob of the seed and meet
  // its constraints (a knob left out takes the spec's default, which may not suit FUSED = 1).
  for (const Knobs& k : {KdaFwdOp::chunked_knob_defaults(), KdaFwdOp::chunked_fused_knob_defaults()}) {
    for (const auto& knob : seed.knobs) EXPECT_EQ(k.count(knob.name), 1u) << knob.name << " in " << knobs_text(k);
    for (const auto& c : seed.constraints) EXPECT_TRUE(ptxevo::evaluator::constraint_holds(c, k)) << c << ": " << knobs_text(k);
  }
}

// A spec written before eight knobs were renamed (kda_fwd.spec with the old names in its knob
// tables and constraints) loads as the current one; the template refuses an old name given as -D.
TEST(KdaFwdChunkedBuild, OldKnobNamesAreAliasesAndTheTemplateRefusesThem) {
  std::string text;
  {
    std::ifstream in(kKdaDir + "/kda_fwd.spec");
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const auto word = [&](std::size_t i) {
    return i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_');
  };
  for (const auto& [old_name, name] : KdaFwdOp::knob_renames()) {
    std::string out;
    std::size_t at = 0;
    for (std::size_t hit = text.find(name); hit != std::string::npos; hit = text.find(name, at)) {
      const bool whole = (hit == 0 || !word(hit - 1)) && !word(hit + name.size());
      out += text.substr(at, hit - at) + (whole ? old_name : name);
      at = hit + name.size();
    }
    text = out + text.substr(at);
  }
  ASSERT_NE(text.find("LMTC = { values"), std::string::npos);
  ASSERT_NE(text.find("\"PGRID == 0 || (FUSED == 0 && BULK == 1)\""), std::string::npos);
  // The old spec beside the templates, which it names relative to its own folder.
  const auto dir = std::filesystem::temp_directory_path() / ("ptxevo-kda-old-names-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* src : {"kda_fwd.cu", "kda_fwd_chunked.cu"}) {
    const std::string from = "source = \"" + std::string(src) + "\"";
    text.replace(text.find(from), from.size(), "source = \"" + kKdaDir + "/" + src + "\"");
  }
  std::ofstream(dir / "kda_fwd.spec") << text;
  const auto registry = ptxevo::kernels::builtin_ops();
  const auto old = ptxevo::evaluator::load_spec((dir / "kda_fwd.spec").string(), registry);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(old.spec) << old.error->format();
  const Spec current = load("kda_fwd.spec");
  ASSERT_EQ(old.spec->seeds.size(), current.seeds.size());
  for (std::size_t i = 0; i < current.seeds.size(); ++i) {
    const auto &a = old.spec->seeds[i], &b = current.seeds[i];
    EXPECT_EQ(a.constraints, b.constraints);
    ASSERT_EQ(a.knobs.size(), b.knobs.size());
    for (std::size_t j = 0; j < b.knobs.size(); ++j) {
      EXPECT_EQ(a.knobs[j].name, b.knobs[j].name);
      EXPECT_EQ(a.knobs[j].values, b.knobs[j].values) << b.knobs[j].name;
      EXPECT_EQ(a.knobs[j].default_value, b.knobs[j].default_value) << b.knobs[j].name;
    }
  }
  // An old -D beside the current knobs: an #error naming both names, not a silent default.
  const auto& seed = chunked_seed(current);
  for (const auto& [old_name, name] : KdaFwdOp::knob_renames()) {
    const auto r = ptxevo::evaluator::Builder(nullptr).build(chunked_request(current, seed, {{old_name, I{0}}}));
    EXPECT_FALSE(r.ok) << old_name;
    EXPECT_NE(r.error.find("knob " + old_name + " was renamed " + name), std::string::npos) << r.error;
  }
}

// The defaults under every option combination (gate x state presence): the Builder links them,
// the PTX holds the tensor-core and conversion instructions the design rests on, nothing spills,
// the gate's static checks pass for every shape's plan, and plain ptxas agrees.
TEST(KdaFwdChunkedBuild, SeedBuildsForEveryOptionCombination) {
  const Spec main = load("kda_fwd.spec");
  const auto& seed = chunked_seed(main);
  const ptxevo::evaluator::Builder builder(nullptr);
  for (const char* file : kSpecs) {
    SCOPED_TRACE(file);
    const Spec spec = load(file);
    // The spec's defaults (the prepare + recurrence pair) and the fused kernel's.
    for (const bool fused : {false, true}) {
      SCOPED_TRACE(fused ? "FUSED=1" : "FUSED=0");
      const Knobs knobs = fused ? KdaFwdOp::chunked_fused_knob_defaults() : KdaFwdOp::chunked_knob_defaults();
      const auto r = builder.build(chunked_request(spec, seed, fused ? knobs : Knobs{}));
      ASSERT_TRUE(r.ok) << r.stage << ": " << r.error;
      for (const char* ins : {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "ld.global.nc.u16",
                              "ex2.approx.ftz.f32", "rsqrt.approx.ftz.f32", "cvt.rn.bf16.f32", "cvt.rn.bf16x2.f32",
                              "%dynamic_smem_size", "cp.async.cg.shared.global", ".maxntid 128"})
        EXPECT_NE(r.ptx.find(ins), std::string::npos) << ins << " missing";
      const auto c = KdaFwdOp::parse(spec.config);
      EXPECT_EQ(r.ptx.find("lg2.approx.ftz.f32") != std::string::npos, c.gate == ptxevo::kernels::KdaGate::Softplus);
      if (fused) {
        ASSERT_EQ(r.resources.size(), 1u);
        EXPECT_EQ(r.resources[0].name, KdaFwdOp::kChunkedEntry);
        // Three 128-thread CTAs a SM (what the shared memory allows, KdaFwdChunked.ChunkedLaunchPlan):
        // 65536 / 384 registers a thread, rounded down to ptxas's multiple of 8. The six scenarios'
        // 384 CTAs (H = 96, BV = 32) then fit the 132 SMs of an H200 in one wave.
        EXPECT_LE(r.resources[0].registers, 168);
      } else {
        // The prepare, the recurrence and (SEQSPLIT 16) the sequence split's combine.
        ASSERT_EQ(r.resources.size(), 3u);
        std::set<std::string> names;
        for (const auto& f : r.resources) names.insert(f.name);
        EXPECT_EQ(names, (std::set<std::string>{KdaFwdOp::kPrepareEntry, KdaFwdOp::kRecurrenceEntry,
                                                KdaFwdOp::kSegCombineEntry}));
        // The recurrence at BV = 64: 128 threads, two CTAs a SM (shared memory) need <= 255.
        for (const auto& f : r.resources) EXPECT_LE(f.registers, 255) << f.name;
      }
      for (const auto& f : r.resources) {
        EXPECT_EQ(f.spill_stores, 0) << f.name;
        EXPECT_EQ(f.spill_loads, 0) << f.name;
        std::printf("%s %s: %s uses %d registers\n", file, fused ? "fused defaults" : "defaults", f.name.c_str(),
                    f.registers);
      }
      expect_ir_clean(r.ptx, spec, knobs);
      const auto sass = ptxevo::evaluator::run_ptxas(r.ptx, spec.arch);
      EXPECT_TRUE(sass.ok) << sass.log;
    }
  }
}

// Every assignment the chunked seed's constraints admit is one the op accepts; a covering set of
// the admitted fused ones (46) builds without spilling, and so does a covering set of the FUSED = 0 ones
// (KdaFwdOp::split_covering_knobs): the prepare depends on CHUNK, WARPS, LM_TENSOR_CORES, U0_BITS
// and WY_TENSOR_CORES only, the recurrence on CHUNK, BV, STAGE, U0_BITS, KSPLIT and
// PREFETCH_CHUNKS, so 24 assignments cover every (CHUNK, WARPS, LM_TENSOR_CORES, U0_BITS), every
// (CHUNK, WY_TENSOR_CORES, U0_BITS), every (CHUNK, BV, staged or not) and every value of STAGE,
// KSPLIT and PREFETCH_CHUNKS.
TEST(KdaFwdChunkedBuild, EveryAdmittedKnobAssignmentBuilds) {
  const Spec spec = load("kda_fwd.spec");
  const auto& seed = chunked_seed(spec);
  const auto admitted = admitted_for(seed);
  // 46 fused; FUSED = 0 with BULK 0 and 1 each: 11,408 with MMA = sync (CHUNK x BV x WARPS x
  // STAGE 0-3 x LM_TENSOR_CORES x U0_BITS x KSPLIT x PREFETCH_CHUNKS x WY_TENSOR_CORES x
  // STATE_HI_LO less what BV * KSPLIT <= 256, PREFETCH_CHUNKS at CHUNK 64 and the recurrence's
  // shared memory exclude), 1,096 with MMA = wgmma (BV 64 / 128, KSPLIT 1, STATE_HI_LO 0); with
  // BULK 1 each at PREPARE_CTAS 0, 396 and 528; all of them at U_HI_LO 0 and 1; LMTERMS 3, and
  // where CHUNK is 16, LM_TENSOR_CORES 1 and MMA sync (2,816 of the sync ones) also 1 and 2; and
  // WY_IN_RECURRENCE 1 (MMA sync, KSPLIT 1, WY_TENSOR_CORES 0, U0_BITS 16: 1,088, of which 256 at
  // CHUNK 16 and LM_TENSOR_CORES 1 take LMTERMS 1 and 2 too) and WY_IN_RECURRENCE 2 (the same at
  // CHUNK 16: 512, 256 of them LM_TENSOR_CORES 1). The WY_IN_RECURRENCE 1 ones at PREPARE_CTAS 0
  // (BULK 0 and 1, U_HI_LO 0 and 1) also at SEQSPLIT 4 and 16.
  EXPECT_EQ(admitted.size(),
            46u + 2u * (1u + 3u) * ((11408u + 2u * 2816u) + 1096u + (1088u + 2u * 256u) + (512u + 2u * 256u)) +
                2u * 2u * 2u * (1088u + 2u * 256u));
  std::vector<Knobs> ok;
  std::set<std::string> prep_cover, rec_cover, ks_cover, stage_cover, prefetch_cover, wy_cover, state_hi_lo_cover,
      u_hi_lo_cover, lmt_cover;
  // The fused kernel (not the default) on a covering set too, to keep CI's time: every (CHUNK,
  // BV) (its layout and registers), every WARPS, STAGE and LM_TENSOR_CORES, picked greedily in
  // admitted order.
  std::set<std::string> fused_cover;
  std::size_t fused_admitted = 0;
  for (const auto& k : admitted) {
    EXPECT_NO_THROW(KdaFwdOp::chunked_geometry(k)) << knobs_text(k);
    if (!KdaFwdOp::chunked_geometry(k).fused) continue;
    ++fused_admitted;
    auto v = [&](const char* n) { return std::to_string(std::get<I>(k.at(n))); };
    bool adds = false;
    for (const std::string& key :
         {"bv" + v("CHUNK") + "/" + v("BV"), "w" + v("WARPS"), "s" + v("STAGE"), "l" + v("LM_TENSOR_CORES")})
      adds |= fused_cover.insert(key).second;
    if (adds) ok.push_back(k);
  }
  EXPECT_EQ(fused_admitted, 46u);
  const std::size_t fused_built = ok.size();
  std::printf("fused: %zu of %zu admitted assignments cover every (CHUNK, BV), WARPS, STAGE and LM_TENSOR_CORES\n",
              fused_built, fused_admitted);
  std::set<std::string> wg_cover, wy_in_recurrence_cover, seqsplit_cover;
  int overlapped = 0;
  for (const Knobs& k : KdaFwdOp::split_covering_knobs()) {
    EXPECT_NE(std::find(admitted.begin(), admitted.end(), k), admitted.end()) << knobs_text(k);
    ok.push_back(k);
    auto v = [&](const char* n) { return std::to_string(std::get<I>(k.at(n))); };
    if (KdaFwdOp::chunked_geometry(k).wgmma) {  // the wgmma recurrence: one a CHUNK
      wg_cover.insert(v("CHUNK"));
      continue;
    }
    if (KdaFwdOp::chunked_geometry(k).seqsplit > 1) {  // the sequence split: CHUNK 16 and 32
      seqsplit_cover.insert(v("CHUNK") + "/" + v("SEQSPLIT"));
      continue;
    }
    if (KdaFwdOp::chunked_geometry(k).prepare_ctas > 0) {  // the persistent prepare + flags: once
      ++overlapped;
      continue;
    }
    // U = T' (V - Kd S) in the recurrence: one a CHUNK, + WY_IN_RECURRENCE 2.
    if (KdaFwdOp::chunked_geometry(k).wy_in_recurrence > 0) {
      wy_in_recurrence_cover.insert(v("CHUNK"));
      continue;
    }
    prep_cover.insert(v("CHUNK") + "/" + v("WARPS") + "/" + v("LM_TENSOR_CORES") + "/" + v("U0_BITS") + "/" +
                      v("WY_TENSOR_CORES"));
    wy_cover.insert(v("CHUNK") + "/" + v("WY_TENSOR_CORES") + "/" + v("U0_BITS"));
    state_hi_lo_cover.insert(v("CHUNK") + "/" + v("STATE_HI_LO") + "/" +
                             (std::get<I>(k.at("STAGE")) > 0 ? "staged" : "0"));
    u_hi_lo_cover.insert(v("CHUNK") + "/" + v("U_HI_LO"));
    if (v("CHUNK") == "16" && v("LM_TENSOR_CORES") == "1") lmt_cover.insert(v("LMTERMS"));
    rec_cover.insert(v("CHUNK") + "/" + v("BV") + "/" + (std::get<I>(k.at("STAGE")) > 0 ? "staged" : "0"));
    ks_cover.insert(v("KSPLIT"));
    stage_cover.insert(v("STAGE"));
    prefetch_cover.insert(v("PREFETCH_CHUNKS"));
  }
  EXPECT_EQ(prep_cover.size(), 24u);
  EXPECT_EQ(rec_cover.size(), 24u);
  EXPECT_EQ(ks_cover.size(), 3u);
  EXPECT_EQ(stage_cover.size(), 4u);
  EXPECT_EQ(prefetch_cover.size(), 4u);
  EXPECT_EQ(wy_cover.size(), 12u);           // both WY forms at every CHUNK with either U0 precision
  EXPECT_EQ(state_hi_lo_cover.size(), 12u);  // both S^T forms at every CHUNK, staged or not
  EXPECT_EQ(u_hi_lo_cover.size(), 6u);       // both U^T forms at every CHUNK
  EXPECT_EQ(lmt_cover.size(), 3u);           // the one-pass prepare's L / M products at 1, 2 and 3 terms
  EXPECT_EQ(wg_cover.size(), 3u);
  EXPECT_EQ(overlapped, 1);
  EXPECT_EQ(wy_in_recurrence_cover.size(), 3u);
  EXPECT_EQ(seqsplit_cover.size(), 2u);
  EXPECT_EQ(ok.size(), fused_built + 24u + 3u + 1u + 4u + 1u);
  std::vector<ptxevo::evaluator::BuildRequest> reqs;
  for (const auto& k : ok) reqs.push_back(chunked_request(spec, seed, k));
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = ptxevo::evaluator::Builder(nullptr).build_all(reqs);
  for (std::size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(reqs[i].name);
    ASSERT_TRUE(results[i].ok) << results[i].stage << ": " << results[i].error;
    for (const auto& f : results[i].resources) {
      EXPECT_EQ(f.spill_stores, 0) << f.name << " uses " << f.registers << " registers";
      std::printf("%s: %d registers, %d spill bytes\n", reqs[i].name.c_str(), f.registers, f.spill_stores);
    }
    expect_ir_clean(results[i].ptx, spec, ok[i]);
  }
  std::printf("built %zu chunked assignments in %.0f s\n", ok.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// sm_100a (Blackwell): the same template (mma.sync and cp.async exist there; the tcgen05 variant,
// kda_fwd_chunked_tcgen05.cu, is KdaFwdTcgen05Build below)
// compiles through the Builder and ptxas at the defaults under every option combination and at
// the largest admitted tiles. Compile-only: it has never run on an sm_100a device.
TEST(KdaFwdChunkedBuild, CompilesForSm100a) {
  const Spec main = load("kda_fwd.spec");
  const auto& seed = chunked_seed(main);
  std::vector<ptxevo::evaluator::BuildRequest> reqs;
  for (const char* file : kSpecs) {
    Spec spec = load(file);
    spec.arch = "sm_100a";
    reqs.push_back(chunked_request(spec, seed, {}));
    reqs.back().name = std::string(file) + " sm_100a";
  }
  Spec spec = main;
  spec.arch = "sm_100a";
  // The defaults above are the prepare + recurrence pair; the fused kernel at its defaults and its
  // largest tiles, and the pair at its largest recurrence layout.
  reqs.push_back(chunked_request(spec, seed, KdaFwdOp::chunked_fused_knob_defaults()));
  reqs.push_back(chunked_request(spec, seed,
                                 {{"FUSED", I{1}},
                                  {"U0_BITS", I{32}},
                                  {"CHUNK", I{32}},
                                  {"BV", I{128}},
                                  {"WARPS", I{8}},
                                  {"STAGE", I{1}},
                                  {"LM_TENSOR_CORES", I{0}},
                                  {"WY_IN_RECURRENCE", I{0}},
                                  {"SEQSPLIT", I{1}}}));
  reqs.push_back(chunked_request(spec, seed,
                                 {{"FUSED", I{1}},
                                  {"U0_BITS", I{32}},
                                  {"CHUNK", I{64}},
                                  {"BV", I{32}},
                                  {"WARPS", I{4}},
                                  {"STAGE", I{0}},
                                  {"LM_TENSOR_CORES", I{0}},
                                  {"WY_IN_RECURRENCE", I{0}},
                                  {"SEQSPLIT", I{1}}}));
  reqs.push_back(chunked_request(spec, seed,
                                 {{"CHUNK", I{64}},
                                  {"BV", I{128}},
                                  {"U0_BITS", I{32}},
                                  {"STAGE", I{1}},
                                  {"WY_IN_RECURRENCE", I{0}},
                                  {"SEQSPLIT", I{1}}}));
  const auto results = ptxevo::evaluator::Builder(nullptr).build_all(reqs);
  for (std::size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(reqs[i].name);
    ASSERT_TRUE(results[i].ok) << results[i].stage << ": " << results[i].error;
    EXPECT_NE(results[i].ptx.find(".target sm_100a"), std::string::npos);
    EXPECT_NE(results[i].ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos);
    ASSERT_FALSE(results[i].resources.empty());
    for (const auto& f : results[i].resources) EXPECT_EQ(f.spill_stores, 0) << f.name;
    const auto sass = ptxevo::evaluator::run_ptxas(results[i].ptx, "sm_100a");
    EXPECT_TRUE(sass.ok) << sass.log;
  }
}

}  // namespace

namespace {

// The tcgen05 variant (kda_fwd_chunked_tcgen05.cu), the third seed of kda_fwd_sm100a.spec: the
// chunk's state GEMMs (Kd S, Qd S, M U, Kr^T U) on tcgen05.mma with tensor-memory accumulators.
// COMPILE-ONLY: these tests build it (NVRTC for sm_100a, nvJitLink's ptxas, plain ptxas); it has
// never run on a GPU.
const ptxevo::evaluator::SeedTemplate& tcgen05_seed(const Spec& spec) {
  for (const auto& s : spec.seeds)
    if (s.entry == KdaFwdOp::kChunkedTcgen05Entry) return s;
  throw std::runtime_error(spec.path + " has no seed with entry kda_fwd_chunked_tcgen05");
}

TEST(KdaFwdTcgen05Build, TheSm100aSpecNamesTheTcgen05Seed) {
  const Spec spec = load("kda_fwd_sm100a.spec");
  EXPECT_EQ(spec.arch, "sm_100a");
  ASSERT_EQ(spec.seeds.size(), 3u);
  EXPECT_EQ(spec.baseline, spec.seeds[0].name);
  EXPECT_EQ(spec.seeds[1].entry, KdaFwdOp::kChunkedEntry);
  const auto& seed = tcgen05_seed(spec);
  EXPECT_EQ(std::filesystem::path(seed.source_path).filename(), "kda_fwd_chunked_tcgen05.cu");
  const Knobs defaults = ptxevo::evaluator::default_knobs(seed);
  EXPECT_EQ(defaults, KdaFwdOp::chunked_tcgen05_knob_defaults());
  EXPECT_TRUE(KdaFwdOp::is_chunked(defaults));
  EXPECT_TRUE(KdaFwdOp::chunked_geometry(defaults).tcgen05);
  // The same shapes and options as the main spec; no sm_90a spec names the tcgen05 entry.
  const Spec main = load("kda_fwd.spec");
  EXPECT_EQ(spec.benchmark_shapes, main.benchmark_shapes);
  EXPECT_EQ(spec.correctness_shapes, main.correctness_shapes);
  EXPECT_EQ(spec.config, main.config);
  for (const char* file : kSpecs)
    for (const auto& s : load(file).seeds) EXPECT_NE(s.entry, KdaFwdOp::kChunkedTcgen05Entry) << file;
  // The plan launches the tcgen05 entry with its own shared-memory layout.
  const auto plan = KdaFwdOp().launch_plan(spec.benchmark_shapes[0], spec.config, defaults);
  ASSERT_EQ(plan.kernels.size(), 1u);
  EXPECT_EQ(plan.kernels[0].entry, KdaFwdOp::kChunkedTcgen05Entry);
  EXPECT_EQ(plan.kernels[0].shared_bytes, KdaFwdOp::chunked_smem_bytes(KdaFwdOp::chunked_geometry(defaults)));
  EXPECT_EQ(plan.kernels[0].block.x, 128u);
  EXPECT_EQ(plan.kernels[0].grid.z, 128u / 32u);
  // MMA takes sync (the mma.sync kernel), wgmma (the split's recurrence only, sm_90a) or tcgen05.
  Knobs k = defaults;
  k["MMA"] = std::string("sync");
  EXPECT_FALSE(KdaFwdOp::chunked_geometry(k).tcgen05);
  EXPECT_EQ(KdaFwdOp().launch_plan(spec.benchmark_shapes[0], spec.config, k).kernels[0].entry,
            std::string(KdaFwdOp::kChunkedEntry));
  for (const char* mma : {"wmma", "wgmma"}) {
    k["MMA"] = std::string(mma);
    try {
      KdaFwdOp::chunked_geometry(k);
      ADD_FAILURE() << "MMA=" << mma << " accepted for the fused kernel";
    } catch (const std::invalid_argument& e) {
      const std::string why = std::string(mma) == "wmma" ? "MMA=wmma must be sync" : "MMA=wgmma needs FUSED=0";
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  // The constraints admit exactly what the op accepts (every admitted layout fits 227 KB).
  const auto ok = admitted_for(seed);
  EXPECT_GE(ok.size(), 50u);
  for (const auto& a : ok) EXPECT_NO_THROW(KdaFwdOp::chunked_geometry(a)) << knobs_text(a);
  Knobs big = defaults;
  big["CHUNK"] = I{64};
  big["STAGE"] = I{1};
  big["LM_TENSOR_CORES"] = I{0};
  EXPECT_THROW(KdaFwdOp::chunked_geometry(big), std::invalid_argument);
}

// A covering set of the tcgen05 seed's admitted assignments builds for sm_100a through the Builder (NVRTC ->
// PTX IR -> nvJitLink, whose ptxas must accept it) without spilling, holds the tcgen05 life cycle
// (alloc, mma, commit to an mbarrier, ld, dealloc) and passes the gate's static checks for every
// shape's plan; plain ptxas agrees on a spread of them. Compile-only: never run on a GPU.
TEST(KdaFwdTcgen05Build, CompilesAndPassesPtxasForSm100a) {
  const Spec spec = load("kda_fwd_sm100a.spec");
  const auto& seed = tcgen05_seed(spec);
  const auto admitted = admitted_for(seed);
  EXPECT_EQ(admitted.size(), 56u);
  // A covering set, to keep CI's time (each build is a serial NVRTC + ptxas run): every (CHUNK,
  // BV), (CHUNK, WARPS) and (CHUNK, STAGE) and both LM_TENSOR_CORES, picked greedily in admitted
  // order; the layout's extremes (the smallest and largest shared memory) are among them.
  std::vector<Knobs> ok;
  std::set<std::string> cover;
  for (const auto& k : admitted) {
    auto v = [&](const char* n) { return std::to_string(std::get<I>(k.at(n))); };
    bool adds = false;
    for (const std::string& key : {"bv" + v("CHUNK") + "/" + v("BV"), "w" + v("CHUNK") + "/" + v("WARPS"),
                                   "s" + v("CHUNK") + "/" + v("STAGE"), "l" + v("LM_TENSOR_CORES")})
      adds |= cover.insert(key).second;
    if (adds) ok.push_back(k);
  }
  auto smem = [](const Knobs& k) { return KdaFwdOp::chunked_smem_bytes(KdaFwdOp::chunked_geometry(k)); };
  auto by_smem = [&](const Knobs& a, const Knobs& b) { return smem(a) < smem(b); };
  EXPECT_EQ(smem(*std::min_element(ok.begin(), ok.end(), by_smem)),
            smem(*std::min_element(admitted.begin(), admitted.end(), by_smem)));
  EXPECT_EQ(smem(*std::max_element(ok.begin(), ok.end(), by_smem)),
            smem(*std::max_element(admitted.begin(), admitted.end(), by_smem)));
  std::printf("tcgen05: %zu of %zu admitted assignments cover every (CHUNK, BV / WARPS / STAGE) and LM_TENSOR_CORES\n",
              ok.size(), admitted.size());
  std::vector<ptxevo::evaluator::BuildRequest> reqs;
  for (const auto& k : ok) {
    reqs.push_back(chunked_request(spec, seed, k));
    reqs.back().name = "tcgen05:" + knobs_text(k);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = ptxevo::evaluator::Builder(nullptr).build_all(reqs);
  for (std::size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(reqs[i].name);
    ASSERT_TRUE(results[i].ok) << results[i].stage << ": " << results[i].error;
    const std::string& ptx = results[i].ptx;
    for (const char* ins : {".target sm_100a", "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
                            "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned",
                            "tcgen05.mma.cta_group::1.kind::f16",
                            "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
                            "mbarrier.try_wait.parity.shared::cta.b64", "tcgen05.ld.sync.aligned.32x32b.x16.b32",
                            "tcgen05.wait::ld.sync.aligned", "tcgen05.st.sync.aligned.32x32b.x16.b32",
                            "tcgen05.wait::st.sync.aligned", "tcgen05.fence::before_thread_sync",
                            "tcgen05.fence::after_thread_sync", "fence.proxy.async.shared::cta",
                            "tcgen05.dealloc.cta_group::1.sync.aligned.b32"})
      EXPECT_NE(ptx.find(ins), std::string::npos) << ins << " missing";
    ASSERT_EQ(results[i].resources.size(), 1u);
    const auto& f = results[i].resources[0];
    EXPECT_EQ(f.name, KdaFwdOp::kChunkedTcgen05Entry);
    EXPECT_EQ(f.spill_stores, 0) << f.registers << " registers";
    EXPECT_EQ(f.spill_loads, 0);
    std::printf("%s: %d registers, %d spill bytes, %lld bytes of shared memory\n", reqs[i].name.c_str(), f.registers,
                f.spill_stores, static_cast<long long>(KdaFwdOp::chunked_smem_bytes(KdaFwdOp::chunked_geometry(ok[i]))));
    expect_ir_clean(ptx, spec, ok[i]);
    if (i % 4 == 0 || i + 1 == results.size()) {
      const auto sass = ptxevo::evaluator::run_ptxas(ptx, "sm_100a");
      EXPECT_TRUE(sass.ok) << sass.log;
    }
  }
  std::printf("built %zu tcgen05 assignments for sm_100a in %.0f s (compile-only: never run)\n", ok.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// The defaults under every option combination (gate x state presence) for sm_100a.
TEST(KdaFwdTcgen05Build, EveryOptionCombinationCompilesForSm100a) {
  const Spec main = load("kda_fwd_sm100a.spec");
  const auto& seed = tcgen05_seed(main);
  std::vector<ptxevo::evaluator::BuildRequest> reqs;
  std::vector<Spec> specs;
  for (const char* file : kSpecs) {
    specs.push_back(load(file));
    specs.back().arch = "sm_100a";
    reqs.push_back(chunked_request(specs.back(), seed, {}));
    reqs.back().name = std::string(file) + " tcgen05 sm_100a";
  }
  const auto results = ptxevo::evaluator::Builder(nullptr).build_all(reqs);
  for (std::size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(reqs[i].name);
    ASSERT_TRUE(results[i].ok) << results[i].stage << ": " << results[i].error;
    EXPECT_NE(results[i].ptx.find("tcgen05.mma.cta_group::1.kind::f16"), std::string::npos);
    const auto c = KdaFwdOp::parse(specs[i].config);
    EXPECT_EQ(results[i].ptx.find("lg2.approx.ftz.f32") != std::string::npos, c.gate == ptxevo::kernels::KdaGate::Softplus);
    ASSERT_EQ(results[i].resources.size(), 1u);
    EXPECT_EQ(results[i].resources[0].spill_stores, 0);
    expect_ir_clean(results[i].ptx, specs[i], KdaFwdOp::chunked_tcgen05_knob_defaults());
    const auto sass = ptxevo::evaluator::run_ptxas(results[i].ptx, "sm_100a");
    EXPECT_TRUE(sass.ok) << sass.log;
  }
}

// Asking for MMA=tcgen05 on sm_90a fails the build with a message naming the knob and both
// arches (launch plans do not see the arch, so the source refuses); so does MMA=sync in this
// source, which implements only tcgen05.
TEST(KdaFwdTcgen05Build, RefusesSm90aNamingTheKnobAndTheArch) {
  Spec spec = load("kda_fwd_sm100a.spec");
  const auto& seed = tcgen05_seed(spec);
  spec.arch = "sm_90a";
  const ptxevo::evaluator::Builder builder(nullptr);
  const auto r = builder.build(chunked_request(spec, seed, {}));
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.stage, "nvrtc");
  for (const char* part : {"knob MMA=tcgen05", "needs arch sm_100a", "targets sm_90a", "MMA=sync"})
    EXPECT_NE(r.error.find(part), std::string::npos) << part << " missing from: " << r.error;
  spec.arch = "sm_100a";
  const auto s = builder.build(chunked_request(spec, seed, {{"MMA", std::string("sync")}}));
  ASSERT_FALSE(s.ok);
  EXPECT_NE(s.error.find("implements only knob MMA=tcgen05"), std::string::npos) << s.error;
}

}  // namespace
