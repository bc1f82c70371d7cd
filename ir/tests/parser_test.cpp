#include <gtest/gtest.h>

#include "ir/parser.hpp"
#include "test_util.hpp"

namespace ptxevo::ir {
namespace {

using testing::nth_instruction;
using testing::parse_or_fail;
using testing::wrap_kernel;

TEST(Parser, ModuleDirectivesAndEntry) {
  Module m = parse_or_fail(wrap_kernel(".reg .b32 %r<3>;\nret;"));
  EXPECT_EQ(m.version(), "8.7");
  EXPECT_EQ(m.target(), "sm_90a");
  auto fs = m.functions();
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_TRUE(fs[0]->is_entry);
  EXPECT_EQ(fs[0]->name, "k");
  ASSERT_EQ(fs[0]->params.size(), 1u);
  EXPECT_EQ(fs[0]->params[0].name, "k_p0");
  EXPECT_EQ(fs[0]->registers.size(), 3u);
  EXPECT_EQ(fs[0]->registers[2].name, "%r2");
}

TEST(Parser, InstructionStructure) {
  Module m = parse_or_fail(wrap_kernel(
      ".reg .pred %p<2>;\n.reg .f32 %f<5>;\n.reg .b64 %rd<3>;\n"
      "@!%p1 ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+-16];"));
  const Instruction& ins = nth_instruction(*m.functions()[0], 0);
  ASSERT_TRUE(ins.guard.has_value());
  EXPECT_TRUE(ins.guard->negated);
  EXPECT_EQ(ins.guard->pred.text, "%p1");
  EXPECT_EQ(ins.opcode, "ld");
  EXPECT_EQ(ins.modifiers, (std::vector<std::string>{".global", ".nc", ".v4", ".f32"}));
  ASSERT_EQ(ins.operands.size(), 2u);
  EXPECT_EQ(ins.operands[0].kind, OperandKind::Vector);
  EXPECT_EQ(ins.operands[0].items.size(), 4u);
  EXPECT_EQ(ins.operands[1].kind, OperandKind::Address);
  EXPECT_EQ(ins.operands[1].offset, -16);
  EXPECT_EQ(ins.operands[1].items[0].kind, OperandKind::Register);
  EXPECT_GE(ins.operands[1].items[0].reg, 0);
}

TEST(Parser, SpecialRegistersPredPairsAndSinks) {
  Module m = parse_or_fail(wrap_kernel(
      ".reg .b32 %r<4>;\n.reg .pred %p<3>;\nmov.u32 %r1, %tid.x;\n"
      "shfl.sync.bfly.b32 %r2|%p1, %r1, 16, 31, -1;\n"
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], 128;"));
  const Function& f = *m.functions()[0];
  EXPECT_EQ(nth_instruction(f, 0).operands[1].kind, OperandKind::Special);
  EXPECT_EQ(nth_instruction(f, 0).operands[1].text, "%tid.x");
  const Instruction& shfl = nth_instruction(f, 1);
  EXPECT_EQ(shfl.operands[0].kind, OperandKind::PredPair);
  EXPECT_EQ(shfl.operands[4].text, "-1");
  EXPECT_EQ(nth_instruction(f, 2).operands[0].kind, OperandKind::Sink);
}

TEST(Parser, InlineAsmScopesShadowRegisters) {
  Module m = parse_or_fail(wrap_kernel(
      ".reg .b32 %r<2>;\n{\n.reg .pred p;\nsetp.eq.u32 p, %r1, 0;\n@p bra DONE;\nDONE:\n}\n"
      "{\n.reg .pred p;\n@p mov.u32 %r1, 1;\n}"));
  const Function& f = *m.functions()[0];
  const int first = nth_instruction(f, 0).operands[0].reg;
  const int second = nth_instruction(f, 2).guard->pred.reg;
  EXPECT_GE(first, 0);
  EXPECT_GE(second, 0);
  EXPECT_NE(first, second) << "each scope declares its own 'p'";
}

TEST(Parser, TmaAddressWithCoordinates) {
  Module m = parse_or_fail(wrap_kernel(
      ".reg .b32 %r<5>;\n.reg .b64 %rd<2>;\n"
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];"));
  const Instruction& ins = nth_instruction(*m.functions()[0], 0);
  ASSERT_EQ(ins.operands.size(), 3u);
  const Operand& src = ins.operands[1];
  ASSERT_EQ(src.kind, OperandKind::Address);
  ASSERT_EQ(src.items.size(), 2u);
  EXPECT_EQ(src.items[1].kind, OperandKind::Vector);
  EXPECT_EQ(src.items[1].items.size(), 2u);
}

TEST(Parser, CallWithPrototypeAndParamScopes) {
  const std::string text =
      ".version 8.7\n.target sm_80\n.address_size 64\n"
      ".func (.param .b32 func_retval0) f(.param .b32 f_param_0);\n"
      ".visible .entry k()\n{\n.reg .b32 %r<3>;\n.reg .b64 %rd<2>;\n"
      "{ // callseq 0\n.param .b32 param0;\nst.param.b32 [param0], %r1;\n.param .b32 retval0;\n"
      "prototype_0 : .callprototype (.param .b32 _) _ (.param .b32 _);\n"
      "call (retval0), %rd1, (param0), prototype_0;\nld.param.b32 %r2, [retval0];\n}\nret;\n}\n";
  Module m = parse_or_fail(text);
  auto fs = m.functions();
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_FALSE(fs[0]->has_body);
  EXPECT_TRUE(fs[0]->has_returns);
  const Function& k = *fs[1];
  const Instruction& call = nth_instruction(k, 1);
  EXPECT_EQ(call.opcode, "call");
  ASSERT_EQ(call.operands.size(), 4u);
  EXPECT_EQ(call.operands[0].kind, OperandKind::List);
  EXPECT_EQ(call.operands[3].text, "prototype_0");
}

TEST(Parser, GlobalsWithInitializersAndAttributes) {
  const std::string text =
      ".version 8.7\n.target sm_90a\n.address_size 64\n"
      ".global .align 4 .b8 table[8] = {1, 2, 3, 4, 5, 6, 7, 8};\n"
      ".global .align 8 .u64 ptr = generic(table);\n"
      ".extern .shared .align 16 .b8 dyn_smem[];\n"
      ".visible .global .attribute(.managed) .align 4 .u32 managed_counter;\n"
      ".const .align 4 .f32 coeffs[2] = {0f3F800000, 0f40000000};\n";
  Module m = parse_or_fail(text);
  auto gs = m.globals();
  ASSERT_EQ(gs.size(), 5u);
  EXPECT_EQ(gs[0]->state_space(), ".global");
  EXPECT_TRUE(gs[0]->has_init);
  EXPECT_EQ(gs[0]->dims, (std::vector<std::string>{"8"}));
  EXPECT_EQ(gs[1]->init, (std::vector<std::string>{"generic", "(", "table", ")"}));
  EXPECT_TRUE(gs[2]->is_extern());
  EXPECT_EQ(gs[2]->dims, (std::vector<std::string>{""}));
  EXPECT_EQ(gs[3]->attrs[2], ".attribute(.managed)");
  EXPECT_EQ(gs[4]->state_space(), ".const");
}

TEST(Parser, PerformanceAndClusterDirectives) {
  const std::string text =
      ".version 8.7\n.target sm_90a\n.address_size 64\n"
      ".visible .entry k()\n.maxntid 256, 1, 1\n.minnctapersm 2\n.reqnctapercluster 2, 1, 1\n.explicitcluster\n"
      ".maxnreg 128\n{\nret;\n}\n";
  Module m = parse_or_fail(text);
  const Function& f = *m.functions()[0];
  ASSERT_NE(f.find_perf(".maxntid"), nullptr);
  EXPECT_EQ(f.find_perf(".maxntid")->args, (std::vector<std::string>{"256", "1", "1"}));
  ASSERT_NE(f.find_perf(".explicitcluster"), nullptr);
  EXPECT_TRUE(f.find_perf(".explicitcluster")->args.empty());
  EXPECT_EQ(f.find_perf(".maxnreg")->args[0], "128");
}

TEST(Parser, DebugSectionsAndLocDirectives) {
  const std::string text =
      ".version 8.7\n.target sm_90a, debug\n.address_size 64\n.file 1 \"/src/k.cu\"\n"
      ".visible .entry k()\n{\n.loc 1 10 3\n$L__func_begin0:\nret;\n$L__func_end0:\n}\n"
      ".section .debug_info\n{\n.b32 42\n.b8 2, 0\n.b32 .debug_abbrev\n.b64 $L__func_begin0\n"
      "$L__info_string0:\n.b8 107, 0\n.b64 $L__func_end0-$L__func_begin0\n}\n";
  Module m = parse_or_fail(text);
  const Section* s = nullptr;
  for (const auto& it : m.items)
    if (const auto* sec = std::get_if<Section>(&it.node)) s = sec;
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name, ".debug_info");
  ASSERT_EQ(s->items.size(), 7u);
  EXPECT_EQ(s->items[1].values.size(), 2u);
  EXPECT_EQ(s->items[2].values[0], ".debug_abbrev");
  EXPECT_EQ(s->items[4].label, "$L__info_string0");
  EXPECT_EQ(s->items[6].values[0], "$L__func_end0-$L__func_begin0");
}

TEST(Parser, InstructionIdsAreUniqueAndOrdered) {
  Module m = parse_or_fail(wrap_kernel(".reg .b32 %r<3>;\nmov.u32 %r1, 1;\nmov.u32 %r2, 2;\nret;"));
  const Function& f = *m.functions()[0];
  EXPECT_LT(nth_instruction(f, 0).id, nth_instruction(f, 1).id);
  EXPECT_LT(nth_instruction(f, 1).id, nth_instruction(f, 2).id);
  EXPECT_EQ(m.next_instruction_id, 3u);
}

TEST(Parser, SymbolWithOffsetAndNegatedPredicateOperand) {
  Module m = parse_or_fail(wrap_kernel(".reg .b32 %r<3>;\n.reg .pred %p<3>;\n"
                                       "mov.u32 %r1, smem+16;\nsetp.ne.and.u32 %p1, %r1, 0, !%p2;",
                                       ".shared .align 4 .b8 smem[64];\n"));
  const Function& f = *m.functions()[0];
  const Operand& sym = nth_instruction(f, 0).operands[1];
  EXPECT_EQ(sym.kind, OperandKind::Symbol);
  EXPECT_TRUE(sym.has_offset);
  EXPECT_EQ(sym.offset, 16);
  EXPECT_TRUE(nth_instruction(f, 1).operands[3].negated);
}

}  // namespace
}  // namespace ptxevo::ir

namespace ptxevo::ir {
namespace {

// Found by the fuzzer: a register type with an absurd width overflowed std::stoi.
TEST(Parser, HugeRegisterTypeWidthDoesNotOverflow) {
  Module m = testing::parse_or_fail(
      testing::wrap_kernel(".reg .b99999999999 %w;\n.reg .f16x99999999999 %v;\n.reg .b3277777777x1077777 %u;"));
  const Function& f = *m.functions()[0];
  ASSERT_EQ(f.registers.size(), 3u);
  EXPECT_EQ(f.registers[2].cls, RegClass::B128);
  EXPECT_EQ(f.registers[0].cls, RegClass::B128);
  EXPECT_EQ(f.registers[1].cls, RegClass::B128);
}

}  // namespace
}  // namespace ptxevo::ir
