// `ptxevo mutate` behaviour: the list, an applied pass, refusals, unknown pass, parse errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/mutate_command.hpp"

namespace ptxevo::cli {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p.string();
}

const char* kPtx =
    ".version 8.0\n.target sm_90a\n.address_size 64\n"
    ".visible .entry k(.param .u64 out)\n{\n.reg .b64 %rd<4>;\n.reg .f32 %f<4>;\n"
    "ld.param.u64 %rd1, [out];\ncvta.to.global.u64 %rd2, %rd1;\nst.global.f32 [%rd2], %f1;\nret;\n}\n";

TEST(MutateCommand, ListsOnePassPerLine) {
  std::ostringstream out;
  EXPECT_EQ(run_mutate_list(out), 0);
  EXPECT_NE(out.str().find("ld_global_nc\n"), std::string::npos);
  EXPECT_NE(out.str().find("store_streaming\n"), std::string::npos);
}

TEST(MutateCommand, AppliesAPassAndPrintsThePtx) {
  const std::string f = write_temp("ptxevo_mutate_ok.ptx", kPtx);
  std::ostringstream out, err;
  EXPECT_EQ(run_mutate(f, "store_streaming", {}, true, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("st.global.cs.f32 [%rd2], %f1;"), std::string::npos) << out.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(run_mutate(f, "max_registers", {"n=64"}, true, out2, err2), 0) << err2.str();
  EXPECT_NE(out2.str().find(".maxnreg 64"), std::string::npos);
  std::remove(f.c_str());
}

TEST(MutateCommand, RefusalUnknownPassAndBadParams) {
  const std::string f = write_temp("ptxevo_mutate_refuse.ptx", kPtx);
  std::ostringstream out, err;
  EXPECT_EQ(run_mutate(f, "ld_global_nc", {}, true, out, err), 1);
  EXPECT_TRUE(out.str().empty());
  EXPECT_NE(err.str().find("not applied: no ld.global"), std::string::npos) << err.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(run_mutate(f, "no_such_pass", {}, true, out2, err2), 2);
  EXPECT_NE(err2.str().find("  fast_math\n"), std::string::npos) << err2.str();
  std::ostringstream out3, err3;
  EXPECT_EQ(run_mutate(f, "max_registers", {"n"}, true, out3, err3), 2);
  std::ostringstream out4, err4;
  EXPECT_EQ(run_mutate(f, "max_registers", {"n=300"}, true, out4, err4), 1);
  EXPECT_NE(err4.str().find("between 24 and 255"), std::string::npos) << err4.str();
  std::remove(f.c_str());
}

TEST(MutateCommand, ParseErrorsCarryFileLineColumn) {
  const std::string f = write_temp("ptxevo_mutate_bad.ptx", ".version 8.0\n.target sm_90a\nfoo bar\n");
  std::ostringstream out, err;
  EXPECT_EQ(run_mutate(f, "fast_math", {}, true, out, err), 1);
  EXPECT_EQ(err.str().rfind(f + ":3:1: error:", 0), 0u) << err.str();
  std::remove(f.c_str());
}

}  // namespace
}  // namespace ptxevo::cli
