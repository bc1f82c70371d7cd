// The checks the driver applies to a TMA tensor map, done on the host before any launch, so a
// launch plan that asks for an impossible map gets a message instead of CUDA_ERROR_INVALID_VALUE.
#pragma once

#include <string>

#include "evaluator/op.hpp"
#include "evaluator/tensor.hpp"

namespace ptxevo::evaluator {

// "" when `m` is a valid map over a tensor of `dtype` holding `numel` elements.
std::string validate_tensor_map(const ArgTensorMap& m, DType dtype, std::int64_t numel);

// The driver's data-type code for `dtype` (CUtensorMapDataType), or -1 when TMA cannot move it.
int tensor_map_data_type(DType dtype);

}  // namespace ptxevo::evaluator
