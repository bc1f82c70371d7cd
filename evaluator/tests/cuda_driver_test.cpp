#include <gtest/gtest.h>

#include <cstdlib>

#include "evaluator/cuda_driver.hpp"

namespace ptxevo::evaluator {
namespace {

TEST(CudaDriver, MissingLibraryIsExplainedNotFatal) {
  setenv("PTXEVO_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  DriverLoad d = load_cuda_driver();
  unsetenv("PTXEVO_LIBCUDA");
  EXPECT_EQ(d.driver, nullptr);
  EXPECT_NE(d.reason.find("/nonexistent/libcuda.so.1"), std::string::npos) << d.reason;
}

TEST(CudaDriver, LoadsWhereADriverExists) {
  DriverLoad d = load_cuda_driver();
  if (!d.driver) GTEST_SKIP() << "no GPU driver on this machine: " << d.reason;
  int version = 0;
  ASSERT_EQ(d.driver->cuDriverGetVersion(&version), CUDA_SUCCESS);
  EXPECT_GE(version, 13000);
  EXPECT_NE(d.driver->error_text(CUDA_ERROR_ILLEGAL_ADDRESS).find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos);
}

}  // namespace
}  // namespace ptxevo::evaluator
