#include <gtest/gtest.h>

#include "evaluator/subprocess.hpp"

namespace ptxevo::evaluator {
namespace {

TEST(Subprocess, CapturesOutputAndExitCode) {
  ProcessResult r = run_process({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("out"), std::string::npos);
  EXPECT_NE(r.output.find("err"), std::string::npos);
}

TEST(Subprocess, MissingProgramIsReportedNotThrown) {
  ProcessResult r = run_process({"/nonexistent/tool", "--x"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/nonexistent/tool"), std::string::npos);
}

TEST(Subprocess, KilledBySignalIsMinusOne) {
  ProcessResult r = run_process({"/bin/sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.exit_code, -1);
}

}  // namespace
}  // namespace ptxevo::evaluator
