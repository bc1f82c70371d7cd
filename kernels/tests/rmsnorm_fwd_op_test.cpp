// RmsNormFwdOp: config validation (bias, residual), tensors, the per-N dispatch of launch plans
// (entry, rows per CTA, cluster, stage), the fp64 reference against naive computations,
// bytes/flops and tolerances. The CPU emulation of the seed: rmsnorm_fwd_emulation_test.cpp; the
// specs and the NVRTC builds: rmsnorm_fwd_build_test.cpp.
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
#include "ir/parser.hpp"
#include "kernels/builtin_ops.hpp"
#include "kernels/rmsnorm/rmsnorm_fwd_op.hpp"
#include "kernels/tests/rmsnorm_test_support.hpp"

namespace {

using namespace rmsnorm_test;


// ---------------------------------------------------------------------------------------------
// Options, tensors, defines

TEST(RmsNormFwdOp, ValidateAcceptsGoodConfigs) {
  RmsNormFwdOp op;
  EXPECT_EQ(op.name(), "rmsnorm_fwd");
  EXPECT_EQ(op.validate({}), "");
  EXPECT_EQ(op.validate({{"x_dtype", "bf16"}, {"w_dtype", "fp32"}, {"has_weight", "true"}, {"store_rstd", "false"},
                         {"eps", "1e-06"}}),
            "");
  EXPECT_EQ(op.validate({{"x_dtype", "fp16"}, {"w_dtype", "same"}}), "");
  EXPECT_EQ(op.validate({{"x_dtype", "fp32"}, {"has_weight", "false"}, {"store_rstd", "true"}, {"eps", "0"}}), "");
  EXPECT_EQ(op.validate({{"eps", "0.00001"}}), "");
  EXPECT_EQ(op.validate({{"has_bias", "true"}, {"b_dtype", "same"}, {"has_residual", "true"},
                         {"residual_out_dtype", "fp32"}}),
            "");
  EXPECT_EQ(op.validate({{"has_bias", "false"}, {"has_residual", "false"}}), "");
  EXPECT_EQ(op.validate({{"has_residual", "true"}, {"residual_out_dtype", "x"}, {"has_weight", "false"}}), "");
}

TEST(RmsNormFwdOp, ValidateRejectsBadConfigs) {
  RmsNormFwdOp op;
  auto rejects = [&](const OpConfig& cfg, const std::string& mentions) {
    const std::string err = op.validate(cfg);
    EXPECT_NE(err, "") << "accepted a bad config mentioning " << mentions;
    EXPECT_NE(err.find(mentions), std::string::npos) << err;
  };
  rejects({{"residual", "true"}}, "unknown option 'residual'");
  rejects({{"bias", "true"}}, "unknown option 'bias'");
  rejects({{"x_dtype", "int8"}}, "x_dtype");
  rejects({{"x_dtype", "float32"}}, "x_dtype");
  rejects({{"w_dtype", "bf16"}}, "w_dtype");
  rejects({{"has_weight", "yes"}}, "has_weight");
  rejects({{"store_rstd", "1"}}, "store_rstd");
  rejects({{"has_bias", "1"}}, "has_bias");
  rejects({{"has_residual", "on"}}, "has_residual");
  rejects({{"has_bias", "true"}, {"b_dtype", "bf16"}}, "b_dtype must be fp32 or same");
  rejects({{"b_dtype", "fp32"}}, "b_dtype is set but has_bias is false");
  rejects({{"has_residual", "true"}, {"residual_out_dtype", "bf16"}}, "residual_out_dtype must be x");
  rejects({{"residual_out_dtype", "fp32"}}, "residual_out_dtype is set but has_residual is false");
  rejects({{"eps", "abc"}}, "eps");
  rejects({{"eps", "1e-6x"}}, "eps");
  rejects({{"eps", "-1e-6"}}, "eps");
  rejects({{"eps", "nan"}}, "eps");
  rejects({{"eps", "inf"}}, "eps");
  rejects({{"eps", "1e39"}}, "eps");
  rejects({{"eps", ""}}, "eps");
  // Every other entry point refuses a bad config too.
  EXPECT_THROW(op.tensors(shape(1, 1), {{"x_dtype", "int8"}}), std::invalid_argument);
  EXPECT_THROW(op.launch_plan(shape(1, 1), {{"eps", "x"}}, {}), std::invalid_argument);
  EXPECT_THROW(op.template_defines({{"has_bias", "maybe"}}), std::invalid_argument);
  EXPECT_THROW(op.bytes(shape(1, 1), {{"residual_out_dtype", "fp32"}}), std::invalid_argument);
}

TEST(RmsNormFwdOp, TensorsFollowTheOptions) {
  RmsNormFwdOp op;
  auto t = op.tensors(shape(64, 4096), {});
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].name, "x");
  EXPECT_EQ(t[0].dtype, DType::BF16);
  EXPECT_EQ(t[0].shape, (std::vector<std::int64_t>{64, 4096}));
  EXPECT_EQ(t[0].role, Role::In);
  EXPECT_FALSE(t[0].fixed_distribution);
  EXPECT_EQ(t[1].name, "w");
  EXPECT_EQ(t[1].dtype, DType::F32);
  EXPECT_EQ(t[1].shape, (std::vector<std::int64_t>{4096}));
  EXPECT_EQ(t[1].role, Role::In);
  EXPECT_TRUE(t[1].fixed_distribution);
  EXPECT_EQ(t[2].name, "out");
  EXPECT_EQ(t[2].dtype, DType::BF16);
  EXPECT_EQ(t[2].shape, (std::vector<std::int64_t>{64, 4096}));
  EXPECT_EQ(t[2].role, Role::Out);

  t = op.tensors(shape(5, 7), {{"has_weight", "false"}, {"store_rstd", "true"}, {"x_dtype", "fp16"}});
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].name, "x");
  EXPECT_EQ(t[0].dtype, DType::F16);
  EXPECT_EQ(t[1].name, "out");
  EXPECT_EQ(t[1].dtype, DType::F16);
  EXPECT_EQ(t[2].name, "rstd");
  EXPECT_EQ(t[2].dtype, DType::F32);
  EXPECT_EQ(t[2].shape, (std::vector<std::int64_t>{5}));
  EXPECT_EQ(t[2].role, Role::Out);

  t = op.tensors(shape(5, 7), {{"store_rstd", "true"}, {"x_dtype", "fp16"}, {"w_dtype", "same"}});
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[1].name, "w");
  EXPECT_EQ(t[1].dtype, DType::F16);
  EXPECT_EQ(t[3].name, "rstd");

  t = op.tensors(shape(2, 3), {{"has_weight", "false"}});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "x");
  EXPECT_EQ(t[1].name, "out");

  // Everything: x, w, b, residual in; out, residual_out, rstd out.
  t = op.tensors(shape(5, 7), {{"x_dtype", "fp16"}, {"has_bias", "true"}, {"b_dtype", "same"}, {"has_residual", "true"},
                               {"residual_out_dtype", "fp32"}, {"store_rstd", "true"}});
  ASSERT_EQ(t.size(), 7u);
  const std::vector<std::string> names = {"x", "w", "b", "residual", "out", "residual_out", "rstd"};
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(t[i].name, names[i]) << i;
  EXPECT_EQ(t[2].dtype, DType::F16);
  EXPECT_EQ(t[2].shape, (std::vector<std::int64_t>{7}));
  EXPECT_EQ(t[2].role, Role::In);
  EXPECT_TRUE(t[2].fixed_distribution);
  EXPECT_EQ(t[3].dtype, DType::F16);
  EXPECT_EQ(t[3].shape, (std::vector<std::int64_t>{5, 7}));
  EXPECT_EQ(t[3].role, Role::In);
  EXPECT_FALSE(t[3].fixed_distribution);  // drawn from the gate's distributions, like x
  EXPECT_EQ(t[5].dtype, DType::F32);
  EXPECT_EQ(t[5].shape, (std::vector<std::int64_t>{5, 7}));
  EXPECT_EQ(t[5].role, Role::Out);
  // residual_out defaults to x's dtype; the bias to fp32.
  t = op.tensors(shape(2, 3), kResidualBias);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(t[2].name, "b");
  EXPECT_EQ(t[2].dtype, DType::F32);
  EXPECT_EQ(t[5].name, "residual_out");
  EXPECT_EQ(t[5].dtype, DType::BF16);
}

TEST(RmsNormFwdOp, ShapesNeedPositiveMAndN) {
  RmsNormFwdOp op;
  EXPECT_THROW(op.tensors({{"M", 4}}, {}), std::invalid_argument);
  EXPECT_THROW(op.tensors({{"N", 4}}, {}), std::invalid_argument);
  EXPECT_THROW(op.tensors(shape(0, 4), {}), std::invalid_argument);
  EXPECT_THROW(op.tensors(shape(4, 0), {}), std::invalid_argument);
  EXPECT_THROW(op.tensors(shape(4, -1), {}), std::invalid_argument);
  EXPECT_THROW(op.tensors({{"M", 4}, {"N", 4}, {"K", 4}}, {}), std::invalid_argument);
  EXPECT_THROW(op.tensors(shape(std::int64_t{1} << 40, std::int64_t{1} << 40), {}), std::invalid_argument);
  EXPECT_THROW(op.launch_plan(shape(0, 4), {}, {}), std::invalid_argument);
  EXPECT_NO_THROW(op.tensors(shape(1, 1), {}));
}

TEST(RmsNormFwdOp, TemplateDefines) {
  RmsNormFwdOp op;
  auto d = op.template_defines({});
  EXPECT_EQ(d.at("XT"), "__nv_bfloat16");
  EXPECT_EQ(d.at("WT"), "float");
  EXPECT_EQ(d.at("BT"), "float");
  EXPECT_EQ(d.at("RT"), "__nv_bfloat16");
  EXPECT_EQ(d.at("HAS_WEIGHT"), "1");
  EXPECT_EQ(d.at("HAS_BIAS"), "0");
  EXPECT_EQ(d.at("HAS_RESIDUAL"), "0");
  EXPECT_EQ(d.at("STORE_RSTD"), "0");
  EXPECT_EQ(d.size(), 8u);
  d = op.template_defines({{"x_dtype", "fp16"}, {"w_dtype", "same"}, {"has_weight", "false"}, {"store_rstd", "true"}});
  EXPECT_EQ(d.at("XT"), "__half");
  EXPECT_EQ(d.at("WT"), "__half");
  EXPECT_EQ(d.at("HAS_WEIGHT"), "0");
  EXPECT_EQ(d.at("STORE_RSTD"), "1");
  d = op.template_defines({{"x_dtype", "fp32"}, {"w_dtype", "same"}});
  EXPECT_EQ(d.at("XT"), "float");
  EXPECT_EQ(d.at("WT"), "float");
  d = op.template_defines({{"x_dtype", "fp16"}, {"has_bias", "true"}, {"b_dtype", "same"}, {"has_residual", "true"},
                           {"residual_out_dtype", "fp32"}});
  EXPECT_EQ(d.at("BT"), "__half");
  EXPECT_EQ(d.at("RT"), "float");
  EXPECT_EQ(d.at("HAS_BIAS"), "1");
  EXPECT_EQ(d.at("HAS_RESIDUAL"), "1");
}

// ---------------------------------------------------------------------------------------------
// Launch plans

TEST(RmsNormFwdOp, LaunchPlanDefaults) {
  RmsNormFwdOp op;
  const auto p = op.launch_plan(shape(32768, 4096), {}, {});
  const KernelLaunch& l = only_launch(p);
  // 4096 / (ITEMS 8 * VEC 8) = 64 threads per row, 512 / 64 = 8 rows per CTA.
  EXPECT_EQ(l.entry, "rmsnorm_fwd_tpr64");
  EXPECT_EQ(l.grid.x, 4096u);
  EXPECT_EQ(l.grid.y, 1u);
  EXPECT_EQ(l.grid.z, 1u);
  EXPECT_EQ(l.block.x, 512u);
  EXPECT_EQ(l.block.y, 1u);
  EXPECT_EQ(l.block.z, 1u);
  EXPECT_EQ(l.shared_bytes, 0u);
  EXPECT_EQ(l.cluster.x * l.cluster.y * l.cluster.z, 1u);
  ASSERT_EQ(l.args.size(), 10u);
  EXPECT_EQ(arg_name(l, 0), "x");
  EXPECT_EQ(arg_name(l, 1), "w");
  EXPECT_EQ(arg_name(l, 2), "");  // no bias
  EXPECT_EQ(arg_name(l, 3), "");  // no residual
  EXPECT_EQ(arg_name(l, 4), "out");
  EXPECT_EQ(arg_name(l, 5), "");  // no residual_out
  EXPECT_EQ(arg_name(l, 6), "");  // no rstd
  EXPECT_EQ(std::get<std::int64_t>(l.args[7]), 32768);
  EXPECT_EQ(std::get<std::int64_t>(l.args[8]), 4096);
  EXPECT_EQ(std::get<float>(l.args[9]), 1e-6f);
  // The defaults equal an explicit default assignment.
  const auto q = op.launch_plan(shape(32768, 4096), {}, RmsNormFwdOp::knob_defaults(DType::BF16));
  EXPECT_EQ(only_launch(q).entry, l.entry);
  EXPECT_EQ(only_launch(q).grid.x, l.grid.x);
  EXPECT_EQ(only_launch(q).block.x, l.block.x);
}

// With the default knobs (THREADS 512, TPR 8, ITEMS 8, VEC 8, CLUSTER 4) one assignment covers
// every benchmark row: a thread keeps 64 elements, so rows up to 32768 sit in one CTA's registers
// and longer ones in a cluster's (at most 4 CTAs; beyond that a slice is re-read).
TEST(RmsNormFwdOp, DispatchPicksTheEntryPerN) {
  RmsNormFwdOp op;
  struct Case {
    std::int64_t m, n;
    const char* entry;
    std::int64_t tpr, rows, cluster;
    std::uint32_t grid_x;
  };
  const std::vector<Case> cases = {
      {32768, 256, "rmsnorm_fwd_tpr8", 8, 64, 1, 512},
      {32768, 512, "rmsnorm_fwd_tpr8", 8, 64, 1, 512},
      {32768, 1024, "rmsnorm_fwd_tpr16", 16, 32, 1, 1024},
      {32768, 2048, "rmsnorm_fwd_tpr32", 32, 16, 1, 2048},
      {32768, 4096, "rmsnorm_fwd_tpr64", 64, 8, 1, 4096},
      {32768, 8192, "rmsnorm_fwd_tpr128", 128, 4, 1, 8192},
      {32768, 16384, "rmsnorm_fwd_tpr256", 256, 2, 1, 16384},
      {32768, 32768, "rmsnorm_fwd_tpr512", 512, 1, 1, 32768},
      {32768, 65536, "rmsnorm_fwd_cluster", 512, 1, 2, 65536},
      {16384, 131072, "rmsnorm_fwd_cluster", 512, 1, 4, 65536},
      {8192, 262144, "rmsnorm_fwd_cluster", 512, 1, 4, 32768},
      // Edge cases: tiny rows take the smallest entry; odd N rounds its thread count up.
      {1, 1, "rmsnorm_fwd_tpr8", 8, 64, 1, 1},
      {3, 7, "rmsnorm_fwd_tpr8", 8, 64, 1, 1},
      {7, 4097, "rmsnorm_fwd_tpr128", 128, 4, 1, 2},
      {3, 131071, "rmsnorm_fwd_cluster", 512, 1, 4, 12},
      {2, 1u << 20, "rmsnorm_fwd_cluster", 512, 1, 4, 8},  // capped at CLUSTER; the rest is re-read
  };
  const RmsNormFwdOp::Config cfg;
  const auto g = RmsNormFwdOp::geometry(cfg, {});
  for (const Case& c : cases) {
    SCOPED_TRACE("M=" + std::to_string(c.m) + " N=" + std::to_string(c.n));
    const auto d = RmsNormFwdOp::dispatch(cfg, g, c.m, c.n);
    EXPECT_EQ(d.entry, c.entry);
    EXPECT_EQ(d.tpr, c.tpr);
    EXPECT_EQ(d.rows_per_cta, c.rows);
    EXPECT_EQ(d.cluster, c.cluster);
    EXPECT_EQ(d.shared_bytes, 0);
    const auto plan = op.launch_plan(shape(c.m, c.n), {}, {});
    const KernelLaunch& l = only_launch(plan);
    EXPECT_EQ(l.entry, c.entry);
    EXPECT_EQ(l.grid.x, c.grid_x);
    EXPECT_EQ(l.grid.y, 1u);
    EXPECT_EQ(l.block.x, 512u);
    EXPECT_EQ(l.cluster.x, static_cast<std::uint32_t>(c.cluster));
    EXPECT_EQ(l.cluster.y * l.cluster.z, 1u);
    EXPECT_EQ(l.grid.x % l.cluster.x, 0u);
  }
}

// SPREAD_CTAS: few rows get more threads per row, then bigger clusters, until the grid has that
// many CTAs; shapes with enough rows keep the plan they had.
TEST(RmsNormFwdOp, DispatchSpreadsFewRows) {
  const RmsNormFwdOp::Config cfg;
  const auto g = RmsNormFwdOp::geometry(cfg, {{"SPREAD_CTAS", I{132}}});
  struct Case {
    std::int64_t m, n;
    const char* entry;
    std::int64_t tpr, cluster;
  };
  const Case cases[] = {
      {1, 4096, "rmsnorm_fwd_tpr512", 512, 1},     // one vector a thread (64 threads without)
      {8, 4096, "rmsnorm_fwd_tpr512", 512, 1},     // 8 CTAs instead of 1
      {64, 4096, "rmsnorm_fwd_tpr512", 512, 1},    // 64 CTAs
      {128, 8192, "rmsnorm_fwd_cluster", 512, 2},  // 256 CTAs, a vector a thread
      {512, 4096, "rmsnorm_fwd_tpr256", 256, 1},   // 256 CTAs of two rows reach 132
      {4096, 4096, "rmsnorm_fwd_tpr64", 64, 1},    // enough rows: as without
      {1, 8, "rmsnorm_fwd_tpr8", 8, 1},            // one vector: nothing to spread
      {2, 65536, "rmsnorm_fwd_cluster", 512, 4},   // cluster 2 -> 4 (CLUSTER), 8 CTAs
      {2, 32768, "rmsnorm_fwd_cluster", 512, 4},   // from one CTA a row to clusters of 4
      {2, 8192, "rmsnorm_fwd_cluster", 512, 2},    // 4 would leave threads without a vector
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("M=" + std::to_string(c.m) + " N=" + std::to_string(c.n));
    const auto d = RmsNormFwdOp::dispatch(cfg, g, c.m, c.n);
    EXPECT_EQ(d.entry, c.entry);
    EXPECT_EQ(d.tpr, c.tpr);
    EXPECT_EQ(d.cluster, c.cluster);
    EXPECT_EQ(d.rows_per_cta * d.tpr, g.threads);
  }
  // The launch follows: M = 8, N = 4096 launches 8 CTAs.
  const auto plan = RmsNormFwdOp().launch_plan(shape(8, 4096), {}, {{"SPREAD_CTAS", I{132}}});
  const KernelLaunch& l = only_launch(plan);
  EXPECT_EQ(l.entry, "rmsnorm_fwd_tpr512");
  EXPECT_EQ(l.grid.x, 8u);
  EXPECT_FALSE(l.programmatic);
  const auto early = RmsNormFwdOp().launch_plan(shape(8, 4096), {}, {{"EARLY_LAUNCH", I{1}}});
  EXPECT_TRUE(only_launch(early).programmatic);  // the kernel waits on griddepcontrol itself
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"EARLY_LAUNCH", I{2}}}), std::invalid_argument);
  // PERSISTENT_CTAS caps the grid of the tpr entries (they walk the row groups), not clusters'.
  const Knobs persistent = {{"PERSISTENT_CTAS", I{264}}};
  const auto p1 = RmsNormFwdOp().launch_plan(shape(32768, 4096), {}, persistent);
  EXPECT_EQ(only_launch(p1).grid.x, 264u);  // 4096 groups of 8 rows
  const auto p2 = RmsNormFwdOp().launch_plan(shape(100, 4096), {}, persistent);
  EXPECT_EQ(only_launch(p2).grid.x, 13u);  // fewer groups than the cap
  const auto p3 = RmsNormFwdOp().launch_plan(shape(1000, 65536), {}, persistent);
  EXPECT_EQ(only_launch(p3).entry, "rmsnorm_fwd_cluster");
  EXPECT_EQ(only_launch(p3).grid.x, 2000u);  // a cluster of 2 per row, as without
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"PERSISTENT_CTAS", I{-1}}}), std::invalid_argument);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SPREAD_CTAS", I{-1}}}), std::invalid_argument);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"WEIGHT_EARLY", I{2}}}), std::invalid_argument);
}

// WIDE_ROWS: up to that many rows, a row that would span a cluster (or more than a CTA's
// registers) gets one CTA of 1024 threads, when they hold it in registers; nothing else changes.
TEST(RmsNormFwdOp, DispatchGivesFewLongRowsACtaOf1024Threads) {
  const RmsNormFwdOp::Config cfg;
  const Knobs decode = {{"SPREAD_CTAS", I{132}}, {"ITEMS", I{2}}, {"WIDE_ROWS", I{128}}};
  const auto g = RmsNormFwdOp::geometry(cfg, decode);
  struct Case {
    std::int64_t m, n;
    const char* entry;
  };
  const Case cases[] = {
      {2, 8192, "rmsnorm_fwd_wide"},       // a cluster of 2 without
      {128, 8192, "rmsnorm_fwd_wide"},     // M == WIDE_ROWS
      {129, 8192, "rmsnorm_fwd_cluster"},  // more rows: the cluster
      {2, 16384, "rmsnorm_fwd_wide"},      // 1024 threads x 2 vectors of 8 hold the row exactly
      {2, 16392, "rmsnorm_fwd_cluster"},   // one vector more than they hold
      {8, 4096, "rmsnorm_fwd_tpr512"},     // one CTA of THREADS holds the row: no cluster to avoid
      {1000, 256, "rmsnorm_fwd_tpr32"},  // short rows: spread as without
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("M=" + std::to_string(c.m) + " N=" + std::to_string(c.n));
    const auto d = RmsNormFwdOp::dispatch(cfg, g, c.m, c.n);
    EXPECT_EQ(d.entry, c.entry);
    const bool wide = d.entry == "rmsnorm_fwd_wide";
    EXPECT_EQ(d.threads, wide ? RmsNormFwdOp::kWideThreads : g.threads);
    EXPECT_EQ(d.rows_per_cta * d.tpr, d.threads);
    if (wide) {
      EXPECT_EQ(d.cluster, 1);
      EXPECT_EQ(d.shared_bytes, 0);
    }
  }
  // The launch: a CTA of 1024 threads per row, never capped by PERSISTENT_CTAS, programmatic
  // with EARLY_LAUNCH like the other entries.
  Knobs k = decode;
  k["PERSISTENT_CTAS"] = I{132};
  k["EARLY_LAUNCH"] = I{1};
  const auto plan = RmsNormFwdOp().launch_plan(shape(100, 8192), {}, k);
  const KernelLaunch& l = only_launch(plan);
  EXPECT_EQ(l.entry, "rmsnorm_fwd_wide");
  EXPECT_EQ(l.grid.x, 100u);
  EXPECT_EQ(l.block.x, 1024u);
  EXPECT_EQ(l.cluster.x, 1u);
  EXPECT_TRUE(l.programmatic);
  // Without a cluster (CLUSTER 1) a long row re-reads what 512 threads cannot hold: wide instead.
  Knobs flat = decode;
  flat["CLUSTER"] = I{1};
  EXPECT_EQ(RmsNormFwdOp::dispatch(cfg, RmsNormFwdOp::geometry(cfg, flat), 4, 16384).entry, "rmsnorm_fwd_wide");
  // THREADS 1024 has no wide entry (its own CTAs are as wide); WIDE_ROWS 0 none either.
  Knobs full = decode;
  full["THREADS"] = I{1024};
  const auto gf = RmsNormFwdOp::geometry(cfg, full);
  EXPECT_NE(RmsNormFwdOp::dispatch(cfg, gf, 2, 32768).entry, "rmsnorm_fwd_wide");
  const auto entries = RmsNormFwdOp::entries(gf);
  EXPECT_EQ(std::count(entries.begin(), entries.end(), "rmsnorm_fwd_wide"), 0);
  const auto with = RmsNormFwdOp::entries(g);
  EXPECT_EQ(std::count(with.begin(), with.end(), "rmsnorm_fwd_wide"), 1);
  const auto none = RmsNormFwdOp::entries(RmsNormFwdOp::geometry(cfg, {{"SPREAD_CTAS", I{132}}}));
  EXPECT_EQ(std::count(none.begin(), none.end(), "rmsnorm_fwd_wide"), 0);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"WIDE_ROWS", I{-1}}}), std::invalid_argument);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"WIDE_ROWS", I{65536}}}), std::invalid_argument);
}

// SMALL_MIN_CTAS: the small entries take a shape only when the other entries' plan would launch
// at least that many CTAs (a cluster counts its CTAs, the wide entry one a row).
TEST(RmsNormFwdOp, DispatchGivesSmallCtasOnlyBeyondAWaveOfTheOthers) {
  const RmsNormFwdOp::Config cfg;
  const Knobs k = {{"THREADS", I{512}},       {"ITEMS", I{2}},         {"SMALL_THREADS", I{512}},
                   {"SMALL_ITEMS", I{2}},     {"SMALL_MIN_ROWS", I{1}}, {"SMALL_MIN_CTAS", I{264}},
                   {"WIDE_ROWS", I{128}},     {"SPREAD_CTAS", I{132}}};
  const auto g = RmsNormFwdOp::geometry(cfg, k);
  struct Case {
    std::int64_t m, n;
    const char* entry;
  };
  const Case cases[] = {
      {512, 4096, "rmsnorm_fwd_tpr256"},      // 256 CTAs of two rows: below 264
      {528, 4096, "rmsnorm_fwd_small256"},    // 264 CTAs
      {4096, 4096, "rmsnorm_fwd_small256"},
      {263, 8192, "rmsnorm_fwd_tpr512"},      // one row a CTA: 263
      {264, 8192, "rmsnorm_fwd_small512"},
      {128, 8192, "rmsnorm_fwd_wide"},        // the wide entry's 128 CTAs
      {16384, 7168, "rmsnorm_fwd_small512"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("M=" + std::to_string(c.m) + " N=" + std::to_string(c.n));
    EXPECT_EQ(RmsNormFwdOp::dispatch(cfg, g, c.m, c.n).entry, c.entry);
  }
  // 0: every shape the small tile holds (as before the knob).
  const auto all = RmsNormFwdOp::geometry(cfg, {{"SMALL_THREADS", I{512}}, {"SMALL_ITEMS", I{2}}, {"SMALL_MIN_ROWS", I{1}}});
  EXPECT_EQ(RmsNormFwdOp::dispatch(cfg, all, 512, 4096).entry, "rmsnorm_fwd_small256");
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_MIN_CTAS", I{-1}}}), std::invalid_argument);
}

// SMALL_THREADS: shapes of at least SMALL_MIN_ROWS rows whose row SMALL_THREADS threads of
// SMALL_ITEMS vectors hold take the small entries (CTAs of SMALL_THREADS, T >= TPR); others keep
// the plan they had, and the small entries are never persistent.
TEST(RmsNormFwdOp, DispatchGivesManyShortRowsSmallCtas) {
  const RmsNormFwdOp::Config cfg;
  const Knobs k = {{"SMALL_THREADS", I{128}}, {"SMALL_ITEMS", I{2}}, {"SMALL_MIN_ROWS", I{4096}},
                   {"PERSISTENT_CTAS", I{132}}};
  const auto g = RmsNormFwdOp::geometry(cfg, k);
  struct Case {
    std::int64_t m, n;
    const char* entry;
    std::int64_t threads;
  };
  const Case cases[] = {
      {32768, 256, "rmsnorm_fwd_small16", 128},   // 16 threads of 2 vectors; 8 rows a CTA
      {32768, 2048, "rmsnorm_fwd_small128", 128},  // 128 threads hold the row exactly
      {4096, 7, "rmsnorm_fwd_small8", 128},        // at least TPR threads a row
      {32768, 2056, "rmsnorm_fwd_tpr64", 512},     // one vector more: the other tile
      {4095, 256, "rmsnorm_fwd_tpr8", 512},        // fewer rows than SMALL_MIN_ROWS
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("M=" + std::to_string(c.m) + " N=" + std::to_string(c.n));
    const auto d = RmsNormFwdOp::dispatch(cfg, g, c.m, c.n);
    EXPECT_EQ(d.entry, c.entry);
    EXPECT_EQ(d.threads, c.threads);
    EXPECT_EQ(d.rows_per_cta * d.tpr, d.threads);
    EXPECT_EQ(d.cluster, 1);
    EXPECT_EQ(d.shared_bytes, 0);
  }
  const auto plan = RmsNormFwdOp().launch_plan(shape(32768, 256), {}, k);
  const KernelLaunch& l = only_launch(plan);
  EXPECT_EQ(l.entry, "rmsnorm_fwd_small16");
  EXPECT_EQ(l.grid.x, 32768u / 8);  // not capped at PERSISTENT_CTAS
  EXPECT_EQ(l.block.x, 128u);
  const auto entries = RmsNormFwdOp::entries(g);
  for (const char* e : {"rmsnorm_fwd_small8", "rmsnorm_fwd_small16", "rmsnorm_fwd_small128"})
    EXPECT_EQ(std::count(entries.begin(), entries.end(), e), 1) << e;
  EXPECT_EQ(std::count(entries.begin(), entries.end(), "rmsnorm_fwd_small256"), 0);
  const auto none = RmsNormFwdOp::entries(RmsNormFwdOp::geometry(cfg, {}));
  EXPECT_EQ(std::count_if(none.begin(), none.end(), [](const std::string& e) { return e.rfind("rmsnorm_fwd_small", 0) == 0; }),
            0);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_THREADS", I{96}}}), std::invalid_argument);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_THREADS", I{16}}}), std::invalid_argument);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_ITEMS", I{0}}}), std::invalid_argument);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_ITEMS", I{32}}}), std::invalid_argument);  // 512 bytes
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_THREADS", I{256}}, {"SMALL_MIN_BLOCKS", I{16}}}),
               std::invalid_argument);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_MIN_ROWS", I{0}}}), std::invalid_argument);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_WEIGHT_PREFETCH", I{3}}}), std::invalid_argument);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_WEIGHT_PREFETCH", I{-1}}}), std::invalid_argument);
  EXPECT_EQ(RmsNormFwdOp::geometry(cfg, {{"SMALL_WEIGHT_PREFETCH", I{1}}}).small_weight_prefetch, 1);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"LOAD_HINT", I{5}}}), std::invalid_argument);
}

// SMALL_STAGE 1: the small entries' rows (the residual's too) in dynamic shared memory, sized by
// the plan; nothing else changes, and a CTA's rows must fit a CTA's shared memory.
TEST(RmsNormFwdOp, DispatchGivesStagedSmallCtasTheirRows) {
  const RmsNormFwdOp::Config cfg;
  RmsNormFwdOp::Config res;
  res.has_residual = true;
  const Knobs k = {{"SMALL_THREADS", I{256}}, {"SMALL_ITEMS", I{4}}, {"SMALL_MIN_ROWS", I{1}}, {"SMALL_STAGE", I{1}}};
  const auto g = RmsNormFwdOp::geometry(cfg, k);
  auto staged = RmsNormFwdOp::dispatch(cfg, g, 1024, 8192);
  EXPECT_EQ(staged.entry, "rmsnorm_fwd_small256");
  EXPECT_EQ(staged.shared_bytes, 8192 * 2);  // one bf16 row a CTA
  staged = RmsNormFwdOp::dispatch(cfg, g, 4096, 1024);
  EXPECT_EQ(staged.entry, "rmsnorm_fwd_small32");
  EXPECT_EQ(staged.shared_bytes, 8 * 1024 * 2);  // eight rows a CTA
  EXPECT_EQ(RmsNormFwdOp::dispatch(res, RmsNormFwdOp::geometry(res, k), 1024, 8192).shared_bytes, 2 * 8192 * 2);
  // The same plan without the knob, but for the shared memory.
  Knobs tile = k;
  tile["SMALL_STAGE"] = I{0};
  const auto plain = RmsNormFwdOp::dispatch(cfg, RmsNormFwdOp::geometry(cfg, tile), 1024, 8192);
  EXPECT_EQ(plain.entry, "rmsnorm_fwd_small256");
  EXPECT_EQ(plain.shared_bytes, 0);
  // Rows the small entries do not take keep their plan.
  EXPECT_EQ(RmsNormFwdOp::dispatch(cfg, g, 1024, 16384).shared_bytes, 0);
  const auto plan = RmsNormFwdOp().launch_plan(shape(1024, 8192), {}, k);
  const KernelLaunch& l = only_launch(plan);
  EXPECT_EQ(l.shared_bytes, 8192u * 2);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_STAGE", I{2}}}), std::invalid_argument);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_STAGE", I{-1}}}), std::invalid_argument);
  // 1024 threads x 16 vectors of 8 bf16: 256 KB a CTA; with a residual 512 threads suffice.
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_THREADS", I{1024}}, {"SMALL_ITEMS", I{16}}, {"SMALL_STAGE", I{1}}}),
               std::invalid_argument);
  EXPECT_NO_THROW(RmsNormFwdOp::geometry(cfg, {{"SMALL_THREADS", I{512}}, {"SMALL_ITEMS", I{16}}, {"SMALL_STAGE", I{1}}}));
  EXPECT_THROW(RmsNormFwdOp::geometry(res, {{"SMALL_THREADS", I{512}}, {"SMALL_ITEMS", I{16}}, {"SMALL_STAGE", I{1}}}),
               std::invalid_argument);
}

TEST(RmsNormFwdOp, DispatchFollowsTheKnobs) {
  const RmsNormFwdOp::Config cfg;
  // From ITEMS 4, CLUSTER 16 (the first defaults), which the expectations below were worked out for.
  auto pick = [&](const Knobs& k, std::int64_t n) {
    Knobs all = {{"ITEMS", I{4}}, {"CLUSTER", I{16}}};
    for (const auto& [name, v] : k) all[name] = v;
    return RmsNormFwdOp::dispatch(cfg, RmsNormFwdOp::geometry(cfg, all), 4096, n);
  };
  // TPR is a floor: N = 256 with TPR = 32 takes 32 threads per row (one vector each).
  auto d = pick({{"TPR", I{32}}}, 256);
  EXPECT_EQ(d.entry, "rmsnorm_fwd_tpr32");
  EXPECT_EQ(d.rows_per_cta, 16);
  // ITEMS sets how much of a row a thread keeps: ITEMS = 1 needs 4x the threads of ITEMS = 4.
  EXPECT_EQ(pick({{"ITEMS", I{1}}}, 4096).entry, "rmsnorm_fwd_tpr512");
  EXPECT_EQ(pick({{"ITEMS", I{16}}}, 4096).entry, "rmsnorm_fwd_tpr32");
  // Without clusters long rows stay in one CTA of THREADS threads.
  d = pick({{"CLUSTER", I{1}}, {"THREADS", I{128}}}, 65536);
  EXPECT_EQ(d.entry, "rmsnorm_fwd_tpr128");
  EXPECT_EQ(d.cluster, 1);
  // CLUSTER caps the cluster.
  EXPECT_EQ(pick({{"CLUSTER", I{4}}}, 262144).cluster, 4);
  // MIN_CLUSTER: a row that needs a cluster takes at least that many CTAs, at most CLUSTER, while
  // every thread keeps a vector; rows a CTA holds are left alone.
  EXPECT_EQ(pick({{"ITEMS", I{8}}}, 65536).cluster, 2);
  EXPECT_EQ(pick({{"ITEMS", I{8}}, {"MIN_CLUSTER", I{8}}}, 65536).cluster, 8);
  EXPECT_EQ(pick({{"ITEMS", I{8}}, {"MIN_CLUSTER", I{16}}, {"CLUSTER", I{8}}}, 65536).cluster, 8);
  EXPECT_EQ(pick({{"ITEMS", I{8}}, {"MIN_CLUSTER", I{16}}}, 65536).cluster, 16);   // 8 elements a thread
  EXPECT_EQ(pick({{"ITEMS", I{8}}, {"MIN_CLUSTER", I{16}}}, 40000).cluster, 8);    // 16 would leave 4.9
  EXPECT_EQ(pick({{"ITEMS", I{8}}, {"MIN_CLUSTER", I{16}}}, 32768).cluster, 1);    // one CTA holds it
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"MIN_CLUSTER", I{3}}}), std::invalid_argument);
  EXPECT_THROW(RmsNormFwdOp::geometry(cfg, {{"MIN_CLUSTER", I{32}}}), std::invalid_argument);
  EXPECT_EQ(pick({{"CLUSTER", I{2}}}, 32768).cluster, 2);
  // VEC = 2: a thread keeps 8 elements, so N = 256 needs 32 threads per row.
  EXPECT_EQ(pick({{"VEC", I{2}}}, 256).entry, "rmsnorm_fwd_tpr32");
  // THREADS = 32: N = 1024 needs 32 threads (one CTA per row); 2048 a cluster of 2.
  EXPECT_EQ(pick({{"THREADS", I{32}}}, 1024).entry, "rmsnorm_fwd_tpr32");
  d = pick({{"THREADS", I{32}}}, 2048);
  EXPECT_EQ(d.entry, "rmsnorm_fwd_cluster");
  EXPECT_EQ(d.cluster, 2);
}

// The stage: only whole-CTA rows get it, sized to what overflows the registers and capped at
// STAGE_KB; with a residual a slot holds fp32 h.
TEST(RmsNormFwdOp, DispatchSizesTheStage) {
  const RmsNormFwdOp::Config plain;
  const RmsNormFwdOp::Config residual = RmsNormFwdOp::parse(kResidualBias);
  // From ITEMS 4 (the first default), which the sizes below were worked out for.
  auto stage = [](const RmsNormFwdOp::Config& c, const Knobs& k, std::int64_t n) {
    Knobs all = {{"ITEMS", I{4}}};
    for (const auto& [name, v] : k) all[name] = v;
    return RmsNormFwdOp::dispatch(c, RmsNormFwdOp::geometry(c, all), 4096, n).shared_bytes;
  };
  const Knobs k64 = {{"CLUSTER", I{1}}, {"STAGE_KB", I{64}}};
  // N = 32768: 4096 vectors over 512 threads = 8 each, 4 in registers, 4 staged (16 B each).
  EXPECT_EQ(stage(plain, k64, 32768), 4 * 512 * 16);
  // N = 65536: 12 overflow but 64 KB holds 8 per thread.
  EXPECT_EQ(stage(plain, k64, 65536), 8 * 512 * 16);
  // The scalar path (N % VEC != 0) stages elements: 2 bytes each, 64 per thread fit.
  EXPECT_EQ(stage(plain, k64, 65537), 64 * 512 * 2);
  // A residual stages fp32 h: 32 bytes per vector, 4 per thread fit.
  EXPECT_EQ(stage(residual, k64, 65536), 4 * 512 * 32);
  // Rows that fit the registers, and multi-row CTAs, get none.
  EXPECT_EQ(stage(plain, k64, 16384), 0);
  EXPECT_EQ(stage(plain, k64, 4096), 0);
  EXPECT_EQ(stage(plain, {{"CLUSTER", I{1}}}, 65536), 0);
  // With a cluster, per slice: N = 65536 over 2 CTAs is 8 vectors per thread, 4 staged.
  EXPECT_EQ(stage(plain, {{"CLUSTER", I{2}}, {"STAGE_KB", I{32}}}, 65536), 4 * 512 * 16);
  // The plan passes it on and never exceeds the limit.
  RmsNormFwdOp op;
  Knobs big = {{"CLUSTER", I{1}}, {"STAGE_KB", RmsNormFwdOp::kMaxStageKb}, {"THREADS", I{1024}}};
  const auto plan = op.launch_plan(shape(4, 262144), {}, big);
  const KernelLaunch& l = only_launch(plan);
  EXPECT_EQ(l.entry, "rmsnorm_fwd_tpr1024");
  EXPECT_GT(l.shared_bytes, 200u * 1024);
  EXPECT_LE(l.shared_bytes, static_cast<std::uint32_t>(RmsNormFwdOp::kMaxStageKb * 1024));
  EXPECT_EQ(l.shared_bytes % (1024 * 16), 0u);
}

TEST(RmsNormFwdOp, EntriesListWhatDispatchCanReturn) {
  const RmsNormFwdOp::Config cfg;
  auto g = RmsNormFwdOp::geometry(cfg, {});
  EXPECT_EQ(RmsNormFwdOp::entries(g),
            (std::vector<std::string>{"rmsnorm_fwd_tpr8", "rmsnorm_fwd_tpr16", "rmsnorm_fwd_tpr32", "rmsnorm_fwd_tpr64",
                                      "rmsnorm_fwd_tpr128", "rmsnorm_fwd_tpr256", "rmsnorm_fwd_tpr512",
                                      "rmsnorm_fwd_cluster"}));
  g = RmsNormFwdOp::geometry(cfg, {{"THREADS", I{128}}, {"TPR", I{32}}, {"CLUSTER", I{1}}});
  EXPECT_EQ(RmsNormFwdOp::entries(g),
            (std::vector<std::string>{"rmsnorm_fwd_tpr32", "rmsnorm_fwd_tpr64", "rmsnorm_fwd_tpr128"}));
  // Over many N and knob sets, dispatch names only listed entries.
  const std::vector<Knobs> sets = {{},
                                   {{"THREADS", I{32}}, {"TPR", I{1}}, {"ITEMS", I{1}}, {"VEC", I{2}}},
                                   {{"THREADS", I{1024}}, {"TPR", I{64}}, {"CLUSTER", I{8}}},
                                   {{"THREADS", I{128}}, {"CLUSTER", I{1}}, {"STAGE_KB", I{112}}}};
  for (const auto& k : sets) {
    g = RmsNormFwdOp::geometry(cfg, k);
    const auto list = RmsNormFwdOp::entries(g);
    for (std::int64_t n : {I{1}, I{2}, I{7}, I{8}, I{100}, I{256}, I{1000}, I{4097}, I{65536}, I{131071}, I{1} << 22}) {
      const auto d = RmsNormFwdOp::dispatch(cfg, g, 1, n);
      EXPECT_NE(std::find(list.begin(), list.end(), d.entry), list.end()) << d.entry << " " << knobs_text(k);
      EXPECT_EQ(d.rows_per_cta * d.tpr, g.threads);
      EXPECT_TRUE(d.cluster == 1 || d.tpr == g.threads);
    }
  }
}

TEST(RmsNormFwdOp, LaunchPlanRowsPerCta) {
  RmsNormFwdOp op;
  struct Case {
    std::int64_t m, n, threads, tpr;
    std::uint32_t grid_x;
  };
  // ITEMS = 1, VEC = 8: a row of n elements needs n / 8 threads (at least TPR).
  for (const Case& c : {Case{1000, 256, 128, 8, 250}, Case{1001, 256, 128, 8, 251}, Case{1, 256, 1024, 8, 1},
                        Case{7, 512, 64, 64, 7}, Case{32768, 256, 128, 32, 8192}, Case{33, 1024, 512, 8, 9},
                        Case{5, 8, 32, 1, 1}, Case{5, 8, 32, 32, 5}}) {
    Knobs k = {{"THREADS", c.threads}, {"TPR", c.tpr}, {"ITEMS", I{1}}};
    const auto p = op.launch_plan(shape(c.m, c.n), {}, k);
    const KernelLaunch& l = only_launch(p);
    EXPECT_EQ(l.grid.x, c.grid_x) << "M=" << c.m << " THREADS=" << c.threads << " TPR=" << c.tpr;
    EXPECT_EQ(l.grid.y, 1u);
    EXPECT_EQ(l.block.x, static_cast<std::uint32_t>(c.threads));
  }
}

TEST(RmsNormFwdOp, LaunchPlanOptionalTensorsAndEps) {
  RmsNormFwdOp op;
  auto p = op.launch_plan(shape(3, 7), {{"has_weight", "false"}, {"store_rstd", "true"}, {"eps", "0.001"}}, {});
  const KernelLaunch& l = only_launch(p);
  ASSERT_EQ(l.args.size(), 10u);
  EXPECT_EQ(arg_name(l, 0), "x");
  EXPECT_EQ(arg_name(l, 1), "");
  EXPECT_EQ(arg_name(l, 4), "out");
  EXPECT_EQ(arg_name(l, 6), "rstd");
  EXPECT_EQ(std::get<std::int64_t>(l.args[7]), 3);
  EXPECT_EQ(std::get<std::int64_t>(l.args[8]), 7);
  EXPECT_EQ(std::get<float>(l.args[9]), 0.001f);
  p = op.launch_plan(shape(3, 7), kResidualBias, {});
  const KernelLaunch& r = only_launch(p);
  const std::vector<std::string> names = {"x", "w", "b", "residual", "out", "residual_out", ""};
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(arg_name(r, i), names[i]) << i;
  // fp32 x defaults to VEC = 4 and accepts it explicitly.
  EXPECT_NO_THROW(op.launch_plan(shape(3, 7), {{"x_dtype", "fp32"}}, {}));
  EXPECT_NO_THROW(op.launch_plan(shape(3, 7), {{"x_dtype", "fp32"}}, {{"VEC", I{4}}}));
}

TEST(RmsNormFwdOp, LaunchPlanSplitsHugeGridsOverY) {
  RmsNormFwdOp op;
  const std::int64_t m = (std::int64_t{1} << 31) + 5;  // N = 1: M*N just above 2^31
  const auto p = op.launch_plan(shape(m, 1), {}, {{"THREADS", I{32}}, {"TPR", I{32}}});
  const KernelLaunch& l = only_launch(p);
  EXPECT_EQ(l.grid.y, 2u);
  EXPECT_LE(l.grid.x, 0x7fffffffu);
  EXPECT_GE(std::uint64_t{l.grid.x} * l.grid.y, static_cast<std::uint64_t>(m));
  EXPECT_EQ(std::get<std::int64_t>(l.args[7]), m);
  // 2^31 rows at two rows per CTA fit grid.x.
  const auto q = op.launch_plan(shape(std::int64_t{1} << 31, 1), {}, {{"THREADS", I{64}}, {"TPR", I{32}}});
  EXPECT_EQ(only_launch(q).grid.x, 1u << 30);
  EXPECT_EQ(only_launch(q).grid.y, 1u);
  // Clusters split in whole clusters: grid.x stays a multiple of the cluster size.
  const Knobs small = {{"THREADS", I{32}}, {"ITEMS", I{1}}, {"VEC", I{2}}};  // N = 128: a cluster of 2
  const auto c = op.launch_plan(shape(std::int64_t{1} << 31, 128), {}, small);
  const KernelLaunch& lc = only_launch(c);
  EXPECT_EQ(lc.entry, "rmsnorm_fwd_cluster");
  EXPECT_EQ(lc.cluster.x, 2u);
  EXPECT_EQ(lc.grid.x % 2, 0u);
  EXPECT_LE(lc.grid.x, 0x7fffffffu);
  EXPECT_GT(lc.grid.y, 1u);
  EXPECT_GE(std::uint64_t{lc.grid.x / 2} * lc.grid.y, std::uint64_t{1} << 31);
}

TEST(RmsNormFwdOp, ImpossibleKnobsThrow) {
  RmsNormFwdOp op;
  const Shape s = shape(64, 4096);
  auto throws = [&](const Knobs& k, const OpConfig& cfg, const std::string& mentions) {
    try {
      op.launch_plan(s, cfg, k);
      ADD_FAILURE() << "accepted impossible knobs mentioning " << mentions;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
    }
  };
  throws({{"TPR", I{3}}}, {}, "TPR");
  throws({{"THREADS", I{256}}, {"TPR", I{512}}}, {}, "TPR");  // > THREADS
  throws({{"THREADS", I{96}}}, {}, "THREADS");                 // not a power of two
  throws({{"THREADS", I{2048}}}, {}, "THREADS");
  throws({{"THREADS", I{16}}, {"TPR", I{8}}}, {}, "THREADS");
  throws({{"THREADS", I{0}}, {"TPR", I{1}}}, {}, "THREADS");
  throws({{"VEC", I{16}}}, {}, "VEC");  // 32 bytes of bf16
  throws({{"VEC", I{8}}}, {{"x_dtype", "fp32"}}, "VEC");
  throws({{"VEC", I{3}}}, {}, "VEC");
  throws({{"VEC", I{0}}}, {}, "VEC");
  throws({{"ITEMS", I{0}}}, {}, "ITEMS");
  throws({{"ITEMS", I{64}}}, {}, "ITEMS");
  throws({{"ITEMS", I{32}}, {"VEC", I{8}}}, {}, "ITEMS");  // 512 bytes per thread
  throws({{"CLUSTER", I{3}}}, {}, "CLUSTER");
  throws({{"CLUSTER", I{32}}}, {}, "CLUSTER");
  throws({{"CLUSTER", I{0}}}, {}, "CLUSTER");
  throws({{"STAGE_KB", I{227}}}, {}, "227 KB of shared memory");
  throws({{"STAGE_KB", I{-1}}}, {}, "STAGE_KB");
  throws({{"MIN_BLOCKS", I{4}}, {"THREADS", I{1024}}}, {}, "MIN_BLOCKS");
  throws({{"MIN_BLOCKS", I{-1}}}, {}, "MIN_BLOCKS");
  throws({{"LOAD_HINT", I{5}}}, {}, "LOAD_HINT");
  throws({{"STORE_HINT", I{2}}}, {}, "STORE_HINT");
  throws({{"UNROLL", I{2}}}, {}, "unknown knob 'UNROLL'");
  throws({{"VEC", std::string("eight")}}, {}, "VEC");
  // Valid corners.
  EXPECT_NO_THROW(op.launch_plan(s, {}, {{"VEC", I{1}}, {"THREADS", I{1024}}, {"TPR", I{1024}}, {"ITEMS", I{16}}}));
  EXPECT_NO_THROW(op.launch_plan(s, {}, {{"THREADS", I{32}}, {"TPR", I{1}}, {"MIN_BLOCKS", I{32}}}));
  EXPECT_NO_THROW(op.launch_plan(s, {}, {{"LOAD_HINT", I{3}}, {"STORE_HINT", I{1}}}));
  EXPECT_NO_THROW(op.launch_plan(s, {}, {{"CLUSTER", I{1}}, {"STAGE_KB", RmsNormFwdOp::kMaxStageKb}}));
}
// ---------------------------------------------------------------------------------------------
// Reference, bytes, flops, tolerance

HostTensor make(const std::string& name, DType t, std::vector<std::int64_t> shp, const std::vector<double>& v) {
  HostTensor h(name, t, std::move(shp));
  for (std::size_t i = 0; i < v.size(); ++i) h.set(static_cast<std::int64_t>(i), v[i]);
  return h;
}

TEST(RmsNormFwdOp, ReferenceMatchesHandComputation) {
  RmsNormFwdOp op;
  // Values exact in bf16 and fp16. Row 0: 1, 2, 3 (sum of squares 14); row 1: -4, 0, 0.5 (16.25).
  const std::vector<double> xv = {1, 2, 3, -4, 0, 0.5};
  const std::vector<double> wv = {1, 0.5, 2};
  const double eps = 1e-6;
  const double r0 = 1.0 / std::sqrt(14.0 / 3 + static_cast<float>(eps));
  const double r1 = 1.0 / std::sqrt(16.25 / 3 + static_cast<float>(eps));
  for (const char* xd : {"bf16", "fp16", "fp32"}) {
    const OpConfig cfg = {{"x_dtype", xd}, {"store_rstd", "true"}};
    const DType xt = std::string(xd) == "bf16" ? DType::BF16 : std::string(xd) == "fp16" ? DType::F16 : DType::F32;
    std::vector<HostTensor> in = {make("x", xt, {2, 3}, xv), make("w", DType::F32, {3}, wv),
                                  HostTensor("out", xt, {2, 3}), HostTensor("rstd", DType::F32, {2})};
    std::vector<HostTensor> refs;
    op.reference(shape(2, 3), cfg, in, refs);
    ASSERT_EQ(refs.size(), 2u);
    const HostTensor& out = ref_named(refs, "out");
    const HostTensor& rstd = ref_named(refs, "rstd");
    EXPECT_EQ(out.dtype, DType::F64);
    EXPECT_EQ(out.shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(rstd.dtype, DType::F64);
    EXPECT_EQ(rstd.shape, (std::vector<std::int64_t>{2}));
    const double want[6] = {1 * r0 * 1, 2 * r0 * 0.5, 3 * r0 * 2, -4 * r1 * 1, 0, 0.5 * r1 * 2};
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(out.get(i), want[i], 1e-12) << xd << " element " << i;
    EXPECT_NEAR(rstd.get(0), r0, 1e-12);
    EXPECT_NEAR(rstd.get(1), r1, 1e-12);
  }
  // No weight, no rstd: only "out", equal to x * rstd. eps = 0.5 changes the result visibly.
  std::vector<HostTensor> in = {make("x", DType::BF16, {2, 3}, xv), HostTensor("out", DType::BF16, {2, 3})};
  std::vector<HostTensor> refs = {HostTensor("stale", DType::F64, {1})};
  op.reference(shape(2, 3), {{"has_weight", "false"}, {"eps", "0.5"}}, in, refs);
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs[0].name, "out");
  const double q0 = 1.0 / std::sqrt(14.0 / 3 + 0.5);
  EXPECT_NEAR(refs[0].get(2), 3 * q0, 1e-12);
  // A fp16 weight ("same").
  in = {make("x", DType::F16, {2, 3}, xv), make("w", DType::F16, {3}, wv), HostTensor("out", DType::F16, {2, 3})};
  op.reference(shape(2, 3), {{"x_dtype", "fp16"}, {"w_dtype", "same"}}, in, refs);
  EXPECT_NEAR(ref_named(refs, "out").get(1), 2 * r0 * 0.5, 1e-12);
  // Missing or mis-typed inputs are reported.
  in = {make("x", DType::BF16, {2, 3}, xv)};
  EXPECT_THROW(op.reference(shape(2, 3), {}, in, refs), std::invalid_argument);
  in = {make("x", DType::F32, {2, 3}, xv), make("w", DType::F32, {3}, wv)};
  EXPECT_THROW(op.reference(shape(2, 3), {}, in, refs), std::invalid_argument);
}

TEST(RmsNormFwdOp, ReferenceOneElementAndManyRows) {
  RmsNormFwdOp op;
  // M = 1, N = 1: out = x / sqrt(x^2 + eps) * w.
  std::vector<HostTensor> in = {make("x", DType::BF16, {1, 1}, {-3}), make("w", DType::F32, {1}, {0.25}),
                                HostTensor("out", DType::BF16, {1, 1})};
  std::vector<HostTensor> refs;
  op.reference(shape(1, 1), {}, in, refs);
  EXPECT_NEAR(ref_named(refs, "out").get(0), -3 / std::sqrt(9 + static_cast<double>(1e-6f)) * 0.25, 1e-12);
  // Rows are independent (the TBB split must not mix them): row m holds the value m + 1.
  const std::int64_t m = 513, n = 37;
  std::vector<double> xv(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m * n; ++i) xv[static_cast<std::size_t>(i)] = static_cast<double>(i / n + 1);
  in = {make("x", DType::F32, {m, n}, xv), HostTensor("out", DType::F32, {m, n})};
  op.reference(shape(m, n), {{"x_dtype", "fp32"}, {"has_weight", "false"}, {"eps", "0"}}, in, refs);
  for (std::int64_t i = 0; i < m * n; i += 97) EXPECT_NEAR(ref_named(refs, "out").get(i), 1.0, 1e-12) << i;
}

// h = x + residual; out = h * rstd * w + b; residual_out = h: by hand, then against a naive loop
// on random data for every dtype combination.
TEST(RmsNormFwdOp, ReferenceWithBiasAndResidual) {
  RmsNormFwdOp op;
  {
    // Row: x = 1, 2, 3; residual = 1, 0, -1; h = 2, 2, 2 (mean square 4).
    const double r = 1.0 / std::sqrt(4.0 + static_cast<float>(1e-6));
    std::vector<HostTensor> in = {make("x", DType::BF16, {1, 3}, {1, 2, 3}), make("w", DType::F32, {3}, {1, 0.5, 2}),
                                  make("b", DType::F32, {3}, {0.5, -1, 0}),
                                  make("residual", DType::BF16, {1, 3}, {1, 0, -1})};
    std::vector<HostTensor> refs;
    op.reference(shape(1, 3), kResidualBias, in, refs);
    ASSERT_EQ(refs.size(), 2u);
    const HostTensor& out = ref_named(refs, "out");
    const HostTensor& res = ref_named(refs, "residual_out");
    EXPECT_EQ(res.dtype, DType::F64);
    EXPECT_EQ(res.shape, (std::vector<std::int64_t>{1, 3}));
    const double want[3] = {2 * r + 0.5, 2 * r * 0.5 - 1, 2 * r * 2};
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(out.get(i), want[i], 1e-12) << i;
      EXPECT_EQ(res.get(i), 2.0) << i;
    }
  }
  struct Case {
    OpConfig cfg;
    DType x, w, b;
  };
  const std::vector<Case> cases = {
      {{{"has_bias", "true"}, {"has_residual", "true"}, {"store_rstd", "true"}}, DType::BF16, DType::F32, DType::F32},
      {{{"x_dtype", "fp16"}, {"w_dtype", "same"}, {"has_bias", "true"}, {"b_dtype", "same"}, {"has_residual", "true"},
        {"residual_out_dtype", "fp32"}},
       DType::F16, DType::F16, DType::F16},
      {{{"x_dtype", "fp32"}, {"has_weight", "false"}, {"has_bias", "true"}, {"eps", "0.25"}}, DType::F32, DType::F32,
       DType::F32},
      {{{"has_residual", "true"}, {"has_weight", "false"}}, DType::BF16, DType::F32, DType::F32},
  };
  const std::int64_t m = 37, n = 53;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> nd(0, 1);
  for (const Case& c : cases) {
    const auto conf = RmsNormFwdOp::parse(c.cfg);
    auto draw = [&](const std::string& name, DType t, std::vector<std::int64_t> shp) {
      HostTensor h(name, t, shp);
      for (std::int64_t i = 0; i < h.numel(); ++i) h.set(i, 3 * nd(rng));  // set() rounds to t
      return h;
    };
    std::vector<HostTensor> in = {draw("x", c.x, {m, n})};
    if (conf.has_weight) in.push_back(draw("w", c.w, {n}));
    if (conf.has_bias) in.push_back(draw("b", c.b, {n}));
    if (conf.has_residual) in.push_back(draw("residual", c.x, {m, n}));
    std::vector<HostTensor> refs;
    op.reference(shape(m, n), c.cfg, in, refs);
    auto input = [&](const std::string& name) -> const HostTensor* {
      for (const auto& t : in)
        if (t.name == name) return &t;
      return nullptr;
    };
    const HostTensor *x = input("x"), *w = input("w"), *b = input("b"), *res = input("residual");
    const double eps = static_cast<float>(conf.eps);
    for (std::int64_t row = 0; row < m; ++row) {
      double ss = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        const double h = x->get(row * n + j) + (res ? res->get(row * n + j) : 0.0);
        ss += h * h;
      }
      const double rstd = 1 / std::sqrt(ss / n + eps);
      if (conf.store_rstd) {
        EXPECT_NEAR(ref_named(refs, "rstd").get(row), rstd, 1e-12 * rstd);
      }
      for (std::int64_t j = 0; j < n; ++j) {
        const double h = x->get(row * n + j) + (res ? res->get(row * n + j) : 0.0);
        const double y = h * rstd * (w ? w->get(j) : 1.0) + (b ? b->get(j) : 0.0);
        ASSERT_NEAR(ref_named(refs, "out").get(row * n + j), y, 1e-12 * (1 + std::abs(y))) << row << "," << j;
        if (res) {
          ASSERT_EQ(ref_named(refs, "residual_out").get(row * n + j), h);
        }
      }
    }
    std::size_t outputs = 0;
    for (const auto& d : op.tensors(shape(m, n), c.cfg)) outputs += d.role == Role::Out ? 1 : 0;
    EXPECT_EQ(refs.size(), outputs);
  }
  // A missing bias or residual is reported.
  std::vector<HostTensor> in = {make("x", DType::BF16, {1, 3}, {1, 2, 3}), make("w", DType::F32, {3}, {1, 1, 1})};
  std::vector<HostTensor> refs;
  EXPECT_THROW(op.reference(shape(1, 3), kResidualBias, in, refs), std::invalid_argument);
  in.push_back(make("b", DType::F32, {3}, {0, 0, 0}));
  EXPECT_THROW(op.reference(shape(1, 3), kResidualBias, in, refs), std::invalid_argument);
  in.push_back(make("residual", DType::F32, {1, 3}, {0, 0, 0}));  // wrong dtype
  try {
    op.reference(shape(1, 3), kResidualBias, in, refs);
    ADD_FAILURE() << "accepted an fp32 residual for bf16 x";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'residual' is f32 with 3 elements"), std::string::npos) << e.what();
  }
}

TEST(RmsNormFwdOp, BytesAndFlops) {
  RmsNormFwdOp op;
  const Shape s = shape(32768, 4096);
  EXPECT_DOUBLE_EQ(op.bytes(s, {}), 2.0 * 32768 * 4096 * 2 + 4.0 * 4096);  // docs/targets.md's formula
  EXPECT_DOUBLE_EQ(op.bytes(s, {{"store_rstd", "true"}}), 2.0 * 32768 * 4096 * 2 + 4.0 * 4096 + 4.0 * 32768);
  EXPECT_DOUBLE_EQ(op.bytes(s, {{"has_weight", "false"}}), 2.0 * 32768 * 4096 * 2);
  EXPECT_DOUBLE_EQ(op.bytes(s, {{"x_dtype", "fp16"}, {"w_dtype", "same"}}), 2.0 * 32768 * 4096 * 2 + 2.0 * 4096);
  EXPECT_DOUBLE_EQ(op.bytes(s, {{"x_dtype", "fp32"}}), 2.0 * 32768 * 4096 * 4 + 4.0 * 4096);
  EXPECT_DOUBLE_EQ(op.bytes(shape(8192, 262144), {}), 2.0 * 8192 * 262144 * 2 + 4.0 * 262144);
  EXPECT_DOUBLE_EQ(op.flops(s, {}), 4.0 * 32768 * 4096);
  // A bias adds N elements; a residual is read and residual_out written (M*N each).
  const double base = 2.0 * 32768 * 4096 * 2 + 4.0 * 4096;
  EXPECT_DOUBLE_EQ(op.bytes(s, {{"has_bias", "true"}}), base + 4.0 * 4096);
  EXPECT_DOUBLE_EQ(op.bytes(s, {{"has_bias", "true"}, {"b_dtype", "same"}}), base + 2.0 * 4096);
  EXPECT_DOUBLE_EQ(op.bytes(s, {{"has_residual", "true"}}), base + 2.0 * 32768 * 4096 * 2);
  EXPECT_DOUBLE_EQ(op.bytes(s, {{"has_residual", "true"}, {"residual_out_dtype", "fp32"}}),
                   base + 32768.0 * 4096 * 2 + 32768.0 * 4096 * 4);
}

TEST(RmsNormFwdOp, Tolerances) {
  RmsNormFwdOp op;
  auto t = op.tolerance("out", {});
  EXPECT_DOUBLE_EQ(t.rel_l2, 5e-3);
  EXPECT_DOUBLE_EQ(t.max_abs, 1e-2);
  t = op.tolerance("out", {{"x_dtype", "fp16"}});
  EXPECT_DOUBLE_EQ(t.rel_l2, 2e-3);
  EXPECT_DOUBLE_EQ(t.max_abs, 4e-3);
  t = op.tolerance("out", {{"x_dtype", "fp32"}});
  EXPECT_DOUBLE_EQ(t.rel_l2, 1e-5);
  EXPECT_DOUBLE_EQ(t.max_abs, 1e-4);
  t = op.tolerance("rstd", {{"store_rstd", "true"}});
  EXPECT_DOUBLE_EQ(t.rel_l2, 1e-5);
  EXPECT_DOUBLE_EQ(t.max_abs, 1e-4);
  EXPECT_THROW(op.tolerance("dx", {}), std::invalid_argument);
  // residual_out is rounded once to its own dtype.
  t = op.tolerance("residual_out", {{"has_residual", "true"}});
  EXPECT_DOUBLE_EQ(t.rel_l2, 5e-3);
  t = op.tolerance("residual_out", {{"has_residual", "true"}, {"residual_out_dtype", "fp32"}});
  EXPECT_DOUBLE_EQ(t.rel_l2, 1e-5);
  t = op.tolerance("residual_out", {{"x_dtype", "fp16"}, {"has_residual", "true"}});
  EXPECT_DOUBLE_EQ(t.max_abs, 4e-3);
  EXPECT_THROW(op.tolerance("residual_out", {}), std::invalid_argument);  // no residual, no such output
}

TEST(RmsNormFwdOp, FixedWeightIsNearOne) {
  RmsNormFwdOp op;
  const auto descs = op.tensors(shape(4, 10000), {});
  HostTensor w("w", DType::F32, {10000});
  std::mt19937_64 rng(7);
  op.fill_fixed(descs.at(1), rng, w);
  double sum = 0, sq = 0;
  for (std::int64_t i = 0; i < w.numel(); ++i) {
    sum += w.get(i);
    sq += (w.get(i) - 1) * (w.get(i) - 1);
  }
  EXPECT_NEAR(sum / 10000, 1.0, 0.05);
  EXPECT_NEAR(std::sqrt(sq / 10000), 0.5, 0.05);
  HostTensor x("x", DType::BF16, {4, 10000});
  EXPECT_THROW(op.fill_fixed(descs.at(0), rng, x), std::logic_error);
  // The bias: 0.5 N(0, 1).
  const auto with_bias = op.tensors(shape(4, 10000), {{"has_bias", "true"}});
  ASSERT_EQ(with_bias.at(2).name, "b");
  HostTensor b("b", DType::F32, {10000});
  op.fill_fixed(with_bias.at(2), rng, b);
  sum = sq = 0;
  for (std::int64_t i = 0; i < b.numel(); ++i) {
    sum += b.get(i);
    sq += b.get(i) * b.get(i);
  }
  EXPECT_NEAR(sum / 10000, 0.0, 0.05);
  EXPECT_NEAR(std::sqrt(sq / 10000), 0.5, 0.05);
}

}  // namespace
