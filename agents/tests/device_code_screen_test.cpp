// The lexical screen: one test per denied construct, and real kernels that must pass.
#include <gtest/gtest.h>


#include "agents/device_code_screen.hpp"
#include "evaluator/template_source.hpp"

namespace ptxevo::agents {
namespace {

std::vector<std::string> rules(std::string_view source) {
  std::vector<std::string> out;
  for (const auto& v : screen_device_code(source)) out.push_back(v.rule);
  return out;
}

bool has(std::string_view source, const std::string& rule) {
  const auto r = rules(source);
  return std::find(r.begin(), r.end(), rule) != r.end();
}

constexpr const char* kGood = R"cu(
#include <cuda_bf16.h>
#define VEC 4
// comments may say printf, main, clock() or malloc freely
__device__ __forceinline__ float twice(float v) { return 2.0f * v; }
__host__ __device__ inline int up(int a, int b) { return (a + b - 1) / b; }
__constant__ float kTable[2] = {1.0f, 2.0f};
extern "C" __global__ void __launch_bounds__(256) scale(const float* x, float* out, long long n) {
  extern __shared__ float stage[];
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int u = 0; u < 1; ++u) {
    float r;
    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x[i]));
    if (i < n) out[i] = twice(r) * kTable[0];
  }
}
)cu";

TEST(DeviceCodeScreen, AcceptsDeviceCode) { EXPECT_TRUE(screen_device_code(kGood).empty()) << describe(screen_device_code(kGood)); }

// As ptxevo reads the seed, and as an agent sees it: its parts (#include "x.cuh" beside it) read in.
TEST(DeviceCodeScreen, AcceptsTheRmsNormSeed) {
  std::string why;
  const auto seed = ptxevo::evaluator::read_template(PTXEVO_RMSNORM_SEED, &why);
  ASSERT_TRUE(seed) << why;
  EXPECT_FALSE(seed->parts.empty()) << "the seed is expected to have parts (entries.cuh)";
  const auto v = screen_device_code(seed->text);
  EXPECT_TRUE(v.empty()) << describe(v);
}

TEST(DeviceCodeScreen, HostFunctionsAndMain) {
  EXPECT_TRUE(has("int main() { return 0; }", "host-function"));
  EXPECT_TRUE(has("__host__ void setup() {}", "host-function"));
  EXPECT_FALSE(has("__host__ __device__ void both() {}", "host-function"));
  EXPECT_FALSE(has("__device__ __host__ void both() {}", "host-function"));
}

TEST(DeviceCodeScreen, IoAllocationAndClocks) {
  EXPECT_TRUE(has("__global__ void k() { printf(\"x\"); }", "io"));
  EXPECT_TRUE(has("__global__ void k() { float* p = (float*)malloc(4); }", "allocation"));
  EXPECT_TRUE(has("__global__ void k(float* p) { free(p); }", "allocation"));
  EXPECT_TRUE(has("__global__ void k() { int* p = new int[4]; delete[] p; }", "allocation"));
  EXPECT_TRUE(has("__global__ void k(long long* t) { *t = clock64(); }", "clock-read"));
  EXPECT_TRUE(has("__global__ void k(long long* t) { *t = clock(); }", "clock-read"));
  EXPECT_TRUE(has("__global__ void k() { __nanosleep(100); }", "clock-read"));
  EXPECT_TRUE(has(R"(__global__ void k(unsigned long long* t) { asm volatile("mov.u64 %0, %globaltimer;" : "=l"(*t)); })",
                  "clock-read"));
  EXPECT_TRUE(has(R"(__global__ void k(unsigned* t) { asm volatile("mov.u32 %0, %clock;" : "=r"(*t)); })", "clock-read"));
}

TEST(DeviceCodeScreen, PersistentState) {
  EXPECT_TRUE(has("__device__ float cache[1024];\n__global__ void k() {}", "persistent-global"));
  EXPECT_TRUE(has("__device__ int calls = 0;\n__global__ void k() {}", "persistent-global"));
  EXPECT_TRUE(has("__managed__ int calls;\n__global__ void k() {}", "persistent-global"));
  EXPECT_TRUE(has("__constant__ float t[4];\n__global__ void k() {}", "persistent-global"));
  EXPECT_FALSE(has("__constant__ float t[2] = {1, 2};\n__global__ void k() {}", "persistent-global"));
}

TEST(DeviceCodeScreen, IncludesPragmasExternAndAsm) {
  EXPECT_TRUE(has("#include <cstdlib>\n", "include"));
  EXPECT_TRUE(has("#include \"/etc/passwd\"\n", "include"));
  EXPECT_FALSE(has("#include <cuda_fp16.h>\n", "include"));
  // <cstdint> does not exist under NVRTC: refused with the substitute and the allowed list named.
  const auto v = screen_device_code("#include <cstdint>\n");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].detail.find("use <cuda/std/cstdint>"), std::string::npos) << v[0].detail;
  EXPECT_NE(v[0].detail.find("allowed: cuda_fp16.h, cuda_bf16.h"), std::string::npos) << v[0].detail;
  EXPECT_FALSE(has("#include <cuda/std/cstdint>\n", "include"));
  EXPECT_TRUE(has("#pragma nv_diag_suppress 177\n", "pragma"));
  EXPECT_TRUE(has("extern int host_value;\n", "extern"));
  EXPECT_TRUE(has(R"(asm(".entry evil() { ret; }");)", "asm-definition"));
  EXPECT_TRUE(has(R"(asm(".func helper() { ret; }");)", "asm-definition"));
  EXPECT_TRUE(has(R"(__global__ void k() { asm volatile("trap;"); })", "asm-trap"));
  EXPECT_TRUE(has(R"(__global__ void k() { asm volatile("exit;"); })", "asm-trap"));
  EXPECT_TRUE(has(std::string("__global__ void k() {}\0", 23), "nul-byte"));
}

TEST(DeviceCodeScreen, CommentsAndStringsDoNotTrigger) {
  EXPECT_TRUE(screen_device_code("// int main() { printf(); }\n/* malloc clock64 */\n__global__ void k() {}\n").empty());
  EXPECT_EQ(strip_comments_and_literals("a /* x\ny */ b \"main\" // c\nd"), "a   \n    b \"\" \nd");
}

TEST(DeviceCodeScreen, ReportsLines) {
  const auto v = screen_device_code("__global__ void k() {}\n\nint main() {}\n");
  ASSERT_EQ(v.size(), 1U);
  EXPECT_NE(v[0].detail.find("line 3"), std::string::npos) << v[0].detail;
}

}  // namespace
}  // namespace ptxevo::agents
