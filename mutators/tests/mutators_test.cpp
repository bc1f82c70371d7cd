// Per-pass before/after on small inline PTX, and each pass's legality refusals.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "ir/parser.hpp"
#include "ir/printer.hpp"
#include "mutators/pass.hpp"

namespace ptxevo::mutators {
namespace {

ir::Module parse(const std::string& ptx) {
  ir::ParseResult r = ir::parse_ptx(ptx);
  if (!r.ok()) throw std::runtime_error(r.error->format("<inline ptx>"));
  return std::move(*r.module);
}

// A kernel `k(in, out, n)` with BODY after the usual parameter loads; %rd3 = global in,
// %rd4 = global out.
std::string kernel(const std::string& body, const std::string& perf = "", const std::string& header =
                                                                                ".version 8.0\n.target sm_90a\n") {
  return header + ".address_size 64\n.visible .entry k(.param .u64 in, .param .u64 out, .param .u32 n)\n" + perf +
         "{\n.reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .f32 %f<16>;\n.reg .b64 %rd<16>;\n"
         "ld.param.u64 %rd1, [in];\nld.param.u64 %rd2, [out];\n"
         "cvta.to.global.u64 %rd3, %rd1;\ncvta.to.global.u64 %rd4, %rd2;\n" +
         body + "\nret;\n}\n";
}

const ir::Instruction* find_op(const ir::Module& m, const std::string& prefix, int nth = 0) {
  for (const auto* f : m.functions())
    for (const auto& st : f->body)
      if (const auto* ins = std::get_if<ir::Instruction>(&st.node))
        if (ins->full_opcode().rfind(prefix, 0) == 0 && nth-- == 0) return ins;
  return nullptr;
}

std::string printed(const ir::Module& m, const std::string& prefix, int nth = 0) {
  const ir::Instruction* ins = find_op(m, prefix, nth);
  return ins ? ir::print_instruction(*ins) : "<none>";
}

struct Applied {
  ir::Module m;
  PassResult r;
};

Applied run(const std::string& pass, const std::string& ptx, const PassParams& params = {}) {
  const PassRegistry reg = builtin_passes();
  const PtxPass* p = reg.find(pass);
  if (!p) throw std::runtime_error("no pass " + pass);
  Applied a{parse(ptx), {}};
  a.r = p->apply(a.m, params);
  // Whatever the pass did, the module still prints and parses again.
  const std::string text = ir::print_module(a.m);
  ir::ParseResult again = ir::parse_ptx(text);
  if (!again.ok()) throw std::runtime_error("re-parse failed: " + again.error->format("<mutated>") + "\n" + text);
  return a;
}

// ---- registry ---------------------------------------------------------------------------

TEST(PassRegistry, ListsEveryBuiltinPassWithMetadata) {
  const PassRegistry reg = builtin_passes();
  const std::vector<std::string> expected = {"async_copy",    "fast_math",       "hoist_global_loads", "if_convert",
                                             "if_unconvert",  "l1_no_allocate",  "l2_evict_hint",      "launch_bounds",
                                             "ld_global_nc",  "max_registers",   "store_streaming",    "widen_vector"};
  EXPECT_EQ(reg.names(), expected);
  for (const auto& n : reg.names()) {
    const PtxPass* p = reg.find(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->name(), n);
    EXPECT_FALSE(p->description().empty());
    EXPECT_FALSE(p->legality().empty());
  }
  EXPECT_EQ(reg.find("nope"), nullptr);
}

TEST(PassRegistry, UnknownParameterIsRefusedWithoutChanges) {
  auto a = run("store_streaming", kernel("st.global.f32 [%rd4], %f1;"), {{"bogus", "1"}});
  EXPECT_FALSE(a.r.applied);
  EXPECT_NE(a.r.refusal.find("unknown parameter 'bogus'"), std::string::npos);
  EXPECT_EQ(printed(a.m, "st."), "st.global.f32 [%rd4], %f1;");
}

TEST(PassRegistry, ParsesParamListsAndTargets) {
  PassParams p;
  std::string err;
  EXPECT_TRUE(parse_param_list({"n=64", "function=k"}, &p, &err));
  EXPECT_EQ(p.at("n"), "64");
  EXPECT_FALSE(parse_param_list({"novalue"}, &p, &err));
  EXPECT_FALSE(err.empty());
  err.clear();
  auto t = parse_targets("3, 5", &err);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(*t, (std::set<std::uint32_t>{3, 5}));
  EXPECT_FALSE(parse_targets("", &err).has_value());
  parse_targets("x", &err);
  EXPECT_FALSE(err.empty());
}

// ---- ld_global_nc ------------------------------------------------------------------------

TEST(LdGlobalNc, ReadOnlyParameterBufferBecomesNc) {
  auto a = run("ld_global_nc", kernel("mul.wide.u32 %rd5, %r1, 4;\nadd.s64 %rd6, %rd3, %rd5;\n"
                                      "ld.global.f32 %f1, [%rd6];\nadd.s64 %rd7, %rd4, %rd5;\n"
                                      "st.global.f32 [%rd7], %f1;"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 1);
  EXPECT_EQ(printed(a.m, "ld.global"), "ld.global.nc.f32 %f1, [%rd6];");
}

TEST(LdGlobalNc, KeepsCacheOperatorOrderAndVectors) {
  auto a = run("ld_global_nc", kernel("ld.global.cg.v4.f32 {%f1, %f2, %f3, %f4}, [%rd3+16];\n"
                                      "st.global.f32 [%rd4], %f1;"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(printed(a.m, "ld.global"), "ld.global.cg.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd3+16];");
}

TEST(LdGlobalNc, RefusesWhenTheSameParameterIsWritten) {
  auto a = run("ld_global_nc", kernel("ld.global.f32 %f1, [%rd3];\nadd.s64 %rd5, %rd3, 4;\n"
                                      "st.global.f32 [%rd5], %f1;"));
  EXPECT_FALSE(a.r.applied);
  EXPECT_NE(a.r.refusal.find("param:in"), std::string::npos) << a.r.refusal;
  EXPECT_EQ(printed(a.m, "ld.global"), "ld.global.f32 %f1, [%rd3];");
}

TEST(LdGlobalNc, RefusesWhenAStoreAddressComesFromMemory) {
  // A pointer loaded from memory may point anywhere, including into `in`.
  auto a = run("ld_global_nc", kernel("ld.global.u64 %rd8, [%rd4];\nld.global.f32 %f1, [%rd3];\n"
                                      "st.global.f32 [%rd8], %f1;"));
  EXPECT_FALSE(a.r.applied);
  EXPECT_NE(a.r.refusal.find("unknown origin"), std::string::npos) << a.r.refusal;
}

TEST(LdGlobalNc, RefusesAtomicsOnTheLoadedBuffer) {
  auto a = run("ld_global_nc", kernel("ld.global.f32 %f1, [%rd3];\natom.global.add.f32 %f2, [%rd3], %f1;"));
  EXPECT_FALSE(a.r.applied);
  EXPECT_NE(a.r.refusal.find("param:in"), std::string::npos) << a.r.refusal;
}

TEST(LdGlobalNc, RefusesLoadThroughLoadedPointerAndOrderedLoads) {
  auto a = run("ld_global_nc", kernel("ld.global.u64 %rd8, [%rd3];\nld.global.f32 %f1, [%rd8];\n"
                                      "ld.relaxed.gpu.global.f32 %f2, [%rd3];\nst.global.f32 [%rd4], %f1;"),
               {{"targets", ""}});
  // The first load (a pointer out of `in`) is legal; the two others are not.
  ASSERT_TRUE(a.r.applied);
  EXPECT_EQ(a.r.changes, 1);
  EXPECT_EQ(printed(a.m, "ld.global", 0), "ld.global.nc.u64 %rd8, [%rd3];");
  EXPECT_EQ(printed(a.m, "ld.global", 1), "ld.global.f32 %f1, [%rd8];");
  EXPECT_EQ(printed(a.m, "ld.relaxed"), "ld.relaxed.gpu.global.f32 %f2, [%rd3];");
}

TEST(LdGlobalNc, TargetsRestrictTheRewrite) {
  const std::string ptx = kernel("ld.global.f32 %f1, [%rd3];\nld.global.f32 %f2, [%rd3+4];\nst.global.f32 [%rd4], %f1;");
  const ir::Module m = parse(ptx);
  const std::uint32_t second = find_op(m, "ld.global", 1)->id;
  auto a = run("ld_global_nc", ptx, {{"targets", std::to_string(second)}});
  ASSERT_TRUE(a.r.applied);
  EXPECT_EQ(a.r.changes, 1);
  EXPECT_EQ(printed(a.m, "ld.global", 0), "ld.global.f32 %f1, [%rd3];");
  EXPECT_EQ(printed(a.m, "ld.global", 1), "ld.global.nc.f32 %f2, [%rd3+4];");
  EXPECT_EQ(find_op(a.m, "ld.global", 1)->id, second);  // ids survive the rewrite
}

TEST(LdGlobalNc, RefusesInNonEntryFunctionsAndWithUnknownCallees) {
  const std::string fn =
      ".version 8.0\n.target sm_90a\n.address_size 64\n"
      ".func f(.param .u64 p)\n{\n.reg .b64 %rd<4>;\n.reg .f32 %f<2>;\nld.param.u64 %rd1, [p];\n"
      "ld.global.f32 %f1, [%rd1];\nret;\n}\n";
  auto a = run("ld_global_nc", fn);
  EXPECT_FALSE(a.r.applied);
  EXPECT_NE(a.r.refusal.find("non-entry"), std::string::npos) << a.r.refusal;

  const std::string call =
      ".version 8.0\n.target sm_90a\n.address_size 64\n.extern .func g();\n"
      ".visible .entry k(.param .u64 in)\n{\n.reg .b64 %rd<4>;\n.reg .f32 %f<2>;\nld.param.u64 %rd1, [in];\n"
      "cvta.to.global.u64 %rd2, %rd1;\nld.global.f32 %f1, [%rd2];\ncall.uni g, ();\nret;\n}\n";
  auto b = run("ld_global_nc", call);
  EXPECT_FALSE(b.r.applied);
  EXPECT_NE(b.r.refusal.find("g"), std::string::npos) << b.r.refusal;
}

// ---- l1_no_allocate ----------------------------------------------------------------------

TEST(L1NoAllocate, AddsQualifierAfterSpaceAndNc) {
  auto a = run("l1_no_allocate", kernel("ld.global.f32 %f1, [%rd3];\nld.global.nc.v2.f32 {%f2, %f3}, [%rd3+8];\n"
                                        "ld.global.ca.f32 %f4, [%rd3];\nld.global.L1::evict_last.f32 %f5, [%rd3];"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 2);
  EXPECT_EQ(printed(a.m, "ld.global", 0), "ld.global.L1::no_allocate.f32 %f1, [%rd3];");
  EXPECT_EQ(printed(a.m, "ld.global", 1), "ld.global.nc.L1::no_allocate.v2.f32 {%f2, %f3}, [%rd3+8];");
  EXPECT_EQ(printed(a.m, "ld.global", 2), "ld.global.ca.f32 %f4, [%rd3];");
  EXPECT_EQ(printed(a.m, "ld.global", 3), "ld.global.L1::evict_last.f32 %f5, [%rd3];");
}

TEST(L1NoAllocate, RefusesOldIsaAndCachedLoads) {
  auto a = run("l1_no_allocate", kernel("ld.global.f32 %f1, [%rd3];", "", ".version 7.0\n.target sm_80\n"));
  EXPECT_FALSE(a.r.applied);
  EXPECT_NE(a.r.refusal.find("PTX ISA 7.4"), std::string::npos) << a.r.refusal;
  auto b = run("l1_no_allocate", kernel("ld.global.cg.f32 %f1, [%rd3];\nld.volatile.global.f32 %f2, [%rd3];"));
  EXPECT_FALSE(b.r.applied);
  EXPECT_FALSE(b.r.refusal.empty());
}

// ---- l2_evict_hint -----------------------------------------------------------------------

TEST(L2EvictHint, CreatesOnePolicyAndHintsEachLoad) {
  auto a = run("l2_evict_hint", kernel("ld.global.f32 %f1, [%rd3];\nld.global.nc.L1::no_allocate.v2.f32 {%f2, %f3}, [%rd3];"),
               {{"priority", "evict_first"}});
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 2);
  EXPECT_EQ(printed(a.m, "createpolicy"), "createpolicy.fractional.L2::evict_first.b64 %ptxevo_l2pol, 0f3F800000;");
  EXPECT_EQ(printed(a.m, "ld.global", 0), "ld.global.L2::cache_hint.f32 %f1, [%rd3], %ptxevo_l2pol;");
  EXPECT_EQ(printed(a.m, "ld.global", 1),
            "ld.global.nc.L1::no_allocate.L2::cache_hint.v2.f32 {%f2, %f3}, [%rd3], %ptxevo_l2pol;");
  // The policy is computed before everything else.
  const auto& body = a.m.functions()[0]->body;
  for (const auto& st : body)
    if (const auto* ins = std::get_if<ir::Instruction>(&st.node)) {
      EXPECT_EQ(ins->opcode, "createpolicy");
      break;
    }
  EXPECT_NE(ir::print_module(a.m).find(".reg .b64 %ptxevo_l2pol;"), std::string::npos);
}

TEST(L2EvictHint, RefusesBadPriorityOldTargetAndHintedLoads) {
  auto a = run("l2_evict_hint", kernel("ld.global.f32 %f1, [%rd3];"), {{"priority", "evict_soon"}});
  EXPECT_FALSE(a.r.applied);
  EXPECT_NE(a.r.refusal.find("priority"), std::string::npos);
  auto b = run("l2_evict_hint", kernel("ld.global.f32 %f1, [%rd3];", "", ".version 8.0\n.target sm_75\n"));
  EXPECT_FALSE(b.r.applied);
  EXPECT_NE(b.r.refusal.find("sm_80"), std::string::npos) << b.r.refusal;
  auto c = run("l2_evict_hint", kernel("createpolicy.fractional.L2::evict_last.b64 %rd9, 0f3F800000;\n"
                                       "ld.global.L2::cache_hint.f32 %f1, [%rd3], %rd9;"));
  EXPECT_FALSE(c.r.applied);
}

// ---- store_streaming ---------------------------------------------------------------------

TEST(StoreStreaming, PlainGlobalStoresBecomeCs) {
  auto a = run("store_streaming", kernel("st.global.f32 [%rd4], %f1;\nst.global.v4.f32 [%rd4+16], {%f1, %f2, %f3, %f4};\n"
                                         "st.global.wt.f32 [%rd4], %f1;\nst.relaxed.gpu.global.f32 [%rd4], %f1;"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 2);
  EXPECT_EQ(printed(a.m, "st.global", 0), "st.global.cs.f32 [%rd4], %f1;");
  EXPECT_EQ(printed(a.m, "st.global", 1), "st.global.cs.v4.f32 [%rd4+16], {%f1, %f2, %f3, %f4};");
  EXPECT_EQ(printed(a.m, "st.global", 2), "st.global.wt.f32 [%rd4], %f1;");
  EXPECT_EQ(printed(a.m, "st.relaxed"), "st.relaxed.gpu.global.f32 [%rd4], %f1;");
}

TEST(StoreStreaming, RefusesWithoutPlainGlobalStores) {
  auto a = run("store_streaming", kernel("st.global.cg.f32 [%rd4], %f1;"));
  EXPECT_FALSE(a.r.applied);
  EXPECT_NE(a.r.refusal.find("cache operator"), std::string::npos);
  auto b = run("store_streaming", kernel("ld.global.f32 %f1, [%rd3];"));
  EXPECT_FALSE(b.r.applied);
  EXPECT_NE(b.r.refusal.find("no st.global"), std::string::npos);
}

// ---- max_registers -----------------------------------------------------------------------

TEST(MaxRegisters, AddsThenReplacesMaxnreg) {
  auto a = run("max_registers", kernel("add.f32 %f1, %f2, %f3;"), {{"n", "64"}});
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_NE(ir::print_module(a.m).find(".maxnreg 64\n"), std::string::npos);
  auto b = run("max_registers", kernel("add.f32 %f1, %f2, %f3;", ".maxnreg 40\n"), {{"n", "96"}});
  ASSERT_TRUE(b.r.applied);
  const auto* f = b.m.find_function("k");
  ASSERT_EQ(f->perf.size(), 1u);
  EXPECT_EQ(f->perf[0].args, std::vector<std::string>{"96"});
}

TEST(MaxRegisters, RefusesOutOfRangeAndUnchanged) {
  EXPECT_FALSE(run("max_registers", kernel(""), {{"n", "16"}}).r.applied);
  EXPECT_FALSE(run("max_registers", kernel(""), {{"n", "256"}}).r.applied);
  EXPECT_FALSE(run("max_registers", kernel(""), {{"n", "x"}}).r.applied);
  auto a = run("max_registers", kernel("", ".maxnreg 64\n"), {{"n", "64"}});
  EXPECT_FALSE(a.r.applied);
  EXPECT_NE(a.r.refusal.find("already"), std::string::npos);
}

TEST(MaxRegisters, RefusesBudgetBelowTheWidestInstruction) {
  // 8 accumulator registers + 32 slack = 40 > 32.
  auto a = run("max_registers",
               kernel("mov.b32 %r1, 0;\nmma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, "
                      "{%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};"),
               {{"n", "32"}});
  EXPECT_FALSE(a.r.applied);
  EXPECT_NE(a.r.refusal.find("needs"), std::string::npos) << a.r.refusal;
}

// ---- launch_bounds -----------------------------------------------------------------------

TEST(LaunchBounds, SetsMaxntidAndMinnctapersm) {
  auto a = run("launch_bounds", kernel("", ".maxntid 1024, 1, 1\n"), {{"maxntid", "256"}, {"minnctapersm", "4"}});
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 2);
  const std::string text = ir::print_module(a.m);
  EXPECT_NE(text.find(".maxntid 256, 1, 1\n.minnctapersm 4\n"), std::string::npos) << text;
}

TEST(LaunchBounds, RefusesReqntidAndOversubscription) {
  auto a = run("launch_bounds", kernel("", ".reqntid 128, 1, 1\n"));
  EXPECT_FALSE(a.r.applied);
  EXPECT_NE(a.r.refusal.find(".reqntid"), std::string::npos);
  auto b = run("launch_bounds", kernel(""), {{"maxntid", "1024"}, {"minnctapersm", "3"}});
  EXPECT_FALSE(b.r.applied);
  EXPECT_NE(b.r.refusal.find("2048"), std::string::npos) << b.r.refusal;
  EXPECT_FALSE(run("launch_bounds", kernel(""), {{"maxntid", "2048"}}).r.applied);
}

// ---- fast_math ---------------------------------------------------------------------------

TEST(FastMath, RewritesF32FormsOnly) {
  auto a = run("fast_math", kernel(".reg .f64 %fd<3>;\n.reg .b16 %h<3>;\ndiv.rn.f32 %f1, %f2, %f3;\ndiv.full.f32 %f4, %f2, %f3;\n"
                                   "sqrt.rn.ftz.f32 %f5, %f2;\nrsqrt.approx.f32 %f6, %f2;\nex2.approx.f32 %f7, %f2;\n"
                                   "rcp.rn.f32 %f8, %f2;\nsqrt.rn.f64 %fd1, %fd2;\nex2.approx.ftz.f32 %f9, %f2;\n"
                                   "ex2.approx.f16 %h1, %h2;"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 6);
  EXPECT_EQ(printed(a.m, "div", 0), "div.approx.ftz.f32 %f1, %f2, %f3;");
  EXPECT_EQ(printed(a.m, "div", 1), "div.approx.ftz.f32 %f4, %f2, %f3;");
  EXPECT_EQ(printed(a.m, "sqrt", 0), "sqrt.approx.ftz.f32 %f5, %f2;");
  EXPECT_EQ(printed(a.m, "rsqrt"), "rsqrt.approx.ftz.f32 %f6, %f2;");
  EXPECT_EQ(printed(a.m, "ex2", 0), "ex2.approx.ftz.f32 %f7, %f2;");
  EXPECT_EQ(printed(a.m, "rcp"), "rcp.approx.ftz.f32 %f8, %f2;");
  EXPECT_EQ(printed(a.m, "sqrt", 1), "sqrt.rn.f64 %fd1, %fd2;");
  EXPECT_EQ(printed(a.m, "ex2", 2), "ex2.approx.f16 %h1, %h2;");
}

TEST(FastMath, OpsAndDivFormParameters) {
  auto a = run("fast_math", kernel(".reg .f64 %fd<3>;\n.reg .b16 %h<3>;\ndiv.rn.f32 %f1, %f2, %f3;\nsqrt.rn.f32 %f5, %f2;"),
               {{"ops", "div"}, {"div_form", "full"}});
  ASSERT_TRUE(a.r.applied);
  EXPECT_EQ(printed(a.m, "div"), "div.full.ftz.f32 %f1, %f2, %f3;");
  EXPECT_EQ(printed(a.m, "sqrt"), "sqrt.rn.f32 %f5, %f2;");
  EXPECT_FALSE(run("fast_math", kernel(""), {{"ops", "tan"}}).r.applied);
  auto b = run("fast_math", kernel("sqrt.approx.ftz.f32 %f5, %f2;"));
  EXPECT_FALSE(b.r.applied);
  EXPECT_NE(b.r.refusal.find("already"), std::string::npos);
}


// ---- hoist_global_loads ------------------------------------------------------------------

std::vector<std::string> instructions(const ir::Module& m) {
  std::vector<std::string> out;
  for (const auto& st : m.functions()[0]->body)
    if (const auto* ins = std::get_if<ir::Instruction>(&st.node)) out.push_back(ir::print_instruction(*ins));
  return out;
}

TEST(HoistGlobalLoads, MovesPastIndependentWorkUpToItsAddress) {
  auto a = run("hoist_global_loads", kernel("mul.wide.u32 %rd5, %r1, 4;\nadd.s64 %rd6, %rd3, %rd5;\n"
                                            "add.f32 %f5, %f6, %f7;\nmul.f32 %f8, %f5, %f5;\n"
                                            "ld.global.f32 %f1, [%rd6];\nst.global.f32 [%rd4], %f1;"));
  ASSERT_TRUE(a.r.applied) << a.r.refusal;
  EXPECT_EQ(a.r.changes, 1);
  const auto v = instructions(a.m);
  ASSERT_EQ(v.size(), 11u);
  EXPECT_EQ(v[5], "add.s64 %rd6, %rd3, %rd5;");
  EXPECT_EQ(v[6], "ld.global.f32 %f1, [%rd6];");
  EXPECT_EQ(v[7], "add.f32 %f5, %f6, %f7;");
  EXPECT_EQ(v[8], "mul.f32 %f8, %f5, %f5;");
}

TEST(HoistGlobalLoads, DistanceLimitsTheMove) {
  auto a = run("hoist_global_loads", kernel("add.f32 %f5, %f6, %f7;\nmul.f32 %f8, %f5, %f5;\nld.global.f32 %f1, [%rd3];"),
               {{"distance", "1"}});
  ASSERT_TRUE(a.r.applied);
  const auto v = instructions(a.m);
  EXPECT_EQ(v[4], "add.f32 %f5, %f6, %f7;");
  EXPECT_EQ(v[5], "ld.global.f32 %f1, [%rd3];");
}

TEST(HoistGlobalLoads, RefusesAcrossStoresBarriersLabelsAndDependences) {
  for (const std::string before : {"st.global.f32 [%rd4], %f2;", "bar.sync 0;", "fence.acq_rel.gpu;", "L1:",
                                   "mov.f32 %f3, %f1;", "mov.f32 %f1, %f2;", "ld.acquire.gpu.global.f32 %f4, [%rd4];"}) {
    auto a = run("hoist_global_loads", kernel("cvta.to.global.u64 %rd5, %rd1;\n" + before + "\nld.global.f32 %f1, [%rd3];"));
    EXPECT_FALSE(a.r.applied) << before;
    EXPECT_FALSE(a.r.refusal.empty());
  }
  EXPECT_FALSE(run("hoist_global_loads", kernel("ld.global.f32 %f1, [%rd3];"), {{"distance", "0"}}).r.applied);
}

}  // namespace
}  // namespace ptxevo::mutators
