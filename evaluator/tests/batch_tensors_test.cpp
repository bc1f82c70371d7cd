// batch_tensors: the tensors a batch of builds shares, each scratch tensor as large as its
// largest build asks for.
#include <gtest/gtest.h>

#include <stdexcept>

#include "evaluator/op.hpp"

namespace {

using namespace ptxevo::evaluator;

// x [M, N] in, out [M, N] out, a 2-D partial-sums scratch [ROWS, N]: ROWS is a knob (1 to 64);
// tensors() sizes the scratch for 64 rows. With `per_build` false it keeps the default
// build_tensors (tensors()).
class ScratchOp : public Op {
 public:
  explicit ScratchOp(bool per_build, bool bad_out = false) : per_build_(per_build), bad_out_(bad_out) {}
  std::string name() const override { return "scratch_op"; }
  std::string validate(const OpConfig&) const override { return ""; }
  std::vector<TensorDesc> tensors(const Shape& s, const OpConfig&) const override { return make(s, 64); }
  std::vector<TensorDesc> build_tensors(const Shape& s, const OpConfig& cfg, const Knobs& k) const override {
    if (!per_build_) return Op::build_tensors(s, cfg, k);
    const std::int64_t rows = std::get<std::int64_t>(k.at("ROWS"));
    if (rows < 1 || rows > 64) throw std::invalid_argument("ROWS must be 1 to 64");
    auto t = make(s, rows);
    if (bad_out_) t[1].shape = {1};
    return t;
  }
  std::map<std::string, std::string> template_defines(const OpConfig&) const override { return {}; }
  LaunchPlan launch_plan(const Shape&, const OpConfig&, const Knobs&) const override { return {}; }
  void reference(const Shape&, const OpConfig&, const std::vector<HostTensor>&, std::vector<HostTensor>&) const override {}
  double bytes(const Shape&, const OpConfig&) const override { return 0; }
  double flops(const Shape&, const OpConfig&) const override { return 0; }
  Tolerance tolerance(const std::string&, const OpConfig&) const override { return {}; }

 private:
  static std::vector<TensorDesc> make(const Shape& s, std::int64_t rows) {
    const std::int64_t m = s.at("M"), n = s.at("N");
    return {{"x", DType::F32, {m, n}, Role::In, false},
            {"out", DType::F32, {m, n}, Role::Out, false},
            {"partial", DType::F32, {rows, n}, Role::Scratch, false}};
  }
  bool per_build_, bad_out_;
};

Knobs rows(std::int64_t r) { return {{"ROWS", r}}; }

TEST(BatchTensors, ScratchIsTheLargestBuildsOrTheOpsWithoutBuilds) {
  const ScratchOp op(true);
  const Shape s = {{"M", 8}, {"N", 32}};
  const auto t = batch_tensors(op, s, {}, {rows(4), rows(16), rows(2)});
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].shape, (std::vector<std::int64_t>{8, 32}));
  EXPECT_EQ(t[2].shape, (std::vector<std::int64_t>{16, 32}));
  // Knobs that make no plan are left out; with none left (or no builds), tensors().
  EXPECT_EQ(batch_tensors(op, s, {}, {rows(99), rows(4)})[2].shape, (std::vector<std::int64_t>{4, 32}));
  EXPECT_EQ(batch_tensors(op, s, {}, {rows(99)})[2].shape, (std::vector<std::int64_t>{64, 32}));
  EXPECT_EQ(batch_tensors(op, s, {}, {})[2].shape, (std::vector<std::int64_t>{64, 32}));
}

TEST(BatchTensors, AnOpWithoutPerBuildScratchKeepsItsTensors) {
  // A 2-D scratch (RMSNorm backward's partial sums) through the default build_tensors.
  const ScratchOp op(false);
  const Shape s = {{"M", 8}, {"N", 32}};
  const auto t = batch_tensors(op, s, {}, {rows(4), {}});
  EXPECT_EQ(t[2].shape, (std::vector<std::int64_t>{64, 32}));
}

TEST(BatchTensors, AnOpThatChangesANonScratchTensorIsABug) {
  const ScratchOp op(true, true);
  EXPECT_THROW(batch_tensors(op, {{"M", 8}, {"N", 32}}, {}, {rows(4)}), std::logic_error);
}

}  // namespace
