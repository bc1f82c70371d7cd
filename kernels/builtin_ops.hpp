// Every op ptxevo ships, registered in a caller-owned registry.
#pragma once

#include "evaluator/op.hpp"

namespace ptxevo::kernels {

evaluator::OpRegistry builtin_ops();

}  // namespace ptxevo::kernels
