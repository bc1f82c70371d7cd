// `ptxevo SPEC --agents llm` as a user runs it: option errors a user can act on, and a short
// replay-mode campaign against a loopback stand-in for a local OpenAI-compatible server, with
// the LLM's calls and rejections in the database and the key in neither the output nor the file.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agents/tests/loopback_server.hpp"
#include "agents/tests/transcript.hpp"
#include "evaluator/subprocess.hpp"

namespace {

// A fresh folder under /tmp for one test's run folder, removed when the test ends however it ends.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ptxevo-cli-llm-XXXXXX";
    if (mkdtemp(tmpl)) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using ptxevo::evaluator::run_process;
constexpr const char* kSpec = PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_fwd.spec";
constexpr const char* kKeyEnv = "PTXEVO_CLI_LLM_TEST_KEY";
constexpr const char* kKey = "sk-cli-SENTINEL-5e6f7a8b9c0d1e2f";

TEST(CliAgents, OptionErrorsSayWhatToFix) {
  auto no_url = run_process({PTXEVO_BIN, kSpec, "--agents", "llm"});
  EXPECT_EQ(no_url.exit_code, 2);
  EXPECT_NE(no_url.output.find("needs --llm-url and --llm-model"), std::string::npos) << no_url.output;
  auto remote = run_process({PTXEVO_BIN, kSpec, "--agents", "llm", "--llm-url", "http://192.0.2.1:8000/v1", "--llm-model", "m"});
  EXPECT_EQ(remote.exit_code, 2);
  EXPECT_NE(remote.output.find("plain http to a non-loopback host"), std::string::npos) << remote.output;
  ::unsetenv("PTXEVO_CLI_UNSET_KEY");
  auto key = run_process({PTXEVO_BIN, kSpec, "--agents", "llm", "--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m",
                          "--llm-key-env", "PTXEVO_CLI_UNSET_KEY"});
  EXPECT_EQ(key.exit_code, 2);
  EXPECT_NE(key.output.find("PTXEVO_CLI_UNSET_KEY: that environment variable is not set"), std::string::npos) << key.output;
  auto usd = run_process({PTXEVO_BIN, kSpec, "--agents", "llm", "--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m",
                          "--llm-max-usd", "5"});
  EXPECT_EQ(usd.exit_code, 2);
  EXPECT_NE(usd.output.find("not counted as free"), std::string::npos) << usd.output;
}

TEST(CliAgents, CampaignWithALocalServer) {
  ASSERT_EQ(::setenv(kKeyEnv, kKey, 1), 0);  // the child inherits it
  // A knob answer, then prose, then a wrong SEARCH text; then the call cap hands the slots to the rules.
  ptxevo::agents::test::LoopbackServer server(ptxevo::agents::test::parse_transcript(
      R"({"reply": "<NAME>more_items</NAME>\n<RATIONALE>r</RATIONALE>\n<KNOBS>\n{\"ITEMS\": 2, \"VEC\": 4}\n</KNOBS>\n"})"
      "\n"
      R"({"reply": "Vectorize the loads."})"
      "\n"
      R"({"reply": "<EDITS>\n<<<<<<< SEARCH\nthis line is not in the seed\n=======\nx\n>>>>>>> REPLACE\n</EDITS>"})"
      "\n"));
  const TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string db = dir.path() + "/llm.db";
  // sm_90a without a GPU replays the recorded H200 data, so the population has parents to give the LLM.
  auto r = run_process({PTXEVO_BIN, "--arch", "sm_90a", kSpec, "--db", db, "--budget", "10", "--initial", "1", "--batch", "2",
                        "--agents", "llm", "--llm-url", server.base_url() + "/v1", "--llm-model", "local-coder",
                        "--llm-key-env", kKeyEnv, "--llm-no-planner", "--llm-fix-turns", "1", "--llm-share", "1",
                        "--llm-price", "0.2,0.6", "--llm-max-calls", "3", "--llm-deadline", "5"});
  ::unsetenv(kKeyEnv);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("LLM agents: openai " + server.base_url() + "/v1 model local-coder (key from $" + kKeyEnv + ")"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("LLM: 3 calls"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("SENTINEL"), std::string::npos);
  ASSERT_EQ(server.requests().size(), 3U);
  EXPECT_EQ(server.requests()[0].headers.at("authorization"), std::string("Bearer ") + kKey);

  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
  auto count = [&](const char* sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(handle, sql, -1, &st, nullptr), SQLITE_OK) << sql;
    sqlite3_step(st);
    const int n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
  };
  EXPECT_EQ(count("SELECT count(*) FROM llm_calls WHERE cost_usd > 0"), 3);
  // The knob answer became a candidate, unless the chosen parent already had those knobs or a
  // rule agent proposed them first; either way it is accounted for.
  EXPECT_EQ(count("SELECT count(*) FROM candidates WHERE operator = 'llm'") +
                count("SELECT count(*) FROM agent_rejections WHERE code IN ('E_NO_CHANGE', 'E_DUPLICATE')"),
            1)
      << r.output;
  EXPECT_EQ(count("SELECT count(*) FROM agent_rejections WHERE code = 'E_NO_ENVELOPE'"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM agent_rejections WHERE code = 'E_EDIT_NO_MATCH'"), 1);
  EXPECT_GT(count("SELECT count(*) FROM agent_rejections WHERE code = 'E_BUDGET'"), 0);
  sqlite3_close(handle);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::ifstream in(db + suffix, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str().find("SENTINEL"), std::string::npos) << suffix;
    std::remove((db + suffix).c_str());
  }
}

// The issue's check, offline: a campaign with `--agents llm` against a loopback server replaying
// answers written the way models write them for the real RMSNorm seed. Every call is recorded,
// every answered coder or fixer call ends as exactly one proposal or one rejection, and roles
// and stages are the documented ones.
TEST(CliAgents, ModelLikeAnswersAreAllAccountedFor) {
  ASSERT_EQ(::setenv(kKeyEnv, kKey, 1), 0);
  ptxevo::agents::test::LoopbackServer server(
      ptxevo::agents::test::load_transcript(std::string(PTXEVO_AGENTS_TRANSCRIPTS) + "/rmsnorm_model_answers.jsonl"));
  const TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string db = dir.path() + "/llm.db";
  auto r = run_process({PTXEVO_BIN, "--arch", "sm_90a", kSpec, "--db", db, "--budget", "24", "--initial", "2", "--batch",
                        "2", "--agents", "llm", "--llm-url", server.base_url() + "/v1", "--llm-model", "local-coder",
                        "--llm-key-env", kKeyEnv, "--llm-no-planner", "--llm-share", "1", "--llm-price", "0.2,0.6",
                        "--llm-max-calls", "9", "--llm-deadline", "10"});
  ::unsetenv(kKeyEnv);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(server.requests().size(), 9U) << r.output;

  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
  auto count = [&](const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(handle, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    sqlite3_step(st);
    const int n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
  };
  // What happened, for the failure messages: each call's role and how it ended.
  std::string story;
  {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(handle,
                       "SELECT k.id || ' ' || k.role || ': ' || coalesce((SELECT 'proposal ' || p.name || ' -> candidate ' || "
                       "coalesce(p.candidate_id, '-') FROM llm_proposals p WHERE p.call_id = k.id), '') || coalesce((SELECT "
                       "group_concat(x.code || '/' || x.stage || ' ' || substr(x.reason, 1, 60), '; ') FROM agent_rejections x "
                       "WHERE x.call_id = k.id), '') FROM llm_calls k ORDER BY k.id",
                       -1, &st, nullptr);
    while (sqlite3_step(st) == SQLITE_ROW) story += std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) + "\n";
    sqlite3_finalize(st);
  }
  EXPECT_EQ(count("SELECT count(*) FROM llm_calls WHERE status = 'ok'"), 9) << story;
  // Exactly one end per answered call: a proposal row, or a rejection made at the reply.
  EXPECT_EQ(count("SELECT count(*) FROM llm_calls k WHERE k.status = 'ok' AND "
                  "(SELECT count(*) FROM llm_proposals p WHERE p.call_id = k.id) + "
                  "(SELECT count(*) FROM agent_rejections x WHERE x.call_id = k.id AND x.candidate_id IS NULL) != 1"),
            0)
      << r.output;
  auto proposal = [&](const std::string& name, const std::string& role) {
    return count("SELECT count(*) FROM llm_proposals WHERE name = '" + name + "' AND role = '" + role + "'");
  };
  auto rejected = [&](const std::string& code, const std::string& stage, const std::string& role) {
    return count("SELECT count(*) FROM agent_rejections WHERE code = '" + code + "' AND stage = '" + stage +
                 "' AND role = '" + role + "'");
  };
  // Lower-case tags and a SEARCH indented unlike the source; bare SEARCH/REPLACE after prose.
  EXPECT_EQ(proposal("precise_rsqrt", "coder"), 1) << r.output;
  EXPECT_EQ(proposal("unnamed", "coder"), 1) << r.output;
  // Knobs that break a constraint: refused at the reply naming it, then the fixer's knobs.
  EXPECT_EQ(count("SELECT count(*) FROM agent_rejections WHERE code = 'E_KNOB_INVALID' AND stage = 'reply' AND role = "
                  "'coder' AND instr(reason, 'THREADS * ITEMS * VEC <= 65536') > 0"),
            1);
  EXPECT_EQ(proposal("wide_tiles_256", "fixer") + rejected("E_DUPLICATE", "reply", "fixer") +
                rejected("E_NO_CHANGE", "reply", "fixer"),
            1);
  // <cstdint> refused by the screen, the allowed header accepted and built.
  EXPECT_EQ(rejected("E_SCREEN", "screen", "coder"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM llm_proposals p JOIN candidates c ON c.id = p.candidate_id WHERE p.name = "
                  "'typed_lane_mask' AND p.role = 'fixer' AND c.build_ok = 1"),
            1)
      << r.output;
  // The undefined helper: a build failure of the coder's candidate, cited in candidate.cu, then the
  // queued fixer's repair, built.
  EXPECT_EQ(count("SELECT count(*) FROM agent_rejections WHERE code = 'E_BUILD' AND stage = 'build' AND role = 'coder' "
                  "AND candidate_id IS NOT NULL AND instr(reason, 'candidate.cu(') > 0 AND instr(reason, 'fast_rsqrt') > 0"),
            1)
      << story;
  EXPECT_EQ(count("SELECT count(*) FROM llm_proposals p JOIN candidates c ON c.id = p.candidate_id WHERE p.name = "
                  "'rounded_rsqrt' AND p.role = 'fixer' AND c.build_ok = 1"),
            1)
      << story;
  // Every LLM candidate has its proposal row.
  EXPECT_EQ(count("SELECT count(*) FROM candidates c WHERE operator = 'llm' AND NOT EXISTS "
                  "(SELECT 1 FROM llm_proposals p WHERE p.candidate_id = c.id)"),
            0);
  sqlite3_close(handle);
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
}

}  // namespace
