// The strict reply envelope: what is accepted, and the reason code of everything that is not.
#include <gtest/gtest.h>

#include "agents/reply_parser.hpp"

namespace ptxevo::agents {
namespace {

const std::string kParent = "int a = 1;\nint b = 2;\nint b2 = 2;\nreturn a + b;\n";
const KnobDomains kKnobs = {{"BLOCK", {"64", "128", "256"}}, {"MODE", {"fast", "safe"}}};

std::string code_of(std::string_view text) {
  auto r = parse_reply(text, kParent, kKnobs);
  if (auto* e = std::get_if<ReplyError>(&r)) return e->code;
  return "OK";
}

ParsedReply ok(std::string_view text) {
  auto r = parse_reply(text, kParent, kKnobs);
  if (auto* e = std::get_if<ReplyError>(&r)) ADD_FAILURE() << e->code << ": " << e->detail;
  return std::get<ParsedReply>(r);
}

TEST(ReplyParser, BodyWithOneFence) {
  const auto r = ok("<NAME>wider_loads</NAME>\n<RATIONALE>128-bit loads.</RATIONALE>\n<BODY>\n```cuda\n__global__ void k() {}\n```\n</BODY>\n");
  EXPECT_EQ(r.kind, PatchKind::Source);
  EXPECT_EQ(r.name, "wider_loads");
  EXPECT_EQ(r.rationale, "128-bit loads.");
  EXPECT_EQ(r.source, "__global__ void k() {}\n");
}

TEST(ReplyParser, RejectsWhatItCannotReadWithoutGuessing) {
  EXPECT_EQ(code_of("Here is my idea: use wider loads."), "E_NO_ENVELOPE");
  EXPECT_EQ(code_of("<BODY>\nno fence at all\n</BODY>"), "E_NO_CODE");
  EXPECT_EQ(code_of("<BODY>\n```cuda\na\n```\n```cuda\nb\n```\n</BODY>"), "E_AMBIGUOUS");
  EXPECT_EQ(code_of("```cuda\na\n```\n```cuda\nb\n```\n"), "E_AMBIGUOUS");
  EXPECT_EQ(code_of("<BODY>\n```python\nprint(1)\n```\n</BODY>"), "E_NO_CODE");
  EXPECT_EQ(code_of("<BODY>\n```cuda\nx\n```\n</BODY><KNOBS>{\"BLOCK\": 64}</KNOBS>"), "E_AMBIGUOUS");
  EXPECT_EQ(code_of("<BODY>\n```cuda\nx\n```\n"), "E_NO_ENVELOPE");  // never closed
  EXPECT_EQ(code_of(""), "E_EMPTY");
  std::string nul = "<BODY>\n```cuda\n";
  nul += '\0';
  nul += "\n```\n</BODY>";
  EXPECT_EQ(code_of(nul), "E_NUL");
  EXPECT_EQ(code_of(std::string(300 * 1024, 'x')), "E_TOO_LARGE");
}

TEST(ReplyParser, LenientSingleCudaFence) {
  EXPECT_EQ(ok("Sure:\n```cuda\n__global__ void k() {}\n```\n").source, "__global__ void k() {}\n");
  EXPECT_EQ(code_of("Sure:\n```\n__global__ void k() {}\n```\n"), "E_NO_ENVELOPE");  // untagged: not without tags
}

TEST(ReplyParser, ThinkBlocksAndCrlfAreNormalized) {
  const auto r = ok("<think>maybe ```cuda\nint decoy;\n``` no</think>\r\n<BODY>\r\n```cuda\r\nint real;\r\n```\r\n</BODY>\r\n");
  EXPECT_EQ(r.source, "int real;\n");
}

TEST(ReplyParser, EditsMatchExactlyOnce) {
  const auto r = ok("<EDITS>\n<<<<<<< SEARCH\nint a = 1;\n=======\nint a = 3;\n>>>>>>> REPLACE\n"
                    "<<<<<<< SEARCH\nreturn a + b;\n=======\n>>>>>>> REPLACE\n</EDITS>");
  EXPECT_EQ(r.kind, PatchKind::Edits);
  EXPECT_EQ(r.source, "int a = 3;\nint b = 2;\nint b2 = 2;\n");
  EXPECT_EQ(code_of("<EDITS>\n<<<<<<< SEARCH\nint c = 1;\n=======\nx\n>>>>>>> REPLACE\n</EDITS>"), "E_EDIT_NO_MATCH");
  EXPECT_EQ(code_of("<EDITS>\n<<<<<<< SEARCH\n = 2;\n=======\nx\n>>>>>>> REPLACE\n</EDITS>"), "E_EDIT_MULTI_MATCH");
  EXPECT_EQ(code_of("<EDITS>\n<<<<<<< SEARCH\nint a = 1;\n>>>>>>> REPLACE\n</EDITS>"), "E_EDIT_SYNTAX");
  EXPECT_EQ(code_of("<EDITS>\nint a = 2;\n</EDITS>"), "E_EDIT_SYNTAX");
  // All or nothing: the second block fails, so the first is not applied either.
  auto partial = apply_edits(kParent, {{"int a = 1;\n", "int a = 9;\n"}, {"nope\n", "x\n"}});
  ASSERT_TRUE(std::holds_alternative<ReplyError>(partial));
  EXPECT_NE(std::get<ReplyError>(partial).detail.find("edit 2"), std::string::npos);
}

TEST(ReplyParser, KnobsStayInTheirDomains) {
  const auto r = ok("<KNOBS>\n{\"BLOCK\": 128, \"MODE\": \"safe\"}\n</KNOBS>");
  EXPECT_EQ(r.kind, PatchKind::Knobs);
  EXPECT_EQ(r.knobs.at("BLOCK"), "128");
  EXPECT_EQ(r.knobs.at("MODE"), "safe");
  EXPECT_EQ(code_of("<KNOBS>{\"BLOCK\": 100}</KNOBS>"), "E_KNOB_INVALID");
  EXPECT_EQ(code_of("<KNOBS>{\"THREADS\": 64}</KNOBS>"), "E_KNOB_INVALID");
  EXPECT_EQ(code_of("<KNOBS>{\"BLOCK\": [64]}</KNOBS>"), "E_KNOB_INVALID");
  EXPECT_EQ(code_of("<KNOBS>BLOCK=64</KNOBS>"), "E_KNOB_INVALID");
}

// How models actually write answers: lower-case tags, bare SEARCH/REPLACE blocks, re-indented
// SEARCH text.
TEST(ReplyParser, ModelHabitsThatAreSafeToRead) {
  const auto lower = ok("<name>smaller_a</name>\n<rationale>r</rationale>\n<edits>\n<<<<<<< SEARCH\nint a = 1;\n=======\n"
                        "int a = 0;\n>>>>>>> REPLACE\n</edits>");
  EXPECT_EQ(lower.kind, PatchKind::Edits);
  EXPECT_EQ(lower.name, "smaller_a");
  EXPECT_EQ(lower.source, "int a = 0;\nint b = 2;\nint b2 = 2;\nreturn a + b;\n");
  EXPECT_EQ(ok("<Knobs>{\"BLOCK\": 64}</Knobs>").knobs.at("BLOCK"), "64");
  // Bare blocks, even inside a fence, read as <EDITS>.
  const auto bare = ok("Change b:\n```\n<<<<<<< SEARCH\nint b = 2;\n=======\nint b = 5;\n>>>>>>> REPLACE\n```\n");
  EXPECT_EQ(bare.kind, PatchKind::Edits);
  EXPECT_EQ(bare.source, "int a = 1;\nint b = 5;\nint b2 = 2;\nreturn a + b;\n");
  // Indentation that differs from the parent: one match with whitespace ignored is applied.
  const auto indented = ok("<EDITS>\n<<<<<<< SEARCH\n    int b = 2;\n    int b2 = 2;\n=======\n  int b = 7;\n>>>>>>> REPLACE\n</EDITS>");
  EXPECT_EQ(indented.source, "int a = 1;\n  int b = 7;\nreturn a + b;\n");
  // ... but never two.
  const std::string twice = "  x = 1;\ny = 2;\n    x = 1;\n";
  auto two = apply_edits(twice, {{"x = 1;\n", "x = 3;\n"}});
  ASSERT_TRUE(std::holds_alternative<ReplyError>(two));
  EXPECT_EQ(std::get<ReplyError>(two).code, "E_EDIT_MULTI_MATCH");
  // A reply with neither sections nor code says what it looked for.
  auto none = parse_reply("I would unroll the loop.", kParent, kKnobs);
  ASSERT_TRUE(std::holds_alternative<ReplyError>(none));
  EXPECT_NE(std::get<ReplyError>(none).detail.find("no SEARCH/REPLACE block"), std::string::npos);
}

TEST(ReplyParser, Plan) {
  auto p = parse_plan("I think... {\"strategy\": \"vectorize loads\", \"hypothesis\": \"memory bound\"} done");
  ASSERT_TRUE(std::holds_alternative<Plan>(p));
  EXPECT_EQ(std::get<Plan>(p).strategy, "vectorize loads");
  EXPECT_TRUE(std::holds_alternative<ReplyError>(parse_plan("no json")));
  EXPECT_TRUE(std::holds_alternative<ReplyError>(parse_plan("{\"strategy\": \"\"}")));
}

}  // namespace
}  // namespace ptxevo::agents
