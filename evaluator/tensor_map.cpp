#include "evaluator/tensor_map.hpp"

#include <cuda.h>

namespace ptxevo::evaluator {

int tensor_map_data_type(DType dtype) {
  switch (dtype) {
    case DType::U8: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case DType::I32: return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case DType::I64: return CU_TENSOR_MAP_DATA_TYPE_INT64;
    case DType::F16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case DType::F32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case DType::F64: return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    case DType::BF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  }
  return -1;
}

std::string validate_tensor_map(const ArgTensorMap& m, DType dtype, std::int64_t numel) {
  const std::string where = "tensor map over '" + m.tensor + "': ";
  const std::size_t rank = m.dims.size();
  if (tensor_map_data_type(dtype) < 0) return where + "TMA cannot move " + to_string(dtype);
  if (rank < 1 || rank > 5) return where + "rank must be 1 to 5, got " + std::to_string(rank);
  if (m.box.size() != rank) return where + "box needs one size per dimension";
  if (m.strides_bytes.size() != rank - 1) return where + "needs rank - 1 strides";
  if (!m.element_strides.empty() && m.element_strides.size() != rank)
    return where + "element strides need one entry per dimension";
  const std::uint64_t esz = dtype_size(dtype);
  std::uint64_t extent = esz;  // bytes spanned, to check against the buffer
  for (std::size_t d = 0; d < rank; ++d) {
    if (m.dims[d] == 0 || m.dims[d] > (std::uint64_t{1} << 32))
      return where + "dimension " + std::to_string(d) + " must be 1 to 2^32";
    if (m.box[d] == 0 || m.box[d] > 256) return where + "box size must be 1 to 256 in dimension " + std::to_string(d);
    if (!m.element_strides.empty() && (m.element_strides[d] == 0 || m.element_strides[d] > 8))
      return where + "element strides must be 1 to 8";
    if (d > 0) {
      const std::uint64_t s = m.strides_bytes[d - 1];
      if (s % 16 != 0) return where + "stride of dimension " + std::to_string(d) + " must be a multiple of 16 bytes";
      if (s >= (std::uint64_t{1} << 40)) return where + "stride of dimension " + std::to_string(d) + " is too large";
      extent += (m.dims[d] - 1) * s;
    } else {
      extent += (m.dims[0] - 1) * esz;
    }
  }
  if ((m.box[0] * esz) % 16 != 0) return where + "the box's inner extent must be a multiple of 16 bytes";
  if (m.swizzle_bytes != 0 && m.swizzle_bytes != 32 && m.swizzle_bytes != 64 && m.swizzle_bytes != 128)
    return where + "swizzle must be 0, 32, 64 or 128 bytes";
  if (m.swizzle_bytes != 0 && m.box[0] * esz > static_cast<std::uint64_t>(m.swizzle_bytes))
    return where + "the box's inner extent must not exceed the swizzle span";
  if (m.l2_promotion_bytes != 0 && m.l2_promotion_bytes != 64 && m.l2_promotion_bytes != 128 &&
      m.l2_promotion_bytes != 256)
    return where + "L2 promotion must be 0, 64, 128 or 256 bytes";
  if (extent > static_cast<std::uint64_t>(numel) * esz)
    return where + "the map spans " + std::to_string(extent) + " bytes but the tensor holds " +
           std::to_string(static_cast<std::uint64_t>(numel) * esz);
  return "";
}

}  // namespace ptxevo::evaluator
