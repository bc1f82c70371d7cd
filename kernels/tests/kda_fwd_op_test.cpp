// KdaFwdOp: options, shapes (B, T, H, N and the packed length sets), tensors, launch plans and
// knob checks, the reference's input checks (wrong-size state, bad cu_seqlens), its agreement with
// the chunked reference on the op's own filled inputs, the fill ranges, bytes/flops against
// docs/kda.md's worked numbers, tolerances, and fp64 emulations of plausible kernel bugs (read
// before the write, no decay, K-first state, raw beta logits) that the tolerance and fills must
// reject.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "evaluator/gpu_evaluation.hpp"
#include "evaluator/tensor.hpp"
#include "kernels/kda/kda_fwd_op.hpp"

namespace {

using ptxevo::evaluator::ArgTensor;
using ptxevo::evaluator::Distribution;
using ptxevo::evaluator::DType;
using ptxevo::evaluator::HostTensor;
using ptxevo::evaluator::Knobs;
using ptxevo::evaluator::OpConfig;
using ptxevo::evaluator::Role;
using ptxevo::evaluator::Shape;
using ptxevo::evaluator::TensorDesc;
using ptxevo::kernels::KdaDims;
using ptxevo::kernels::KdaFwdOp;
using ptxevo::kernels::kda_dims;
using I = std::int64_t;

Shape shape(I b, I t, I h, I n) { return {{"B", b}, {"T", t}, {"H", h}, {"N", n}}; }

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

std::vector<std::string> names(const std::vector<TensorDesc>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds) out.push_back(d.name);
  return out;
}

// Inputs drawn as the gate draws them (fill_inputs), outputs zero.
std::vector<HostTensor> filled(const KdaFwdOp& op, const Shape& s, const OpConfig& cfg, Distribution d, std::uint64_t seed) {
  const auto descs = op.tensors(s, cfg);
  std::vector<HostTensor> ts;
  for (const auto& desc : descs) ts.emplace_back(desc.name, desc.dtype, desc.shape);
  ptxevo::evaluator::fill_inputs(op, descs, d, seed, ts);
  return ts;
}

TEST(KdaFwdOp, ValidateAcceptsGoodConfigs) {
  const KdaFwdOp op;
  EXPECT_EQ(op.validate({}), "");
  EXPECT_EQ(op.validate({{"gate", "softplus"}, {"initial_state", "false"}, {"final_state", "false"}}), "");
  EXPECT_EQ(op.validate({{"gate", "lower_bound"}, {"lower_bound", "-1.5"}, {"scale", "0.125"}, {"head_dim", "128"}}), "");
  const auto c = KdaFwdOp::parse({{"lower_bound", "-2"}, {"scale", "0.5"}});
  EXPECT_EQ(c.lower_bound, -2.0);
  EXPECT_EQ(c.scale, 0.5);
  EXPECT_NEAR(KdaFwdOp::parse({}).scale, 1.0 / std::sqrt(128.0), 1e-16);
}

TEST(KdaFwdOp, ValidateRejectsBadConfigsWithAReason) {
  const KdaFwdOp op;
  auto has = [&](const OpConfig& cfg, const std::string& text) {
    const std::string m = op.validate(cfg);
    EXPECT_NE(m.find(text), std::string::npos) << "'" << m << "' lacks '" << text << "'";
  };
  has({{"head_dim", "64"}}, "K = V = 128");
  has({{"gate", "sigmoid"}}, "lower_bound or softplus");
  has({{"gate", "softplus"}, {"lower_bound", "-5"}}, "softplus gate has no lower bound");
  has({{"lower_bound", "-6"}}, "[-5, 0)");
  has({{"lower_bound", "0"}}, "[-5, 0)");
  has({{"scale", "0"}}, "scale");
  has({{"scale", "x"}}, "finite number");
  has({{"initial_state", "yes"}}, "true or false");
  has({{"state_dtype", "bf16"}}, "unknown option 'state_dtype'");
}

TEST(KdaFwdOp, ShapesNameBatchTokensHeadsAndSequences) {
  auto d = ptxevo::kernels::kda_dims(shape(2, 100, 4, 2));
  EXPECT_FALSE(d.packed);
  EXPECT_EQ(d.cu_seqlens, (std::vector<I>{0, 100, 200}));
  d = ptxevo::kernels::kda_dims(shape(1, 8192, 96, 6));
  EXPECT_TRUE(d.packed);
  EXPECT_EQ(d.cu_seqlens, (std::vector<I>{0, 1300, 1847, 3895, 4858, 5129, 8192}));
  d = ptxevo::kernels::kda_dims(shape(1, 8192, 64, 8));
  EXPECT_EQ(d.cu_seqlens.size(), 9u);
  EXPECT_EQ(d.cu_seqlens[1], 1024);
  Shape with_d = shape(1, 16, 1, 1);
  with_d["D"] = 128;
  EXPECT_NO_THROW(ptxevo::kernels::kda_dims(with_d));
  // Every set is a valid packing of its own total.
  for (I n : ptxevo::kernels::kda_length_set_counts()) {
    const auto lengths = ptxevo::kernels::kda_length_set(n);
    EXPECT_EQ(static_cast<I>(lengths.size()), n);
    const auto cu = ptxevo::kernels::kda_cu_seqlens(lengths);
    EXPECT_NO_THROW(ptxevo::kernels::check_cu_seqlens(cu, cu.back()));
  }
}

TEST(KdaFwdOp, BadShapesThrowWithAReason) {
  auto has = [](const Shape& s, const std::string& text) {
    const std::string m = error_of([&] { ptxevo::kernels::kda_dims(s); });
    EXPECT_NE(m.find(text), std::string::npos) << "'" << m << "' lacks '" << text << "'";
  };
  Shape d64 = shape(1, 16, 1, 1);
  d64["D"] = 64;
  has(d64, "head dim D=64");
  has({{"B", 1}, {"T", 16}, {"H", 1}}, "lacks dimension N");
  has({{"M", 1}, {"B", 1}, {"T", 16}, {"H", 1}, {"N", 1}}, "unknown shape dimension 'M'");
  has(shape(2, 16, 1, 3), "need B = 1");
  has(shape(1, 16, 1, 11), "no length set for N=11");
  has(shape(1, 1000, 1, 6), "T must be 8192");
  has(shape(1, 0, 1, 1), "must be >= 1");
}

TEST(KdaFwdOp, CuSeqlensChecks) {
  using ptxevo::kernels::check_cu_seqlens;
  EXPECT_NE(error_of([] { check_cu_seqlens({0, 5, 5, 9}, 9); }).find("strictly increasing"), std::string::npos);
  EXPECT_NE(error_of([] { check_cu_seqlens({0, 7, 5, 9}, 9); }).find("strictly increasing"), std::string::npos);
  EXPECT_NE(error_of([] { check_cu_seqlens({2, 9}, 9); }).find("start at 0"), std::string::npos);
  EXPECT_NE(error_of([] { check_cu_seqlens({0, 8}, 9); }).find("end at the number of packed tokens, 9"),
            std::string::npos);
  EXPECT_NO_THROW(check_cu_seqlens({0, 1, 9}, 9));
}

TEST(KdaFwdOp, TensorsFollowTheShapeAndOptions) {
  const KdaFwdOp op;
  auto ts = op.tensors(shape(1, 8192, 96, 6), {});
  EXPECT_EQ(names(ts), (std::vector<std::string>{"q", "k", "v", "g", "beta", "A_log", "dt_bias", "cu_seqlens",
                                                  "initial_state", "out", "final_state", "workspace"}));
  EXPECT_EQ(ts[0].shape, (std::vector<I>{1, 8192, 96, 128}));
  EXPECT_EQ(ts[4].shape, (std::vector<I>{1, 8192, 96}));
  EXPECT_EQ(ts[7].dtype, DType::I64);
  EXPECT_EQ(ts[7].shape, (std::vector<I>{7}));
  EXPECT_EQ(ts[8].shape, (std::vector<I>{6, 96, 128, 128}));
  EXPECT_EQ(ts[8].dtype, DType::F32);
  EXPECT_EQ(ts[9].role, Role::Out);
  EXPECT_EQ(ts[10].role, Role::Out);
  // The prepare + recurrence pair's workspace: H (N + T / C) slots of the largest CHUNK's chunk
  // bytes (C = 64: 1544 a token, 98816 a chunk): 96 x (6 + 128) x 98816; then PREPARE_CTAS's flags,
  // a word a (head, CHUNK 16 slot): 96 x (6 + 512) x 4.
  EXPECT_EQ(ts[11].role, Role::Scratch);
  EXPECT_EQ(ts[11].dtype, DType::U8);
  EXPECT_EQ(ts[11].shape, (std::vector<I>{96 * (6 + 128) * 98816 + 96 * (6 + 512) * 4}));
  EXPECT_EQ(KdaFwdOp::workspace_chunk_bytes(16), 16 * 1376);
  EXPECT_EQ(KdaFwdOp::workspace_chunk_bytes(32), 32 * 1424);
  // Drawn by the op: g, A_log, dt_bias, cu_seqlens; the rest follow the gate's distributions.
  for (const auto& t : ts)
    EXPECT_EQ(t.fixed_distribution, t.name == "g" || t.name == "A_log" || t.name == "dt_bias" || t.name == "cu_seqlens")
        << t.name;
  ts = op.tensors(shape(2, 64, 4, 2), {{"initial_state", "false"}, {"final_state", "false"}});
  EXPECT_EQ(names(ts), (std::vector<std::string>{"q", "k", "v", "g", "beta", "A_log", "dt_bias", "out", "workspace"}));
  ts = op.tensors(shape(2, 64, 4, 2), {{"initial_state", "false"}});
  EXPECT_EQ(ts[ts.size() - 2].name, "final_state");
  EXPECT_EQ(ts[ts.size() - 2].shape, (std::vector<I>{2, 4, 128, 128}));
}

TEST(KdaFwdOp, TemplateDefines) {
  const KdaFwdOp op;
  auto d = op.template_defines({});
  EXPECT_EQ(d.at("KDA_GATE_SOFTPLUS"), "0");
  EXPECT_EQ(d.at("HAS_INITIAL_STATE"), "1");
  EXPECT_EQ(d.at("HAS_FINAL_STATE"), "1");
  d = op.template_defines({{"gate", "softplus"}, {"initial_state", "false"}, {"final_state", "false"}});
  EXPECT_EQ(d.at("KDA_GATE_SOFTPLUS"), "1");
  EXPECT_EQ(d.at("HAS_INITIAL_STATE"), "0");
  EXPECT_EQ(d.at("HAS_FINAL_STATE"), "0");
}

TEST(KdaFwdOp, LaunchPlanOneCtaPerSequenceHeadAndValueSlice) {
  const KdaFwdOp op;
  auto p = op.launch_plan(shape(1, 8192, 96, 6), {}, {});
  ASSERT_EQ(p.kernels.size(), 1u);
  const auto& l = p.kernels[0];
  EXPECT_EQ(l.entry, "kda_fwd_recurrent");
  EXPECT_EQ(l.grid.x, 6u);
  EXPECT_EQ(l.grid.y, 96u);
  EXPECT_EQ(l.grid.z, 4u);  // BV = 32
  EXPECT_EQ(l.block.x, 128u);
  ASSERT_EQ(l.args.size(), 15u);
  EXPECT_EQ(std::get<ArgTensor>(l.args[7]).name, "cu_seqlens");
  EXPECT_EQ(std::get<ArgTensor>(l.args[8]).name, "initial_state");
  EXPECT_EQ(std::get<ArgTensor>(l.args[9]).name, "out");
  EXPECT_EQ(std::get<ArgTensor>(l.args[10]).name, "final_state");
  EXPECT_EQ(std::get<I>(l.args[11]), 8192);
  EXPECT_EQ(std::get<std::int32_t>(l.args[12]), 96);
  EXPECT_FLOAT_EQ(std::get<float>(l.args[13]), static_cast<float>(1.0 / std::sqrt(128.0)));
  EXPECT_FLOAT_EQ(std::get<float>(l.args[14]), -5.0f);
  // Fixed-length rows and absent states pass null pointers.
  p = op.launch_plan(shape(3, 100, 2, 3), {{"initial_state", "false"}, {"final_state", "false"}},
                     {{"BV", I{128}}, {"KSPLIT", I{1}}});
  const auto& f = p.kernels[0];
  EXPECT_EQ(f.grid.x, 3u);
  EXPECT_EQ(f.grid.z, 1u);
  EXPECT_EQ(f.block.x, 128u);
  for (int i : {7, 8, 10}) EXPECT_EQ(std::get<ArgTensor>(f.args[static_cast<std::size_t>(i)]).name, "") << i;
  EXPECT_EQ(std::get<I>(f.args[11]), 100);
}

TEST(KdaFwdOp, ImpossibleKnobsThrowWithAReason) {
  const KdaFwdOp op;
  auto has = [&](const Knobs& k, const std::string& text) {
    const std::string m = error_of([&] { op.launch_plan(shape(1, 16, 1, 1), {}, k); });
    EXPECT_NE(m.find(text), std::string::npos) << "'" << m << "' lacks '" << text << "'";
  };
  has({{"BV", I{48}}}, "BV=48");
  has({{"BV", I{256}}}, "BV=256");
  has({{"KSPLIT", I{3}}}, "KSPLIT=3");
  has({{"BV", I{8}}, {"KSPLIT", I{2}}}, "[32, 1024]");
  has({{"TB", I{32}}}, "TB=32");
  has({{"MIN_BLOCKS", I{32}}}, "MIN_BLOCKS=32");
  has({{"CHUNK_SIZE", I{16}}}, "unknown knob 'CHUNK_SIZE'");
  // Knobs that name a CHUNK are the chunked kernel's.
  has({{"CHUNK", I{8}}}, "CHUNK=8");
  has({{"CHUNK", I{16}}, {"BV", I{8}}}, "BV=8");
  has({{"CHUNK", I{16}}, {"WARPS", I{2}}}, "WARPS=2");
  has({{"CHUNK", I{16}}, {"KSPLIT", I{4}}}, "KSPLIT=4 needs FUSED=0");
  has({{"CHUNK", I{16}}, {"PREFETCH_CHUNKS", I{2}}}, "PREFETCH_CHUNKS=2 needs FUSED=0");
  has({{"CHUNK", I{16}}, {"SPLITK", I{2}}}, "unknown knob 'SPLITK' for the chunked kernel");
  has({{"CHUNK", I{64}}, {"BV", I{64}}, {"STAGE", I{0}}, {"LM_TENSOR_CORES", I{0}}}, "227 KB");
  has({{"CHUNK", I{64}}, {"BV", I{16}}, {"STAGE", I{1}}, {"LM_TENSOR_CORES", I{0}}}, "227 KB");
  has({{"CHUNK", I{16}}, {"STAGE", I{2}}}, "STAGE=2 must be 0 or 1 (FUSED=1)");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"STAGE", I{4}}}, "STAGE=4 must be 0 to 3");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"KSPLIT", I{3}}}, "KSPLIT=3");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"PREFETCH_CHUNKS", I{3}}}, "PREFETCH_CHUNKS=3");
  has({{"CHUNK", I{64}}, {"FUSED", I{0}}, {"BV", I{16}}, {"PREFETCH_CHUNKS", I{2}}},
      "PREFETCH_CHUNKS=2 needs CHUNK < 64");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"BV", I{128}}, {"KSPLIT", I{4}}}, "BV * KSPLIT <= 256");
  has({{"CHUNK", I{64}}, {"FUSED", I{0}}, {"BV", I{128}}, {"STAGE", I{3}}}, "227 KB");
  has({{"CHUNK", I{32}}, {"LM_TENSOR_CORES", I{1}}}, "LM_TENSOR_CORES=1 needs CHUNK=16");
  has({{"CHUNK", I{32}}}, "LM_TENSOR_CORES=1 needs CHUNK=16");  // LM_TENSOR_CORES defaults to 1
  // FUSED = 0: the prepare + recurrence pair, mma.sync only.
  has({{"CHUNK", I{16}}, {"FUSED", I{2}}}, "FUSED=2");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"MMA", std::string("tcgen05")}}, "MMA=tcgen05 needs FUSED=1");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"U0_BITS", I{8}}}, "U0_BITS=8");
  has({{"CHUNK", I{16}}, {"U0_BITS", I{16}}}, "U0_BITS=16 needs FUSED=0");
  // MMA = wgmma: the split's recurrence in whole warpgroups; BULK: a recurrence knob.
  has({{"CHUNK", I{16}}, {"MMA", std::string("wmma")}}, "MMA=wmma must be sync");
  has({{"CHUNK", I{16}}, {"MMA", std::string("wgmma")}}, "MMA=wgmma needs FUSED=0");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"STATE_HI_LO", I{0}}, {"BV", I{32}}, {"MMA", std::string("wgmma")}},
      "BV=32");
  has({{"CHUNK", I{16}},
       {"FUSED", I{0}},
       {"STATE_HI_LO", I{0}},
       {"BV", I{64}},
       {"KSPLIT", I{2}},
       {"MMA", std::string("wgmma")}},
      "KSPLIT=2");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"BV", I{64}}, {"MMA", std::string("wgmma")}},
      "STATE_HI_LO=1");  // STATE_HI_LO defaults to 1
  has({{"CHUNK", I{16}}, {"BULK", I{1}}}, "BULK=1 needs FUSED=0");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"BULK", I{2}}}, "BULK=2 must be 0 or 1");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"BULK", I{0}}, {"PREPARE_CTAS", I{132}}},
      "PREPARE_CTAS=132 needs FUSED=0 and BULK=1");
  has({{"CHUNK", I{16}}, {"PREPARE_CTAS", I{132}}}, "PREPARE_CTAS=132 needs FUSED=0 and BULK=1");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"BULK", I{1}}, {"PREPARE_CTAS", I{-1}}}, "PREPARE_CTAS=-1 must be 0 (off)");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"LMTERMS", I{4}}}, "LMTERMS=4 must be 1, 2 or 3");
  has({{"CHUNK", I{32}}, {"FUSED", I{0}}, {"LM_TENSOR_CORES", I{1}}, {"LMTERMS", I{1}}},
      "LMTERMS=1 needs FUSED=0, CHUNK=16, LM_TENSOR_CORES=1 and MMA=sync");
  has({{"CHUNK", I{16}}, {"FUSED", I{0}}, {"LM_TENSOR_CORES", I{0}}, {"LMTERMS", I{2}}},
      "LMTERMS=2 needs FUSED=0, CHUNK=16, LM_TENSOR_CORES=1 and MMA=sync");
  has({{"CHUNK", I{16}}, {"LMTERMS", I{1}}}, "LMTERMS=1 needs FUSED=0");
  has({{"CHUNK", I{16}},
       {"FUSED", I{0}},
       {"STATE_HI_LO", I{0}},
       {"BV", I{64}},
       {"MMA", std::string("wgmma")},
       {"LMTERMS", I{2}}},
      "LMTERMS=2 needs FUSED=0, CHUNK=16, LM_TENSOR_CORES=1 and MMA=sync");
  EXPECT_NO_THROW(op.launch_plan(shape(1, 16, 1, 1), {},
                                 {{"CHUNK", I{16}},
                                  {"FUSED", I{0}},
                                  {"STATE_HI_LO", I{0}},
                                  {"BV", I{128}},
                                  {"BULK", I{1}},
                                  {"MMA", std::string("wgmma")}}));
  EXPECT_NO_THROW(op.launch_plan(shape(1, 16, 1, 1), {}, {{"CHUNK", I{64}}, {"FUSED", I{0}}, {"BV", I{128}}}));
}

// FUSED = 0: kda_fwd_prepare over (chunk slot, head), then kda_fwd_recurrence over (sequence,
// head, value slice) with a warp per 16 value columns; both get the workspace, T, H, N, the scale
// and the lower bound.
// The eight renamed knobs under their old names: the same plans as under the current ones (the
// op's own parsing maps them), and an error where a knob is given both ways.
TEST(KdaFwdOp, OldKnobNamesGiveTheSamePlans) {
  const KdaFwdOp op;
  const auto renames = op.knob_aliases();
  EXPECT_EQ(renames.size(), 8u);
  EXPECT_EQ(renames, KdaFwdOp::knob_renames());
  const auto plan_text = [&](const Knobs& k) {
    std::string t;
    for (const auto& l : op.launch_plan(shape(1, 8192, 96, 6), {}, k).kernels)
      t += l.entry + " " + std::to_string(l.grid.x) + "x" + std::to_string(l.grid.y) + "x" +
           std::to_string(l.grid.z) + " " + std::to_string(l.block.x) + " " + std::to_string(l.shared_bytes) +
           (l.programmatic ? " pdl" : "") + ";";
    return t;
  };
  for (const Knobs& current : KdaFwdOp::split_covering_knobs()) {
    Knobs old;
    for (const auto& [name, v] : current) {
      std::string given = name;
      for (const auto& [old_name, to] : renames)
        if (to == name) given = old_name;
      old[given] = v;
    }
    EXPECT_EQ(ptxevo::evaluator::canonical_knobs(op, old), current);
    EXPECT_EQ(plan_text(old), plan_text(current));
    const auto g = KdaFwdOp::chunked_geometry(old);
    EXPECT_EQ(g.u0_bits, std::get<I>(current.at("U0_BITS")));
    EXPECT_EQ(g.prefetch_chunks, std::get<I>(current.at("PREFETCH_CHUNKS")));
    EXPECT_EQ(g.prepare_ctas, std::get<I>(current.at("PREPARE_CTAS")));
  }
  Knobs both = KdaFwdOp::chunked_knob_defaults();
  both["WYREC"] = I{1};
  try {
    (void)op.launch_plan(shape(1, 64, 4, 1), {}, both);
    FAIL() << "both names accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "knob WYREC was renamed WY_IN_RECURRENCE; give one of WYREC and WY_IN_RECURRENCE, not both");
  }
}

TEST(KdaFwdOp, SplitLaunchPlan) {
  const KdaFwdOp op;
  Knobs k = KdaFwdOp::chunked_knob_defaults();  // at CHUNK 32, BV 64, STAGE 1, per-thread copies
  k["CHUNK"] = I{32};
  k["BV"] = I{64};
  k["STAGE"] = I{1};
  k["BULK"] = I{0};
  k["LMTERMS"] = I{3};  // the one-pass prepare's knob (CHUNK 16 only)
  k["WY_IN_RECURRENCE"] = I{0};    // W0 and U0 in the workspace (WY_IN_RECURRENCE 1 below)
  k["SEQSPLIT"] = I{1};  // needs WY_IN_RECURRENCE 1
  const auto p = op.launch_plan(shape(1, 8192, 96, 6), {}, k);
  ASSERT_EQ(p.kernels.size(), 2u);
  const auto& pr = p.kernels[0];
  const auto& rc = p.kernels[1];
  EXPECT_EQ(pr.entry, "kda_fwd_prepare");
  EXPECT_EQ(pr.grid.x, 6u + 8192u / 32u);  // N + T / CHUNK slots
  EXPECT_EQ(pr.grid.y, 96u);
  EXPECT_EQ(pr.block.x, 128u);             // WARPS = 4
  EXPECT_EQ(pr.shared_bytes, static_cast<std::uint32_t>(KdaFwdOp::prepare_smem_bytes(KdaFwdOp::chunked_geometry(k), false)));
  ASSERT_EQ(pr.args.size(), 14u);
  EXPECT_EQ(std::get<ArgTensor>(pr.args[7]).name, "cu_seqlens");
  EXPECT_EQ(std::get<ArgTensor>(pr.args[8]).name, "workspace");
  EXPECT_EQ(std::get<I>(pr.args[9]), 8192);
  EXPECT_EQ(std::get<std::int32_t>(pr.args[10]), 96);
  EXPECT_EQ(std::get<std::int32_t>(pr.args[11]), 6);
  EXPECT_FLOAT_EQ(std::get<float>(pr.args[12]), static_cast<float>(1.0 / std::sqrt(128.0)));
  EXPECT_FLOAT_EQ(std::get<float>(pr.args[13]), -5.0f);
  EXPECT_EQ(rc.entry, "kda_fwd_recurrence");
  EXPECT_EQ(rc.grid.x, 6u);
  EXPECT_EQ(rc.grid.y, 96u);
  EXPECT_EQ(rc.grid.z, 2u);   // BV = 64
  EXPECT_EQ(rc.block.x, 128u);  // BV / 16 warps
  ASSERT_EQ(rc.args.size(), 13u);
  EXPECT_EQ(std::get<ArgTensor>(rc.args[0]).name, "workspace");
  EXPECT_EQ(std::get<ArgTensor>(rc.args[10]).name, "v");  // read with WY_IN_RECURRENCE 1
  EXPECT_EQ(std::get<std::int32_t>(rc.args[11]), 1);      // one segment
  EXPECT_EQ(std::get<std::int32_t>(rc.args[12]), 0);      // pass 0: whole sequences
  EXPECT_EQ(std::get<ArgTensor>(rc.args[2]).name, "initial_state");
  EXPECT_EQ(std::get<ArgTensor>(rc.args[3]).name, "out");
  EXPECT_EQ(std::get<ArgTensor>(rc.args[4]).name, "final_state");
  EXPECT_EQ(std::get<std::int32_t>(rc.args[7]), 6);
  // CHUNK 32, BV 64, STAGE 1, U0_BITS 16: two buffers of the workspace's dense layout: Qd, W0
  // 2 x 8192, Kr^T 8192, M 2 x 2048, 2^Gtot 512, U0^T 64 x 32 x 2; three CTAs a SM.
  EXPECT_EQ(rc.shared_bytes, 2u * (16384u + 8192u + 4096u + 512u + 4096u));
  EXPECT_LE(2 * (rc.shared_bytes + 1024), 228u * 1024);
  // BULK = 1: an mbarrier a buffer after everything else (32 bytes reserved).
  Knobs bulk = k;
  bulk["BULK"] = I{1};
  EXPECT_EQ(op.launch_plan(shape(1, 8192, 96, 6), {}, bulk).kernels[1].shared_bytes, rc.shared_bytes + 32u);
  // U0_BITS = 32: U0^T in fp32, in the workspace and in shared memory.
  Knobs u32 = k;
  u32["U0_BITS"] = I{32};
  EXPECT_EQ(op.launch_plan(shape(1, 8192, 96, 6), {}, u32).kernels[1].shared_bytes, rc.shared_bytes + 2u * 64u * 32u * 2u);
  // KSPLIT 2: twice the warps, plus two buffers of every warp's partial W^T and Qs^T (C floats a
  // lane); STAGE 3: four operand buffers.
  Knobs ks2 = k;
  ks2["KSPLIT"] = I{2};
  const auto rk = op.launch_plan(shape(1, 8192, 96, 6), {}, ks2).kernels[1];
  EXPECT_EQ(rk.block.x, 256u);
  EXPECT_EQ(rk.shared_bytes, rc.shared_bytes + 2u * 8u * 32u * 32u * 4u);
  Knobs st3 = k;
  st3["STAGE"] = I{3};
  EXPECT_EQ(op.launch_plan(shape(1, 8192, 96, 6), {}, st3).kernels[1].shared_bytes, 2u * rc.shared_bytes);
  EXPECT_EQ(KdaFwdOp::workspace_chunk_bytes(32, 16), KdaFwdOp::workspace_chunk_bytes(32) - 128 * 32 * 2);
  // WY_IN_RECURRENCE 1: T' (two bf16 terms, C x C) in U0^T's place in the workspace; in shared
  // memory T' and C rows of v (2 BV + 16 bytes each) in place of U0^T's BV x C; the prepare without
  // v's rows.
  Knobs wr = k;
  wr["WY_IN_RECURRENCE"] = I{1};
  const auto pw = op.launch_plan(shape(1, 8192, 96, 6), {}, wr);
  EXPECT_EQ(pw.kernels[1].shared_bytes, rc.shared_bytes + 2u * (2u * 32u * 32u * 2u + 32u * (2u * 64u + 16u) - 64u * 32u * 2u));
  EXPECT_EQ(pw.kernels[0].shared_bytes, pr.shared_bytes - 32u * 128u * 2u);
  EXPECT_EQ(KdaFwdOp::workspace_chunk_bytes(32, 16, 1), KdaFwdOp::workspace_chunk_bytes(32, 16) - 128 * 32 * 2 + 2 * 32 * 32 * 2);
  EXPECT_EQ(KdaFwdOp::workspace_chunk_bytes(16, 16, 1) / 16, 928);
  EXPECT_EQ(KdaFwdOp::workspace_chunk_bytes(16, 16, 2) / 16, 864);  // bytes a token-head
  Knobs wr_ks = wr;
  wr_ks["KSPLIT"] = I{2};
  EXPECT_THROW(op.launch_plan(shape(1, 8192, 96, 6), {}, wr_ks), std::invalid_argument);
  Knobs wr_wg = KdaFwdOp::chunked_knob_defaults();
  wr_wg["MMA"] = std::string("wgmma");
  wr_wg["SEQSPLIT"] = I{1};
  wr_wg["LMTERMS"] = I{3};
  // The defaults' WY_IN_RECURRENCE needs MMA sync.
  EXPECT_THROW(op.launch_plan(shape(1, 8192, 96, 6), {}, wr_wg), std::invalid_argument);
  // WY_IN_RECURRENCE 2 (CHUNK 16 only): no T' in the workspace or the stage; the prepare holds M
  // and T' in fp32 and T' as hi + lo bf16 rows of C + 8.
  Knobs w2 = wr;
  w2["WY_IN_RECURRENCE"] = I{2};
  EXPECT_THROW(op.launch_plan(shape(1, 8192, 96, 6), {}, w2), std::invalid_argument);  // CHUNK 32
  w2["CHUNK"] = I{16};
  Knobs w1 = w2;
  w1["WY_IN_RECURRENCE"] = I{1};
  const auto p2 = op.launch_plan(shape(1, 8192, 96, 6), {}, w2), p1 = op.launch_plan(shape(1, 8192, 96, 6), {}, w1);
  EXPECT_EQ(p2.kernels[1].shared_bytes, p1.kernels[1].shared_bytes - 2u * 2u * 16u * 16u * 2u);
  EXPECT_EQ(p2.kernels[0].shared_bytes, p1.kernels[0].shared_bytes + 2u * 16u * 16u * 4u + 2u * 16u * 24u * 2u);
  // PREPARE_CTAS > 0: the flag reset first (a thread a flag, 1024 CTAs at most), the prepare as
  // min(PREPARE_CTAS, items) persistent CTAs over one grid dimension, the recurrence programmatic.
  Knobs ov = KdaFwdOp::chunked_knob_defaults();
  ov["PREPARE_CTAS"] = I{264};
  ov["SEQSPLIT"] = I{1};
  const auto po = op.launch_plan(shape(1, 8192, 96, 6), {}, ov);
  ASSERT_EQ(po.kernels.size(), 3u);
  EXPECT_EQ(po.kernels[0].entry, "kda_fwd_flags_reset");
  EXPECT_EQ(po.kernels[0].grid.x, (96u * (6u + 512u) + 255u) / 256u);
  EXPECT_EQ(po.kernels[0].block.x, 256u);
  ASSERT_EQ(po.kernels[0].args.size(), 5u);
  EXPECT_EQ(std::get<ArgTensor>(po.kernels[0].args[1]).name, "cu_seqlens");
  EXPECT_FALSE(po.kernels[0].programmatic);
  EXPECT_EQ(po.kernels[1].entry, "kda_fwd_prepare");
  EXPECT_EQ(po.kernels[1].grid.x, 264u);
  EXPECT_EQ(po.kernels[1].grid.y, 1u);
  EXPECT_FALSE(po.kernels[1].programmatic);
  EXPECT_EQ(po.kernels[2].entry, "kda_fwd_recurrence");
  EXPECT_TRUE(po.kernels[2].programmatic);
  // Never more prepare CTAs than items (one token, one head: one slot).
  EXPECT_EQ(op.launch_plan(shape(1, 1, 1, 1), {}, ov).kernels[1].grid.x, 1u);
  EXPECT_FALSE(p.kernels[1].programmatic);  // PREPARE_CTAS 0: the recurrence after the prepare
  // Fixed-length rows: null cu_seqlens, N = B.
  const auto f = op.launch_plan(shape(3, 100, 2, 3), {{"initial_state", "false"}},
                                {{"CHUNK", I{16}}, {"BV", I{16}}, {"FUSED", I{0}}, {"LM_TENSOR_CORES", I{0}}});
  EXPECT_EQ(f.kernels[0].grid.x, 3u + 300u / 16u);
  EXPECT_EQ(std::get<ArgTensor>(f.kernels[0].args[7]).name, "");
  EXPECT_EQ(std::get<ArgTensor>(f.kernels[1].args[2]).name, "");
  EXPECT_EQ(f.kernels[1].block.x, 32u);
  // Every CHUNK's prepare and recurrence layouts fit a CTA.
  for (I c : {16, 32, 64})
    for (I bv : {16, 32, 64, 128})
      for (I stage : {0, 1}) {
        const KdaFwdOp::ChunkedGeometry g{c, bv, 4, stage, 1, false, false};
        EXPECT_LE(KdaFwdOp::chunked_smem_bytes(g), 227 * 1024) << c << " " << bv << " " << stage;
        EXPECT_LE(KdaFwdOp::prepare_smem_bytes(g, true), 227 * 1024) << c;
      }
}

// SEQSPLIT: the segment count from the shape (at most 128 (sequence, head, segment) chains, no
// segment shorter than a chunk, none below 4), and the plan prepare, pass 1, combine, pass 3.
TEST(KdaFwdOp, SequenceSplitSegmentsAndPlan) {
  auto segs = [](const Shape& s, I chunk, I split) { return KdaFwdOp::seq_segments(kda_dims(s), chunk, split); };
  EXPECT_EQ(segs(shape(1, 65536, 4, 1), 16, 16), 16);
  EXPECT_EQ(segs(shape(1, 65536, 4, 1), 16, 32), 32);
  EXPECT_EQ(segs(shape(1, 65536, 16, 1), 16, 32), 8);   // 128 / 16 chains
  EXPECT_EQ(segs(shape(1, 8192, 64, 1), 16, 32), 1);    // scenario 4: 2 segments would not pay
  EXPECT_EQ(segs(shape(1, 8192, 96, 6), 16, 32), 1);    // scenarios 1-3, 5, 6: never
  EXPECT_EQ(segs(shape(1, 1000, 4, 1), 16, 1), 1);      // off
  EXPECT_EQ(segs(shape(1, 64, 4, 1), 16, 16), 4);       // 4 chunks
  EXPECT_EQ(segs(shape(1, 48, 4, 1), 16, 16), 1);       // 3 chunks
  EXPECT_EQ(segs(shape(1, 8192, 40, 1), 16, 32), 1);    // 128 / 40 chains: 3 segments would not pay
  EXPECT_EQ(segs(shape(1, 2000, 4, 5), 16, 32), 6);     // 128 / 20 chains (the longest: 900 tokens)
  const KdaFwdOp op;
  Knobs k = KdaFwdOp::chunked_knob_defaults();
  k["SEQSPLIT"] = I{16};
  const auto p = op.launch_plan(shape(1, 65536, 4, 1), {}, k);
  ASSERT_EQ(p.kernels.size(), 4u);
  EXPECT_EQ(p.kernels[0].entry, "kda_fwd_prepare");
  const auto& p1 = p.kernels[1];
  const auto& cb = p.kernels[2];
  const auto& p3 = p.kernels[3];
  EXPECT_EQ(p1.entry, "kda_fwd_recurrence");
  EXPECT_EQ(p3.entry, "kda_fwd_recurrence");
  EXPECT_EQ(p1.grid.x, 15u);  // (sequence, segment) pairs: segments 0..14, then 1..15
  EXPECT_EQ(p3.grid.x, 15u);
  EXPECT_EQ(p1.grid.z, 4u);   // 256 value columns (S0 and the transition) in slices of 64
  EXPECT_EQ(p3.grid.z, 2u);
  EXPECT_EQ(std::get<std::int32_t>(p1.args[11]), 16);
  EXPECT_EQ(std::get<std::int32_t>(p1.args[12]), 1);
  EXPECT_EQ(std::get<std::int32_t>(p3.args[12]), 3);
  EXPECT_EQ(cb.entry, "kda_fwd_seg_combine");
  EXPECT_EQ(cb.grid.x, 1u);
  EXPECT_EQ(cb.grid.y, 4u);
  EXPECT_EQ(cb.grid.z, 16u);  // 8 value columns a CTA
  EXPECT_EQ(cb.block.x, 256u);
  EXPECT_EQ(cb.shared_bytes, 2u * 128u * 128u * 4u + 8u * 128u * 4u);  // X_j twice, E^T rows
  EXPECT_EQ(std::get<std::int32_t>(cb.args[5]), 16);
  // The workspace holds the segment states of the most segments any SEQSPLIT gives (32 here).
  const KdaDims d = kda_dims(shape(1, 65536, 4, 1));
  EXPECT_GE(KdaFwdOp::workspace_bytes(d), 4 * 31 * 256 * 128 * 4);
  // 160 tokens: 10 chunks, 10 segments at most: the chunk slots of the largest layout, their flags,
  // 16 bytes of alignment and 9 blocks of 128 KB a chain.
  I most = 0;
  for (I c : {16, 32, 64}) most = std::max(most, 4 * (1 + 160 / c) * KdaFwdOp::workspace_chunk_bytes(c));
  EXPECT_EQ(KdaFwdOp::workspace_bytes(kda_dims(shape(1, 160, 4, 1))), most + 4 * (1 + 10) * 4 + 16 + 4 * 9 * 131072);
  // Many chains: the two-kernel plan.
  EXPECT_EQ(op.launch_plan(shape(1, 8192, 96, 1), {}, k).kernels.size(), 2u);
  // Only with WY_IN_RECURRENCE 1 and PREPARE_CTAS 0; powers of two up to 32.
  Knobs bad = k;
  bad["WY_IN_RECURRENCE"] = I{0};
  EXPECT_THROW(op.launch_plan(shape(1, 65536, 4, 1), {}, bad), std::invalid_argument);
  bad = k;
  bad["PREPARE_CTAS"] = I{396};
  EXPECT_THROW(op.launch_plan(shape(1, 65536, 4, 1), {}, bad), std::invalid_argument);
  bad = k;
  bad["SEQSPLIT"] = I{3};
  EXPECT_THROW(op.launch_plan(shape(1, 65536, 4, 1), {}, bad), std::invalid_argument);
  bad["SEQSPLIT"] = I{64};
  EXPECT_THROW(op.launch_plan(shape(1, 65536, 4, 1), {}, bad), std::invalid_argument);
}

// Knobs that name a CHUNK launch kda_fwd_chunked: the same grid and arguments as the recurrent
// entry, WARPS * 32 threads and the layout's dynamic shared memory.
TEST(KdaFwdOp, ChunkedLaunchPlan) {
  const KdaFwdOp op;
  const auto rec = op.launch_plan(shape(1, 8192, 96, 6), {}, {}).kernels.at(0);
  const auto p = op.launch_plan(shape(1, 8192, 96, 6), {}, KdaFwdOp::chunked_fused_knob_defaults());
  ASSERT_EQ(p.kernels.size(), 1u);
  const auto& l = p.kernels[0];
  EXPECT_EQ(l.entry, "kda_fwd_chunked");
  EXPECT_EQ(l.grid.x, 6u);
  EXPECT_EQ(l.grid.y, 96u);
  EXPECT_EQ(l.grid.z, 4u);  // BV = 32
  EXPECT_EQ(l.block.x, 128u);
  ASSERT_EQ(l.args.size(), rec.args.size());
  for (std::size_t i = 0; i < l.args.size(); ++i) {
    ASSERT_EQ(l.args[i].index(), rec.args[i].index()) << i;
    if (i <= 10) {
      EXPECT_EQ(std::get<ArgTensor>(l.args[i]).name, std::get<ArgTensor>(rec.args[i]).name) << i;
    }
  }
  EXPECT_EQ(std::get<I>(l.args[11]), 8192);
  EXPECT_FLOAT_EQ(std::get<float>(l.args[14]), -5.0f);
  // CHUNK = 16, BV = 32: region A 3 x 16 x 129 x 4 (rounded to 16 B) + V 2048 + beta 64 + 2^Gtot
  // 512 + Kd, Qd 2 x 4352 + KrT 6144 + S^T 2 x 8704 + L 1024 + M 2 x 768 + staging (STAGE = 1)
  // q, k, g 3 x 4096 and v 1024.
  EXPECT_EQ(l.shared_bytes, 24768u + 2048u + 64u + 512u + 8704u + 6144u + 17408u + 1024u + 1536u + 12288u + 1024u);
  // Three CTAs a SM at the defaults: 228 KB of shared memory a SM, 1 KB of it reserved per CTA.
  EXPECT_LE(3 * (l.shared_bytes + 1024), 228u * 1024);
  const auto q =
      op.launch_plan(shape(2, 65, 3, 2), {},
                     {{"CHUNK", I{32}}, {"BV", I{128}}, {"WARPS", I{8}}, {"STAGE", I{1}}, {"LM_TENSOR_CORES", I{0}}});
  EXPECT_EQ(q.kernels.at(0).grid.z, 1u);
  EXPECT_EQ(q.kernels.at(0).block.x, 256u);
  for (I c : {16, 32, 64})
    for (I bv : {16, 32, 64, 128}) {
      for (I stage : {0, 1}) {
        const KdaFwdOp::ChunkedGeometry g{c, bv, 4, stage, 0, false, true};
        const bool fits = KdaFwdOp::chunked_smem_bytes(g) <= 227 * 1024;
        EXPECT_EQ(fits, c < 64 || (bv <= 32 && stage == 0)) << c << " " << bv << " " << stage;
      }
    }
}

TEST(KdaFwdOp, ReferenceRejectsWrongSizeStateAndBadCuSeqlens) {
  const KdaFwdOp op;
  const Shape s = shape(1, 115, 2, 3);
  auto ts = filled(op, s, {}, Distribution::Normal, 1);
  std::vector<HostTensor> ref;
  // A state for one sequence instead of three.
  auto bad = ts;
  for (auto& t : bad)
    if (t.name == "initial_state") t = HostTensor("initial_state", DType::F32, {1, 2, 128, 128});
  std::string m = error_of([&] { op.reference(s, {}, bad, ref); });
  EXPECT_NE(m.find("initial_state"), std::string::npos) << m;
  EXPECT_NE(m.find("[3, 2, 128, 128]"), std::string::npos) << m;
  // cu_seqlens that does not increase.
  bad = ts;
  for (auto& t : bad)
    if (t.name == "cu_seqlens") t.set(2, 17.0);
  m = error_of([&] { op.reference(s, {}, bad, ref); });
  EXPECT_NE(m.find("strictly increasing"), std::string::npos) << m;
  // A missing input.
  bad = ts;
  bad.erase(bad.begin() + 3);
  m = error_of([&] { op.reference(s, {}, bad, ref); });
  EXPECT_NE(m.find("no input tensor named 'g'"), std::string::npos) << m;
}

// The op's reference on its own filled inputs: every distribution and both gates give finite
// outputs, and the chunked reference agrees with it.
TEST(KdaFwdOp, ReferenceOnFilledInputsAgreesWithTheChunkedOne) {
  const KdaFwdOp op;
  for (const OpConfig& cfg : {OpConfig{}, OpConfig{{"gate", "softplus"}}})
    for (Distribution dist : ptxevo::evaluator::all_distributions()) {
      const Shape s = shape(1, 241, 2, 7);
      const auto ts = filled(op, s, cfg, dist, 5);
      std::vector<HostTensor> ref;
      op.reference(s, cfg, ts, ref);
      ASSERT_EQ(ref.size(), 2u);
      EXPECT_EQ(ref[0].name, "out");
      EXPECT_EQ(ref[1].name, "final_state");
      const auto c = KdaFwdOp::parse(cfg);
      const auto p = KdaFwdOp::problem(ptxevo::kernels::kda_dims(s), c, ts);
      std::vector<double> out(static_cast<std::size_t>(ref[0].numel())), st(static_cast<std::size_t>(ref[1].numel()));
      ptxevo::kernels::kda_chunked_reference(p, 16, out.data(), st.data());
      double d = 0, n = 0;
      for (I i = 0; i < ref[0].numel(); ++i) {
        const double r = ref[0].get(i);
        ASSERT_TRUE(std::isfinite(r));
        d += (out[static_cast<std::size_t>(i)] - r) * (out[static_cast<std::size_t>(i)] - r);
        n += r * r;
      }
      EXPECT_GT(n, 0.0);
      EXPECT_LT(std::sqrt(d / n), 1e-10) << ptxevo::evaluator::to_string(dist);
      for (I i = 0; i < ref[1].numel(); ++i) ASSERT_NEAR(st[static_cast<std::size_t>(i)], ref[1].get(i), 1e-9 * (1 + std::abs(ref[1].get(i))));
    }
}

// The kernel takes scale and lower_bound as floats, so the fp64 reference must use the same
// rounded values (GCC 12's SLP vectorizer once dropped the rounding: CMakeLists.txt).
TEST(KdaFwdOp, ProblemGivesTheReferenceTheKernelsFloatScalars) {
  const KdaFwdOp op;
  const Shape s = shape(1, 3, 1, 1);
  const OpConfig cfg{{"scale", "0.1"}, {"lower_bound", "-4.3"}};
  const auto ts = filled(op, s, cfg, Distribution::Normal, 1);
  const auto p = KdaFwdOp::problem(ptxevo::kernels::kda_dims(s), KdaFwdOp::parse(cfg), ts);
  EXPECT_EQ(p.scale, static_cast<double>(0.1f));
  EXPECT_EQ(p.lower_bound, static_cast<double>(-4.3f));
  EXPECT_NE(p.scale, 0.1);
  const auto d = KdaFwdOp::problem(ptxevo::kernels::kda_dims(s), KdaFwdOp::parse({}), ts);
  EXPECT_EQ(d.scale, static_cast<double>(static_cast<float>(1 / std::sqrt(128.0))));
}

// The gate inputs are drawn in parallel chunks: the values depend on the generator's state only.
TEST(KdaFwdOp, GateInputFillIsReproducibleFromTheSeed) {
  const KdaFwdOp op;
  const auto descs = op.tensors(shape(1, 3000, 6, 1), {});
  for (const auto& d : descs) {
    if (d.name != "g" && d.name != "dt_bias") continue;
    HostTensor a(d.name, d.dtype, d.shape), b(d.name, d.dtype, d.shape), c(d.name, d.dtype, d.shape);
    std::mt19937_64 r1(11), r2(11), r3(12);
    op.fill_fixed(d, r1, a);
    op.fill_fixed(d, r2, b);
    op.fill_fixed(d, r3, c);
    EXPECT_EQ(a.data, b.data) << d.name;
    EXPECT_NE(a.data, c.data) << d.name;
  }
}

TEST(KdaFwdOp, FillRangesForGateInputs) {
  const KdaFwdOp op;
  const Shape s = shape(1, 8192, 12, 8);
  const auto descs = op.tensors(s, {});
  std::mt19937_64 rng(3);
  for (const auto& d : descs) {
    if (!d.fixed_distribution) continue;
    HostTensor t(d.name, d.dtype, d.shape);
    op.fill_fixed(d, rng, t);
    if (d.name == "cu_seqlens") {
      for (I i = 0; i <= 8; ++i) EXPECT_EQ(t.get(i), 1024.0 * static_cast<double>(i));
    } else if (d.name == "A_log") {
      for (I i = 0; i < t.numel(); ++i) EXPECT_TRUE(t.get(i) >= -1.0 && t.get(i) <= std::log(16.0) + 1e-6);
    } else {
      // Constants -8, 0, +8 (g) or 0 (dt_bias) appear as whole heads; everything stays in a
      // sane range (|x| < 8 * 6 sigma).
      std::set<double> per_head_first;
      double mx = 0;
      for (I i = 0; i < t.numel(); ++i) mx = std::max(mx, std::abs(t.get(i)));
      EXPECT_LT(mx, 48.0) << d.name;
      for (I h = 0; h < 12; ++h) per_head_first.insert(t.get(h * 128));
      EXPECT_TRUE(per_head_first.count(0.0)) << d.name;
      if (d.name == "g") {
        EXPECT_TRUE(per_head_first.count(8.0));
        EXPECT_TRUE(per_head_first.count(-8.0));
      }
    }
  }
  HostTensor q("q", DType::BF16, {1});
  EXPECT_THROW(op.fill_fixed(descs[0], rng, q), std::logic_error);
}

// docs/kda.md section 2.3's table: scenario 1 (H = 96, fixed 8192) 1.021 GB, scenario 3 (8 x 1024)
// 1.109 GB, F_canon 7.73e10; scenario 4 (H = 64) 0.681 GB.
TEST(KdaFwdOp, BytesAndFlopsMatchKdaMd) {
  const KdaFwdOp op;
  EXPECT_NEAR(op.bytes(shape(1, 8192, 96, 1), {}) / 1e9, 1.021, 0.001);
  EXPECT_NEAR(op.bytes(shape(1, 8192, 96, 6), {}) / 1e9, 1.084, 0.001);
  EXPECT_NEAR(op.bytes(shape(1, 8192, 96, 8), {}) / 1e9, 1.109, 0.001);
  EXPECT_NEAR(op.bytes(shape(1, 8192, 64, 1), {}) / 1e9, 0.681, 0.001);
  EXPECT_NEAR(op.flops(shape(1, 8192, 96, 8), {}), 7.73e10, 0.01e10);
  // 1282 bytes per token-head without states.
  const double no_state = op.bytes(shape(1, 1000, 1, 1), {{"initial_state", "false"}, {"final_state", "false"}});
  EXPECT_NEAR(no_state, 1282.0 * 1000 + 4 + 512, 1e-6);
}

TEST(KdaFwdOp, Tolerances) {
  const KdaFwdOp op;
  EXPECT_EQ(op.tolerance("out", {}).rel_l2, 1e-2);
  EXPECT_EQ(op.tolerance("final_state", {}).rel_l2, 1e-2);
  EXPECT_THROW(op.tolerance("final_state", {{"final_state", "false"}}), std::invalid_argument);
  EXPECT_THROW(op.tolerance("q", {}), std::invalid_argument);
}

}  // namespace

namespace {

// Plausible kernel bugs, emulated in fp64 on the op's own inputs: the tolerance and the fills
// must reject each (each is far outside 1e-2), while the faithful emulation sits at rounding.
enum class Bug { None, ReadBeforeWrite, NoDecay, KFirstState, NoBetaSigmoid };

std::vector<double> emulate_out(const ptxevo::kernels::KdaProblem& p, Bug bug) {
  const std::size_t K = 128, V = 128;
  std::vector<double> out(static_cast<std::size_t>(p.total_tokens() * p.heads) * V);
  for (I n = 0; n < p.sequences(); ++n)
    for (I h = 0; h < p.heads; ++h) {
      std::vector<double> s(K * V, 0.0);
      if (p.initial_state)
        for (std::size_t j = 0; j < V; ++j)
          for (std::size_t i = 0; i < K; ++i) {
            float f;
            const std::size_t idx = static_cast<std::size_t>((n * p.heads + h) * 128 * 128) + j * K + i;
            std::memcpy(&f, p.initial_state + 4 * idx, 4);
            // The bug reads [N, H, K, V] as if it were the V-first layout.
            (bug == Bug::KFirstState ? s[j * V + i] : s[i * V + j]) = f;
          }
      for (I t = p.cu_seqlens[static_cast<std::size_t>(n)]; t < p.cu_seqlens[static_cast<std::size_t>(n + 1)]; ++t) {
        const auto tok = ptxevo::kernels::kda_token(p, t, h);
        double b = tok.beta;
        if (bug == Bug::NoBetaSigmoid) {  // the raw logit
          std::uint16_t raw;
          std::memcpy(&raw, p.beta + 2 * (t * p.heads + h), 2);
          b = ptxevo::evaluator::bf16_to_double(raw);
        }
        std::vector<double> r(tok.v), o(V, 0.0);
        for (std::size_t i = 0; i < K; ++i)
          for (std::size_t j = 0; j < V; ++j) {
            if (bug != Bug::NoDecay) s[i * V + j] *= std::exp(tok.a[i]);
            r[j] -= tok.k[i] * s[i * V + j];
          }
        if (bug == Bug::ReadBeforeWrite)
          for (std::size_t i = 0; i < K; ++i)
            for (std::size_t j = 0; j < V; ++j) o[j] += tok.q[i] * s[i * V + j];
        for (std::size_t i = 0; i < K; ++i)
          for (std::size_t j = 0; j < V; ++j) {
            s[i * V + j] += b * tok.k[i] * r[j];
            if (bug != Bug::ReadBeforeWrite) o[j] += tok.q[i] * s[i * V + j];
          }
        for (std::size_t j = 0; j < V; ++j) out[static_cast<std::size_t>(t * p.heads + h) * V + j] = p.scale * o[j];
      }
    }
  return out;
}

TEST(KdaFwdOp, PlausibleBugsFailTheTolerance) {
  const KdaFwdOp op;
  const Shape s = shape(1, 241, 4, 7);
  for (Distribution dist : ptxevo::evaluator::all_distributions()) {
    const auto ts = filled(op, s, {}, dist, 9);
    std::vector<HostTensor> ref;
    op.reference(s, {}, ts, ref);
    const auto p = KdaFwdOp::problem(ptxevo::kernels::kda_dims(s), KdaFwdOp::parse({}), ts);
    auto rel = [&](Bug bug) {
      const auto out = emulate_out(p, bug);
      double d = 0, n = 0;
      for (I i = 0; i < ref[0].numel(); ++i) {
        const double r = ref[0].get(i), x = out[static_cast<std::size_t>(i)];
        // The gate rejects a non-finite output before any tolerance.
        if (!std::isfinite(x)) return std::numeric_limits<double>::infinity();
        d += (x - r) * (x - r);
        n += r * r;
      }
      return std::sqrt(d / n);
    };
    const double tol = op.tolerance("out", {}).rel_l2;
    EXPECT_LT(rel(Bug::None), 1e-12) << to_string(dist);
    for (Bug bug : {Bug::ReadBeforeWrite, Bug::NoDecay, Bug::KFirstState, Bug::NoBetaSigmoid})
      EXPECT_GT(rel(bug), 5 * tol) << to_string(dist) << " bug " << static_cast<int>(bug);
  }
}

}  // namespace
