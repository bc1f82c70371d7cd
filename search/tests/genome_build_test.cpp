// A genome's PTX edits as a build pass: applied in order, with the IR verifier between them.
#include <gtest/gtest.h>

#include <functional>

#include "ir/parser.hpp"
#include "search/genome_build.hpp"

namespace ptxevo::search {
namespace {

constexpr const char* kPtx = R"(.version 8.0
.target sm_90a
.address_size 64

.visible .entry k(
	.param .u64 p
)
{
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<2>;

	ld.param.u64 	%rd1, [p];
	mov.u32 	%r1, 7;
	st.global.u32 	[%rd1], %r1;
	ret;
}
)";

// Changes the stored constant: a legal edit.
class SetConstant : public mutators::PtxPass {
 public:
  std::string name() const override { return "set_constant"; }
  std::string description() const override { return "mov.u32 %r1, 7 -> 9"; }
  std::string legality() const override { return "always"; }
  std::map<std::string, std::string> param_defaults() const override { return {}; }
  mutators::PassResult apply(ir::Module& m, const mutators::PassParams&) const override {
    mutators::PassResult r;
    for (auto* f : m.functions())
      for (auto& st : f->body)
        if (auto* in = std::get_if<ir::Instruction>(&st.node); in && in->opcode == "mov") {
          in->operands.back().text = "9";
          ++r.changes;
        }
    r.applied = r.changes > 0;
    if (!r.applied) r.refusal = "no mov";
    return r;
  }
};

// Points the parameter load at a name nothing defines: the module no longer verifies (a buggy pass).
class RenameParamUse : public mutators::PtxPass {
 public:
  std::string name() const override { return "break_param"; }
  std::string description() const override { return "[p] -> [q]"; }
  std::string legality() const override { return "never"; }
  std::map<std::string, std::string> param_defaults() const override { return {}; }
  mutators::PassResult apply(ir::Module& m, const mutators::PassParams&) const override {
    mutators::PassResult r;
    std::function<void(ir::Operand&)> visit = [&](ir::Operand& o) {
      if (o.kind == ir::OperandKind::Symbol && o.text == "p") {
        o.text = "q";
        ++r.changes;
      }
      for (auto& item : o.items) visit(item);
    };
    for (auto* f : m.functions())
      for (auto& st : f->body)
        if (auto* in = std::get_if<ir::Instruction>(&st.node))
          for (auto& op : in->operands) visit(op);
    r.applied = r.changes > 0;
    return r;
  }
};

std::shared_ptr<const mutators::PassRegistry> registry() {
  auto reg = std::make_shared<mutators::PassRegistry>();
  reg->add(std::make_unique<SetConstant>());
  reg->add(std::make_unique<RenameParamUse>());
  return reg;
}

ir::Module parsed() {
  auto r = ir::parse_ptx(kPtx);
  EXPECT_TRUE(r.ok()) << (r.error ? r.error->format("k.ptx") : "");
  return std::move(*r.module);
}

TEST(EditPass, LegalEditsApplyInOrder) {
  auto m = parsed();
  EXPECT_EQ(edit_pass({{"set_constant", {}}}, registry())(m), "");
}

TEST(EditPass, APassThatBreaksTheModuleIsNamedByTheVerifier) {
  auto m = parsed();
  const std::string err = edit_pass({{"set_constant", {}}, {"break_param", {}}}, registry())(m);
  EXPECT_EQ(err.rfind("pass-broke-ir: break_param left the module ill-formed (", 0), 0u) << err;
  EXPECT_NE(err.find("edited.ptx:"), std::string::npos) << err;
}

TEST(EditPass, AnUnknownPassSaysSo) {
  auto m = parsed();
  EXPECT_EQ(edit_pass({{"nope", {}}}, registry())(m), "pass-unknown: no pass named 'nope'");
}

}  // namespace
}  // namespace ptxevo::search
