// `ptxevo SPEC --agents llm` as a user runs it: option errors a user can act on, and a short
// replay-mode campaign against a loopback stand-in for a local OpenAI-compatible server, with
// the LLM's calls and rejections in the database and the key in neither the output nor the file.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "agents/tests/loopback_server.hpp"
#include "agents/tests/transcript.hpp"
#include "evaluator/subprocess.hpp"

namespace {

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
  char tmpl[] = "/tmp/ptxevo-cli-llm-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string db = std::string(tmpl) + "/llm.db";
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
  ::rmdir(tmpl);
}

}  // namespace
