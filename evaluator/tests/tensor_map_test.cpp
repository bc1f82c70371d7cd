#include <gtest/gtest.h>

#include <cuda.h>

#include "evaluator/tensor_map.hpp"

namespace ptxevo::evaluator {
namespace {

// A 2-D bf16 tile map over a [rows, cols] tensor.
ArgTensorMap tile(std::uint64_t rows, std::uint64_t cols, std::uint32_t box_rows, std::uint32_t box_cols) {
  ArgTensorMap m;
  m.tensor = "x";
  m.dims = {cols, rows};
  m.strides_bytes = {cols * 2};
  m.box = {box_cols, box_rows};
  return m;
}

TEST(TensorMap, ValidTileMap) { EXPECT_EQ(validate_tensor_map(tile(128, 4096, 8, 64), DType::BF16, 128 * 4096), ""); }

TEST(TensorMap, RejectsStrideNotMultipleOf16) {
  EXPECT_NE(validate_tensor_map(tile(128, 4097, 8, 64), DType::BF16, 128 * 4097).find("multiple of 16"),
            std::string::npos);
}

TEST(TensorMap, RejectsBoxLargerThan256) {
  EXPECT_NE(validate_tensor_map(tile(128, 4096, 8, 512), DType::BF16, 128 * 4096).find("box size"), std::string::npos);
}

TEST(TensorMap, RejectsInnerBoxNotMultipleOf16Bytes) {
  EXPECT_NE(validate_tensor_map(tile(128, 4096, 8, 4), DType::BF16, 128 * 4096).find("inner extent"),
            std::string::npos);
}

TEST(TensorMap, SwizzleSpanBoundsTheInnerBox) {
  ArgTensorMap m = tile(128, 4096, 8, 128);  // 256 bytes inner
  m.swizzle_bytes = 128;
  EXPECT_NE(validate_tensor_map(m, DType::BF16, 128 * 4096).find("swizzle span"), std::string::npos);
  m.box[0] = 64;  // 128 bytes
  EXPECT_EQ(validate_tensor_map(m, DType::BF16, 128 * 4096), "");
}

TEST(TensorMap, MapMustFitTheTensor) {
  EXPECT_NE(validate_tensor_map(tile(256, 4096, 8, 64), DType::BF16, 128 * 4096).find("spans"), std::string::npos);
}

TEST(TensorMap, RankAndShapeConsistency) {
  ArgTensorMap m = tile(128, 4096, 8, 64);
  m.box.pop_back();
  EXPECT_NE(validate_tensor_map(m, DType::BF16, 128 * 4096), "");
  ArgTensorMap r;
  r.tensor = "x";
  EXPECT_NE(validate_tensor_map(r, DType::F32, 16).find("rank"), std::string::npos);
}

TEST(TensorMap, DataTypeCodes) {
  EXPECT_EQ(tensor_map_data_type(DType::BF16), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ(tensor_map_data_type(DType::F32), CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  EXPECT_EQ(tensor_map_data_type(DType::U8), CU_TENSOR_MAP_DATA_TYPE_UINT8);
}

}  // namespace
}  // namespace ptxevo::evaluator
