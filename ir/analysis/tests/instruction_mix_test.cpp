#include "ir/analysis/instruction_mix.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/analysis/tests/test_helpers.hpp"

namespace ptxevo::ir {
namespace {

using C = InstrCategory;

// One instruction per line, with the category each must get, in body order.
const std::vector<std::pair<const char*, C>> kCases = {
    {"ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];", C::GlobalLoad},
    {"ld.global.nc.f32 %f1, [%rd1];", C::GlobalLoad},
    {"st.global.f32 [%rd1], %f1;", C::GlobalStore},
    {"ld.shared.u32 %r1, [%r2];", C::SharedLoad},
    {"st.shared::cta.u32 [%r2], %r1;", C::SharedStore},
    {"ld.u32 %r1, [%rd1];", C::GenericMemory},
    {"ld.local.u32 %r1, [%rd1];", C::Local},
    {"ld.param.u64 %rd1, [out];", C::Param},
    {"ld.const.f32 %f1, [c];", C::Const},
    {"atom.global.add.f32 %f1, [%rd1], %f2;", C::Atomic},
    {"red.shared.add.u32 [%r2], %r1;", C::Atomic},
    {"cp.async.cg.shared.global [%r2], [%rd1], 16;", C::AsyncCopy},
    {"cp.async.commit_group;", C::AsyncCopy},
    {"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r2], [%rd1, {%r1, %r3}], [%r4];",
     C::AsyncCopy},
    {"mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], %r1;", C::Mbarrier},
    {"bar.sync 0;", C::BarrierFence},
    {"fence.proxy.async.shared::cta;", C::BarrierFence},
    {"bar.warp.sync -1;", C::Warp},
    {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, "
     "{%f5, %f6, %f7, %f8};",
     C::TensorCore},
    {"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];", C::TensorCore},
    {"wgmma.fence.sync.aligned;", C::TensorCore},
    {"shfl.sync.bfly.b32 %r1|%p1, %r2, 1, 31, -1;", C::Warp},
    {"vote.sync.ballot.b32 %r1, %p1, -1;", C::Warp},
    {"fma.rn.f32 %f1, %f2, %f3, %f4;", C::Fp32},
    {"add.rn.f16x2 %h1, %h2, %h3;", C::Fp16},
    {"mul.rn.f64 %fd1, %fd2, %fd3;", C::Fp64},
    {"ex2.approx.ftz.f32 %f1, %f2;", C::SpecialFunction},
    {"rsqrt.approx.f32 %f1, %f2;", C::SpecialFunction},
    {"mad.lo.s32 %r1, %r2, %r3, %r4;", C::IntArith},
    {"mul.wide.s32 %rd1, %r1, 4;", C::IntArith},
    {"shl.b32 %r1, %r2, 2;", C::Logic},
    {"lop3.b32 %r1, %r2, %r3, %r4, 0x96;", C::Logic},
    {"setp.lt.s32 %p1, %r1, %r2;", C::CompareSelect},
    {"selp.f32 %f1, %f2, %f3, %p1;", C::CompareSelect},
    {"cvt.rn.f32.s32 %f1, %r1;", C::Conversion},
    {"cvta.to.global.u64 %rd1, %rd2;", C::Conversion},
    {"mov.u32 %r1, %tid.x;", C::Move},
    {"vabsdiff4.u32.u32.u32 %r1, %r2, %r3, %r4;", C::IntArith},
    {"nanosleep.u32 100;", C::Other},
    {"bra.uni L;", C::Control},
};

std::string cases_kernel() {
  std::string body =
      "  .reg .pred %p<4>;\n  .reg .b32 %r<10>;\n  .reg .f32 %f<10>;\n  .reg .b64 %rd<10>;\n"
      "  .reg .f16x2 %h<4>;\n  .reg .f64 %fd<4>;\n";
  for (const auto& [text, cat] : kCases) body += std::string("  ") + text + "\n";
  body += "L:\n  ret;\n";
  return test::kernel(body, ".const .f32 c;");
}

TEST(InstructionMix, EveryCaseGetsItsCategory) {
  const Module m = test::parse(cases_kernel());
  const Function& f = test::function(m, "k");
  std::size_t k = 0;
  for (const auto& st : f.body) {
    const auto* ins = std::get_if<Instruction>(&st.node);
    if (!ins || k >= kCases.size()) continue;
    EXPECT_EQ(to_string(categorize(*ins)), std::string(to_string(kCases[k].second))) << kCases[k].first;
    ++k;
  }
  EXPECT_EQ(k, kCases.size());
}

TEST(InstructionMix, CountsAndAccessWidths) {
  const Module m = test::parse(cases_kernel());
  const InstructionMix mix = instruction_mix(test::function(m, "k"));
  EXPECT_EQ(mix.total, kCases.size() + 1);  // + the final ret
  EXPECT_EQ(mix.count(C::GlobalLoad), 2u);
  EXPECT_EQ(mix.count(C::AsyncCopy), 3u);
  EXPECT_EQ(mix.count(C::TensorCore), 3u);
  EXPECT_EQ(mix.count(C::Warp), 3u);
  EXPECT_EQ(mix.count(C::Control), 2u);
  EXPECT_EQ(mix.count(C::Fp16), 1u);
  std::size_t sum = 0;
  for (auto n : mix.by_category) sum += n;
  EXPECT_EQ(sum, mix.total);
  // 128: ld.v4.f32, cp.async 16 B, ldmatrix .x4; 64: ld.param.u64; 0: the bulk tensor copy;
  // 32: the other nine accesses. commit_group and mbarrier are not accesses.
  const std::map<int, std::size_t> expected = {{0, 1}, {32, 9}, {64, 1}, {128, 3}};
  EXPECT_EQ(mix.access_width, expected);
}

TEST(InstructionMix, MemoryAccessPredicate) {
  const Module m = test::parse(cases_kernel());
  const Function& f = test::function(m, "k");
  auto at = [&](const char* op) { return std::get<Instruction>(f.body[test::find_instruction(f, op)].node); };
  EXPECT_TRUE(is_memory_access(at("ld.global.nc.f32")));
  EXPECT_TRUE(is_memory_access(at("red.shared.add.u32")));
  EXPECT_TRUE(is_memory_access(at("ldmatrix.sync.aligned.m8n8.x4.shared.b16")));
  EXPECT_FALSE(is_memory_access(at("cp.async.commit_group")));
  EXPECT_FALSE(is_memory_access(at("mbarrier.try_wait.parity.shared::cta.b64")));
  EXPECT_FALSE(is_memory_access(at("mov.u32")));
}

}  // namespace
}  // namespace ptxevo::ir
