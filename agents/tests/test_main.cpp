// curl_global_init must run once before any thread uses libcurl; the library leaves that to
// main, so the test binary does it here through a gtest Environment.
#include <curl/curl.h>
#include <gtest/gtest.h>

namespace {

class CurlEnvironment final : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_EQ(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK); }
  void TearDown() override { curl_global_cleanup(); }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new CurlEnvironment);  // gtest takes ownership
  return RUN_ALL_TESTS();
}
