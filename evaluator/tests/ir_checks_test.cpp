#include "evaluator/ir_checks.hpp"

#include <gtest/gtest.h>

#include "ir/parser.hpp"

namespace ptxevo::evaluator {
namespace {

ir::Module parse(const std::string& text) {
  ir::ParseResult r = ir::parse_ptx(text);
  if (!r.ok()) {
    ADD_FAILURE() << "line " << r.error->loc.line << ": " << r.error->message;
    return {};
  }
  return std::move(*r.module);
}

const std::string kHeader = ".version 8.7\n.target sm_90a\n.address_size 64\n";

// A kernel `k` with `decls` at module scope, `perf` directives and `body`, on known lines:
// line 4 holds the first declaration; the body starts after the register declarations.
std::string kernel(const std::string& decls, const std::string& body, const std::string& perf = "") {
  return kHeader + decls +
         ".visible .entry k(\n"
         ".param .u64 k_out\n"
         ")\n" +
         perf +
         "{\n"
         ".reg .pred %p<3>;\n"
         ".reg .b32 %r<16>;\n"
         ".reg .b64 %rd<16>;\n"
         ".reg .f32 %f<8>;\n"
         "ld.param.u64 %rd1, [k_out];\n"
         "cvta.to.global.u64 %rd2, %rd1;\n"
         "mov.u32 %r1, %tid.x;\n"
         "mul.wide.u32 %rd14, %r1, 4;\n"
         "add.s64 %rd15, %rd2, %rd14;\n" +
         body + "\nret;\n}\n";
}

KernelLaunch launch(const std::string& entry, Dim3 block, Dim3 grid = {}, Dim3 cluster = {}) {
  KernelLaunch l;
  l.entry = entry;
  l.block = block;
  l.grid = grid;
  l.cluster = cluster;
  return l;
}
LaunchPlan plan_of(KernelLaunch l) { return LaunchPlan{{std::move(l)}}; }
const LaunchPlan kPlan = plan_of(launch("k", {256, 1, 1}, {64, 1, 1}));

std::string dump(const std::vector<IrViolation>& v) {
  std::string s;
  for (const auto& x : v) s += x.rule + ": " + x.message + "\n";
  return s;
}
int count(const std::vector<IrViolation>& v, const std::string& rule) {
  int n = 0;
  for (const auto& x : v) n += x.rule == rule;
  return n;
}

// ---- legal kernels ----------------------------------------------------------------------------
TEST(IrChecks, ReadOnlyGlobalTableAndTidAreAllowed) {
  const std::string decl =
      ".global .align 4 .b8 table[16] = {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64};\n"
      ".const .align 4 .f32 scale = 0f3F800000;\n";
  const std::string body =
      "and.b32 %r2, %r1, 3;\n"
      "mov.u64 %rd3, table;\n"
      "cvta.global.u64 %rd4, %rd3;\n"
      "mul.wide.u32 %rd5, %r2, 4;\n"
      "add.s64 %rd6, %rd4, %rd5;\n"
      "ld.f32 %f1, [%rd6];\n"
      "ld.global.nc.f32 %f2, [table+4];\n"
      "ld.const.f32 %f3, [scale];\n"
      "add.f32 %f1, %f1, %f2;\n"
      "mul.f32 %f1, %f1, %f3;\n"
      "mov.u32 %r3, %ctaid.x;\n"
      "st.global.f32 [%rd15], %f1;";
  const ir::Module m = parse(kernel(decl, body, ".maxntid 256, 1, 1\n"));
  const auto v = check_ir(m, kPlan);
  EXPECT_TRUE(v.empty()) << dump(v);
  // __launch_bounds__(256) emits .maxntid 256,1,1; a 32x8 block is a legal launch of it.
  EXPECT_TRUE(check_ir(m, plan_of(launch("k", {32, 8, 1}, {64, 1, 1}))).empty());
}

// ---- persistent-global ------------------------------------------------------------------------
TEST(IrChecks, AtomicCounterInGlobalIsRejected) {
  const ir::Module m = parse(kernel(".global .align 4 .u32 counter;\n", "atom.global.add.u32 %r2, [counter], 1;"));
  const auto v = check_ir(m, kPlan);
  ASSERT_EQ(count(v, "persistent-global"), 1) << dump(v);
  EXPECT_NE(v[0].message.find("'k' line 18"), std::string::npos) << v[0].message;
  EXPECT_NE(v[0].message.find("'counter' (declared at line 4)"), std::string::npos) << v[0].message;
}

TEST(IrChecks, DirectStoreAndReductionAreRejected) {
  const auto st = check_ir(parse(kernel(".global .u32 flag;\n", "st.global.u32 [flag], %r1;")), kPlan);
  EXPECT_EQ(count(st, "persistent-global"), 1) << dump(st);
  const auto red = check_ir(parse(kernel(".global .f32 acc;\n", "red.global.add.f32 [acc+0], 0f3F800000;")), kPlan);
  EXPECT_EQ(count(red, "persistent-global"), 1) << dump(red);
}

TEST(IrChecks, StoreThroughDerivedAddressIsRejected) {
  // The result cache keyed by nothing: the address goes through mov, cvta and add first.
  const std::string body =
      "mov.u64 %rd3, cache;\n"
      "cvta.global.u64 %rd4, %rd3;\n"
      "add.s64 %rd5, %rd4, %rd14;\n"
      "ld.f32 %f1, [%rd5];\n"
      "setp.eq.f32 %p1, %f1, 0f00000000;\n"
      "@%p1 st.f32 [%rd5], 0f40000000;\n"
      "st.global.f32 [%rd15], %f1;";
  const auto v = check_ir(parse(kernel(".global .align 4 .f32 cache[1024];\n", body)), kPlan);
  ASSERT_EQ(count(v, "persistent-global"), 1) << dump(v);
  EXPECT_NE(v[0].message.find("st.f32"), std::string::npos) << v[0].message;
  EXPECT_NE(v[0].message.find("'k' line 23"), std::string::npos) << v[0].message;
}

TEST(IrChecks, AddressEscapesAreRejected) {
  // Passed to a function (which could store through it) ...
  const std::string callee = ".func sink(.param .u64 sink_p)\n{\nret;\n}\n";
  const std::string call_body =
      "mov.u64 %rd3, buf;\n"
      "{\n"
      ".param .u64 param0;\n"
      "st.param.b64 [param0], %rd3;\n"
      "call.uni sink, (param0);\n"
      "}";
  const auto c = check_ir(parse(kernel(".global .u32 buf[4];\n" + callee, call_body)), kPlan);
  EXPECT_EQ(count(c, "persistent-global"), 1) << dump(c);
  // ... stored to memory as data ...
  const auto s = check_ir(parse(kernel(".global .u32 buf[4];\n", "mov.u64 %rd3, buf;\nst.global.u64 [%rd15], %rd3;")),
                          kPlan);
  EXPECT_EQ(count(s, "persistent-global"), 1) << dump(s);
  // ... or placed in another variable's initializer.
  const auto init = check_ir(parse(kernel(".global .u32 buf[4];\n.global .u64 ptr = generic(buf);\n", "")), kPlan);
  EXPECT_EQ(count(init, "persistent-global"), 1) << dump(init);
}

TEST(IrChecks, BulkCopyIntoGlobalIsRejectedButCopyFromItIsNot) {
  const std::string decls = ".global .align 16 .b8 acc[64];\n.shared .align 16 .b8 tile[64];\n";
  const auto w = check_ir(
      parse(kernel(decls, "mov.u32 %r2, tile;\ncp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [acc], [%r2], 64;")),
      kPlan);
  EXPECT_EQ(count(w, "persistent-global"), 1) << dump(w);
  const auto r = check_ir(parse(kernel(decls, "mov.u32 %r2, tile;\ncp.async.ca.shared.global [%r2], [acc], 16;")), kPlan);
  EXPECT_EQ(count(r, "persistent-global"), 0) << dump(r);
}

TEST(IrChecks, ExternWeakAndCommonGlobalsAreRejected) {
  for (const char* linkage : {".extern", ".weak", ".common"}) {
    const auto v = check_ir(parse(kernel(std::string(linkage) + " .global .align 4 .b8 other[16];\n", "")), kPlan);
    EXPECT_EQ(count(v, "persistent-global"), 1) << linkage << "\n" << dump(v);
  }
  // Shared memory is per CTA and per launch: writing it is fine.
  const auto sh = check_ir(parse(kernel(".shared .align 4 .f32 s[256];\n", "st.shared.f32 [s], 0f00000000;")), kPlan);
  EXPECT_TRUE(sh.empty()) << dump(sh);
}

// ---- clock-read -------------------------------------------------------------------------------
TEST(IrChecks, ClockReadsAreRejected) {
  for (const char* reg : {"%clock", "%clock_hi", "%globaltimer_lo", "%globaltimer_hi"}) {
    const auto v = check_ir(parse(kernel("", std::string("mov.u32 %r2, ") + reg + ";")), kPlan);
    ASSERT_EQ(count(v, "clock-read"), 1) << reg << "\n" << dump(v);
    EXPECT_NE(v[0].message.find(reg), std::string::npos);
    EXPECT_NE(v[0].message.find("'k' line 17"), std::string::npos) << v[0].message;
  }
  for (const char* reg : {"%clock64", "%globaltimer", "%pm0_64"}) {
    const auto v = check_ir(parse(kernel("", std::string("mov.u64 %rd3, ") + reg + ";")), kPlan);
    EXPECT_EQ(count(v, "clock-read"), 1) << reg << "\n" << dump(v);
  }
  // Reads in a helper function count too.
  const std::string helper = ".func (.reg .b64 t) now()\n{\nmov.u64 t, %globaltimer;\nret;\n}\n";
  EXPECT_EQ(count(check_ir(parse(kernel(helper, "")), kPlan), "clock-read"), 1);
  // Thread and block indices, lane ids and the SM id are ordinary.
  const auto ok = check_ir(
      parse(kernel("", "mov.u32 %r2, %ntid.x;\nmov.u32 %r3, %laneid;\nmov.u32 %r4, %nctaid.y;\nmov.u32 %r5, %smid;")),
      kPlan);
  EXPECT_TRUE(ok.empty()) << dump(ok);
}

// ---- missing-entry ----------------------------------------------------------------------------
TEST(IrChecks, MissingEntriesAreRejected) {
  const std::string extra =
      ".func helper()\n{\nret;\n}\n"
      ".visible .entry decl_only(.param .u64 p);\n";
  const ir::Module m = parse(kernel(extra, ""));
  EXPECT_TRUE(check_ir(m, kPlan).empty());
  for (const char* name : {"nope", "helper", "decl_only"}) {
    const auto v = check_ir(m, plan_of(launch(name, {128, 1, 1})));
    ASSERT_EQ(count(v, "missing-entry"), 1) << name << "\n" << dump(v);
    EXPECT_NE(v[0].message.find(name), std::string::npos);
  }
  LaunchPlan two = kPlan;
  two.kernels.push_back(launch("second", {128, 1, 1}));
  EXPECT_EQ(count(check_ir(m, two), "missing-entry"), 1);
}

// ---- launch-resources -------------------------------------------------------------------------
TEST(IrChecks, BlockMustFitMaxntidAndMatchReqntid) {
  const ir::Module maxn = parse(kernel("", "", ".maxntid 256, 1, 1\n"));
  const auto over = check_ir(maxn, plan_of(launch("k", {512, 1, 1})));
  ASSERT_EQ(count(over, "launch-resources"), 1) << dump(over);
  EXPECT_NE(over[0].message.find("'k' line 4"), std::string::npos) << over[0].message;
  EXPECT_NE(over[0].message.find(".maxntid"), std::string::npos);

  const ir::Module req = parse(kernel("", "", ".reqntid 128\n"));
  EXPECT_TRUE(check_ir(req, plan_of(launch("k", {128, 1, 1}))).empty());
  EXPECT_EQ(count(check_ir(req, plan_of(launch("k", {64, 2, 1}))), "launch-resources"), 1);
  EXPECT_EQ(count(check_ir(req, plan_of(launch("k", {64, 1, 1}))), "launch-resources"), 1);
}

TEST(IrChecks, HardwareBlockAndGridLimits) {
  const ir::Module m = parse(kernel("", ""));
  EXPECT_EQ(count(check_ir(m, plan_of(launch("k", {2048, 1, 1}))), "launch-resources"), 1);
  EXPECT_EQ(count(check_ir(m, plan_of(launch("k", {64, 32, 1}))), "launch-resources"), 1);  // 2048 threads
  EXPECT_EQ(count(check_ir(m, plan_of(launch("k", {1, 1, 128}))), "launch-resources"), 1);  // z > 64
  EXPECT_EQ(count(check_ir(m, plan_of(launch("k", {0, 1, 1}))), "launch-resources"), 1);
  EXPECT_EQ(count(check_ir(m, plan_of(launch("k", {32, 1, 1}, {1, 70000, 1}))), "launch-resources"), 1);
  EXPECT_TRUE(check_ir(m, plan_of(launch("k", {1024, 1, 1}, {1u << 30, 1, 1}))).empty());
}

TEST(IrChecks, ClusterDirectives) {
  const ir::Module req = parse(kernel("", "", ".reqnctapercluster 2, 1, 1\n"));
  EXPECT_TRUE(check_ir(req, plan_of(launch("k", {128, 1, 1}, {4, 1, 1}, {2, 1, 1}))).empty());
  // Launched without the cluster the kernel requires.
  const auto none = check_ir(req, plan_of(launch("k", {128, 1, 1}, {4, 1, 1})));
  ASSERT_EQ(count(none, "launch-resources"), 1) << dump(none);
  EXPECT_NE(none[0].message.find(".reqnctapercluster"), std::string::npos);
  EXPECT_EQ(count(check_ir(req, plan_of(launch("k", {128, 1, 1}, {4, 1, 1}, {4, 1, 1}))), "launch-resources"), 1);

  // A cluster launch of a kernel without cluster directives is fine; .explicitcluster needs one.
  const ir::Module plain = parse(kernel("", ""));
  EXPECT_TRUE(check_ir(plain, plan_of(launch("k", {128, 1, 1}, {8, 1, 1}, {2, 1, 1}))).empty());
  const ir::Module expl = parse(kernel("", "", ".explicitcluster\n"));
  EXPECT_TRUE(check_ir(expl, plan_of(launch("k", {128, 1, 1}, {8, 1, 1}, {2, 1, 1}))).empty());
  EXPECT_EQ(count(check_ir(expl, plan_of(launch("k", {128, 1, 1}, {8, 1, 1}))), "launch-resources"), 1);

  // Cluster size and shape limits.
  EXPECT_EQ(count(check_ir(plain, plan_of(launch("k", {128, 1, 1}, {32, 4, 2}, {4, 4, 2}))), "launch-resources"), 1);
  EXPECT_EQ(count(check_ir(plain, plan_of(launch("k", {128, 1, 1}, {5, 1, 1}, {2, 1, 1}))), "launch-resources"), 1);
  const ir::Module rank = parse(kernel("", "", ".maxclusterrank 4\n"));
  EXPECT_TRUE(check_ir(rank, plan_of(launch("k", {128, 1, 1}, {8, 1, 1}, {4, 1, 1}))).empty());
  EXPECT_EQ(count(check_ir(rank, plan_of(launch("k", {128, 1, 1}, {8, 1, 1}, {8, 1, 1}))), "launch-resources"), 1);
}

}  // namespace
}  // namespace ptxevo::evaluator
