// The ptxevo binary as a user runs it: exit codes, stdout, and FILE:LINE:COL errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "evaluator/subprocess.hpp"

namespace {

using ptxevo::evaluator::run_process;

const std::string kExample = PTXEVO_SOURCE_DIR "/kernels/examples/rmsnorm_row_sm90a.ptx";

std::string temp_file(const std::string& content) {
  char tmpl[] = "/tmp/ptxevo-cli-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  std::ofstream(tmpl) << content;
  return tmpl;
}

TEST(Cli, IrPrintIsStableOnItsOwnOutput) {
  auto first = run_process({PTXEVO_BIN, "ir", "print", kExample});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find(".entry"), std::string::npos);
  const std::string f = temp_file(first.output);
  auto second = run_process({PTXEVO_BIN, "ir", "print", f});
  EXPECT_EQ(second.output, first.output);
  std::remove(f.c_str());
}

TEST(Cli, ParseErrorNamesFileLineColumn) {
  const std::string f = temp_file(".version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n  mov.u32 %r1 2;\n}\n");
  auto r = run_process({PTXEVO_BIN, "ir", "print", f});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(f + ":6:15: error:"), std::string::npos) << r.output;
  std::remove(f.c_str());
}

TEST(Cli, VerifyReportsUndeclaredRegister) {
  const std::string f = temp_file(".version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n  mov.u32 %r1, 2;\n}\n");
  auto r = run_process({PTXEVO_BIN, "ir", "verify", f});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(f + ":6:3: error: use of undeclared register '%r1'"), std::string::npos) << r.output;
  std::remove(f.c_str());
}

TEST(Cli, MissingFileIsAClearError) {
  auto r = run_process({PTXEVO_BIN, "ir", "stats", "/nonexistent/x.ptx"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent/x.ptx: error: cannot open file"), std::string::npos) << r.output;
}

TEST(Cli, StatsJsonIsValidAndDescribesTheKernel) {
  auto r = run_process({PTXEVO_BIN, "ir", "stats", kExample, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  ASSERT_TRUE(j.contains("functions"));
  ASSERT_FALSE(j["functions"].empty());
  EXPECT_EQ(j["target"], "sm_90a");
}

TEST(Cli, StatsTextMentionsRegistersAndLoops) {
  auto r = run_process({PTXEVO_BIN, "ir", "stats", kExample});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("register"), std::string::npos);
  EXPECT_NE(r.output.find("loop"), std::string::npos);
}

TEST(Cli, EvalWithoutGpuBuildsAndSaysNothingRan) {
  if (std::getenv("PTXEVO_HAS_GPU")) GTEST_SKIP() << "this machine has a GPU; tests/gpu covers the GPU path";
  auto r = run_process({PTXEVO_BIN, "eval", PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j["report"]["verdict"], "not-run");
  EXPECT_TRUE(j["candidate_build"]["ok"].get<bool>());
  EXPECT_FALSE(j["candidate_build"]["resources"].empty());
  EXPECT_NE(j["report"]["reasons"][0].get<std::string>().find("nothing was run"), std::string::npos);
}

TEST(Cli, EvalRejectsAKnownBadKernelStatically) {
  auto r = run_process({PTXEVO_BIN, "eval", PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec", "--source",
                        PTXEVO_SOURCE_DIR "/kernels/rmsnorm/known_bad/clock_stage.cu"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("clock-read"), std::string::npos) << r.output;
}

TEST(Cli, EvalReportsSpecErrorsWithPosition) {
  const std::string f = temp_file("op = \"rmsnorm_fwd\"\narch = 90\n");
  auto r = run_process({PTXEVO_BIN, "eval", f});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(f + ":2:"), std::string::npos) << r.output;
  std::remove(f.c_str());
}

TEST(Cli, UnknownSubcommandFails) {
  auto r = run_process({PTXEVO_BIN, "frobnicate"});
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace

namespace {

// Without a GPU of the target arch the campaign says which mode it runs in (replay when replay
// data fits the spec, static otherwise) and never claims a measurement.
TEST(CliCampaign, SaysWhichModeItRunsIn) {
  const std::string db = temp_file("");
  std::remove(db.c_str());
  auto r = run_process({PTXEVO_BIN, "--arch", "sm_100", PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec", "--db", db,
                        "--budget", "2", "--initial", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // sm_100 (mapped to sm_100a) has neither a GPU here nor replay data.
  EXPECT_NE(r.output.find("STATIC: no GPU for sm_100a"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nothing was measured: no fitness recorded"), std::string::npos) << r.output;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
}

TEST(CliCampaign, RejectsAnUnknownArchAndABadSpec) {
  auto r = run_process({PTXEVO_BIN, "--arch", "sm_75", PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("sm_75 is not a target"), std::string::npos) << r.output;
  const std::string spec = temp_file("op = \"rmsnorm_fwd\"\narch = 90\n");
  auto bad = run_process({PTXEVO_BIN, spec});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find(spec + ":2:"), std::string::npos) << bad.output;
  std::remove(spec.c_str());
  auto none = run_process({PTXEVO_BIN});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("give a spec file"), std::string::npos) << none.output;
}

TEST(CliCampaign, RejectsOutOfRangeSearchOptions) {
  for (const std::vector<std::string>& opt :
       {std::vector<std::string>{"--random-edit-share", "1.5"}, {"--random-max-edits", "0"}, {"--build-factor", "0.5"}}) {
    std::vector<std::string> argv = {PTXEVO_BIN, PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec"};
    argv.insert(argv.end(), opt.begin(), opt.end());
    auto r = run_process(argv);
    EXPECT_NE(r.exit_code, 0) << opt[0];
    EXPECT_NE(r.output.find(opt[0]), std::string::npos) << r.output;
  }
}

// --passes names the PTX passes a campaign uses; a name it cannot use is refused before any
// database is opened, with the names it can.
TEST(CliCampaign, PassesOptionTakesKnownPassesOrNone) {
  const std::string db = temp_file("");
  std::remove(db.c_str());
  for (const char* bad : {"l2_evict_hint,bogus", "launch_bounds"}) {
    auto r = run_process({PTXEVO_BIN, PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec", "--db", db, "--passes", bad});
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("--passes: unknown PTX pass"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("store_streaming"), std::string::npos) << r.output;
    EXPECT_FALSE(std::ifstream(db).good()) << "no database for a refused command";
  }
  for (const char* good : {"none", "l2_evict_hint,store_streaming"}) {
    auto r = run_process({PTXEVO_BIN, "--arch", "sm_100", PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec", "--db", db,
                          "--budget", "2", "--initial", "1", "--passes", good});
    EXPECT_EQ(r.exit_code, 0) << good << "\n" << r.output;
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
  }
}

TEST(CliCampaign, ReplayFileMustExistAndFit) {
  auto r = run_process({PTXEVO_BIN, PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec", "--replay", "/nonexistent/r.json",
                        "--db", "/tmp/ptxevo-cli-never.db"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent/r.json does not exist"), std::string::npos) << r.output;
}

}  // namespace

namespace {

// `ptxevo prior --db FILE` on the H200 prior confirmation's warm database (a bf16 campaign and the
// fp16 campaign it warmed): the campaigns feeding the prior per op family, the operator
// posterior per (family, arch) scope, and the cost model's held-out rank correlation beside the
// analytic guess's. A missing database is exit code 2.
TEST(CliPrior, ShowsFeedingCampaignsOperatorPosteriorsAndHeldOutRank) {
  const std::string db = temp_file("");
  auto unzip = run_process({"/bin/sh", "-c",
                            "gzip -dc '" PTXEVO_SOURCE_DIR "/data/campaigns/rmsnorm_fwd_h200_warm_7b02051.db.gz' > '" +
                                db + "'"});
  ASSERT_EQ(unzip.exit_code, 0) << unzip.output;
  // From the repository root, as the campaigns ran: their specs are recorded as relative paths
  // (kernels/rmsnorm/...), which the cost model needs for the op options.
  auto r = run_process({"/bin/sh", "-c", "cd '" PTXEVO_SOURCE_DIR "' && '" PTXEVO_BIN "' prior --db '" + db + "'"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("op family rmsnorm: campaigns feeding the prior"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("campaign 1  rmsnorm_fwd  sm_90a  rmsnorm_fwd.spec"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("campaign 2  rmsnorm_fwd  sm_90a  rmsnorm_fwd_fp16.spec"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("operator posterior [rmsnorm|sm_90a]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("knob_step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ptx:store_streaming"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("held-out (fit on the first 70% by time, ranked the last 30% within each shape): Spearman model"),
            std::string::npos)
      << r.output;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
  auto missing = run_process({PTXEVO_BIN, "prior", "--db", "/nonexistent/prior.db"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("no trace database"), std::string::npos) << missing.output;
}

// `ptxevo universe` without a GPU builds and screens, says nothing was measured, and
// `ptxevo prior-study` refuses such a file with a reason (docs/prior_study.md).
TEST(CliUniverse, WithoutAGpuBuildsOnlyAndTheStudyRefusesIt) {
  if (std::getenv("PTXEVO_HAS_GPU")) GTEST_SKIP() << "this machine has a GPU: the universe would be measured";
  const std::string out = temp_file("");
  std::remove(out.c_str());
  auto r = run_process({PTXEVO_BIN, "universe", PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec", "--out", out,
                        "--vary", "VEC=4,8", "--vary", "STORE_HINT=0,1", "--max", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("NOTHING IS MEASURED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("4 admitted assignments, 2 in the file (a thinned subset"), std::string::npos) << r.output;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("format"), "ptxevo-universe-1");
  EXPECT_EQ(j.at("members").size(), 2u);
  EXPECT_EQ(j.at("members")[0].at("genome").at("knobs").at("VEC"), 8);  // the baseline first
  EXPECT_FALSE(j.at("members")[0].contains("eval"));
  auto s = run_process({PTXEVO_BIN, "prior-study", "--universe", out});
  EXPECT_EQ(s.exit_code, 1);
  EXPECT_NE(s.output.find("holds no measurements"), std::string::npos) << s.output;
  std::remove(out.c_str());

  auto bad = run_process({PTXEVO_BIN, "universe", PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec", "--out", out,
                          "--vary", "VEC=3"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("3 is not a value of VEC in the spec (its values: 2,4,8)"), std::string::npos) << bad.output;
}

}  // namespace
