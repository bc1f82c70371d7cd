// Lowering PTX entries to inline asm, and the instruction comparison, on small hand-written PTX.
#include <gtest/gtest.h>

#include "exporter/inline_ptx.hpp"
#include "exporter/ptx_compare.hpp"
#include "ir/parser.hpp"

namespace ptxevo::exporter {
namespace {

constexpr const char* kPtx = R"(.version 9.0
.target sm_90a
.address_size 64
.shared .align 4 .b8 red[64];
.extern .shared .align 16 .b8 stage[];
.visible .entry k(
	.param .u64 k_param_0,
	.param .f32 k_param_1
)
.maxntid 128, 1, 1
.minnctapersm 2
{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	.reg .f32 %f<2>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [k_param_0];
	mov.u32 %r1, %tid.x;
	setp.eq.s32 %p1, %r1, 0;
	@%p1 bra $L__BB0_2;
	ld.param.f32 %f1, [k_param_1];
	mov.u32 %r2, red;
	mov.u32 %r3, stage;
	st.shared.f32 [%r2], %f1;
	st.shared.f32 [%r3], %f1;
$L__BB0_2:
	ret;
}
)";

const std::vector<KernelParam> kParams = {{"const float*", "x", "l"}, {"float", "eps", "f"}};

ir::Module parse(const std::string& text) {
  auto r = ir::parse_ptx(text);
  EXPECT_TRUE(r.ok()) << (r.error ? r.error->format("test.ptx") : "");
  return std::move(*r.module);
}

TEST(InlinePtx, LowersParametersRegistersLabelsAndSharedMemory) {
  const ir::Module m = parse(kPtx);
  const LoweredEntry e = lower_entry(m, *m.find_function("k"), kParams);
  const std::string& d = e.definition;
  EXPECT_NE(d.find("extern \"C\" __global__ void __launch_bounds__(128, 2) k(const float* x, float eps)"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("mov.b64 %%x_rd1, %0;"), std::string::npos) << d;  // ld.param -> operand, in place
  EXPECT_NE(d.find("mov.b32 %%x_f1, %1;"), std::string::npos) << d;
  EXPECT_NE(d.find(".reg .b32 %%x_r<4>;"), std::string::npos) << d;   // registers renamed in the scope
  EXPECT_NE(d.find("$k__L__BB0_2"), std::string::npos) << d;          // labels carry the entry's name
  EXPECT_NE(d.find(".shared .align 4 .b8 red[64];"), std::string::npos) << d;  // moved into the scope
  EXPECT_NE(d.find("mov.u32 %%x_r3, ptxevo_dynamic_smem;"), std::string::npos) << d;
  EXPECT_TRUE(e.uses_dynamic_smem);
  EXPECT_EQ(e.dynamic_smem_align, 16u);
  EXPECT_NE(d.find(": \"l\"(x), \"f\"(eps), \"r\"((unsigned)__cvta_generic_to_shared(ptxevo_dynamic_smem))"),
            std::string::npos)
      << d;
  EXPECT_EQ(d.find("ld.param"), std::string::npos) << d;
}

TEST(InlinePtx, RefusesWhatAsmCannotHold) {
  std::string with_call = kPtx;
  with_call.replace(with_call.find("ret;"), 4, "call.uni f;\n\tret;");
  with_call.insert(with_call.find(".visible .entry"), ".func f()\n{\n\tret;\n}\n");
  ir::Module m = parse(with_call);
  EXPECT_THROW(lower_entry(m, *m.find_function("k"), kParams), ExportError);

  m = parse(kPtx);
  const std::vector<KernelParam> wrong = {{"const float*", "x", "l"}, {"int", "n", "r"}};
  try {
    lower_entry(m, *m.find_function("k"), wrong);
    FAIL() << "a float parameter bound as an int must be refused";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("4-byte float"), std::string::npos) << e.what();
  }
  const std::vector<KernelParam> too_few = {{"const float*", "x", "l"}};
  EXPECT_THROW(lower_entry(m, *m.find_function("k"), too_few), ExportError);
}

TEST(InlinePtx, LaunchAttributes) {
  ir::Function f;
  f.name = "k";
  f.perf = {{".maxntid", {"256", "1", "1"}}, {".minnctapersm", {"3"}}};
  EXPECT_EQ(launch_attributes(f), "__launch_bounds__(256, 3)");
  f.perf = {{".maxnreg", {"64"}}};
  EXPECT_EQ(launch_attributes(f), "__maxnreg__(64)");
  f.perf = {{".reqnctapercluster", {"2", "1", "1"}}, {".explicitcluster", {}}};
  EXPECT_EQ(launch_attributes(f), "__cluster_dims__(2, 1, 1)");
  f.perf = {{".maxntid", {"256", "1", "1"}}, {".maxnreg", {"64"}}};
  EXPECT_THROW(launch_attributes(f), ExportError);  // CUDA C++ forbids both on one kernel
  f.perf = {{".reqntid", {"256", "1", "1"}}};
  EXPECT_THROW(launch_attributes(f), ExportError);
}

TEST(InlinePtx, EscapesForCStrings) { EXPECT_EQ(c_escape("\t.pragma \"nounroll\";\\"), "\\t.pragma \\\"nounroll\\\";\\\\"); }

TEST(PtxCompare, SameModuloNamesAndDifferentOtherwise) {
  const ir::Module a = parse(kPtx);
  std::string renamed = kPtx;
  for (auto at = renamed.find("%r"); at != std::string::npos; at = renamed.find("%r", at + 3)) renamed.replace(at, 2, "%q");
  const ir::Module b = parse(renamed);
  PtxComparison c = compare_modules(a, b);
  EXPECT_TRUE(c.same) << c.difference;
  EXPECT_EQ(c.entries, 1u);

  std::string changed = kPtx;
  changed.replace(changed.find("st.shared.f32 [%r3]"), 13, "st.shared.u32");
  c = compare_modules(a, parse(changed));
  EXPECT_FALSE(c.same);
  EXPECT_NE(c.difference.find("st.shared"), std::string::npos) << c.difference;

  std::string bounds = kPtx;
  bounds.replace(bounds.find(".minnctapersm 2"), 15, ".minnctapersm 4");
  c = compare_modules(a, parse(bounds));
  EXPECT_FALSE(c.same);
  EXPECT_NE(c.difference.find("directives"), std::string::npos) << c.difference;
}

}  // namespace
}  // namespace ptxevo::exporter
