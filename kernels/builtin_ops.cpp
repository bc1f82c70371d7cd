#include "kernels/builtin_ops.hpp"

#include "declared_ops/declared_op.hpp"
#include "kernels/kda/kda_bwd_op.hpp"
#include "kernels/kda/kda_fwd_op.hpp"
#include "kernels/rmsnorm/rmsnorm_bwd_op.hpp"
#include "kernels/rmsnorm/rmsnorm_fwd_op.hpp"

namespace ptxevo::kernels {

evaluator::OpRegistry builtin_ops() {
  evaluator::OpRegistry r(declared_ops::load_declared_op);
  r.add(std::make_unique<RmsNormFwdOp>());
  r.add(std::make_unique<RmsNormBwdOp>());
  r.add(std::make_unique<KdaFwdOp>());
  r.add(std::make_unique<KdaBwdOp>());
  return r;
}

}  // namespace ptxevo::kernels
