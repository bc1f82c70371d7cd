// The RMSNorm forward declared in a file (kernels/rmsnorm/rmsnorm_fwd.op.toml) against the op
// compiled into ptxevo (RmsNormFwdOp): the same tensors, defines, tolerances, bytes and flops for
// every option combination, and the same launch plan (entry, grid, block, cluster, shared memory,
// arguments) for every shape of the specs and knob combinations the spec allows.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "evaluator/knob_constraints.hpp"
#include "evaluator/spec.hpp"
#include "kernels/builtin_ops.hpp"

namespace ptxevo::kernels {
namespace {

using evaluator::Knobs;
using evaluator::OpConfig;
using evaluator::Shape;

const std::string kDir = std::string(PTXEVO_SOURCE_DIR) + "/kernels/rmsnorm/";

// The built-in op and its declared twin, with the declared spec (`op`: rmsnorm_fwd or rmsnorm_bwd).
struct Pair {
  evaluator::OpRegistry registry = builtin_ops();
  evaluator::Spec spec;
  const evaluator::Op* builtin = nullptr;
  const evaluator::Op* declared = nullptr;
  explicit Pair(const std::string& op = "rmsnorm_fwd") {
    const auto r = evaluator::load_spec(kDir + op + "_declared.spec", registry);
    if (!r.spec) throw std::runtime_error(r.error->format());
    spec = *r.spec;
    builtin = registry.find(op);
    declared = registry.find(op + "_declared");
  }
};

std::string describe(const evaluator::LaunchPlan& p) {
  std::ostringstream s;
  for (const auto& k : p.kernels) {
    s << k.entry << " grid " << k.grid.x << "," << k.grid.y << "," << k.grid.z << " block " << k.block.x << " cluster "
      << k.cluster.x << " smem " << k.shared_bytes << " args";
    for (const auto& a : k.args) {
      if (const auto* t = std::get_if<evaluator::ArgTensor>(&a)) s << " " << (t->name.empty() ? "null" : t->name);
      else if (const auto* i = std::get_if<std::int64_t>(&a)) s << " " << *i;
      else if (const auto* f = std::get_if<float>(&a)) s << " f" << *f;
      else s << " ?";
    }
    s << "\n";
  }
  return s.str();
}

const std::vector<OpConfig> kConfigs = {
    {},
    {{"x_dtype", "fp16"}, {"w_dtype", "same"}},
    {{"x_dtype", "fp32"}, {"has_bias", "true"}, {"has_residual", "true"}, {"store_rstd", "true"}},
    {{"x_dtype", "bf16"}, {"has_bias", "true"}, {"b_dtype", "same"}, {"has_residual", "true"},
     {"residual_out_dtype", "fp32"}, {"eps", "1e-05"}},
    {{"has_weight", "false"}, {"store_rstd", "true"}},
};

TEST(RmsNormDeclared, TensorsDefinesTolerancesAndSizesAgree) {
  const Pair p;
  ASSERT_NE(p.declared, nullptr);
  const Shape s = {{"M", 33}, {"N", 4097}};
  for (const auto& cfg : kConfigs) {
    SCOPED_TRACE(::testing::PrintToString(cfg));
    EXPECT_EQ(p.declared->validate(cfg), "");
    const auto a = p.builtin->tensors(s, cfg), b = p.declared->tensors(s, cfg);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      EXPECT_EQ(a[i].dtype, b[i].dtype) << a[i].name;
      EXPECT_EQ(a[i].shape, b[i].shape) << a[i].name;
      EXPECT_EQ(a[i].role, b[i].role) << a[i].name;
      EXPECT_EQ(a[i].fixed_distribution, b[i].fixed_distribution) << a[i].name;
      if (a[i].role == evaluator::Role::Out) {
        EXPECT_EQ(p.builtin->tolerance(a[i].name, cfg).rel_l2, p.declared->tolerance(b[i].name, cfg).rel_l2) << a[i].name;
        EXPECT_EQ(p.builtin->tolerance(a[i].name, cfg).max_abs, p.declared->tolerance(b[i].name, cfg).max_abs) << a[i].name;
      }
    }
    EXPECT_EQ(p.builtin->template_defines(cfg), p.declared->template_defines(cfg));
    EXPECT_DOUBLE_EQ(p.builtin->bytes(s, cfg), p.declared->bytes(s, cfg));
    EXPECT_DOUBLE_EQ(p.builtin->flops(s, cfg), p.declared->flops(s, cfg));
  }
}

TEST(RmsNormDeclared, LaunchPlansAgreeOnEveryShapeAndKnobCombination) {
  const Pair p;
  std::vector<Shape> shapes = p.spec.benchmark_shapes;
  shapes.insert(shapes.end(), p.spec.correctness_shapes.begin(), p.spec.correctness_shapes.end());
  shapes.insert(shapes.end(), p.spec.heldout_shapes.begin(), p.spec.heldout_shapes.end());
  for (const Shape& extra : std::vector<Shape>{{{"M", 1LL << 27}, {"N", 8}}, {{"M", (1LL << 31) + 5}, {"N", 64}}, {{"M", 2}, {"N", 1000003}}})
    shapes.push_back(extra);
  const auto& seed = p.spec.seeds.at(0);
  // Every combination the spec's knobs and constraints allow, sampled (all of them is ~10^5).
  std::mt19937_64 rng(11);
  int compared = 0, refused = 0;
  for (int trial = 0; trial < 800; ++trial) {
    Knobs k;
    for (const auto& ks : seed.knobs) k[ks.name] = ks.values[rng() % ks.values.size()];
    bool ok = true;
    for (const auto& c : seed.constraints) ok = ok && evaluator::constraint_holds(c, k);
    if (!ok) continue;
    for (const auto& cfg : {kConfigs[0], kConfigs[2]}) {
      OpConfig c = cfg;
      if (c.count("x_dtype") && c.at("x_dtype") == "fp32" && std::get<std::int64_t>(k.at("VEC")) > 4) continue;
      for (const Shape& s : shapes) {
        std::string a, b;
        try {
          a = describe(p.builtin->launch_plan(s, c, k));
        } catch (const std::invalid_argument&) {
          a = "refused";
        }
        try {
          b = describe(p.declared->launch_plan(s, c, k));
        } catch (const std::invalid_argument&) {
          b = "refused";
        }
        ASSERT_EQ(a, b) << evaluator::shape_to_string(s) << " " << ::testing::PrintToString(c);
        ++compared;
        refused += a == "refused";
      }
    }
  }
  EXPECT_GT(compared, 10000);
  std::cout << compared << " plans compared, " << refused << " refused by both\n";
}

TEST(RmsNormBwdDeclared, TensorsDefinesTolerancesSizesAndPlansAgree) {
  const Pair p("rmsnorm_bwd");
  ASSERT_NE(p.declared, nullptr);
  const std::vector<OpConfig> configs = {{}, {{"x_dtype", "fp16"}, {"w_dtype", "same"}}, {{"x_dtype", "fp32"}},
                                         {{"has_weight", "false"}}};
  const Shape s0 = {{"M", 33}, {"N", 4097}};
  for (const auto& cfg : configs) {
    SCOPED_TRACE(::testing::PrintToString(cfg));
    const auto a = p.builtin->tensors(s0, cfg), b = p.declared->tensors(s0, cfg);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      EXPECT_EQ(a[i].dtype, b[i].dtype) << a[i].name;
      EXPECT_EQ(a[i].shape, b[i].shape) << a[i].name;
      EXPECT_EQ(a[i].role, b[i].role) << a[i].name;
      EXPECT_EQ(a[i].fixed_distribution, b[i].fixed_distribution) << a[i].name;
      if (a[i].role == evaluator::Role::Out) {
        EXPECT_EQ(p.builtin->tolerance(a[i].name, cfg).rel_l2, p.declared->tolerance(b[i].name, cfg).rel_l2) << a[i].name;
        EXPECT_EQ(p.builtin->tolerance(a[i].name, cfg).max_abs, p.declared->tolerance(b[i].name, cfg).max_abs) << a[i].name;
      }
    }
    EXPECT_EQ(p.builtin->template_defines(cfg), p.declared->template_defines(cfg));
    EXPECT_DOUBLE_EQ(p.builtin->bytes(s0, cfg), p.declared->bytes(s0, cfg));
    EXPECT_DOUBLE_EQ(p.builtin->flops(s0, cfg), p.declared->flops(s0, cfg));
  }
  std::vector<Shape> shapes = p.spec.benchmark_shapes;
  shapes.insert(shapes.end(), p.spec.correctness_shapes.begin(), p.spec.correctness_shapes.end());
  shapes.insert(shapes.end(), p.spec.heldout_shapes.begin(), p.spec.heldout_shapes.end());
  for (std::int64_t n : {8, 12, 4096, 4100, 65536, 131072, 262144, 1048576}) shapes.push_back({{"M", 4096}, {"N", n}});
  const auto& seed = p.spec.seeds.at(0);
  std::mt19937_64 rng(5);
  int compared = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Knobs k;
    for (const auto& ks : seed.knobs) k[ks.name] = ks.values[rng() % ks.values.size()];
    bool ok = true;
    for (const auto& c : seed.constraints) ok = ok && evaluator::constraint_holds(c, k);
    if (!ok) continue;
    for (const auto& cfg : configs) {
      for (const Shape& s : shapes) {
        std::string a, b;
        try {
          a = describe(p.builtin->launch_plan(s, cfg, k));
        } catch (const std::invalid_argument&) {
          a = "refused";
        }
        try {
          b = describe(p.declared->launch_plan(s, cfg, k));
        } catch (const std::invalid_argument&) {
          b = "refused";
        }
        ASSERT_EQ(a, b) << evaluator::shape_to_string(s) << " " << ::testing::PrintToString(cfg);
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 10000);
  std::cout << compared << " backward plans compared\n";
}

}  // namespace
}  // namespace ptxevo::kernels
