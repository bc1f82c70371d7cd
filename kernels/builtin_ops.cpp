#include "kernels/builtin_ops.hpp"

#include "kernels/rmsnorm/rmsnorm_bwd_op.hpp"
#include "kernels/rmsnorm/rmsnorm_fwd_op.hpp"

namespace ptxevo::kernels {

evaluator::OpRegistry builtin_ops() {
  evaluator::OpRegistry r;
  r.add(std::make_unique<RmsNormFwdOp>());
  r.add(std::make_unique<RmsNormBwdOp>());
  return r;
}

}  // namespace ptxevo::kernels
