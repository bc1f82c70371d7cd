#include "declared_ops/declared_op.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <string>

#include "evaluator/builder.hpp"
#include "evaluator/spec.hpp"
#include "evaluator/toml_reader.hpp"

namespace ptxevo::declared_ops {
namespace {

using evaluator::ArgTensor;
using evaluator::DType;
using evaluator::Knobs;
using evaluator::OpConfig;
using evaluator::Shape;

const std::string kExamples = std::string(PTXEVO_SOURCE_DIR) + "/examples/ops/";

std::unique_ptr<DeclaredOp> load(const std::string& file) {
  OpDeclarationResult r = load_op_declaration(kExamples + file);
  if (!r.decl) {
    ADD_FAILURE() << r.error->format();
    return nullptr;
  }
  return std::make_unique<DeclaredOp>(std::move(*r.decl));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(DeclaredOp, OptionsAreTypedAndDefaulted) {
  auto op = load("gelu_bias/gelu_bias.op.toml");
  ASSERT_TRUE(op);
  EXPECT_EQ(op->validate({}), "");
  EXPECT_EQ(op->validate({{"dtype", "fp16"}}), "");
  EXPECT_NE(op->validate({{"dtype", "fp64"}}).find("option 'dtype' (dtype) cannot be 'fp64'; values: bf16, fp16, fp32"),
            std::string::npos);
  EXPECT_NE(op->validate({{"eps", "1"}}).find("unknown option 'eps'; options: dtype"), std::string::npos);
  EXPECT_EQ(op->template_defines({}).at("ELEM"), "__nv_bfloat16");
  EXPECT_EQ(op->template_defines({{"dtype", "fp32"}}).at("ELEM"), "float");
}

TEST(DeclaredOp, TensorsAndLaunchPlanFollowTheExpressions) {
  auto op = load("gelu_bias/gelu_bias.op.toml");
  ASSERT_TRUE(op);
  const Shape s = {{"M", 100000}, {"N", 1000}};
  const auto ts = op->tensors(s, {});
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[0].name, "x");
  EXPECT_EQ(ts[0].shape, (std::vector<std::int64_t>{100000, 1000}));
  EXPECT_EQ(ts[0].dtype, DType::BF16);
  EXPECT_FALSE(ts[0].fixed_distribution);
  EXPECT_EQ(ts[1].shape, (std::vector<std::int64_t>{1000}));
  EXPECT_TRUE(ts[1].fixed_distribution);
  EXPECT_EQ(ts[2].role, evaluator::Role::Out);
  const Knobs k = {{"THREADS", std::int64_t{128}}, {"VEC", std::int64_t{4}}, {"ROWS", std::int64_t{1}}};
  const auto p = op->launch_plan(s, {}, k);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].entry, "gelu_bias");
  EXPECT_EQ(p.kernels[0].grid.x, 2u);       // cdiv(1000, 512)
  EXPECT_EQ(p.kernels[0].grid.y, 65535u);   // min(cdiv(100000, 1), 65535)
  EXPECT_EQ(p.kernels[0].block.x, 128u);
  ASSERT_EQ(p.kernels[0].args.size(), 5u);
  EXPECT_EQ(std::get<ArgTensor>(p.kernels[0].args[1]).name, "b");
  EXPECT_EQ(std::get<std::int64_t>(p.kernels[0].args[4]), 1000);
  EXPECT_NE(error_of([&] { op->launch_plan(s, {}, {{"THREADS", std::int64_t{128}}}); })
                .find("reads knob 'VEC', which the candidate does not set"),
            std::string::npos);
  EXPECT_NE(error_of([&] { op->launch_plan(s, {}, {{"THREADS", std::int64_t{2048}}, {"VEC", std::int64_t{1}}, {"ROWS", std::int64_t{1}}}); })
                .find("block.x = 2048 (THREADS) is outside [1, 1024]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { op->tensors({{"M", 4}}, {}); }).find("the shape lacks dimension 'N'"), std::string::npos);
  EXPECT_NE(error_of([&] { op->tensors({{"M", 4}, {"N", 4}, {"K", 2}}, {}); }).find("no dimension 'K'"), std::string::npos);
}

TEST(DeclaredOp, SizesToleranceAndReference) {
  auto op = load("gelu_bias/gelu_bias.op.toml");
  ASSERT_TRUE(op);
  const Shape s = {{"M", 8}, {"N", 16}};
  EXPECT_DOUBLE_EQ(op->bytes(s, {}), 2.0 * (8 * 16 + 16 + 8 * 16));  // x, b read; y written
  EXPECT_DOUBLE_EQ(op->flops(s, {}), 10.0 * 8 * 16);
  EXPECT_DOUBLE_EQ(op->tolerance("y", {}).rel_l2, 5e-3);
  EXPECT_DOUBLE_EQ(op->tolerance("y", {{"dtype", "fp32"}}).rel_l2, 1e-5);
  EXPECT_THROW(op->tolerance("x", {}), std::invalid_argument);
  const std::string src = op->device_reference_source({});
  EXPECT_EQ(src.rfind("#define ELEM __nv_bfloat16\n#line 1 ", 0), 0u) << src.substr(0, 80);
  const auto r = op->device_reference_plan(s, {});
  EXPECT_EQ(r.outputs, (std::vector<std::string>{"y"}));
  ASSERT_EQ(r.plan.kernels.size(), 1u);
  EXPECT_EQ(std::get<ArgTensor>(r.plan.kernels[0].args[2]).name, "ref:y");
  EXPECT_FALSE(op->has_host_reference());
  auto row = load("row_argmax/row_argmax.op.toml");
  ASSERT_TRUE(row);
  EXPECT_DOUBLE_EQ(row->tolerance("idx", {}).rel_l2, 0.0);  // integers: exact
  EXPECT_DOUBLE_EQ(row->bytes({{"M", 4}, {"N", 10}}, {}), 2.0 * 40 + 8.0 * 4);
}

TEST(DeclaredOp, FixedFillsKeepTheirPromises) {
  OpDeclarationResult r = load_op_declaration(kExamples + "gelu_bias/gelu_bias.op.toml");
  ASSERT_TRUE(r.decl);
  OpDeclaration d = *r.decl;
  TensorDecl off;
  off.name = "offsets";
  off.role = evaluator::Role::In;
  off.dtype = "i32";
  off.shape = {"M + 1"};
  off.fill.kind = FillKind::Offsets;
  off.fill.total = "N";
  TensorDecl ids = off;
  ids.name = "ids";
  ids.shape = {"N"};
  ids.fill = {FillKind::IntRange, -3, 5, {}};
  d.tensors.push_back(off);
  d.tensors.push_back(ids);
  const DeclaredOp op(d);
  std::mt19937_64 rng(7);
  for (const Shape& s : {Shape{{"M", 1}, {"N", 1}}, Shape{{"M", 5}, {"N", 5}}, Shape{{"M", 9}, {"N", 1000}}, Shape{{"M", 300}, {"N", 301}}}) {
    for (const auto& desc : op.tensors(s, {})) {
      if (!desc.fixed_distribution || desc.name == "b") continue;
      evaluator::HostTensor t(desc.name, desc.dtype, desc.shape);
      op.fill_fixed(desc, rng, t);
      if (desc.name == "offsets") {
        EXPECT_EQ(t.get(0), 0);
        EXPECT_EQ(t.get(t.numel() - 1), static_cast<double>(s.at("N")));
        for (std::int64_t i = 1; i < t.numel(); ++i) EXPECT_LT(t.get(i - 1), t.get(i)) << evaluator::shape_to_string(s) << " at " << i;
      } else {
        std::set<double> seen;
        for (std::int64_t i = 0; i < t.numel(); ++i) {
          EXPECT_GE(t.get(i), -3);
          EXPECT_LE(t.get(i), 5);
          seen.insert(t.get(i));
        }
        if (t.numel() >= 1000) {
          EXPECT_EQ(seen.size(), 9u);
        }
      }
    }
  }
  EXPECT_NE(error_of([&] { op.tensors({{"M", 10}, {"N", 5}}, {}); }).find("10 segments cannot share a total of 5"), std::string::npos);
}

TEST(DeclaredOp, SpecNamesTheOpFileAndItsSeedsMustGiveTheKnobs) {
  const evaluator::OpRegistry registry(load_declared_op);
  const auto r = evaluator::load_spec(kExamples + "gelu_bias/gelu_bias.spec", registry);
  ASSERT_TRUE(r.spec) << r.error->format();
  EXPECT_EQ(r.spec->op, "gelu_bias");
  EXPECT_NE(r.spec->op_file.find("gelu_bias.op.toml"), std::string::npos);
  ASSERT_NE(registry.find("gelu_bias"), nullptr);
  // The same file again is the same op; another spec naming it reuses it.
  const auto again = evaluator::load_spec(kExamples + "gelu_bias/gelu_bias.spec", registry);
  ASSERT_TRUE(again.spec);
  const auto row = evaluator::load_spec(kExamples + "row_argmax/row_argmax.spec", registry);
  ASSERT_TRUE(row.spec) << row.error->format();
  // A seed without a knob the plan reads is refused at its [[seed]].
  std::string text;
  std::string why;
  ASSERT_TRUE(evaluator::read_text_file(kExamples + "gelu_bias/gelu_bias.spec", &text, &why));
  const auto at = text.find("knobs.ROWS");
  text.erase(at, text.find('\n', at) - at);
  const auto bad = evaluator::parse_spec(text, kExamples + "gelu_bias/gelu_bias.spec", registry);
  ASSERT_TRUE(bad.error);
  EXPECT_NE(bad.error->message.find("reads knob 'ROWS' in its launch plan; declare it in the seed's knobs"), std::string::npos)
      << bad.error->format();
}

TEST(DeclaredOp, AnErrorInTheOpFileIsReportedThere) {
  const evaluator::OpRegistry registry(load_declared_op);
  const std::string spec = "op_file = \"nope.op.toml\"\n[shapes]\nbenchmark = [{M = 1}]\ncorrectness = [{M = 1}]\n";
  const auto r = evaluator::parse_spec(spec, kExamples + "gelu_bias/x.spec", registry);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->line, 1u);
  EXPECT_NE(r.error->message.find("op file 'nope.op.toml': cannot read op file: no such file"), std::string::npos) << r.error->format();
}

// The seeds and references of both examples build with NVRTC for sm_90a (no GPU needed).
TEST(DeclaredOp, ExampleSeedsAndReferencesBuild) {
  const evaluator::OpRegistry registry(load_declared_op);
  evaluator::Builder builder(nullptr);
  for (const char* spec : {"gelu_bias/gelu_bias.spec", "row_argmax/row_argmax.spec"}) {
    const auto r = evaluator::load_spec(kExamples + spec, registry);
    ASSERT_TRUE(r.spec) << r.error->format();
    const evaluator::Op& op = *registry.find(r.spec->op);
    for (const std::string dtype : {"bf16", "fp32"}) {
      const OpConfig cfg = {{"dtype", dtype}};
      evaluator::BuildRequest ref;
      ref.name = op.name() + "_ref";
      ref.source = op.device_reference_source(cfg);
      ref.source_path = ref.name + ".cu";
      ref.arch = "sm_90a";
      const auto rb = builder.build(ref);
      EXPECT_TRUE(rb.ok) << spec << " reference (" << dtype << "): " << rb.stage << ": " << rb.error;
      evaluator::BuildRequest seed;
      seed.name = op.name();
      std::string why;
      ASSERT_TRUE(evaluator::read_text_file(r.spec->seeds[0].source_path, &seed.source, &why));
      seed.source_path = r.spec->seeds[0].source_path;
      seed.arch = "sm_90a";
      seed.defines = op.template_defines(cfg);
      seed.knobs = evaluator::default_knobs(r.spec->seeds[0]);
      const auto sb = builder.build(seed);
      EXPECT_TRUE(sb.ok) << spec << " seed (" << dtype << "): " << sb.stage << ": " << sb.error;
    }
  }
}

}  // namespace
}  // namespace ptxevo::declared_ops
