// The whole LLM loop offline: a campaign on the test_scale op with the LLM agents on, against
// the loopback server replaying a transcript that injects host code, an infinite loop, an
// out-of-bounds write, a wrong parameter list, a compile error, a truncated reply, 429 and 529,
// prose instead of the envelope, a stall and finally a 401 echoing the key. The campaign goes
// on (the rule agents take over), every rejection has its reason in the database, the spend is
// recorded per call, and the key appears in no log line and no byte of the database files.
// The infinite loop and the out-of-bounds write are device faults: on a GPU the gate's watchdog
// and poisoned-output checks reject them; here (no GPU) they are built, recorded and "measured"
// by the knob-model measurer, which shows they flow through the same path as every candidate.
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "agents/tests/loopback_server.hpp"
#include "agents/device_code_screen.hpp"
#include "agents/tests/transcript.hpp"
#include "campaign_fixture.hpp"
#include "evaluator/nvrtc_compiler.hpp"
#include "search/llm_evidence.hpp"
#include "search/llm_proposer.hpp"
#include "search/campaign.hpp"

namespace ptxevo::search {
namespace {

namespace fs = std::filesystem;
constexpr const char* kKeyEnv = "PTXEVO_LLM_CAMPAIGN_TEST_KEY";
constexpr const char* kKey = "sk-live-SENTINEL-93ab71c0d2e4f6a8";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class LlmCampaignTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::setenv(kKeyEnv, kKey, 1), 0);
    dir_ = fs::temp_directory_path() / ("ptxevo_llm_campaign_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    registry_.add(std::make_unique<testing::ScaleOp>());
    spec_ = testing::write_scale_spec(dir_, registry_);
    cache_.emplace(dir_ / "cache");
    builder_.emplace(&*cache_);
  }
  void TearDown() override {
    ::unsetenv(kKeyEnv);
    fs::remove_all(dir_);
  }

  std::vector<agents::test::ScriptedResponse> script() const {
    auto s = agents::test::load_transcript(std::string(PTXEVO_AGENTS_TRANSCRIPTS) + "/campaign_scale.jsonl");
    for (auto& r : s) {
      const auto at = r.body.find("KEY_ECHO");
      if (at != std::string::npos) r.body.replace(at, 8, kKey);  // the server echoes the key, as some do
    }
    return s;
  }

  struct Stack {
    std::shared_ptr<agents::CircuitBreaker> breaker = std::make_shared<agents::CircuitBreaker>();
    std::unique_ptr<agents::ChatClient> client;
    std::unique_ptr<agents::Budget> budget;
    std::unique_ptr<TraceCallRecorder> recorder;
    std::unique_ptr<agents::LlmAgent> agent;
  };

  Stack stack(tracedb::TraceDb& db, const std::string& base_url, agents::BudgetCaps caps, std::ostream& log) {
    Stack s;
    agents::RetryConfig retry;
    retry.deadline = std::chrono::milliseconds(1500);  // the stall ends here
    s.client = std::make_unique<agents::ChatClient>(
        agents::EndpointConfig{agents::ApiKind::OpenAI, base_url + "/v1", "replayed-coder", kKeyEnv},
        std::make_shared<agents::CurlTransport>(), agents::RetryPolicy(retry, agents::RetryClock::real(7)), s.breaker,
        [&log](std::string_view l) { log << l << "\n"; });
    s.budget = std::make_unique<agents::Budget>(caps, agents::Price{3.0, 15.0}, "replayed-coder");
    s.recorder = std::make_unique<TraceCallRecorder>(db);
    agents::AgentOptions o;
    o.use_planner = false;
    s.agent = std::make_unique<agents::LlmAgent>(*s.client, s.breaker, *s.budget, *s.recorder, o,
                                                 [&log](std::string_view l) { log << l << "\n"; });
    return s;
  }

  CampaignResult run(tracedb::TraceDb& db, Stack& s, Measurer* m, std::ostream& log, std::int64_t evaluations,
                     int build_rounds = CampaignOptions{}.build_rounds) {
    CampaignOptions o;
    o.islands = 2;
    o.island_size = 4;
    o.batch = 4;
    o.initial = 4;
    o.max_evaluations = evaluations;
    o.build_rounds = build_rounds;
    o.final_check = false;
    std::atomic<bool> never{false};
    CampaignEngine e(spec_, *registry_.find("test_scale"), *builder_, db, {m}, o, log, never);
    e.use_llm({s.agent.get(), s.budget.get(), s.recorder.get(), 1.0});
    return e.run();
  }

  std::int64_t count(tracedb::TraceDb& db, const std::string& sql) {
    auto st = db.connection().prepare(sql);
    st.step();
    return st.column_int(0);
  }

  fs::path dir_;
  evaluator::OpRegistry registry_;
  evaluator::Spec spec_;
  std::optional<evaluator::BuildCache> cache_;
  std::optional<evaluator::Builder> builder_;
};

// A candidate's fate in a prompt: replay and static campaigns say "not measured", not
// "measured (unmeasured)".
TEST(LlmEvidence, OutcomesInWords) {
  EXPECT_EQ(outcome_text("measured", "done", "unmeasured"), "built; not measured (no timing for it in this campaign's mode)");
  EXPECT_EQ(outcome_text("failed", "nvrtc", ""), "failed at nvrtc");
  EXPECT_EQ(outcome_text("measured", "done", "new_best"), "measured (new_best)");
  EXPECT_EQ(outcome_text("measured", "done", ""), "measured");
}

// The fixer of a build failure sees the lines of its source the compiler cites, numbered.
TEST(LlmEvidence, BuildErrorsShowTheCitedLines) {
  std::string src;
  for (int i = 1; i <= 40; ++i) src += "line" + std::to_string(i) + "\n";
  const std::string e = build_error_for_fixer("candidate.cu(20): error: x is undefined\ncandidate.cu(22): error: y", src);
  EXPECT_NE(e.find("   17 | line17\n"), std::string::npos) << e;
  EXPECT_NE(e.find("   25 | line25\n"), std::string::npos) << e;
  EXPECT_EQ(e.find("line16\n"), std::string::npos) << e;
  EXPECT_EQ(e.find("line26\n"), std::string::npos) << e;
  EXPECT_EQ(build_error_for_fixer("rmsnorm.cu(3): error", src), "rmsnorm.cu(3): error");
}

TEST_F(LlmCampaignTest, HostileAndBrokenRepliesAreRecordedAndTheCampaignGoesOn) {
  std::ostringstream log;
  const fs::path db_path = dir_ / "llm.db";
  spec_.heldout_shapes = {{{"N", 777777}}};  // never to appear in a prompt
  {
    auto db = tracedb::TraceDb::open(db_path);
    agents::test::LoopbackServer server(script());
    Stack s = stack(db, server.base_url(), {}, log);
    testing::KnobModelMeasurer m;
    const CampaignResult r = run(db, s, &m, log, 40);
    EXPECT_EQ(r.stop_reason, "budget") << log.str();
    EXPECT_EQ(server.requests().size(), 13U);  // every scripted exchange was used
    EXPECT_FALSE(s.agent->available());                        // the 401 opened the breaker for good
    // The prompt carried the parent's evidence: measured speedups, resources and instruction mix.
    const std::string prompt = server.requests().front().body;
    for (const char* needle : {"## 3. Measured per-shape speedup", "% of the roofline floor", "registers,", "global_load",
                               "## 7. Lessons from the trace database", "extern \\\"C\\\" __global__"})
      EXPECT_NE(prompt.find(needle), std::string::npos) << needle;
    // The full ABI, typed and named; the spec without held-out shapes or file names.
    EXPECT_NE(prompt.find("void scale(const float* x, float* out, long long)"), std::string::npos) << prompt.substr(0, 3000);
    EXPECT_NE(prompt.find("Knob constraints"), std::string::npos);
    for (const auto& req : server.requests()) {
      EXPECT_EQ(req.body.find("777777"), std::string::npos);
      EXPECT_EQ(req.body.find("scale.cu"), std::string::npos);
    }

    // LLM children were proposed beside the rule agents' and went through the normal path.
    EXPECT_GE(count(db, "SELECT count(*) FROM candidates WHERE operator = 'llm'"), 5);
    EXPECT_GE(count(db, "SELECT count(*) FROM candidates WHERE operator NOT IN ('llm', 'seed', 'random')"), 5);
    // After the endpoint died, the rule agents kept proposing.
    EXPECT_GT(count(db, "SELECT max(id) FROM candidates WHERE operator != 'llm'"),
              count(db, "SELECT max(id) FROM candidates WHERE operator = 'llm'"));
    // The infinite loop and the out-of-bounds write were built and recorded like any candidate.
    for (const char* marker : {"for (;;)", "out[i + n]"}) {
      auto st = db.connection().prepare("SELECT build_ok, state FROM candidates WHERE operator = 'llm' AND instr(genome_json, ?) > 0");
      st.bind(1, std::string(marker));
      ASSERT_TRUE(st.step()) << marker;
      EXPECT_EQ(st.column_int(0), 1) << marker;
      EXPECT_EQ(st.column_text(1), "measured") << marker;
    }

    // What each LLM candidate was meant to be, for later prompts and the report.
    EXPECT_EQ(count(db, "SELECT count(*) FROM candidates c WHERE operator = 'llm' AND NOT EXISTS "
                        "(SELECT 1 FROM llm_proposals p WHERE p.candidate_id = c.id)"),
              0);
    EXPECT_EQ(count(db, "SELECT count(*) FROM llm_proposals WHERE name = 'double_via_add' AND kind = 'source' AND role = 'coder'"), 1);
    EXPECT_EQ(count(db, "SELECT count(*) FROM llm_proposals WHERE name = 'spin_until_done' AND role = 'fixer'"), 1);
    // Later prompts show earlier ideas with their outcomes.
    bool idea_in_prompt = false;
    for (const auto& req : server.requests()) idea_in_prompt |= req.body.find("LLM idea 'double_via_add'") != std::string::npos;
    EXPECT_TRUE(idea_in_prompt);

    // Every coder or fixer call that answered ends as exactly one thing: a candidate with its
    // proposal row, or a rejection row (answers that repeat one of the round included).
    EXPECT_EQ(count(db, "SELECT count(*) FROM llm_calls k WHERE k.role IN ('coder', 'fixer') AND k.status = 'ok' AND "
                        "(SELECT count(*) FROM llm_proposals p WHERE p.call_id = k.id) + "
                        "(SELECT count(*) FROM agent_rejections r WHERE r.call_id = k.id AND r.candidate_id IS NULL) != 1"),
              0) << log.str();
    // Every rejection has its reason.
    EXPECT_EQ(count(db, "SELECT count(*) FROM agent_rejections WHERE reason = '' OR code = ''"), 0);
    auto has = [&](const std::string& code, const std::string& needle) {
      auto st = db.connection().prepare("SELECT count(*) FROM agent_rejections WHERE code = ? AND instr(reason, ?) > 0");
      st.bind(1, code).bind(2, needle);
      st.step();
      return st.column_int(0) > 0;
    };
    EXPECT_TRUE(has("E_SCREEN", "host-function")) << log.str();
    EXPECT_TRUE(has("E_SCREEN", "include"));
    EXPECT_TRUE(has("E_IR_CHECK", "entry-params"));
    EXPECT_TRUE(has("E_BUILD", "scale_factor"));  // NVRTC's error names the undefined identifier
    EXPECT_TRUE(has("E_BUILD", "candidate.cu("));  // agent source is cited under its own name
    EXPECT_TRUE(has("E_TRUNCATED", "length limit"));
    EXPECT_TRUE(has("E_NO_ENVELOPE", "no <BODY>"));
    EXPECT_TRUE(has("E_ENDPOINT", "deadline"));  // the stall
    EXPECT_TRUE(has("E_ENDPOINT", "401"));
    EXPECT_EQ(count(db, "SELECT count(*) FROM agent_rejections WHERE code = 'E_BUILD' AND candidate_id IS NULL"), 0);
    // Build failures have the documented stage; the step that failed leads the reason.
    EXPECT_EQ(count(db, "SELECT count(*) FROM agent_rejections WHERE code = 'E_BUILD' AND stage != 'build'"), 0);
    EXPECT_TRUE(has("E_BUILD", "nvrtc: "));

    // Tokens and cost per call; failed calls that were sent still count their worst case.
    EXPECT_EQ(count(db, "SELECT count(*) FROM llm_calls WHERE status = 'ok' AND (input_tokens != 1500 OR output_tokens != 400)"), 0);
    EXPECT_EQ(count(db, "SELECT count(*) FROM llm_calls WHERE status IN ('ok', 'truncated', 'error') AND cost_usd IS NULL"), 0);
    EXPECT_EQ(count(db, "SELECT count(*) FROM llm_calls WHERE status = 'truncated' AND output_tokens = 2048"), 1);
    const tracedb::LlmSpend spend = db.llm_spend(r.campaign_id);
    EXPECT_EQ(spend.calls, count(db, "SELECT count(*) FROM llm_calls WHERE status IN ('ok', 'truncated', 'error')"));
    EXPECT_GT(spend.usd, 0);
    EXPECT_EQ(s.budget->spent().calls, spend.calls);
    EXPECT_NE(log.str().find("LLM "), std::string::npos);
  }
  // No key anywhere: log lines, the database and its WAL.
  EXPECT_EQ(log.str().find("SENTINEL"), std::string::npos);
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (!entry.is_regular_file()) continue;
    EXPECT_EQ(slurp(entry.path()).find("SENTINEL"), std::string::npos) << entry.path();
  }
}

// A failed answer reaches the fixer as soon as its own build fails, while the rule agents'
// children of the same round are still unrecorded: a short campaign gets its fix. (Before, the
// fixer waited for the whole round and then for a slot the posterior gave the LLM.)
TEST_F(LlmCampaignTest, TheFixerRunsBeforeTheRoundsOtherBuildsAreRecorded) {
  std::ostringstream log;
  const fs::path db_path = dir_ / "fix.db";
  auto db = tracedb::TraceDb::open(db_path);
  auto watcher = tracedb::TraceDb::open(db_path);  // read by the server's thread while the campaign waits
  std::int64_t unrecorded_siblings = -1;
  auto at_request = [&](const agents::test::ReceivedRequest& req) {
    if (req.body.find("entry-params") == std::string::npos) return;  // only the fixer's call cites it
    unrecorded_siblings = count(watcher,
                                "SELECT count(*) FROM candidates s JOIN candidates f ON f.generation = s.generation "
                                "WHERE f.operator = 'llm' AND f.state = 'failed' AND s.operator != 'llm' AND s.state = 'proposed'");
  };
  agents::test::LoopbackServer server(
      agents::test::load_transcript(std::string(PTXEVO_AGENTS_TRANSCRIPTS) + "/fix_in_short_campaign.jsonl"), at_request);
  Stack s = stack(db, server.base_url(), {}, log);
  testing::KnobModelMeasurer m;
  const CampaignResult r = run(db, s, &m, log, 16, /*build_rounds=*/1);
  EXPECT_EQ(r.stop_reason, "budget") << log.str();
  ASSERT_EQ(server.requests().size(), 6U) << log.str();  // every scripted exchange was used
  EXPECT_GT(unrecorded_siblings, 0) << log.str();
  EXPECT_EQ(count(db, "SELECT count(*) FROM agent_rejections WHERE code = 'E_IR_CHECK' AND stage = 'screen' AND role = 'coder'"), 1);
  EXPECT_EQ(count(db, "SELECT count(*) FROM llm_proposals p JOIN candidates c ON c.id = p.candidate_id "
                      "WHERE p.name = 'restore_the_length' AND p.role = 'fixer' AND c.state = 'measured'"),
            1) << log.str();
  EXPECT_EQ(count(db, "SELECT count(*) FROM llm_calls k WHERE k.role IN ('coder', 'fixer') AND k.status = 'ok' AND "
                      "(SELECT count(*) FROM llm_proposals p WHERE p.call_id = k.id) + "
                      "(SELECT count(*) FROM agent_rejections r WHERE r.call_id = k.id AND r.candidate_id IS NULL) != 1"),
            0);
}

TEST_F(LlmCampaignTest, ResumedCampaignKeepsItsSpendAndTheCapHolds) {
  std::ostringstream log;
  auto db = tracedb::TraceDb::open(dir_ / "resume.db");
  std::int64_t first_calls = 0;
  {
    agents::test::LoopbackServer server(script());
    Stack s = stack(db, server.base_url(), {.max_calls = 3, .max_input_tokens = {}, .max_output_tokens = {}, .max_usd = {}}, log);
    testing::KnobModelMeasurer m;
    run(db, s, &m, log, 24);
    first_calls = s.budget->spent().calls;
    EXPECT_EQ(first_calls, 3);
    EXPECT_EQ(server.requests().size(), 3U);
    EXPECT_GT(count(db, "SELECT count(*) FROM agent_rejections WHERE code = 'E_BUDGET'"), 0);
  }
  {
    // Resumed with the same cap: the three calls already made count, so nothing more is sent.
    agents::test::LoopbackServer server(script());
    Stack s = stack(db, server.base_url(), {.max_calls = 3, .max_input_tokens = {}, .max_output_tokens = {}, .max_usd = {}}, log);
    testing::KnobModelMeasurer m;
    const CampaignResult r = run(db, s, &m, log, 32);
    EXPECT_TRUE(r.resumed);
    EXPECT_EQ(server.requests().size(), 0U);
    EXPECT_EQ(s.budget->spent().calls, first_calls);
  }
}

// The engine's own choices are deterministic: replaying the same transcript twice gives the same
// candidates, calls and rejections (timestamps, latencies and timeout durations aside).
TEST_F(LlmCampaignTest, ReplayedCampaignIsDeterministic) {
  auto snapshot = [&](const std::string& name) {
    std::ostringstream log;
    auto db = tracedb::TraceDb::open(dir_ / name);
    agents::test::LoopbackServer server(script());
    Stack s = stack(db, server.base_url(), {}, log);
    testing::KnobModelMeasurer m;
    run(db, s, &m, log, 32);
    std::string out;
    for (const char* sql : {"SELECT id || ' ' || genome_hash || ' ' || operator || ' ' || state FROM candidates ORDER BY id",
                            "SELECT role || ' ' || turn || ' ' || status || ' ' || coalesce(input_tokens, '') || ' ' || "
                            "coalesce(output_tokens, '') FROM llm_calls ORDER BY id",
                            "SELECT coalesce(candidate_id, '') || ' ' || code || ' ' || stage || ' ' || reason FROM "
                            "agent_rejections ORDER BY id"}) {
      auto st = db.connection().prepare(sql);
      while (st.step()) out += st.column_text(0) + "\n";
    }
    // Only the wall clock may differ: curl's "timed out after N milliseconds" for the stall.
    return std::regex_replace(out, std::regex("after [0-9]+ milliseconds"), "after N milliseconds");
  };
  const std::string first = snapshot("a.db");
  EXPECT_NE(first.find("E_SCREEN"), std::string::npos);
  EXPECT_EQ(first, snapshot("b.db"));
}

// Nothing listens at the endpoint: the first calls fail over their retries, the breaker opens,
// and the campaign runs to its budget on the rule agents alone without calling again.
TEST_F(LlmCampaignTest, DeadEndpointHandsTheSlotsToTheRuleAgents) {
  std::ostringstream log;
  auto db = tracedb::TraceDb::open(dir_ / "dead.db");
  std::string dead_url;
  {
    agents::test::LoopbackServer closed({});  // binds a free port, then closes it
    dead_url = closed.base_url();
  }
  Stack s = stack(db, dead_url, {}, log);
  testing::KnobModelMeasurer m;
  const CampaignResult r = run(db, s, &m, log, 24);
  EXPECT_EQ(r.stop_reason, "budget") << log.str();
  EXPECT_FALSE(s.agent->available());
  EXPECT_EQ(count(db, "SELECT count(*) FROM candidates WHERE operator = 'llm'"), 0);
  EXPECT_GE(count(db, "SELECT count(*) FROM candidates WHERE operator NOT IN ('llm', 'seed', 'random')"), 5);
  // Each call ended in a recorded rejection; once the breaker opened, nothing more was tried.
  // 4 attempts each and 5 consecutive failures open the breaker: the second call ends as
  // circuit-open after its first attempt.
  const auto calls = count(db, "SELECT count(*) FROM llm_calls WHERE status IN ('error', 'circuit-open')");
  EXPECT_GE(calls, 1);
  EXPECT_LE(calls, 2);
  EXPECT_EQ(count(db, "SELECT count(*) FROM agent_rejections WHERE code = 'E_ENDPOINT'"), calls);
  EXPECT_NE(log.str().find("endpoint down: rule agents only"), std::string::npos);
}

// The screen (and the prompt) tell the model these headers are allowed: each must build with
// the campaign's compiler, or the advice costs a build and a fixer turn.
TEST(NvrtcOnly, EveryHeaderTheScreenAllowsBuilds) {
  for (const auto header : agents::allowed_includes()) {
    const std::string src = "#include <" + std::string(header) + ">\nextern \"C\" __global__ void k(int* p) { p[0] = 1; }\n";
    EXPECT_TRUE(agents::screen_device_code(src).empty()) << header;
    const auto r = evaluator::compile_to_ptx(src, "candidate.cu", "sm_90a", {});
    EXPECT_TRUE(r.ok) << header << ": " << r.log;
  }
}

TEST(NvrtcOnly, RefusesHostCodeWithoutAnyHostOption) {
  // The screen would stop these first; NVRTC alone refuses them too, since the engine never
  // passes -default-device.
  for (const char* src : {"int main() { return 0; }\n", "void helper() {}\n__global__ void k() { }\n"}) {
    const auto r = evaluator::compile_to_ptx(src, "reply.cu", "sm_90a", {});
    EXPECT_FALSE(r.ok) << src;
    EXPECT_NE(r.log.find("host"), std::string::npos) << r.log;
  }
}

}  // namespace
}  // namespace ptxevo::search

namespace {
class CurlEnvironment final : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_EQ(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK); }
  void TearDown() override { curl_global_cleanup(); }
};
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new CurlEnvironment);  // gtest takes ownership
  return RUN_ALL_TESTS();
}
