// Helpers shared by the RMSNorm forward op tests (rmsnorm_fwd_op_test.cpp) and its spec and
// build tests (rmsnorm_fwd_build_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "evaluator/op.hpp"
#include "kernels/rmsnorm/rmsnorm_fwd_op.hpp"

namespace rmsnorm_test {


using ptxevo::evaluator::ArgTensor;
using ptxevo::evaluator::DType;
using ptxevo::evaluator::HostTensor;
using ptxevo::evaluator::KernelLaunch;
using ptxevo::evaluator::Knobs;
using ptxevo::evaluator::OpConfig;
using ptxevo::evaluator::Role;
using ptxevo::evaluator::Shape;
using ptxevo::kernels::RmsNormFwdOp;
using I = std::int64_t;

inline const std::string kRmsDir = std::string(PTXEVO_SOURCE_DIR) + "/kernels/rmsnorm";

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline Shape shape(std::int64_t m, std::int64_t n) { return {{"M", m}, {"N", n}}; }

inline const KernelLaunch& only_launch(const ptxevo::evaluator::LaunchPlan& p) {
  EXPECT_EQ(p.kernels.size(), 1u);
  return p.kernels.at(0);
}
// A reference into a temporary plan would dangle: keep the plan in a variable.
const KernelLaunch& only_launch(ptxevo::evaluator::LaunchPlan&& p) = delete;

inline std::string arg_name(const KernelLaunch& l, std::size_t i) { return std::get<ArgTensor>(l.args.at(i)).name; }

// Knob assignments as "K=V,..." for messages.
inline std::string knobs_text(const Knobs& k) {
  std::string s;
  for (const auto& [n, v] : k) s += (s.empty() ? "" : ",") + n + "=" + std::to_string(std::get<std::int64_t>(v));
  return s;
}

// The reference output called `name`.
inline const HostTensor& ref_named(const std::vector<HostTensor>& refs, const std::string& name) {
  for (const auto& r : refs)
    if (r.name == name) return r;
  throw std::runtime_error("no reference output " + name);
}

inline const OpConfig kResidualBias = {{"has_residual", "true"}, {"has_bias", "true"}};

}  // namespace rmsnorm_test
