#include <gtest/gtest.h>

#include "ir/def_use.hpp"
#include "test_util.hpp"

namespace ptxevo::ir {
namespace {

using testing::nth_instruction;
using testing::parse_or_fail;
using testing::wrap_kernel;

struct Names {
  std::vector<std::string> defs, uses;
};

Names names_of(const Function& f, const Instruction& ins) {
  Names n;
  DefUse du = def_use(ins);
  for (int r : du.defs) n.defs.push_back(f.registers[static_cast<std::size_t>(r)].name);
  for (int r : du.uses) n.uses.push_back(f.registers[static_cast<std::size_t>(r)].name);
  return n;
}

class DefUseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = parse_or_fail(wrap_kernel(
        ".reg .pred %p<4>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<4>;\n.reg .f32 %f<8>;\n"
        "@%p1 add.s32 %r1, %r2, %r3;\n"                       // 0
        "st.global.v2.f32 [%rd1+8], {%f1, %f2};\n"             // 1
        "shfl.sync.bfly.b32 %r4|%p2, %r1, 1, 31, -1;\n"        // 2
        "bar.sync %r5, %r6;\n"                                 // 3
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd2, %rd3, %p3, 1, 1, 0, 0;\n"  // 4
        "mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r7], %r1;\n"  // 5
        "mbarrier.init.shared::cta.b64 [%r7], %r1;\n"          // 6
        "atom.global.add.u32 %r2, [%rd1], %r3;\n"              // 7
        "ret;"));                                              // 8
    f_ = m_.functions()[0];
  }
  Names at(std::size_t i) { return names_of(*f_, nth_instruction(*f_, i)); }
  Module m_;
  Function* f_ = nullptr;
};

TEST_F(DefUseTest, ArithmeticWithGuard) {
  auto n = at(0);
  EXPECT_EQ(n.defs, (std::vector<std::string>{"%r1"}));
  EXPECT_EQ(n.uses, (std::vector<std::string>{"%p1", "%r2", "%r3"}));
}
TEST_F(DefUseTest, StoreDefinesNothing) {
  auto n = at(1);
  EXPECT_TRUE(n.defs.empty());
  EXPECT_EQ(n.uses, (std::vector<std::string>{"%rd1", "%f1", "%f2"}));
}
TEST_F(DefUseTest, PredPairDefinesBoth) {
  EXPECT_EQ(at(2).defs, (std::vector<std::string>{"%r4", "%p2"}));
}
TEST_F(DefUseTest, BarrierReadsRegisterOperands) {
  auto n = at(3);
  EXPECT_TRUE(n.defs.empty());
  EXPECT_EQ(n.uses, (std::vector<std::string>{"%r5", "%r6"}));
}
TEST_F(DefUseTest, WgmmaAccumulatorIsReadAndWritten) {
  auto n = at(4);
  EXPECT_EQ(n.defs.size(), 4u);
  EXPECT_EQ(n.uses.size(), 7u);  // 4 accumulators + 2 descriptors + scale-d predicate
}
TEST_F(DefUseTest, MbarrierWaitDefinesPredicateButInitDoesNot) {
  EXPECT_EQ(at(5).defs, (std::vector<std::string>{"%p3"}));
  EXPECT_TRUE(at(6).defs.empty());
}
TEST_F(DefUseTest, AtomicDefinesOldValue) {
  EXPECT_EQ(at(7).defs, (std::vector<std::string>{"%r2"}));
  EXPECT_EQ(at(7).uses, (std::vector<std::string>{"%rd1", "%r3"}));
}
TEST_F(DefUseTest, ReturnHasNoOperands) {
  EXPECT_TRUE(at(8).defs.empty());
  EXPECT_TRUE(at(8).uses.empty());
}

}  // namespace
}  // namespace ptxevo::ir
