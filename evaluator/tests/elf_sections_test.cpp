#include <gtest/gtest.h>

#include <algorithm>

#include "evaluator/elf_sections.hpp"
#include "evaluator/ptxas.hpp"

namespace ptxevo::evaluator {
namespace {

std::vector<std::uint8_t> build(const std::string& body, const std::string& extra = "") {
  const std::string ptx = ".version 8.7\n.target sm_90a\n.address_size 64\n" + extra +
                          ".visible .entry k(.param .u64 p)\n{\n.reg .b64 %rd<3>;\n.reg .b32 %r<3>;\n"
                          "ld.param.u64 %rd1, [p];\n" + body + "ret;\n}\n";
  PtxasResult r = run_ptxas(ptx, "sm_90a");
  EXPECT_TRUE(r.ok) << r.log;
  return r.cubin;
}

TEST(ElfSections, ReadsCubinSections) {
  auto cubin = build("st.global.u32 [%rd1], 1;\n");
  auto secs = read_elf_sections(cubin);
  bool text = false;
  for (const auto& s : secs) text |= s.name == ".text.k";
  EXPECT_TRUE(text);
}

TEST(ElfSections, SameInputNoDiffDifferentCodeDiffers) {
  auto a = build("st.global.u32 [%rd1], 1;\n");
  auto b = build("st.global.u32 [%rd1], 1;\n");
  auto c = build("st.global.u32 [%rd1], 2;\n");
  EXPECT_TRUE(diff_elf_sections(a, b, {}).empty());
  auto d = diff_elf_sections(a, c, {});
  ASSERT_FALSE(d.empty());
  EXPECT_NE(std::find(d.begin(), d.end(), ".text.k"), d.end());
}

TEST(ElfSections, IgnoredSectionsAreSkipped) {
  auto a = build("st.global.u32 [%rd1], 1;\n");
  auto c = build("st.global.u32 [%rd1], 2;\n");
  std::set<std::string> ignore;
  for (const auto& name : diff_elf_sections(a, c, {})) ignore.insert(name);
  EXPECT_TRUE(diff_elf_sections(a, c, ignore).empty());
}

TEST(ElfSections, RejectsGarbage) {
  EXPECT_THROW(read_elf_sections({1, 2, 3}), std::runtime_error);
  std::vector<std::uint8_t> truncated(64, 0);
  truncated[0] = 0x7f;
  truncated[1] = 'E';
  truncated[2] = 'L';
  truncated[3] = 'F';
  truncated[4] = 2;
  truncated[5] = 1;
  truncated[0x28] = 0xff;  // section headers past the end
  truncated[0x3A] = 64;
  truncated[0x3C] = 4;
  EXPECT_THROW(read_elf_sections(truncated), std::runtime_error);
}

}  // namespace
}  // namespace ptxevo::evaluator
