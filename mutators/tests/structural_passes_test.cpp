// widen_vector, async_copy, if_convert and if_unconvert: before/after on inline PTX (every
// rewritten kernel is also assembled with ptxas), and each pass's legality refusals.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/mutate_command.hpp"
#include "evaluator/ptxas.hpp"
#include "ir/parser.hpp"
#include "ir/printer.hpp"
#include "ir/verifier.hpp"
#include "mutators/pass.hpp"

namespace ptxevo::mutators {
namespace {

ir::Module parse(const std::string& ptx) {
  ir::ParseResult r = ir::parse_ptx(ptx);
  if (!r.ok()) throw std::runtime_error(r.error->format("<inline ptx>"));
  return std::move(*r.module);
}

// A kernel k(in, out, n) on `target`: %rd3 = global in, %rd4 = global out, %r1 = %tid.x,
// %r2 = address of the 16-byte aligned shared array `sm`, %r3 = %r2 + 16 * %tid.x.
// `in_attrs` goes between `.u64` and the name of `in` (e.g. ".ptr .global .align 16").
std::string kernel(const std::string& body, const std::string& target = "sm_80", const std::string& in_attrs = "") {
  return ".version 8.0\n.target " + target + "\n.address_size 64\n.visible .entry k(.param .u64 " +
         (in_attrs.empty() ? "" : in_attrs + " ") + "in, .param .u64 out, .param .u32 n)\n"
         "{\n.reg .pred %p<8>;\n.reg .b16 %rs<16>;\n.reg .b32 %r<32>;\n.reg .f32 %f<32>;\n.reg .b64 %rd<32>;\n"
         ".shared .align 16 .b8 sm[4096];\n"
         "ld.param.u64 %rd1, [in];\nld.param.u64 %rd2, [out];\n"
         "cvta.to.global.u64 %rd3, %rd1;\ncvta.to.global.u64 %rd4, %rd2;\n"
         "mov.u32 %r1, %tid.x;\nmov.u32 %r2, sm;\nshl.b32 %r5, %r1, 4;\nadd.s32 %r3, %r2, %r5;\n" +
         body + "\nret;\n}\n";
}

struct Applied {
  ir::Module m;
  PassResult r;
  std::string text;
};

Applied run(const std::string& pass, const std::string& ptx, const PassParams& params = {}) {
  const PassRegistry reg = builtin_passes();
  const PtxPass* p = reg.find(pass);
  if (!p) throw std::runtime_error("no pass " + pass);
  Applied a{parse(ptx), {}, {}};
  a.r = p->apply(a.m, params);
  a.text = ir::print_module(a.m);
  ir::ParseResult again = ir::parse_ptx(a.text);
  if (!again.ok()) throw std::runtime_error("re-parse failed: " + again.error->format("<mutated>") + "\n" + a.text);
  if (ir::print_module(*again.module) != a.text) throw std::runtime_error("printing is not stable:\n" + a.text);
  if (a.r.applied) {
    // What a pass writes must still be PTX that ptxas accepts, and pass the IR verifier.
    const auto diags = ir::verify(*again.module);
    if (!diags.empty()) throw std::runtime_error("verifier: " + diags.front().message + "\n" + a.text);
    const auto res = evaluator::run_ptxas(a.text, a.m.target());
    if (!res.ok) throw std::runtime_error("ptxas rejects the result:\n" + res.log + "\n" + a.text);
  }
  return a;
}

// The function's instructions as printed, after the kernel() prologue's eight.
std::vector<std::string> body_of(const ir::Module& m, std::size_t skip = 8) {
  std::vector<std::string> out;
  for (const auto& st : m.functions()[0]->body) {
    if (const auto* ins = std::get_if<ir::Instruction>(&st.node)) out.push_back(ir::print_instruction(*ins));
    if (const auto* l = std::get_if<ir::Label>(&st.node)) out.push_back(l->name + ":");
  }
  out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(std::min(skip, out.size())));
  return out;
}

using Lines = std::vector<std::string>;

void expect_refused(const Applied& a, const std::string& reason_part) {
  EXPECT_FALSE(a.r.applied) << a.text;
  EXPECT_EQ(a.r.changes, 0);
  EXPECT_NE(a.r.refusal.find(reason_part), std::string::npos) << "refusal: " << a.r.refusal;
}

// ---- widen_vector --------------------------------------------------------------------------

TEST(WidenVector, FourSharedLoadsBecomeOneV4) {
  auto a = run("widen_vector", kernel("ld.shared.f32 %f1, [%r3];\nld.shared.f32 %f2, [%r3+4];\n"
                                      "add.f32 %f9, %f8, %f8;\nld.shared.f32 %f3, [%r3+8];\nld.shared.f32 %f4, [%r3+12];\n"
                                      "st.global.v4.f32 [%rd4], {%f1, %f2, %f3, %f4};"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 1);
  EXPECT_EQ(body_of(a.m), (Lines{"ld.shared.v4.f32 {%f1, %f2, %f3, %f4}, [%r3];", "add.f32 %f9, %f8, %f8;",
                                 "st.global.v4.f32 [%rd4], {%f1, %f2, %f3, %f4};", "ret;"}));
}

TEST(WidenVector, GlobalStoresThroughAnAlignedPointerParameter) {
  // in is declared 16-byte aligned; %rd6 = in + 8 * i keeps 8, so two f32 stores make a .v2
  // (placed where the second store was) but not a .v4.
  auto a = run("widen_vector",
               kernel("mul.wide.u32 %rd5, %r1, 8;\nadd.s64 %rd6, %rd3, %rd5;\nst.global.f32 [%rd6], %f1;\n"
                      "mul.f32 %f3, %f2, %f2;\nst.global.f32 [%rd6+4], %f3;",
                      "sm_80", ".ptr .global .align 16"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(body_of(a.m), (Lines{"mul.wide.u32 %rd5, %r1, 8;", "add.s64 %rd6, %rd3, %rd5;", "mul.f32 %f3, %f2, %f2;",
                                 "st.global.v2.f32 [%rd6], {%f1, %f3};", "ret;"}));
}

TEST(WidenVector, PairsOfV2LoadsAndPartialAlignment) {
  auto a = run("widen_vector", kernel("ld.shared.v2.u32 {%r10, %r11}, [%r3+16];\nld.shared.v2.u32 {%r12, %r13}, [%r3+24];"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(body_of(a.m)[0], "ld.shared.v4.u32 {%r10, %r11, %r12, %r13}, [%r3+16];");
  // Offset 8 from a 16-aligned base: four loads become two .v2 (8-byte) loads, not one .v4.
  auto b = run("widen_vector", kernel("ld.shared.u32 %r10, [%r3+8];\nld.shared.u32 %r11, [%r3+12];\n"
                                      "ld.shared.u32 %r12, [%r3+16];\nld.shared.u32 %r13, [%r3+20];"));
  ASSERT_TRUE(b.r.applied) << b.r.refusal;
  EXPECT_EQ(b.r.changes, 2);
  EXPECT_EQ(body_of(b.m), (Lines{"ld.shared.v2.u32 {%r10, %r11}, [%r3+8];", "ld.shared.v2.u32 {%r12, %r13}, [%r3+16];",
                                 "ret;"}));
  // max_bytes=8 and a symbol base with immediate values.
  auto c = run("widen_vector", kernel("st.shared.u16 [sm+8], %rs1;\nst.shared.u16 [sm+10], 0;\n"
                                      "st.shared.u16 [sm+12], %rs2;\nst.shared.u16 [sm+14], %rs3;"),
               {{"max_bytes", "8"}});
  ASSERT_TRUE(c.r.applied) << c.r.refusal;
  EXPECT_EQ(body_of(c.m)[0], "st.shared.v4.u16 [sm+8], {%rs1, 0, %rs2, %rs3};");
}

TEST(WidenVector, RefusesWithoutProvenAlignment) {
  // `in` carries no .align: nothing is known about the pointer.
  auto a = run("widen_vector", kernel("ld.global.f32 %f1, [%rd3];\nld.global.f32 %f2, [%rd3+4];"));
  expect_refused(a, "cannot prove [%rd3] (id");
  EXPECT_NE(a.r.refusal.find("8-byte aligned for .v2: base %rd3 is known only 1-byte aligned"), std::string::npos)
      << a.r.refusal;
  // %tid.x * 4 from an aligned array: only 4-byte alignment.
  auto b = run("widen_vector", kernel("shl.b32 %r6, %r1, 2;\nadd.s32 %r7, %r2, %r6;\n"
                                      "ld.shared.f32 %f1, [%r7];\nld.shared.f32 %f2, [%r7+4];"));
  expect_refused(b, "known only 4-byte aligned");
}

TEST(WidenVector, RefusesAcrossStoresBarriersAndDependences) {
  // A store between two loads may write what the second reads.
  expect_refused(run("widen_vector", kernel("ld.shared.f32 %f1, [%r3];\nst.shared.f32 [%r2], %f9;\n"
                                            "ld.shared.f32 %f2, [%r3+4];")),
                 "no two ld/st");
  expect_refused(run("widen_vector", kernel("st.shared.f32 [%r3], %f1;\nbar.sync 0;\nst.shared.f32 [%r3+4], %f2;")),
                 "no two ld/st");
  expect_refused(run("widen_vector", kernel("ld.shared.f32 %f1, [%r3];\nbar.warp.sync -1;\nld.shared.f32 %f2, [%r3+4];")),
                 "no two ld/st");
  // A load between two stores of the same space may read the first.
  expect_refused(run("widen_vector", kernel("st.shared.f32 [%r3], %f1;\nld.shared.f32 %f5, [%r2];\n"
                                            "st.shared.f32 [%r3+4], %f2;")),
                 "no two ld/st");
  // The first stored value is overwritten before the second store.
  expect_refused(run("widen_vector", kernel("st.shared.f32 [%r3], %f1;\nmov.f32 %f1, %f7;\nst.shared.f32 [%r3+4], %f2;")),
                 "a stored value, the address or the guard is redefined");
  // The second load's destination is read in between.
  expect_refused(run("widen_vector", kernel("ld.shared.f32 %f1, [%r3];\nadd.f32 %f6, %f2, %f2;\n"
                                            "ld.shared.f32 %f2, [%r3+4];")),
                 "its destination is read or written");
  // Different guards, modifiers or a branch target in between.
  expect_refused(run("widen_vector", kernel("@%p1 ld.shared.f32 %f1, [%r3];\nld.shared.f32 %f2, [%r3+4];")), "no two");
  expect_refused(run("widen_vector", kernel("ld.shared.f32 %f1, [%r3];\nld.shared.u32 %r9, [%r3+4];")), "no two");
  // One vector's registers must have one width (a .u8 may load into 16- or 32-bit registers).
  expect_refused(run("widen_vector", kernel("ld.shared.u8 %rs1, [%r3];\nld.shared.u8 %r9, [%r3+1];")), "no two");
  expect_refused(run("widen_vector", kernel("ld.shared.f32 %f1, [%r3];\nL1:\nld.shared.f32 %f2, [%r3+4];")), "no two");
  expect_refused(run("widen_vector", kernel("ld.volatile.shared.f32 %f1, [%r3];\nld.volatile.shared.f32 %f2, [%r3+4];")),
                 "no scalar or .v2");
}

TEST(WidenVector, ParametersAndTargets) {
  const std::string two = kernel("ld.shared.f32 %f1, [%r3];\nld.shared.f32 %f2, [%r3+4];\n"
                                 "st.shared.f32 [%r3+32], %f1;\nst.shared.f32 [%r3+36], %f2;");
  auto loads = run("widen_vector", two, {{"access", "load"}});
  ASSERT_TRUE(loads.r.applied);
  EXPECT_EQ(body_of(loads.m), (Lines{"ld.shared.v2.f32 {%f1, %f2}, [%r3];", "st.shared.f32 [%r3+32], %f1;",
                                     "st.shared.f32 [%r3+36], %f2;", "ret;"}));
  auto stores = run("widen_vector", two, {{"access", "store"}});
  ASSERT_TRUE(stores.r.applied);
  EXPECT_EQ(body_of(stores.m)[2], "st.shared.v2.f32 [%r3+32], {%f1, %f2};");
  EXPECT_FALSE(run("widen_vector", two, {{"access", "all"}}).r.applied);
  EXPECT_FALSE(run("widen_vector", two, {{"max_bytes", "32"}}).r.applied);
  EXPECT_FALSE(run("widen_vector", two, {{"window", "0"}}).r.applied);
  auto none = run("widen_vector", two, {{"targets", "99999"}});
  expect_refused(none, "among the targets");
}

// ---- async_copy ----------------------------------------------------------------------------

const char* kStage =
    "mul.wide.u32 %rd5, %r1, 4;\nadd.s64 %rd6, %rd3, %rd5;\nshl.b32 %r6, %r1, 2;\nadd.s32 %r7, %r2, %r6;\n";

TEST(AsyncCopy, GlobalToSharedBeforeABarrierBecomesCpAsync) {
  auto a = run("async_copy", kernel(std::string(kStage) + "ld.global.f32 %f1, [%rd6];\nst.shared.f32 [%r7], %f1;\n"
                                                          "bar.sync 0;\nld.shared.f32 %f2, [%r7+4];"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 1);
  EXPECT_EQ(body_of(a.m, 12), (Lines{"cp.async.ca.shared.global [%r7], [%rd6], 4;", "cp.async.commit_group;",
                                     "cp.async.wait_all;", "bar.sync 0;", "ld.shared.f32 %f2, [%r7+4];", "ret;"}));
}

TEST(AsyncCopy, SixteenBytesWithCgAndSeveralCopiesPerBarrier) {
  auto a = run("async_copy",
               kernel(std::string(kStage) +
                          "ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd6];\nld.global.nc.v2.u32 {%r10, %r11}, [%rd6+16];\n"
                          "st.shared.v4.f32 [%r3], {%f1, %f2, %f3, %f4};\nst.shared.v2.u32 [%r3+16], {%r10, %r11};\n"
                          "$L_next:\nbar.sync 0;",
                      "sm_90a"),
               {{"cache16", "cg"}});
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 2);
  EXPECT_EQ(body_of(a.m, 12),
            (Lines{"cp.async.cg.shared.global [%r3], [%rd6], 16;", "cp.async.ca.shared.global [%r3+16], [%rd6+16], 8;",
                   "$L_next:", "cp.async.commit_group;", "cp.async.wait_all;", "bar.sync 0;", "ret;"}));
}

TEST(AsyncCopy, RefusesBeforeSm80) {
  auto a = run("async_copy", kernel(std::string(kStage) + "ld.global.f32 %f1, [%rd6];\nst.shared.f32 [%r7], %f1;\n"
                                                          "bar.sync 0;",
                                    "sm_75"));
  expect_refused(a, "cp.async needs sm_80 or later (module targets sm_75)");
}

TEST(AsyncCopy, RefusesOtherUsesMissingBarriersAndSharedAccesses) {
  const std::string pre = std::string(kStage) + "ld.global.f32 %f1, [%rd6];\n";
  expect_refused(run("async_copy", kernel(pre + "st.shared.f32 [%r7], %f1;\nadd.f32 %f2, %f1, %f1;\nbar.sync 0;")),
                 "is used elsewhere than in one st.shared");
  expect_refused(run("async_copy", kernel(pre + "st.shared.f32 [%r7], %f1;")), "no bar.sync follows");
  expect_refused(run("async_copy", kernel(pre + "st.shared.f32 [%r7], %f1;\nld.shared.f32 %f3, [%r7];\nbar.sync 0;")),
                 "may access the shared bytes the copy at id");
  expect_refused(run("async_copy", kernel(pre + "st.shared.f32 [%r7], %f1;\nbar.warp.sync -1;\nbar.sync 0;")),
                 "a bar.sync must follow");
  expect_refused(run("async_copy", kernel(pre + "ld.shared.f32 %f3, [%r7];\nst.shared.f32 [%r7], %f1;\nbar.sync 0;")),
                 "may access the same shared bytes");
  expect_refused(run("async_copy", kernel(pre + "st.shared.f32 [%r7], %f1;\n@%p1 bra L1;\nbar.sync 0;\nL1:")),
                 "a bar.sync must follow on the straight-line path");
  expect_refused(run("async_copy", kernel(pre + "st.global.f32 [%rd4], %f1;\nbar.sync 0;")),
                 "not to a plain st.shared");
  expect_refused(run("async_copy", kernel(pre + "st.global.f32 [%rd4], %f9;\nst.shared.f32 [%r7], %f1;\nbar.sync 0;")),
                 "lies between the load");
  expect_refused(run("async_copy", kernel(std::string(kStage) + "ld.global.u16 %rs1, [%rd6];\n"
                                                               "st.shared.u16 [%r7], %rs1;\nbar.sync 0;")),
                 "does not load 4, 8 or 16 bytes");
  expect_refused(run("async_copy", kernel(pre + "@%p1 st.shared.f32 [%r7], %f1;\nbar.sync 0;")), "different guards");
  // Two copies to possibly overlapping bytes (different bases) may not both be in flight: the
  // later pair is rewritten, the earlier one refused.
  auto two = run("async_copy", kernel(pre + "st.shared.f32 [%r7], %f1;\nld.global.f32 %f2, [%rd6+4];\n"
                                             "st.shared.f32 [%r3], %f2;\nbar.sync 0;"));
  ASSERT_TRUE(two.r.applied) << two.r.refusal;
  EXPECT_EQ(two.r.changes, 1);
  EXPECT_EQ(body_of(two.m, 13)[0], "st.shared.f32 [%r7], %f1;");
  EXPECT_EQ(body_of(two.m, 13)[1], "cp.async.ca.shared.global [%r3], [%rd6+4], 4;");
  EXPECT_FALSE(run("async_copy", kernel(pre), {{"cache16", "cs"}}).r.applied);
}

// ---- if_convert ----------------------------------------------------------------------------

const char* kCond = "setp.ge.u32 %p1, %r1, 32;\nsetp.lt.u32 %p2, %r1, 48;\n";

TEST(IfConvert, ShortForwardBranchBecomesPredication) {
  auto a = run("if_convert", kernel(std::string(kCond) + "@%p1 bra $L_skip;\nadd.f32 %f1, %f2, %f3;\n"
                                                         "st.global.f32 [%rd4], %f1;\n$L_skip:\nst.global.f32 [%rd4+4], %f5;"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(body_of(a.m, 10), (Lines{"@!%p1 add.f32 %f1, %f2, %f3;", "@!%p1 st.global.f32 [%rd4], %f1;", "$L_skip:",
                                     "st.global.f32 [%rd4+4], %f5;", "ret;"}));
  auto b = run("if_convert", kernel(std::string(kCond) + "@!%p1 bra.uni $L_skip;\nmov.f32 %f1, 0f3F800000;\n$L_skip:"));
  ASSERT_TRUE(b.r.applied) << b.r.refusal;
  EXPECT_EQ(body_of(b.m, 10)[0], "@%p1 mov.f32 %f1, 0f3F800000;");
}

TEST(IfConvert, CombinesAnExistingGuardThroughAndPred) {
  auto a = run("if_convert", kernel(std::string(kCond) + "@%p1 bra $L_skip;\n@%p2 st.global.f32 [%rd4], %f1;\n"
                                                         "@!%p2 st.global.f32 [%rd4+4], %f1;\n$L_skip:"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(body_of(a.m, 10),
            (Lines{"and.pred %ptxevo_ifc, %p2, !%p1;", "@%ptxevo_ifc st.global.f32 [%rd4], %f1;",
                   "and.pred %ptxevo_ifc, !%p2, !%p1;", "@%ptxevo_ifc st.global.f32 [%rd4+4], %f1;", "$L_skip:", "ret;"}));
  EXPECT_NE(a.text.find(".reg .pred %ptxevo_ifc;"), std::string::npos);
  auto b = run("if_convert", kernel(std::string(kCond) + "@%p1 bra $L_skip;\n@%p2 st.global.f32 [%rd4], %f1;\n$L_skip:"),
               {{"combine_guards", "false"}});
  expect_refused(b, "already has a guard (combine_guards=false)");
}

TEST(IfConvert, IfElseDiamondBecomesTwoPredicatedRuns) {
  auto a = run("if_convert", kernel(std::string(kCond) + "@%p1 bra $L_else;\nadd.f32 %f1, %f2, %f3;\nbra.uni $L_join;\n"
                                                         "$L_else:\nsub.f32 %f1, %f2, %f3;\n@%p2 st.global.f32 [%rd4], %f1;\n"
                                                         "$L_join:\nst.global.f32 [%rd4+4], %f1;"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(body_of(a.m, 10),
            (Lines{"@!%p1 add.f32 %f1, %f2, %f3;", "$L_else:", "@%p1 sub.f32 %f1, %f2, %f3;",
                   "and.pred %ptxevo_ifc, %p2, %p1;", "@%ptxevo_ifc st.global.f32 [%rd4], %f1;", "$L_join:",
                   "st.global.f32 [%rd4+4], %f1;", "ret;"}));
  // The else label is also a target of another branch: its code cannot be predicated on %p1.
  auto b = run("if_convert", kernel(std::string(kCond) + "@%p1 bra $L_else;\nadd.f32 %f1, %f2, %f3;\n"
                                                         "bra.uni $L_join;\n$L_else:\nsub.f32 %f1, %f2, %f3;\n$L_join:\n"
                                                         "@%p2 bra $L_else;"));
  expect_refused(b, "label $L_else after the branch at id 10 is also reached from elsewhere");
  // Then and else parts together count against max_instructions.
  auto c = run("if_convert", kernel(std::string(kCond) + "@%p1 bra $L_else;\nadd.f32 %f1, %f2, %f3;\nbra.uni $L_join;\n"
                                                         "$L_else:\nsub.f32 %f1, %f2, %f3;\n$L_join:"),
               {{"max_instructions", "1"}});
  expect_refused(c, "skips more than max_instructions=1");
}

TEST(IfConvert, RefusesLongRegionsBarriersAtomicsLabelsAndPredicateWrites) {
  const std::string br = std::string(kCond) + "@%p1 bra $L_skip;\n";
  expect_refused(run("if_convert", kernel(br + "add.f32 %f1, %f2, %f3;\nadd.f32 %f4, %f2, %f3;\nadd.f32 %f5, %f2, %f3;\n"
                                               "add.f32 %f6, %f2, %f3;\nadd.f32 %f7, %f2, %f3;\n$L_skip:")),
                 "skips more than max_instructions=4");
  expect_refused(run("if_convert", kernel(br + "bar.sync 0;\n$L_skip:")), "is a barrier or fence");
  expect_refused(run("if_convert", kernel(br + "atom.global.add.u32 %r9, [%rd4], 1;\n$L_skip:")), "is atomic");
  expect_refused(run("if_convert", kernel(br + "shfl.sync.bfly.b32 %r9, %r1, 1, 31, -1;\n$L_skip:")),
                 "warp-collective");
  expect_refused(run("if_convert", kernel(br + "mov.f32 %f1, %f2;\n$L_other:\nmov.f32 %f3, %f2;\n$L_skip:")),
                 "a label other than $L_skip comes first");
  expect_refused(run("if_convert", kernel(br + "setp.eq.u32 %p1, %r1, 7;\nmov.f32 %f3, %f2;\n$L_skip:")),
                 "redefines %p1");
  expect_refused(run("if_convert", kernel(std::string(kCond) + "$L_back:\nmov.f32 %f3, %f2;\n@%p1 bra $L_back;\n"
                                                               "mov.f32 %f4, %f2;\n$L_end:")),
                 "a label other than $L_back comes first");
  expect_refused(run("if_convert", kernel("bra $L_skip;\nmov.f32 %f3, %f2;\n$L_skip:")), "no conditional bra");
  EXPECT_FALSE(run("if_convert", kernel(""), {{"max_instructions", "0"}}).r.applied);
}

// ---- if_unconvert --------------------------------------------------------------------------

TEST(IfUnconvert, GuardedRunBecomesABranchAndBack) {
  const std::string src = std::string(kCond) + "@%p1 ld.global.f32 %f1, [%rd3];\n@%p1 add.f32 %f2, %f1, %f1;\n"
                                               "@%p1 st.global.f32 [%rd4], %f2;\n@%p2 st.global.f32 [%rd4+4], %f2;";
  auto a = run("if_unconvert", kernel(src));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 1);
  const Lines expected = {"@!%p1 bra $ptxevo_skip0;",        "ld.global.f32 %f1, [%rd3];",
                          "add.f32 %f2, %f1, %f1;",          "st.global.f32 [%rd4], %f2;",
                          "$ptxevo_skip0:",                  "@%p2 st.global.f32 [%rd4+4], %f2;",
                          "ret;"};
  EXPECT_EQ(body_of(a.m, 10), expected);
  // if_convert undoes it.
  auto b = run("if_convert", a.text);
  ASSERT_TRUE(b.r.applied) << b.r.refusal;
  EXPECT_EQ(body_of(b.m, 10), (Lines{"@%p1 ld.global.f32 %f1, [%rd3];", "@%p1 add.f32 %f2, %f1, %f1;",
                                     "@%p1 st.global.f32 [%rd4], %f2;", "$ptxevo_skip0:",
                                     "@%p2 st.global.f32 [%rd4+4], %f2;", "ret;"}));
}

TEST(IfUnconvert, RunEndsWherePredicateIsRedefined) {
  auto a = run("if_unconvert", kernel(std::string(kCond) + "@%p1 mov.f32 %f1, %f2;\n@%p1 setp.eq.f32 %p1, %f1, %f3;\n"
                                                           "@%p1 mov.f32 %f4, %f2;\n@%p1 mov.f32 %f5, %f2;"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 2);
  EXPECT_EQ(body_of(a.m, 10), (Lines{"@!%p1 bra $ptxevo_skip0;", "mov.f32 %f1, %f2;", "setp.eq.f32 %p1, %f1, %f3;",
                                     "$ptxevo_skip0:", "@!%p1 bra $ptxevo_skip1;", "mov.f32 %f4, %f2;",
                                     "mov.f32 %f5, %f2;", "$ptxevo_skip1:", "ret;"}));
}

TEST(IfUnconvert, RefusesShortRunsCollectivesAndBadParameters) {
  expect_refused(run("if_unconvert", kernel(std::string(kCond) + "@%p1 mov.f32 %f1, %f2;\n@%p2 mov.f32 %f3, %f2;")),
                 "no run of min_instructions=2");
  expect_refused(run("if_unconvert", kernel(std::string(kCond) + "@%p1 atom.global.add.u32 %r9, [%rd4], 1;\n"
                                                                 "@%p1 bar.sync 0;")),
                 "cannot go behind a branch: it is atomic");
  expect_refused(run("if_unconvert", kernel("add.f32 %f1, %f2, %f3;")), "no guarded instruction");
  EXPECT_FALSE(run("if_unconvert", kernel(""), {{"min_instructions", "x"}}).r.applied);
}

// ---- ptxevo mutate -------------------------------------------------------------------------

TEST(StructuralPasses, ListedAndAppliedByTheMutateCommand) {
  std::ostringstream list;
  EXPECT_EQ(cli::run_mutate_list(list), 0);
  for (const char* n : {"widen_vector\n", "async_copy\n", "if_convert\n", "if_unconvert\n"})
    EXPECT_NE(list.str().find(n), std::string::npos) << n;
  const auto path = std::filesystem::temp_directory_path() / "ptxevo_structural_passes.ptx";
  std::ofstream(path) << kernel("ld.shared.f32 %f1, [%r3];\nld.shared.f32 %f2, [%r3+4];\nst.global.v2.f32 [%rd4], {%f1, %f2};");
  std::ostringstream out, err;
  EXPECT_EQ(cli::run_mutate(path.string(), "widen_vector", {"access=load"}, true, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("ld.shared.v2.f32 {%f1, %f2}, [%r3];"), std::string::npos) << out.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(cli::run_mutate(path.string(), "async_copy", {}, true, out2, err2), 1);
  EXPECT_NE(err2.str().find("async_copy not applied:"), std::string::npos) << err2.str();
  std::remove(path.string().c_str());
}

}  // namespace
}  // namespace ptxevo::mutators
