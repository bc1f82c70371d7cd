// kill -9 at random moments: a child process runs the engine's write pattern (candidate,
// build, evaluation: three transactions per candidate) and reports each measured candidate on
// a pipe after its commit. The parent kills it with SIGKILL, reopens the file and checks that
// it is sound, that every evaluation is complete, that everything reported is there, and that
// at most the one candidate in flight is left pending. Each trial resumes the previous one's
// campaign, so the file also goes through repeated crash recovery and resume.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tracedb/tests/sample_reports.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::tracedb {
namespace {

using testing::sample_report;
using testing::TempDbPath;

constexpr int kShapesPerReport = 3;  // sample_report's shapes

CampaignKey key() { return {"specs/crash.toml", "feed", "rmsnorm", "sm_90a", "{}"}; }

void measure(TraceDb& db, std::int64_t id, std::int64_t environment, CandidateState state) {
  if (state == CandidateState::Proposed) db.record_build(id, {true, "ptx", "done", "", "{}", ""});
  db.record_evaluation(id, environment, sample_report(1.0 + static_cast<double>(id % 7) / 10));
}

// The engine's loop, cut down: resume, finish the pending candidates, then walk genomes
// g0, g1, ... skipping those already done. Stops after `limit` genomes. Returns normally only
// when limit is reached; reports each measured candidate's id on report_fd when it is >= 0.
void run_writer(const std::string& path, int report_fd, int limit) {
  auto db = TraceDb::open(path);
  const auto campaign = db.open_campaign(key()).id;
  const auto environment = db.record_environment({"gpu", "driver", "cuda", "{}", "{}"});
  auto report = [&](std::int64_t id) {
    if (report_fd >= 0 && write(report_fd, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(3);
  };
  for (const auto& p : db.pending_candidates(campaign)) {
    measure(db, p.id, environment, p.state);
    report(p.id);
  }
  for (int i = 0; i < limit; ++i) {
    const auto c = db.record_candidate(campaign, {"g" + std::to_string(i), "{}", std::nullopt, "crash-test"});
    if (c.done()) continue;
    measure(db, c.id, environment, c.state);
    report(c.id);
  }
}

std::vector<std::int64_t> read_reports(int fd) {
  std::vector<std::int64_t> ids;
  std::int64_t id = 0;
  // 8-byte writes to a pipe are atomic (< PIPE_BUF), so reads come in whole ids.
  while (read(fd, &id, sizeof id) == static_cast<ssize_t>(sizeof id)) ids.push_back(id);
  return ids;
}

// The invariants that must hold after any crash.
// Returns how many candidates were left pending.
std::size_t check(const std::string& path, const std::set<std::int64_t>& reported, int trial) {
  SCOPED_TRACE("after trial " + std::to_string(trial));
  auto db = TraceDb::open(path);
  if (!db.integrity_ok()) {
    ADD_FAILURE() << "PRAGMA integrity_check failed";
    return 0;
  }
  auto& c = db.connection();
  // A campaign may not exist yet if the first child died before creating it.
  const auto campaign = db.find_campaign(key().spec_path, key().spec_hash);
  if (!campaign) {
    EXPECT_TRUE(reported.empty());
    return 0;
  }
  // Every committed evaluation is complete.
  EXPECT_EQ(c.query_int("SELECT count(*) FROM evaluations e WHERE shape_count != "
                        "(SELECT count(*) FROM shape_results WHERE evaluation_id = e.id)"),
            0);
  EXPECT_EQ(c.query_int("SELECT count(*) FROM evaluations WHERE shape_count != " + std::to_string(kShapesPerReport)),
            0);
  // Measured means exactly one evaluation (never measured twice), and no evaluation without it.
  EXPECT_EQ(c.query_int("SELECT count(*) FROM candidates c WHERE (c.state = 'measured') != "
                        "((SELECT count(*) FROM evaluations WHERE candidate_id = c.id) = 1)"),
            0);
  EXPECT_EQ(c.query_int("SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
                        "WHERE c.state != 'measured'"),
            0);
  // Everything the child saw committed is there.
  for (const auto id : reported) {
    const auto row = db.candidate(id);
    if (!row) {
      ADD_FAILURE() << "reported candidate " << id << " is missing";
      continue;
    }
    EXPECT_EQ(row->state, CandidateState::Measured) << id;
  }
  // At most the candidate in flight is left over.
  const auto pending = db.pending_candidates(campaign->id).size();
  EXPECT_LE(pending, 1u);
  return pending;
}

TEST(TraceDbCrashTest, SurvivesKillNineAtRandomMoments) {
  TempDbPath tmp;
  const std::string path = tmp.db().string();
  std::mt19937 rng(20261130);  // fixed: a failure replays the same kill times
  std::uniform_int_distribution<int> delay_us(0, 50'000);
  std::set<std::int64_t> reported;
  std::int64_t measured_before = 0;
  int left_in_flight = 0;  // trials killed between a candidate's first and last commit
  constexpr int kTrials = 20;
  for (int trial = 0; trial < kTrials; ++trial) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      // _exit, never return: the child must not run the parent's gtest teardown or atexit.
      try {
        run_writer(path, fds[1], 1'000'000);
      } catch (...) {
        _exit(2);
      }
      _exit(0);
    }
    close(fds[1]);
    // Every fourth trial first waits for one measured candidate, so the file makes progress
    // however slow the machine is and some kills land in a warmed-up loop, not during open.
    if (trial % 4 == 3) {
      std::int64_t id = 0;
      if (read(fds[0], &id, sizeof id) == static_cast<ssize_t>(sizeof id)) reported.insert(id);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    // Killed, not exited on an error of its own (which would make the test vacuous).
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited with status " << WEXITSTATUS(status);
    for (const auto id : read_reports(fds[0])) reported.insert(id);
    close(fds[0]);
    if (check(path, reported, trial) > 0) ++left_in_flight;
    if (::testing::Test::HasFailure()) return;
    auto db = TraceDb::open(path);
    const auto campaign = db.find_campaign(key().spec_path, key().spec_hash);
    const auto measured = campaign ? db.count_evaluations(campaign->id) : 0;
    EXPECT_GE(measured, measured_before);  // nothing committed is ever lost
    measured_before = measured;
  }
  EXPECT_GE(measured_before, kTrials / 4);
  // Shows how much the kills exercised (the moments vary with the machine's speed).
  std::cout << "[ info ] " << kTrials << " kills, " << measured_before << " candidates measured, "
            << left_in_flight << " kills left one in flight\n";

  // A clean final run resumes the leftover candidate and finishes with nothing pending.
  {
    auto db = TraceDb::open(path);
    run_writer(path, -1, static_cast<int>(db.count_candidates(db.open_campaign(key()).id)) + 2);
  }
  auto db = TraceDb::open(path);
  const auto campaign = db.open_campaign(key()).id;
  EXPECT_TRUE(db.pending_candidates(campaign).empty());
  EXPECT_EQ(db.count_evaluations(campaign), db.count_candidates(campaign));
  EXPECT_TRUE(db.integrity_ok());
}

}  // namespace
}  // namespace ptxevo::tracedb
