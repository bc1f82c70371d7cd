// kda_bwd: the op's contract (tensors per option, knobs, the three-kernel plan, the reference's
// outputs), the spec, and the seed's builds for sm_90a through the engine's Builder (NVRTC -> PTX
// IR -> nvJitLink) and ptxas under every option combination and covering knob assignment, with the
// gate's static IR checks on every spec shape's plan.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "evaluator/builder.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/gpu_evaluation.hpp"
#include "evaluator/ir_checks.hpp"
#include "evaluator/ptxas.hpp"
#include "evaluator/spec.hpp"
#include "evaluator/template_source.hpp"
#include "ir/parser.hpp"
#include "kernels/builtin_ops.hpp"
#include "kernels/kda/kda_bwd_op.hpp"
#include "kernels/tests/ptx_entry_params.hpp"

namespace {

using ptxevo::evaluator::Knobs;
using ptxevo::evaluator::OpConfig;
using ptxevo::evaluator::Shape;
using ptxevo::evaluator::Spec;
using ptxevo::kernels::KdaBwdOp;
using I = std::int64_t;

const std::string kKdaDir = std::string(PTXEVO_SOURCE_DIR) + "/kernels/kda";

Shape shape(I b, I t, I h, I n) { return {{"B", b}, {"T", t}, {"H", h}, {"N", n}}; }

OpConfig options(const char* gate, bool initial, bool final) {
  return {{"gate", gate}, {"initial_state", initial ? "true" : "false"}, {"final_state", final ? "true" : "false"}};
}

std::vector<std::string> names_of(const std::vector<ptxevo::evaluator::TensorDesc>& ts, ptxevo::evaluator::Role role) {
  std::vector<std::string> out;
  for (const auto& t : ts)
    if (t.role == role) out.push_back(t.name);
  return out;
}

TEST(KdaBwdOp, TensorsFollowTheOptions) {
  const KdaBwdOp op;
  using ptxevo::evaluator::Role;
  const auto all = op.tensors(shape(1, 115, 4, 3), options("lower_bound", true, true));
  EXPECT_EQ(names_of(all, Role::In), (std::vector<std::string>{"q", "k", "v", "g", "beta", "A_log", "dt_bias", "cu_seqlens",
                                                               "initial_state", "d_out", "d_final_state"}));
  EXPECT_EQ(names_of(all, Role::Out), (std::vector<std::string>{"dq", "dk", "dv", "dg", "dbeta", "dA_log", "ddt_bias",
                                                                "d_initial_state"}));
  EXPECT_EQ(all.back().name, "workspace");
  EXPECT_EQ(all.back().shape, (std::vector<I>{KdaBwdOp::workspace_words(ptxevo::kernels::kda_dims(shape(1, 115, 4, 3)))}));
  // The larger of the recurrent seed's layout (8 slices' shares and PREP's records) and the chunked
  // seed's at CHUNK 64, BV 16 (8 slices' shares of 3 x 128 + 2 x 64 + 1 words).
  const auto d = ptxevo::kernels::kda_dims(shape(1, 115, 4, 3));
  const I recurrent = 4 * (115 / 32 + 3) * 128 * 128 + 8 * 115 * 4 * (3 * 128 + 1) + 4 * 4 * 129 + 115 * 4 * (3 * 128 + 1);
  EXPECT_EQ(KdaBwdOp::layout_words(d, 8) + KdaBwdOp::prep_words(d), recurrent);
  EXPECT_EQ(KdaBwdOp::workspace_words(d), std::max(recurrent, KdaBwdOp::chunked_layout(d, 64, 16).words));
  const auto none = op.tensors(shape(2, 17, 1, 2), options("softplus", false, false));
  EXPECT_EQ(names_of(none, Role::In), (std::vector<std::string>{"q", "k", "v", "g", "beta", "A_log", "dt_bias", "d_out"}));
  EXPECT_EQ(names_of(none, Role::Out),
            (std::vector<std::string>{"dq", "dk", "dv", "dg", "dbeta", "dA_log", "ddt_bias"}));
  for (const auto& o : KdaBwdOp::outputs(KdaBwdOp::Config{})) EXPECT_NO_THROW(op.tolerance(o, {}));
  EXPECT_THROW(op.tolerance("out", {}), std::invalid_argument);
}

// One build's tensors carry the workspace its plan uses; a batch's the largest of its builds'.
TEST(KdaBwdOp, BuildTensorsSizeTheWorkspaceForTheKnobs) {
  const KdaBwdOp op;
  const auto cfg = options("lower_bound", true, true);
  const auto s = shape(1, 8192, 96, 1);
  const auto d = ptxevo::kernels::kda_dims(s);
  const auto words = [](const std::vector<ptxevo::evaluator::TensorDesc>& ts) { return ts.back().shape.at(0); };
  const ptxevo::evaluator::Knobs recurrent = KdaBwdOp::knob_defaults(), chunked = KdaBwdOp::chunked_knob_defaults();
  const auto num = [](const ptxevo::evaluator::Knobs& k, const char* n) { return std::get<std::int64_t>(k.at(n)); };
  ptxevo::evaluator::Knobs prep = recurrent, bv16 = chunked;
  prep["PREP"] = std::int64_t{1};
  bv16["BV"] = std::int64_t{16};
  bv16["CHUNK"] = std::int64_t{64};
  EXPECT_EQ(words(op.build_tensors(s, cfg, recurrent)), KdaBwdOp::layout_words(d, 128 / num(recurrent, "BV")));
  EXPECT_EQ(words(op.build_tensors(s, cfg, prep)), KdaBwdOp::layout_words(d, 128 / num(recurrent, "BV")) + KdaBwdOp::prep_words(d));
  EXPECT_EQ(words(op.build_tensors(s, cfg, chunked)),
            KdaBwdOp::chunked_layout(d, num(chunked, "CHUNK"), num(chunked, "BV"), num(chunked, "SLICE_LOOP") == 1).words);
  EXPECT_EQ(words(op.build_tensors(s, cfg, bv16)), KdaBwdOp::workspace_words(d));  // the largest layout
  EXPECT_LT(words(op.build_tensors(s, cfg, chunked)), KdaBwdOp::workspace_words(d));
  // Everything but the workspace is tensors()'.
  auto a = op.build_tensors(s, cfg, chunked), b = op.tensors(s, cfg);
  a.pop_back();
  b.pop_back();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].shape, b[i].shape) << a[i].name;
  // A batch: the larger of its builds'; knobs that make no plan are left out; none left: tensors().
  const ptxevo::evaluator::Knobs bad = {{"CHUNK", std::int64_t{48}}};
  EXPECT_THROW(op.build_tensors(s, cfg, bad), std::invalid_argument);
  EXPECT_EQ(words(ptxevo::evaluator::batch_tensors(op, s, cfg, {recurrent, chunked, bad})),
            std::max(words(op.build_tensors(s, cfg, recurrent)), words(op.build_tensors(s, cfg, chunked))));
  EXPECT_EQ(words(ptxevo::evaluator::batch_tensors(op, s, cfg, {bad})), KdaBwdOp::workspace_words(d));
  EXPECT_EQ(words(ptxevo::evaluator::batch_tensors(op, s, cfg, {})), KdaBwdOp::workspace_words(d));
  std::printf("workspace at scenario 1: recurrent defaults %.1f GB, PREP %.1f GB, chunked defaults %.1f GB, largest %.1f GB\n",
              4e-9 * static_cast<double>(words(op.build_tensors(s, cfg, recurrent))),
              4e-9 * static_cast<double>(words(op.build_tensors(s, cfg, prep))),
              4e-9 * static_cast<double>(words(op.build_tensors(s, cfg, chunked))), 4e-9 * static_cast<double>(KdaBwdOp::workspace_words(d)));
}

TEST(KdaBwdOp, OptionsAndKnobsAreCheckedWithTheirNames) {
  const KdaBwdOp op;
  EXPECT_EQ(op.validate({}), "");
  EXPECT_NE(op.validate({{"gate", "relu"}}).find("kda_bwd: gate must be lower_bound or softplus"), std::string::npos)
      << op.validate({{"gate", "relu"}});
  auto error = [](const Knobs& k) {
    try {
      KdaBwdOp::geometry(k);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error(KdaBwdOp::knob_defaults()), "");
  EXPECT_NE(error({{"BV", I{64}}}).find("BV must be 16 or 32"), std::string::npos);
  EXPECT_NE(error({{"BV", I{8}}}).find("BV must be 16 or 32"), std::string::npos);
  EXPECT_NE(error({{"CKPT", I{16}}}).find("CKPT must be 32, 64 or 128"), std::string::npos);
  EXPECT_NE(error({{"BV", I{32}}, {"SUB", I{16}}}).find("SUB * BV must be at most 256"), std::string::npos);
  EXPECT_NE(error({{"TB", I{4}}}).find("unknown knob 'TB'"), std::string::npos);
  EXPECT_NE(error({{"PREP", I{2}}}).find("PREP must be 0 or 1"), std::string::npos);
  // The chunked seed: CHUNK selects it, and it takes CHUNK and BV only.
  EXPECT_EQ(error(KdaBwdOp::chunked_knob_defaults()), "");
  for (const auto& k : KdaBwdOp::chunked_covering_knobs()) EXPECT_EQ(error(k), "");
  EXPECT_EQ(KdaBwdOp::geometry(KdaBwdOp::chunked_knob_defaults()).chunk, 32);
  EXPECT_EQ(KdaBwdOp::geometry(KdaBwdOp::knob_defaults()).chunk, 0);
  EXPECT_NE(error({{"CHUNK", I{16}}}).find("CHUNK must be 32 or 64"), std::string::npos);
  EXPECT_NE(error({{"CHUNK", I{32}}, {"BV", I{8}}}).find("BV must be 16, 32 or 64 with CHUNK"), std::string::npos);
  EXPECT_NE(error({{"CHUNK", I{64}}, {"BV", I{64}}}).find("CHUNK * BV must be at most 2048"), std::string::npos);
  EXPECT_NE(error({{"CHUNK", I{32}}, {"SUB", I{4}}}).find("unknown knob 'SUB' for the chunked seed"), std::string::npos);
  EXPECT_NE(error({{"CHUNK", I{32}}, {"MMA", I{2}}}).find("MMA must be 0 or 1"), std::string::npos);
  EXPECT_TRUE(KdaBwdOp::geometry({{"CHUNK", I{32}}, {"MMA", I{1}}}).mma);
  EXPECT_EQ(KdaBwdOp::geometry({{"CHUNK", I{32}}, {"MMA", I{1}}, {"MMA_TERMS", I{1}}}).mma_terms, 1);
  EXPECT_NE(error({{"CHUNK", I{32}}, {"MMA", I{1}}, {"MMA_TERMS", I{2}}}).find("MMA_TERMS must be 1 or 3"),
            std::string::npos);
  EXPECT_NE(error({{"CHUNK", I{32}}, {"MMA", I{0}}, {"MMA_TERMS", I{1}}}).find("needs MMA 1"), std::string::npos);
  EXPECT_TRUE(KdaBwdOp::geometry({{"CHUNK", I{32}}, {"MMA", I{1}}, {"SLICE_LOOP", I{1}}}).slice_loop);
  EXPECT_NE(error({{"CHUNK", I{32}}, {"MMA", I{1}}, {"SLICE_LOOP", I{2}}}).find("SLICE_LOOP must be 0 or 1"),
            std::string::npos);
  // SLICE_LOOP applies with MMA 1 and CHUNK 32 only (its accumulators), and is ignored elsewhere.
  EXPECT_FALSE(KdaBwdOp::geometry({{"CHUNK", I{32}}, {"MMA", I{0}}, {"SLICE_LOOP", I{1}}}).slice_loop);
  EXPECT_FALSE(KdaBwdOp::geometry({{"CHUNK", I{64}}, {"MMA", I{1}}, {"SLICE_LOOP", I{1}}}).slice_loop);
  EXPECT_TRUE(KdaBwdOp::geometry(KdaBwdOp::chunked_knob_defaults()).slice_loop);
}

// SLICE_LOOP 1: one slices CTA per (chunk, head) and one share a token-head, the rest of the plan
// and workspace as with SLICE_LOOP 0; the slices entry adds the dM and dL sums to its shared memory.
TEST(KdaBwdOp, SliceLoopPlansOneSlicesCtaAndOneShareAChunkHead) {
  const KdaBwdOp op;
  const auto s = shape(1, 115, 4, 3);
  const auto d = ptxevo::kernels::kda_dims(s);
  const Knobs loop = {{"CHUNK", I{32}}, {"BV", I{32}}, {"MMA", I{1}}, {"SLICE_LOOP", I{1}}};
  Knobs each = loop;
  each["SLICE_LOOP"] = I{0};
  const auto p = op.launch_plan(s, options("lower_bound", true, true), loop);
  const auto q = op.launch_plan(s, options("lower_bound", true, true), each);
  ASSERT_EQ(p.kernels.size(), 6u);
  EXPECT_EQ(p.kernels[3].entry, KdaBwdOp::kChunkSlicesEntry);
  EXPECT_EQ(p.kernels[3].grid.y, 4u);   // heads
  EXPECT_EQ(q.kernels[3].grid.y, 16u);  // heads x four slices
  EXPECT_EQ(p.kernels[1].grid.z, 4u);   // the chains still split the value columns
  const auto l = KdaBwdOp::chunked_layout(d, 32, 32, true), m = KdaBwdOp::chunked_layout(d, 32, 32);
  EXPECT_EQ(l.share_off, m.share_off);
  EXPECT_EQ(l.sums_off - l.share_off, 115 * 4 * (3 * 128 + 2 * 32 + 1));
  EXPECT_EQ(m.sums_off - m.share_off, 4 * (l.sums_off - l.share_off));
  EXPECT_EQ(std::get<I>(p.kernels[0].args.at(29)), l.sums_off);
  EXPECT_LE(l.words, KdaBwdOp::workspace_words(d));
  EXPECT_EQ(p.kernels[3].shared_bytes, q.kernels[3].shared_bytes + 4u * 2 * 32 * 33);
  for (std::size_t i : {0u, 1u, 2u, 4u}) EXPECT_EQ(p.kernels[i].shared_bytes, q.kernels[i].shared_bytes);
}

// The chunked plan: a prepare per chunk slot, the two chunk-serial passes per chain and value
// slice, then per slot and slice, per slot, per head; its workspace regions follow one another and
// fit the tensor the op declares.
TEST(KdaBwdOp, ChunkedPlanAndWorkspaceLayout) {
  const KdaBwdOp op;
  const auto s = shape(1, 115, 4, 3);  // packed [64, 21, 30]: chunks of 64 -> 1, 1, 1; of 32 -> 2, 1, 1
  const auto d = ptxevo::kernels::kda_dims(s);
  const auto p = op.launch_plan(s, options("lower_bound", true, true), {{"CHUNK", I{32}}, {"BV", I{64}}});
  ASSERT_EQ(p.kernels.size(), 6u);
  const std::vector<std::string> entries = {KdaBwdOp::kChunkPrepareEntry, KdaBwdOp::kChunkStatesEntry,
                                            KdaBwdOp::kChunkDstatesEntry, KdaBwdOp::kChunkSlicesEntry,
                                            KdaBwdOp::kChunkFinishEntry,  KdaBwdOp::kReduceEntry};
  for (std::size_t i = 0; i < entries.size(); ++i) EXPECT_EQ(p.kernels[i].entry, entries[i]);
  const auto l = KdaBwdOp::chunked_layout(d, 32, 64);
  EXPECT_EQ(l.slots, 115 / 32 + 3);  // every chunk of any 3 sequences of 115 tokens has a slot
  EXPECT_EQ(p.kernels[0].grid.x, static_cast<unsigned>(l.slots));
  EXPECT_EQ(p.kernels[0].grid.y, 4u);  // heads
  EXPECT_EQ(p.kernels[1].grid.x, 3u);  // sequences
  EXPECT_EQ(p.kernels[1].grid.z, 2u);  // 128 / BV slices
  EXPECT_EQ(p.kernels[3].grid.y, 8u);  // heads x slices
  EXPECT_EQ(p.kernels[4].grid.x, static_cast<unsigned>(l.slots));
  EXPECT_EQ(p.kernels[5].grid.x, 4u);
  EXPECT_EQ(std::get<std::int32_t>(p.kernels[5].args.at(4)), static_cast<std::int32_t>(l.slots));
  const I th = 115 * 4;
  EXPECT_EQ(l.dstate_off, 4 * l.slots * 128 * 128);
  EXPECT_EQ(l.prep_off, 2 * l.dstate_off);
  EXPECT_EQ(l.y_off - l.prep_off, th * (3 * 128 + 1));
  EXPECT_EQ(l.mat_off - l.y_off, th * 128);
  EXPECT_EQ(l.share_off - l.mat_off, 4 * l.slots * 3 * 32 * 32);
  EXPECT_EQ(l.sums_off - l.share_off, 2 * th * (3 * 128 + 2 * 32 + 1));
  EXPECT_EQ(l.words - l.sums_off, l.slots * 4 * 129);
  for (const auto& k : p.kernels) {
    if (k.entry == KdaBwdOp::kReduceEntry) continue;
    EXPECT_EQ(std::get<I>(k.args.at(29)), l.sums_off) << k.entry;
    EXPECT_GT(k.shared_bytes, 48u * 1024) << k.entry;
    EXPECT_LE(k.shared_bytes, 227u * 1024) << k.entry;
  }
  // Every knob assignment of either seed fits the declared workspace, on batched, packed and long
  // shapes.
  for (const auto& sh : {s, shape(2, 65, 4, 2), shape(1, 8192, 96, 6), shape(1, 8192, 64, 8)}) {
    const auto dd = ptxevo::kernels::kda_dims(sh);
    for (const I chunk : {32, 64})
      for (const I bv : {16, 32, 64}) {
        if (chunk * bv > 2048) continue;
        EXPECT_NO_THROW(KdaBwdOp::geometry({{"CHUNK", chunk}, {"BV", bv}}));
        EXPECT_LE(KdaBwdOp::chunked_layout(dd, chunk, bv).words, KdaBwdOp::workspace_words(dd));
      }
  }
}

TEST(KdaBwdOp, PlanIsOneCtaPerChainSliceThenPerTokenChunkThenPerHead) {
  const KdaBwdOp op;
  const auto s = shape(1, 115, 4, 3);
  const auto p = op.launch_plan(s, options("lower_bound", true, true), {{"BV", I{32}}, {"CKPT", I{64}}, {"SUB", I{4}}});
  ASSERT_EQ(p.kernels.size(), 3u);
  EXPECT_EQ(p.kernels[0].entry, KdaBwdOp::kRecurrentEntry);
  EXPECT_EQ(p.kernels[1].entry, KdaBwdOp::kFinishEntry);
  EXPECT_EQ(p.kernels[2].entry, KdaBwdOp::kReduceEntry);
  EXPECT_EQ(p.kernels[0].grid.x, 3u);  // sequences
  EXPECT_EQ(p.kernels[0].grid.y, 4u);  // heads
  EXPECT_EQ(p.kernels[0].grid.z, 4u);  // 128 / BV slices
  EXPECT_EQ(p.kernels[0].block.x, 128u);
  EXPECT_EQ(p.kernels[1].grid.x, 4u);  // ceil(115 / 32) token chunks
  EXPECT_EQ(p.kernels[1].grid.y, 4u);
  EXPECT_EQ(p.kernels[2].grid.x, 4u);  // heads
  // The workspace's regions follow one another and fit in it: checkpoints (115 / 32 + 3 slots a
  // head), 8 slices' shares of 3 x 128 + 1 words a token-head, 129 words a chunk and head.
  const auto d = ptxevo::kernels::kda_dims(s);
  EXPECT_EQ(KdaBwdOp::share_offset(d), 4 * (3 + 3) * 128 * 128);
  EXPECT_EQ(KdaBwdOp::sums_offset(d, 4) - KdaBwdOp::share_offset(d), 4 * 115 * 4 * (3 * 128 + 1));  // BV 32
  EXPECT_EQ(KdaBwdOp::layout_words(d, 4) - KdaBwdOp::sums_offset(d, 4), 4 * 4 * 129);
  // the tensor: any BV and PREP fit
  EXPECT_LE(KdaBwdOp::layout_words(d, 8) + KdaBwdOp::prep_words(d), KdaBwdOp::workspace_words(d));
  // PREP: the prepare kernel first, the saved pre-processing after the plan's own layout
  const auto q = op.launch_plan(s, options("lower_bound", true, true),
                                {{"BV", I{32}}, {"CKPT", I{64}}, {"SUB", I{4}}, {"PREP", I{1}}});
  ASSERT_EQ(q.kernels.size(), 4u);
  EXPECT_EQ(q.kernels[0].entry, KdaBwdOp::kPrepareEntry);
  EXPECT_EQ(q.kernels[0].grid.x, 4u);
  EXPECT_EQ(std::get<I>(q.kernels[0].args.back()), KdaBwdOp::layout_words(d, 4));
  EXPECT_EQ(q.kernels[1].entry, KdaBwdOp::kRecurrentEntry);
  EXPECT_EQ(std::get<I>(q.kernels[1].args.back()), KdaBwdOp::layout_words(d, 4));
  EXPECT_EQ(q.kernels[1].args.size(), p.kernels[0].args.size() + 1);
  EXPECT_LE(KdaBwdOp::layout_words(d, 4) + KdaBwdOp::prep_words(d), KdaBwdOp::workspace_words(d));
  EXPECT_EQ(std::get<I>(p.kernels[0].args.back()), KdaBwdOp::share_offset(d));
  EXPECT_EQ(std::get<I>(p.kernels[1].args.back()), KdaBwdOp::sums_offset(d, 4));
  for (const auto& t : op.tensors(s, options("lower_bound", true, true)))
    if (t.name == "workspace") {
      EXPECT_EQ(t.shape, std::vector<I>{KdaBwdOp::workspace_words(d)});
    }
}

// The reference's outputs are the fp64 backward's, by name and shape, for every option set.
TEST(KdaBwdOp, ReferenceGivesEveryOutput) {
  const KdaBwdOp op;
  for (const bool initial : {false, true})
    for (const bool final : {false, true}) {
      const OpConfig cfg = options("lower_bound", initial, final);
      const Shape s = shape(1, 17, 2, 1);
      const auto descs = op.tensors(s, cfg);
      std::vector<ptxevo::evaluator::HostTensor> ts;
      for (const auto& d : descs) ts.emplace_back(d.name, d.dtype, d.shape);
      ptxevo::evaluator::fill_inputs(op, descs, ptxevo::evaluator::Distribution::Normal, 7, ts);
      std::vector<ptxevo::evaluator::HostTensor> ref;
      op.reference(s, cfg, ts, ref);
      std::vector<std::string> names;
      for (const auto& r : ref) names.push_back(r.name);
      EXPECT_EQ(names, KdaBwdOp::outputs(ptxevo::kernels::KdaFwdOp::parse(cfg)));
      for (const auto& r : ref) {
        double norm = 0;
        for (I i = 0; i < r.numel(); ++i) norm += r.get(i) * r.get(i);
        EXPECT_GT(norm, 0) << r.name << " is all zero";
        for (const auto& d : descs) {
          if (d.name == r.name) {
            EXPECT_EQ(r.shape, d.shape) << r.name;
          }
        }
      }
    }
}

Spec load(const std::string& file) {
  const auto registry = ptxevo::kernels::builtin_ops();
  auto r = ptxevo::evaluator::load_spec(kKdaDir + "/" + file, registry);
  if (!r.spec) throw std::runtime_error(r.error->format());
  return *r.spec;
}

TEST(KdaBwdSpec, HoldsTheForwardsScenariosAndDefaultsMatchTheOp) {
  const Spec spec = load("kda_bwd.spec");
  EXPECT_EQ(spec.op, "kda_bwd");
  ASSERT_EQ(spec.benchmark_shapes.size(), 6u);
  const Spec fwd = load("kda_fwd.spec");
  EXPECT_EQ(spec.benchmark_shapes, fwd.benchmark_shapes);
  EXPECT_EQ(ptxevo::evaluator::default_knobs(spec.seeds.at(0)), KdaBwdOp::knob_defaults());
  ASSERT_EQ(spec.seeds.size(), 2u);
  EXPECT_EQ(ptxevo::evaluator::default_knobs(spec.seeds.at(1)), KdaBwdOp::chunked_knob_defaults());
  EXPECT_GE(spec.correctness_shapes.size(), 10u);
}

// The gate's static checks on a build's PTX for the plans of every shape of `spec`.
void expect_ir_clean(const std::string& ptx, const Spec& spec, const OpConfig& cfg, const Knobs& knobs) {
  const auto parsed = ptxevo::ir::parse_ptx(ptx);
  ASSERT_TRUE(parsed.ok()) << (parsed.error ? parsed.error->message : std::string("parse failed"));
  std::vector<Shape> shapes = spec.benchmark_shapes;
  shapes.insert(shapes.end(), spec.correctness_shapes.begin(), spec.correctness_shapes.end());
  for (const auto& s : shapes)
    for (const auto& v : ptxevo::evaluator::check_ir(*parsed.module, KdaBwdOp().launch_plan(s, cfg, knobs)))
      ADD_FAILURE() << ptxevo::evaluator::shape_to_string(s) << ": " << v.rule << ": " << v.message;
}

TEST(KdaBwdBuild, SeedBuildsUnderEveryOptionSetAndCoveringKnobs) {
  const Spec spec = load("kda_bwd.spec");
  const auto& seed = spec.seeds.at(0);
  std::string why;
  const auto text = ptxevo::evaluator::read_template(seed.source_path, &why);
  ASSERT_TRUE(text) << why;
  const ptxevo::evaluator::Builder builder(nullptr);
  int built = 0;
  for (const char* gate : {"lower_bound", "softplus"})
    for (const bool initial : {false, true})
      for (const bool final : {false, true})
        for (const auto& knobs : KdaBwdOp::covering_knobs()) {
          const OpConfig cfg = options(gate, initial, final);
          SCOPED_TRACE(std::string(gate) + (initial ? " +in" : "") + (final ? " +out" : "") + " BV " +
                       std::to_string(std::get<I>(knobs.at("BV"))));
          ptxevo::evaluator::BuildRequest r;
          r.name = "kda_bwd";
          r.source = text->text;
          r.source_path = seed.source_path;
          r.defines = KdaBwdOp().template_defines(cfg);
          r.knobs = knobs;
          r.arch = spec.arch;
          const auto b = builder.build(r);
          ASSERT_TRUE(b.ok) << b.stage << ": " << b.error;
          std::set<std::string> entries;
          for (const auto& res : b.resources) {
            entries.insert(res.name);
            EXPECT_EQ(res.spill_stores, 0) << res.name;
          }
          std::set<std::string> planned;
          for (const auto& k : KdaBwdOp().launch_plan(spec.correctness_shapes.at(0), cfg, knobs).kernels)
            planned.insert(k.entry);
          EXPECT_EQ(entries, planned);  // PREP adds the prepare kernel; nothing unplanned is built
          EXPECT_EQ(planned.size(), std::get<I>(knobs.at("PREP")) ? 4u : 3u);
          expect_ir_clean(b.ptx, spec, cfg, knobs);
          if (built++ % 4 == 0) {
            const auto sass = ptxevo::evaluator::run_ptxas(b.ptx, spec.arch);
            EXPECT_TRUE(sass.ok) << sass.log;
          }
        }
}

// The chunked seed builds under every option set and its covering knobs, without spills, with
// exactly the entries its plan launches, and passes the gate's static checks on every spec shape.
TEST(KdaBwdBuild, ChunkedSeedBuildsUnderEveryOptionSetAndCoveringKnobs) {
  const Spec spec = load("kda_bwd.spec");
  const auto& seed = spec.seeds.at(1);
  std::string why;
  const auto text = ptxevo::evaluator::read_template(seed.source_path, &why);
  ASSERT_TRUE(text) << why;
  const ptxevo::evaluator::Builder builder(nullptr);
  int built = 0;
  for (const char* gate : {"lower_bound", "softplus"})
    for (const bool initial : {false, true})
      for (const bool final : {false, true})
        for (const auto& knobs : KdaBwdOp::chunked_covering_knobs()) {
          // Each option set with one of the assignments, each assignment under several option sets.
          if ((built++ % 5) != (initial * 2 + final + (gate[0] == 's')) % 5) continue;
          const OpConfig cfg = options(gate, initial, final);
          std::string named;
          for (const auto& [name, value] : knobs) named += " " + name + " " + std::to_string(std::get<I>(value));
          SCOPED_TRACE(std::string(gate) + (initial ? " +in" : "") + (final ? " +out" : "") + named);
          ptxevo::evaluator::BuildRequest r;
          r.name = "kda_bwd_chunked";
          r.source = text->text;
          r.source_path = seed.source_path;
          r.defines = KdaBwdOp().template_defines(cfg);
          r.knobs = knobs;
          r.arch = spec.arch;
          const auto b = builder.build(r);
          ASSERT_TRUE(b.ok) << b.stage << ": " << b.error;
          std::set<std::string> entries;
          for (const auto& res : b.resources) {
            entries.insert(res.name);
            EXPECT_EQ(res.spill_stores, 0) << res.name;
          }
          std::set<std::string> planned;
          for (const auto& k : KdaBwdOp().launch_plan(spec.correctness_shapes.at(0), cfg, knobs).kernels)
            planned.insert(k.entry);
          EXPECT_EQ(entries, planned);
          EXPECT_EQ(planned.size(), 6u);
          expect_ir_clean(b.ptx, spec, cfg, knobs);
        }
}

// The fp64 device reference (kda_bwd.cu under KDA_BWD_REFERENCE) is trusted code: it builds for
// every option set, and its plan names its own entries with as many arguments as
// they declare, the op's inputs, "ref:" outputs and its F64 scratch only, and double scalars.
// Its numbers are compared with the host's on the emulated machine (KdaBwdReferenceOnHost) and,
// before first use, by every GPU worker.
TEST(KdaBwdDeviceReference, BuildsForEveryOptionSetWithConsistentPlans) {
  const KdaBwdOp op;
  for (const OpConfig& cfg : std::vector<OpConfig>{options("lower_bound", true, true),
                                                   options("softplus", false, false),
                                                   options("lower_bound", true, false),
                                                   options("softplus", false, true)}) {
    SCOPED_TRACE(cfg.at("gate") + " " + cfg.at("initial_state") + " " + cfg.at("final_state"));
    ptxevo::evaluator::Builder builder(nullptr);
    ptxevo::evaluator::BuildRequest req;
    req.name = "ref";
    req.source = op.device_reference_source(cfg);
    req.source_path = "ref.cu";
    req.arch = "sm_90a";
    const auto b = builder.build(req);
    ASSERT_TRUE(b.ok) << b.stage << ": " << b.error;
    // A 64-column slice of the state and of its gradient in fp64 does not fit 255 registers: the
    // recurrence spills (4.6 KB of stores at CUDA 13.0), which costs time, not accuracy.
    for (const auto& f : b.resources) EXPECT_LE(f.spill_stores, 8192) << f.name;
    for (const Shape& s : {shape(1, 1, 1, 1), shape(2, 65, 4, 2), shape(1, 115, 4, 3)}) {
      const auto descs = op.tensors(s, cfg);
      const auto plan = op.device_reference_plan(s, cfg);
      EXPECT_EQ(plan.outputs, KdaBwdOp::outputs(ptxevo::kernels::KdaFwdOp::parse(cfg)));
      ASSERT_EQ(plan.scratch.size(), 1u);
      EXPECT_EQ(plan.scratch[0].dtype, ptxevo::evaluator::DType::F64);
      std::set<std::string> names = {plan.scratch[0].name};
      for (const auto& d : descs)
        if (d.role == ptxevo::evaluator::Role::In) names.insert(d.name);
      for (const auto& o : plan.outputs) names.insert("ref:" + o);
      ASSERT_EQ(plan.plan.kernels.size(), 3u);
      for (const auto& k : plan.plan.kernels) {
        EXPECT_EQ(k.entry.rfind("ptxevo_ref_kda_bwd_", 0), 0u) << k.entry;
        EXPECT_EQ(ptxevo::kernels::testing::entry_params(b.ptx, k.entry), static_cast<int>(k.args.size())) << k.entry;
        for (const auto& a : k.args) {
          if (const auto* t = std::get_if<ptxevo::evaluator::ArgTensor>(&a)) {
            EXPECT_TRUE(t->name.empty() || names.count(t->name)) << k.entry << " names unknown tensor " << t->name;
          }
          EXPECT_FALSE(std::holds_alternative<float>(a)) << k.entry << ": the reference takes its scalars in double";
        }
      }
    }
  }
}

}  // namespace

// What the defaults' speed rests on (H100 and H200: 228 KB of shared memory an SM, 1 KB of it
// reserved per CTA): at CHUNK 32, BV 32 the chain kernels fit three CTAs an SM, so the 384 chains
// of H = 96 x four slices run in one wave (dstates at 89 KB took two), and the slices kernel two.
TEST(KdaBwdOp, ChunkedDefaultsKeepTheirCtasPerSm) {
  const auto per_sm = [](const char* entry) {
    return (228u * 1024) / (KdaBwdOp::chunked_shared_bytes(entry, 32, 32) + 1024u);
  };
  EXPECT_GE(per_sm(KdaBwdOp::kChunkStatesEntry), 3u);
  EXPECT_GE(per_sm(KdaBwdOp::kChunkDstatesEntry), 3u);
  EXPECT_GE(per_sm(KdaBwdOp::kChunkSlicesEntry), 2u);
  EXPECT_GE(per_sm(KdaBwdOp::kChunkPrepareEntry), 3u);
  EXPECT_GE(per_sm(KdaBwdOp::kChunkFinishEntry), 2u);
  EXPECT_GE((228u * 1024) / (KdaBwdOp::chunked_shared_bytes(KdaBwdOp::kChunkSlicesEntry, 32, 32, true) + 1024u), 2u);
}
