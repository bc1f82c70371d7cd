#include "declared_ops/op_declaration.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ptxevo::declared_ops {
namespace {

// A small valid declaration; the tests below break one line of it at a time.
const std::string kOp = R"toml([op]
name = "scale_add"
dims = ["M", "N"]
knobs = { THREADS = "int" }

[options.dtype]
type = "dtype"
values = ["bf16", "fp32"]
default = "fp32"
define = "ELEM"

[options.alpha]
type = "float"
default = 2.0

[[tensor]]
name = "x"
role = "in"
dtype = "dtype"
shape = ["M", "N"]

[[tensor]]
name = "y"
role = "out"
dtype = "dtype"
shape = ["M", "N"]

[[launch]]
entry = "scale_add"
grid = ["cdiv(M * N, THREADS)"]
block = ["THREADS"]
args = ["x", "y", "f32: alpha", "i64: M * N"]

[reference]
source = "ref.cu"

[[reference.launch]]
entry = "scale_add_ref"
grid = ["cdiv(M * N, 256)"]
block = [256]
args = ["x", "ref:y", "f64: alpha", "i64: M * N"]
)toml";

class OpDeclarationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ptxevo-opdecl-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                                     "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "ref.cu") << "extern \"C\" __global__ void scale_add_ref() {}\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  OpDeclarationResult parse(const std::string& text) {
    const std::string path = (dir_ / "op.toml").string();
    std::ofstream(path) << text;
    return load_op_declaration(path);
  }
  static std::string edit(std::string s, const std::string& from, const std::string& to) {
    const auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
  }
  void expect_error(const std::string& text, std::uint32_t line, std::uint32_t col, const std::string& needle) {
    const OpDeclarationResult r = parse(text);
    ASSERT_TRUE(r.error) << "expected an error containing: " << needle;
    EXPECT_NE(r.error->message.find(needle), std::string::npos) << r.error->format();
    EXPECT_EQ(r.error->line, line) << r.error->format();
    EXPECT_EQ(r.error->col, col) << r.error->format();
  }

  std::filesystem::path dir_;
};

TEST_F(OpDeclarationTest, ReadsEveryPart) {
  const OpDeclarationResult r = parse(kOp);
  ASSERT_TRUE(r.decl) << r.error->format();
  const OpDeclaration& d = *r.decl;
  EXPECT_EQ(d.name, "scale_add");
  EXPECT_EQ(d.dims, (std::vector<std::string>{"M", "N"}));
  ASSERT_EQ(d.options.size(), 2u);
  EXPECT_EQ(d.options[0].type, OptionType::DType);
  EXPECT_EQ(d.options[0].define, "ELEM");
  EXPECT_EQ(d.options[1].default_value, "2");
  ASSERT_EQ(d.tensors.size(), 2u);
  ASSERT_EQ(d.launches.size(), 1u);
  ASSERT_EQ(d.launches[0].args.size(), 4u);
  EXPECT_EQ(d.launches[0].args[2].kind, ArgKind::F32);
  EXPECT_EQ(d.launches[0].args[2].text, "alpha");
  EXPECT_EQ(d.launches[0].args[3].kind, ArgKind::I64);
  EXPECT_EQ(d.launches[0].args[3].text, "M * N");
  EXPECT_NE(d.reference_source.find("scale_add_ref"), std::string::npos);
}

TEST_F(OpDeclarationTest, ErrorsNameTheLineAndColumn) {
  expect_error(edit(kOp, "dims = [\"M\", \"N\"]", "dimz = [\"M\", \"N\"]"), 3, 1, "unknown key 'dimz' in [op]");
  // Inside an expression: the column of the unknown name within the line.
  expect_error(edit(kOp, "grid = [\"cdiv(M * N, THREADS)\"]", "grid = [\"cdiv(M * K, THREADS)\"]"), 30, 19,
               "unknown name 'K'");
  expect_error(edit(kOp, "grid = [\"cdiv(M * N, THREADS)\"]", "grid = [\"cdiv(M * N THREADS)\"]"), 30, 21,
               "takes two arguments");
  expect_error(edit(kOp, "args = [\"x\", \"y\", \"f32: alpha\"", "args = [\"x\", \"z\", \"f32: alpha\""), 32, 14,
               "argument 'z' of launch 'scale_add' is not a declared tensor");
  expect_error(edit(kOp, "shape = [\"M\", \"N\"]\n\n[[tensor]]\nname = \"y\"", "shape = [\"M\", \"B\"]\n\n[[tensor]]\nname = \"y\""),
               20, 16, "unknown name 'B'");
  expect_error(edit(kOp, "args = [\"x\", \"ref:y\"", "args = [\"x\", \"y\""), 41, 14, "'y' is out (write \"ref:y\")");
  expect_error(edit(kOp, "args = [\"x\", \"ref:y\"", "args = [\"x\", \"x\""), 34, 1,
               "no [[reference.launch]] is passed \"ref:y\"");
  expect_error(edit(kOp, "source = \"ref.cu\"", "source = \"missing.cu\""), 35, 10, "reference source 'missing.cu' cannot be read");
  expect_error(edit(kOp, "type = \"float\"", "type = \"real\""), 13, 8, "must be one of: int, float, bool, enum, dtype");
  expect_error(edit(kOp, "values = [\"bf16\", \"fp32\"]", "values = [\"bf16\", \"fp33\"]"), 8, 19, "unknown dtype 'fp33'");
  expect_error(edit(kOp, "name = \"y\"", "name = \"x\""), 23, 8, "tensor 'x' is already the tensor at line 17");
  expect_error(edit(kOp, "\"i64: M * N\"]\n\n[reference]", "\"i64: alpha\"]\n\n[reference]"), 32, 33,
               "float option 'alpha' is passed as f32: or f64:");
  expect_error(edit(kOp, "role = \"out\"", "role = \"output\""), 24, 8, "must be in, out, inout or scratch");
  expect_error("[op\n", 1, 4, "invalid TOML");
}

// Degenerate rows: kinds by name, conditional ones as { kind, when }; only on gate-drawn float inputs.
TEST_F(OpDeclarationTest, DegenerateRowsAreKindsWithConditions) {
  const std::string with = edit(kOp, "shape = [\"M\", \"N\"]\n\n[[tensor]]\nname = \"y\"",
                                "shape = [\"M\", \"N\"]\ndegenerate_rows = [\"zero\", { kind = \"denormal\", when = \"dtype == \\\"fp32\\\"\" }]"
                                "\n\n[[tensor]]\nname = \"y\"");
  const OpDeclarationResult r = parse(with);
  ASSERT_TRUE(r.decl) << r.error->format();
  ASSERT_EQ(r.decl->tensors[0].degenerate_rows.size(), 2u);
  EXPECT_EQ(r.decl->tensors[0].degenerate_rows[0].first, evaluator::DegenerateRow::Zero);
  EXPECT_EQ(r.decl->tensors[0].degenerate_rows[1].first, evaluator::DegenerateRow::Denormal);
  EXPECT_EQ(r.decl->tensors[0].degenerate_rows[1].second, "dtype == \"fp32\"");
  expect_error(edit(with, "\"zero\"", "\"zeros\""), 21, 20, "unknown degenerate row kind \"zeros\"");
  expect_error(edit(kOp, "role = \"out\"\ndtype = \"dtype\"", "role = \"out\"\ndtype = \"dtype\"\ndegenerate_rows = [\"zero\"]"), 26, 19,
               "'degenerate_rows' is for float inputs the gate draws");
}

TEST_F(OpDeclarationTest, IntegerInputsNeedAFill) {
  const std::string text = edit(kOp, "[[tensor]]\nname = \"y\"",
                                "[[tensor]]\nname = \"idx\"\nrole = \"in\"\ndtype = \"i64\"\nshape = [\"M\"]\n\n[[tensor]]\nname = \"y\"");
  expect_error(text, 22, 1, "tensor 'idx' is an integer tensor: give it a 'fill'");
  const std::string filled = edit(text, "dtype = \"i64\"", "dtype = \"i64\"\nfill = { kind = \"offsets\", total = \"N\" }");
  const OpDeclarationResult r = parse(filled);
  ASSERT_TRUE(r.decl) << r.error->format();
  EXPECT_EQ(r.decl->tensor("idx")->fill.kind, FillKind::Offsets);
  expect_error(edit(text, "dtype = \"i64\"", "dtype = \"i64\"\nfill = { kind = \"offsets\", total = \"T\" }"), 26, 37,
               "unknown name 'T'");
}

TEST_F(OpDeclarationTest, TheShippedExamplesLoad) {
  for (const char* f : {"examples/ops/gelu_bias/gelu_bias.op.toml", "examples/ops/row_argmax/row_argmax.op.toml"}) {
    const OpDeclarationResult r = load_op_declaration(std::string(PTXEVO_SOURCE_DIR) + "/" + f);
    EXPECT_TRUE(r.decl) << r.error->format();
  }
}

}  // namespace
}  // namespace ptxevo::declared_ops
