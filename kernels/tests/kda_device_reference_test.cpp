// The KDA forward's device reference is trusted code: it must build for every target arch without
// spills, and its plan must name the entry with as many arguments as it declares parameters, and
// only tensors the evaluator provides, for every option set and for batched and packed shapes.
// Its numbers are compared with the host reference on the GPU (tests/gpu/device_reference_test.cpp)
// and again by every GPU worker before first use.
#include <gtest/gtest.h>

#include <set>

#include "evaluator/builder.hpp"
#include "kernels/tests/ptx_entry_params.hpp"
#include "kernels/kda/kda_fwd_op.hpp"

namespace ptxevo::kernels {
namespace {

using evaluator::OpConfig;
using evaluator::Shape;

using testing::entry_params;

class KdaDeviceReference : public ::testing::TestWithParam<std::string> {};

TEST_P(KdaDeviceReference, BuildsForEveryOptionSetWithConsistentPlans) {
  const KdaFwdOp op;
  for (const OpConfig& cfg : std::vector<OpConfig>{
           {},
           {{"gate", "softplus"}, {"initial_state", "false"}},
           {{"final_state", "false"}, {"lower_bound", "-2.5"}, {"scale", "0.125"}},
           {{"initial_state", "false"}, {"final_state", "false"}}}) {
    SCOPED_TRACE(GetParam() + " with " + std::to_string(cfg.size()) + " options");
    evaluator::Builder builder(nullptr);
    evaluator::BuildRequest req;
    req.name = "ref";
    req.source = op.device_reference_source(cfg);
    ASSERT_FALSE(req.source.empty());
    req.source_path = "ref.cu";
    req.arch = GetParam();
    const evaluator::BuildResult b = builder.build(req);
    ASSERT_TRUE(b.ok) << b.stage << ": " << b.error;
    for (const auto& f : b.resources) EXPECT_EQ(f.spill_stores, 0) << f.name;
    for (const Shape& s : {Shape{{"B", 1}, {"T", 1}, {"H", 1}, {"N", 1}}, Shape{{"B", 8}, {"T", 1024}, {"H", 96}, {"N", 8}},
                           Shape{{"B", 1}, {"T", 8192}, {"H", 64}, {"N", 6}}}) {
      const auto descs = op.tensors(s, cfg);
      const auto plan = op.device_reference_plan(s, cfg);
      std::set<std::string> names;
      for (const auto& d : descs)
        if (d.role == evaluator::Role::In) names.insert(d.name);
      for (const auto& o : plan.outputs) {
        bool is_out = false;
        for (const auto& d : descs) is_out |= d.name == o && d.role == evaluator::Role::Out;
        EXPECT_TRUE(is_out) << o << " is not an output of the op";
        names.insert("ref:" + o);
      }
      ASSERT_EQ(plan.plan.kernels.size(), 1u);
      const auto& k = plan.plan.kernels[0];
      EXPECT_EQ(entry_params(b.ptx, k.entry), static_cast<int>(k.args.size())) << k.entry;
      EXPECT_EQ(k.grid.x, static_cast<std::uint32_t>(s.at("N")));
      EXPECT_EQ(k.grid.y, static_cast<std::uint32_t>(s.at("H")));
      for (const auto& a : k.args) {
        if (const auto* t = std::get_if<evaluator::ArgTensor>(&a)) {
          EXPECT_TRUE(t->name.empty() || names.count(t->name)) << k.entry << " names unknown tensor " << t->name;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, KdaDeviceReference, ::testing::Values("sm_90a", "sm_100a"));

}  // namespace
}  // namespace ptxevo::kernels
