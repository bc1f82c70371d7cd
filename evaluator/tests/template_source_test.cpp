#include "evaluator/template_source.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ptxevo::evaluator {
namespace {

namespace fs = std::filesystem;

class TemplateSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("ptxevo-template-test-" + std::to_string(getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "sub");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(TemplateSourceTest, AFileWithoutPartsIsReadAsItIs) {
  const std::string text = "#include <cuda_bf16.h>\n#include \"cuda_fp16.h\"\nint x;\n";
  std::string why;
  const auto t = read_template(write("a.cu", text), &why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->text, text);
  EXPECT_TRUE(t->parts.empty());
}

TEST_F(TemplateSourceTest, PartsBesideTheIncluderAreExpandedInPlaceRecursively) {
  write("sub/inner.cuh", "inner();\n");
  write("sub/mid.cuh", "mid_a();\n#include \"inner.cuh\"\nmid_b();");  // no final newline
  const auto path = write("a.cu", "top();\n  #  include \"sub/mid.cuh\"  // the middle\nend();\n");
  std::string why;
  const auto t = read_template(path, &why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->text, "top();\nmid_a();\ninner();\nmid_b();\nend();\n");
  ASSERT_EQ(t->parts.size(), 2u);
  EXPECT_EQ(fs::path(t->parts[0]).filename(), "mid.cuh");
  EXPECT_EQ(fs::path(t->parts[1]).filename(), "inner.cuh");
}

TEST_F(TemplateSourceTest, APartIncludedTwiceIsExpandedTwice) {
  // No include guards: a kernel included once per namespace needs every copy.
  write("p.cuh", "p();\n");
  const auto path = write("a.cu", "#include \"p.cuh\"\n#include \"p.cuh\"\n");
  std::string why;
  const auto t = read_template(path, &why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->text, "p();\np();\n");
  EXPECT_EQ(t->parts.size(), 1u);
}

TEST_F(TemplateSourceTest, ACycleIsAnErrorWithFileAndLine) {
  write("b.cuh", "b();\n#include \"a.cu\"\n");
  const auto path = write("a.cu", "a();\n#include \"b.cuh\"\n");
  std::string why;
  EXPECT_FALSE(read_template(path, &why));
  EXPECT_NE(why.find("b.cuh:2: include cycle: a.cu -> b.cuh -> a.cu"), std::string::npos) << why;
}

TEST_F(TemplateSourceTest, AMissingTopFileAndAnUnreadablePartAreErrors) {
  std::string why;
  EXPECT_FALSE(read_template((dir_ / "none.cu").string(), &why));
  EXPECT_NE(why.find("cannot read"), std::string::npos) << why;
  // A directory of the included name: it exists but is no file, so the line is left for NVRTC.
  fs::create_directories(dir_ / "d.cuh");
  const auto path = write("a.cu", "#include \"d.cuh\"\n");
  const auto t = read_template(path, &why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->text, "#include \"d.cuh\"\n");
}

TEST_F(TemplateSourceTest, IncludesInsideOtherTextAreNotDirectives) {
  write("p.cuh", "p();\n");
  const std::string text = "// #include \"p.cuh\" is how a part comes in\nx = \"#include \\\"p.cuh\\\"\";\n";
  std::string why;
  const auto t = read_template(write("a.cu", text), &why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->text, text);
}

}  // namespace
}  // namespace ptxevo::evaluator
