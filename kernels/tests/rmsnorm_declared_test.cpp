// The RMSNorm forward declared in a file (kernels/rmsnorm/rmsnorm_fwd.op.toml) against the op
// compiled into ptxevo (RmsNormFwdOp): the same tensors, defines, tolerances, bytes and flops for
// every option combination, and the same launch plan (entry, grid, block, cluster, shared memory,
// arguments) for every shape of the specs and knob combinations the spec allows.
#include <gtest/gtest.h>

#include <functional>
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

// Tensors (names, dtypes, shapes, roles, draws), output tolerances, defines, bytes and flops of
// the two ops agree for `cfg` on `s`.
void expect_same_description(const Pair& p, const Shape& s, const OpConfig& cfg) {
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
    EXPECT_EQ(a[i].degenerate_rows, b[i].degenerate_rows) << a[i].name;
    if (a[i].role == evaluator::Role::Out) {
      EXPECT_EQ(p.builtin->tolerance(a[i].name, cfg).rel_l2, p.declared->tolerance(b[i].name, cfg).rel_l2) << a[i].name;
      EXPECT_EQ(p.builtin->tolerance(a[i].name, cfg).max_abs, p.declared->tolerance(b[i].name, cfg).max_abs) << a[i].name;
    }
  }
  EXPECT_EQ(p.builtin->template_defines(cfg), p.declared->template_defines(cfg));
  EXPECT_DOUBLE_EQ(p.builtin->bytes(s, cfg), p.declared->bytes(s, cfg));
  EXPECT_DOUBLE_EQ(p.builtin->flops(s, cfg), p.declared->flops(s, cfg));
}

// The launch plans of the two ops, compared on every shape of the spec plus `extra`, for `trials`
// knob assignments drawn from the seed's values (those its constraints reject are skipped) and
// each config `admits`. Returns how many plans were compared and how many both refused.
std::pair<int, int> compare_plans(const Pair& p, std::vector<Shape> extra, const std::vector<OpConfig>& configs,
                                  int trials, std::uint64_t seed_value,
                                  const std::function<bool(const OpConfig&, const Knobs&)>& admits) {
  std::vector<Shape> shapes = p.spec.benchmark_shapes;
  shapes.insert(shapes.end(), p.spec.correctness_shapes.begin(), p.spec.correctness_shapes.end());
  shapes.insert(shapes.end(), p.spec.heldout_shapes.begin(), p.spec.heldout_shapes.end());
  shapes.insert(shapes.end(), extra.begin(), extra.end());
  const auto& seed = p.spec.seeds.at(0);
  std::mt19937_64 rng(seed_value);
  int compared = 0, refused = 0;
  for (int trial = 0; trial < trials; ++trial) {
    Knobs k;
    for (const auto& ks : seed.knobs) k[ks.name] = ks.values[rng() % ks.values.size()];
    bool ok = true;
    for (const auto& c : seed.constraints) ok = ok && evaluator::constraint_holds(c, k);
    if (!ok) continue;
    for (const auto& cfg : configs) {
      if (!admits(cfg, k)) continue;
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
        EXPECT_EQ(a, b) << evaluator::shape_to_string(s) << " " << ::testing::PrintToString(cfg);
        if (a != b) return {compared, refused};
        ++compared;
        refused += a == "refused";
      }
    }
  }
  return {compared, refused};
}

TEST(RmsNormDeclared, TensorsDefinesTolerancesAndSizesAgree) {
  const Pair p;
  ASSERT_NE(p.declared, nullptr);
  for (const auto& cfg : kConfigs) expect_same_description(p, {{"M", 33}, {"N", 4097}}, cfg);
}

TEST(RmsNormDeclared, LaunchPlansAgreeOnEveryShapeAndKnobCombination) {
  const Pair p;
  // Every combination the spec's knobs and constraints allow, sampled (all of them is ~10^5);
  // fp32 x takes VEC <= 4 (16-byte vectors).
  const auto [compared, refused] = compare_plans(
      p, {{{"M", 1LL << 27}, {"N", 8}}, {{"M", (1LL << 31) + 5}, {"N", 64}}, {{"M", 2}, {"N", 1000003}}},
      {kConfigs[0], kConfigs[2]}, 800, 11, [](const OpConfig& c, const Knobs& k) {
        return !(c.count("x_dtype") && c.at("x_dtype") == "fp32" && std::get<std::int64_t>(k.at("VEC")) > 4);
      });
  EXPECT_GT(compared, 10000);
  std::cout << compared << " plans compared, " << refused << " refused by both\n";
}

TEST(RmsNormBwdDeclared, TensorsDefinesTolerancesSizesAndPlansAgree) {
  const Pair p("rmsnorm_bwd");
  ASSERT_NE(p.declared, nullptr);
  const std::vector<OpConfig> configs = {{}, {{"x_dtype", "fp16"}, {"w_dtype", "same"}}, {{"x_dtype", "fp32"}},
                                         {{"has_weight", "false"}}};
  for (const auto& cfg : configs) expect_same_description(p, {{"M", 33}, {"N", 4097}}, cfg);
  std::vector<Shape> extra;
  for (std::int64_t n : {8, 12, 4096, 4100, 65536, 131072, 262144, 1048576}) extra.push_back({{"M", 4096}, {"N", n}});
  const auto [compared, refused] = compare_plans(p, extra, configs, 400, 5, [](const OpConfig&, const Knobs&) { return true; });
  EXPECT_GT(compared, 10000);
  std::cout << compared << " backward plans compared, " << refused << " refused by both\n";
}

}  // namespace
}  // namespace ptxevo::kernels
