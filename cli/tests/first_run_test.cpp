// A new user's first run, as docs/campaign.md and the README describe it: the replay demo
// scores every build and writes its report in a run folder outside the sources; export and
// replay export work from that database alone, from another directory; every command that
// builds takes --arch; `ir print` and `mutate` verify what they read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "cli/campaign_command.hpp"
#include "evaluator/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
using ptxevo::evaluator::run_process;

const std::string kSpec = PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec";

fs::path temp_dir(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("ptxevo-first-run-" + std::to_string(getpid()) + "-" + tag);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// `sh -c "cd DIR && ptxevo ARGS"`: the command as typed in another directory.
ptxevo::evaluator::ProcessResult ptxevo_in(const fs::path& dir, const std::string& args) {
  return run_process({"/bin/sh", "-c", "cd '" + dir.string() + "' && '" PTXEVO_BIN "' " + args});
}

const std::string kUndeclared =
    ".version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n  mov.u32 %r1, 2;\n  ret;\n}\n";

TEST(CliFirstRun, IrPrintAndMutateVerifyTheirInputUnlessTold) {
  const fs::path d = temp_dir("verify");
  std::ofstream(d / "k.ptx") << kUndeclared;
  const std::string f = (d / "k.ptx").string();
  auto print = run_process({PTXEVO_BIN, "ir", "print", f});
  EXPECT_EQ(print.exit_code, 1);
  EXPECT_NE(print.output.find(f + ":6:3: error: use of undeclared register '%r1'"), std::string::npos) << print.output;
  EXPECT_EQ(print.output.find(".entry"), std::string::npos) << "printed PTX that does not verify";
  auto raw = run_process({PTXEVO_BIN, "ir", "print", "--no-verify", f});
  EXPECT_EQ(raw.exit_code, 0) << raw.output;
  EXPECT_NE(raw.output.find("mov.u32"), std::string::npos) << raw.output;

  auto mutate = run_process({PTXEVO_BIN, "mutate", f, "--pass", "fast_math"});
  EXPECT_EQ(mutate.exit_code, 1);
  EXPECT_NE(mutate.output.find("use of undeclared register"), std::string::npos) << mutate.output;
  EXPECT_NE(mutate.output.find("does not verify; no pass applied"), std::string::npos) << mutate.output;
  auto unchecked = run_process({PTXEVO_BIN, "mutate", "--no-verify", f, "--pass", "fast_math"});
  EXPECT_EQ(unchecked.output.find("does not verify"), std::string::npos) << unchecked.output;
  fs::remove_all(d);
}

// Every command that builds takes --arch with the campaign's aliases and its error.
TEST(CliFirstRun, EveryBuildingCommandRefusesAnUnknownArchTheSameWay) {
  const fs::path d = temp_dir("arch");
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{PTXEVO_BIN, kSpec, "--arch", "sm_75", "--db", (d / "c.db").string()},
        {PTXEVO_BIN, "eval", kSpec, "--arch", "sm_75"},
        {PTXEVO_BIN, "build", kSpec, "--arch", "sm_75", "--out", (d / "b").string()},
        {PTXEVO_BIN, "universe", kSpec, "--arch", "sm_75", "--out", (d / "u.json").string()},
        {PTXEVO_BIN, "export", kSpec, "--arch", "sm_75", "--out", (d / "x").string()}}) {
    auto r = run_process(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd[1];
    EXPECT_NE(r.output.find("--arch sm_75 is not a target ptxevo knows"), std::string::npos) << cmd[1] << ": " << r.output;
  }
  fs::remove_all(d);
}

// `eval --arch sm_100` on a machine without that GPU: built for sm_100a, nothing run.
TEST(CliFirstRun, EvalAndBuildTakeArch) {
  // Built for sm_100a: not run here, with or without an H200 (eval says the GPU is another arch).
  const fs::path d = temp_dir("evalarch");
  auto r = run_process({PTXEVO_BIN, "eval", kSpec, "--arch", "sm_100", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j["arch"], "sm_100a");
  EXPECT_EQ(j["report"]["verdict"], "not-run");
  EXPECT_TRUE(j["candidate_build"]["ok"].get<bool>()) << r.output;
  auto b = run_process({PTXEVO_BIN, "build", kSpec, "--arch", "sm_100a", "--out", (d / "b").string()});
  ASSERT_EQ(b.exit_code, 0) << b.output;
  std::ifstream ptx(d / "b" / "kernel.ptx");
  const std::string text((std::istreambuf_iterator<char>(ptx)), {});
  EXPECT_NE(text.find(".target sm_100a"), std::string::npos);
  fs::remove_all(d);
}

// The shipped replay data lives in data/replay/, apart from the sources: a spec finds its record
// beside it first, else in the nearest data/replay/ above it.
TEST(CliFirstRun, ReplayDataIsFoundBesideTheSpecOrInTheNearestDataFolder) {
  const fs::path root = temp_dir("replay-lookup");
  fs::create_directories(root / "ops" / "norm");
  fs::create_directories(root / "data" / "replay");
  const fs::path spec = root / "ops" / "norm" / "norm.spec";
  std::ofstream(spec) << "op = \"rmsnorm_fwd\"\n";
  EXPECT_EQ(ptxevo::cli::default_replay(spec.string()), root / "ops" / "norm" / "norm.replay.json")
      << "nothing recorded: the path beside the spec, for the message";
  std::ofstream(root / "data" / "replay" / "norm.replay.json") << "{}";
  EXPECT_EQ(fs::weakly_canonical(ptxevo::cli::default_replay(spec.string())),
            fs::weakly_canonical(root / "data" / "replay" / "norm.replay.json"));
  std::ofstream(root / "ops" / "norm" / "norm.replay.json") << "{}";
  EXPECT_EQ(ptxevo::cli::default_replay(spec.string()), root / "ops" / "norm" / "norm.replay.json") << "beside wins";
  // The repository's own spec finds the shipped record.
  EXPECT_EQ(fs::weakly_canonical(ptxevo::cli::default_replay(kSpec)),
            fs::weakly_canonical(PTXEVO_SOURCE_DIR "/data/replay/rmsnorm_fwd.replay.json"));
  fs::remove_all(root);
}

// The README's first command, without a GPU: replay proposes only what the record holds, so
// every build is scored; the run folder is named first, outside the sources; the winner's
// replayed speedups per shape, the HTML report's path and how to run on a GPU are printed.
// From another directory, export and report work from the database alone.
TEST(CliFirstRun, ReplayDemoScoresEveryBuildAndTheDatabaseStandsAlone) {
  // --replay names the record, so the campaign replays on a machine with a GPU too.
  const fs::path work = temp_dir("demo");
  const std::string replay = " --replay '" PTXEVO_SOURCE_DIR "/data/replay/rmsnorm_fwd.replay.json'";
  auto r = ptxevo_in(work, "'" + kSpec + "' --budget 24" + replay);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("run folder: ptxevo-runs/rmsnorm_fwd (trace database campaign.db)", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("REPLAY: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" 0 unmeasured"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("REPLAYED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("its replayed speedups (recorded on NVIDIA H200, not measured here)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("M=8192,N=262144"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("report: ptxevo-runs/rmsnorm_fwd/campaign.html"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("on a GPU: "), std::string::npos) << r.output;
  const fs::path db = work / "ptxevo-runs" / "rmsnorm_fwd" / "campaign.db";
  EXPECT_TRUE(fs::exists(db));
  EXPECT_GT(fs::file_size(work / "ptxevo-runs" / "rmsnorm_fwd" / "campaign.html"), 1000u);
  EXPECT_FALSE(fs::exists(PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.ptxevo.db"));

  // Run again: it says it resumes, and stops at the budget it already spent.
  auto again = ptxevo_in(work, "'" + kSpec + "' --budget 24" + replay);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("resumed: delete the folder to start afresh"), std::string::npos) << again.output;

  // `report` finds the run folder by itself.
  auto report = ptxevo_in(work, "report");
  EXPECT_EQ(report.exit_code, 0) << report.output;

  // Elsewhere, with the database alone: export the winner as CUDA source.
  const fs::path elsewhere = temp_dir("elsewhere");
  auto x = ptxevo_in(elsewhere, "export --db '" + db.string() + "' --format cuda --out out --no-verify");
  ASSERT_EQ(x.exit_code, 0) << x.output;
  EXPECT_TRUE(fs::exists(elsewhere / "out" / "ptxevo_rmsnorm_fwd.cu")) << x.output;
  // replay export reads its spec from the database too; this one holds no GPU campaign.
  auto rx = ptxevo_in(elsewhere, "replay export --db '" + db.string() + "' --out r.json");
  EXPECT_EQ(rx.exit_code, 1);
  EXPECT_NE(rx.output.find("no GPU campaign in"), std::string::npos) << rx.output;
  // Relabelled as a GPU campaign, it exports with the spec recorded in the database alone.
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.string().c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw,
                           "UPDATE campaigns SET spec_path = replace(spec_path, '#replay', '#gpu');"
                           "UPDATE evaluations SET mode = 'gpu';",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(raw);
  }
  auto rx2 = ptxevo_in(elsewhere, "replay export --db '" + db.string() + "' --out r.json --commit test");
  ASSERT_EQ(rx2.exit_code, 0) << rx2.output;
  EXPECT_NE(rx2.output.find("wrote 24 records of campaign 1"), std::string::npos) << rx2.output;
  std::ifstream exported(elsewhere / "r.json");
  const auto j = nlohmann::json::parse(exported);
  EXPECT_EQ(j.at("op"), "rmsnorm_fwd");
  EXPECT_EQ(j.at("benchmark_shapes").size(), 11u);
  fs::remove_all(work);
  fs::remove_all(elsewhere);
}

}  // namespace
