#include <gtest/gtest.h>

#include "ir/printer.hpp"
#include "test_util.hpp"

namespace ptxevo::ir {
namespace {

using testing::parse_or_fail;
using testing::wrap_kernel;

std::string roundtrip(const std::string& text) { return print_module(parse_or_fail(text)); }

TEST(Printer, CanonicalLayout) {
  const std::string out = roundtrip(
      "  .version   8.7\n.target sm_90a\n.address_size 64  // c\n"
      ".visible .entry k( .param .u64 k_p0 )\n{ .reg .b32 %r<2>;  ld.param.u32   %r1,[k_p0];\n ret; }\n");
  EXPECT_EQ(out,
            ".version 8.7\n.target sm_90a\n.address_size 64\n\n"
            ".visible .entry k(\n\t.param .u64 k_p0\n)\n{\n\t.reg .b32 %r<2>;\n\tld.param.u32 %r1, [k_p0];\n\tret;\n}\n");
}

TEST(Printer, IsIdempotent) {
  const std::string text = wrap_kernel(
      ".reg .pred %p<3>;\n.reg .b32 %r<6>;\n.reg .b64 %rd<4>;\n.reg .f32 %f<3>;\n"
      "{\n.reg .pred p;\nLAB_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%r1], %r2;\n@!p bra LAB_WAIT;\n}\n"
      "@%p1 st.global.cs.v2.f32 [%rd1+8], {%f1, %f2};\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f1, %f2}, %rd2, %rd3, %p2, 1, 1, 0, 0;\n"
      "mov.f32 %f1, 0f3F800000;\nmov.b32 %r3, -1;\nret;");
  const std::string once = roundtrip(text);
  EXPECT_EQ(once, roundtrip(once));
}

TEST(Printer, AddressOffsetsAndVectors) {
  const std::string out = roundtrip(wrap_kernel(".reg .b64 %rd<2>;\n.reg .b32 %r<5>;\n"
                                                "ld.global.v4.u32 {%r1, %r2, %r3, _}, [%rd1+-32];\n"
                                                "st.shared.u32 [%r4+0x10], %r1;"));
  EXPECT_NE(out.find("ld.global.v4.u32 {%r1, %r2, %r3, _}, [%rd1+-32];"), std::string::npos) << out;
  EXPECT_NE(out.find("st.shared.u32 [%r4+16], %r1;"), std::string::npos) << out;
}

TEST(Printer, DeclarationsAndInitializers) {
  const std::string out = roundtrip(
      ".version 8.7\n.target sm_80\n.address_size 64\n"
      ".global .align 4 .b8 t[4] = { 1,2, 3 ,4 };\n.global .align 8 .u64 p = generic( t );\n"
      ".func (.param .b32 r) f(.param .b32 a)\n;\n");
  EXPECT_NE(out.find(".global .align 4 .b8 t[4] = {1, 2, 3, 4};"), std::string::npos) << out;
  EXPECT_NE(out.find(".global .align 8 .u64 p = generic(t);"), std::string::npos) << out;
  EXPECT_NE(out.find(".func (.param .b32 r) f(\n\t.param .b32 a\n);"), std::string::npos) << out;
}

TEST(Printer, PrintsSingleInstruction) {
  Module m = parse_or_fail(wrap_kernel(".reg .b32 %r<4>;\n.reg .pred %p<2>;\n@%p1 add.s32 %r1, %r2, %r3;"));
  EXPECT_EQ(print_instruction(testing::nth_instruction(*m.functions()[0], 0)), "@%p1 add.s32 %r1, %r2, %r3;");
}

}  // namespace
}  // namespace ptxevo::ir
