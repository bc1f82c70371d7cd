#include <gtest/gtest.h>
#include <unistd.h>

#include "evaluator/eval_types.hpp"
#include "evaluator/worker_protocol.hpp"

namespace ptxevo::evaluator {
namespace {

struct Pipe {
  int fd[2];
  Pipe() { EXPECT_EQ(pipe(fd), 0); }
  ~Pipe() {
    close(fd[0]);
    if (fd[1] >= 0) close(fd[1]);
  }
  void close_writer() {
    close(fd[1]);
    fd[1] = -1;
  }
};

TEST(WorkerProtocol, RoundTripsHeaderAndBlobs) {
  Pipe p;
  Message m{{{"type", "evaluate"}, {"n", 3}}, {{1, 2, 3}, {}, std::vector<std::uint8_t>(1000, 7)}};
  ASSERT_TRUE(write_message(p.fd[1], m));
  std::string err;
  auto got = read_message(p.fd[0], &err);
  ASSERT_TRUE(got.has_value()) << err;
  EXPECT_EQ(got->header, m.header);
  ASSERT_EQ(got->blobs.size(), 3u);
  EXPECT_EQ(got->blobs[0], m.blobs[0]);
  EXPECT_TRUE(got->blobs[1].empty());
  EXPECT_EQ(got->blobs[2], m.blobs[2]);
}

TEST(WorkerProtocol, EndOfStreamAndTruncationAreDistinguished) {
  {
    Pipe p;
    p.close_writer();
    std::string err;
    EXPECT_FALSE(read_message(p.fd[0], &err).has_value());
    EXPECT_EQ(err, "end of stream");
  }
  {
    Pipe p;
    const std::uint64_t len = 100;
    ASSERT_EQ(write(p.fd[1], &len, sizeof len), static_cast<ssize_t>(sizeof len));
    ASSERT_EQ(write(p.fd[1], "{\"a\":", 5), 5);
    p.close_writer();
    std::string err;
    EXPECT_FALSE(read_message(p.fd[0], &err).has_value());
    EXPECT_EQ(err, "truncated message header");
  }
}

TEST(WorkerProtocol, RejectsAbsurdLengths) {
  Pipe p;
  const std::uint64_t len = ~std::uint64_t{0};
  ASSERT_EQ(write(p.fd[1], &len, sizeof len), static_cast<ssize_t>(sizeof len));
  std::string err;
  EXPECT_FALSE(read_message(p.fd[0], &err).has_value());
  EXPECT_EQ(err, "message header too large");
}

TEST(EvalTypes, RequestAndReportSurviveJson) {
  EvalRequest r;
  r.op = "rmsnorm_fwd";
  r.config = {{"x_dtype", "bf16"}};
  r.shapes = {{{{"M", 3}, {"N", 7}}, ShapeClass::Heldout}, {{{"M", 8}, {"N", 8}}, ShapeClass::Benchmark, false}};
  r.candidate_knobs = {{"VEC", std::int64_t{8}}, {"LOADER", std::string("plain")}};
  r.tolerances = {{"out", {5e-3, 1e-2}}};
  r.seed = 42;
  r.gate.determinism_runs = 4;
  EvalRequest back = request_from_json(to_json(r));
  EXPECT_EQ(back.gate.determinism_runs, 4);
  // A request written before the runs were counted: two runs, or one without the check.
  auto legacy = to_json(r);
  legacy["gate"].erase("determinism_runs");
  legacy["gate"]["check_determinism"] = false;
  EXPECT_EQ(request_from_json(legacy).gate.determinism_runs, 1);
  legacy["gate"]["check_determinism"] = true;
  EXPECT_EQ(request_from_json(legacy).gate.determinism_runs, 2);
  EXPECT_EQ(back.op, r.op);
  EXPECT_EQ(back.config, r.config);
  ASSERT_EQ(back.shapes.size(), 2u);
  EXPECT_EQ(back.shapes[0].cls, ShapeClass::Heldout);
  EXPECT_TRUE(back.shapes[0].timed);
  EXPECT_FALSE(back.shapes[1].timed);  // gated, not timed (--max-benchmark-shapes)
  EXPECT_EQ(back.shapes[0].shape, r.shapes[0].shape);
  EXPECT_EQ(back.candidate_knobs, r.candidate_knobs);
  EXPECT_DOUBLE_EQ(back.tolerances.at("out").rel_l2, 5e-3);
  EXPECT_EQ(back.seed, 42u);

  EvalReport rep;
  rep.verdict = "fail";
  rep.reasons = {"tolerance: rel_l2 0.1 > 0.005"};
  ShapeReport s;
  s.shape = {{"M", 1}};
  s.cls = ShapeClass::Benchmark;
  s.passed = false;
  s.rel_l2["out"] = 0.1;
  s.candidate_ms = SampleStats{30, 1.0, 0.9, 1.1, 1.0, 0.8, 1.2};
  s.speedup = PairedRatio{30, 1.05, 1.01, 1.09};
  rep.shapes.push_back(s);
  rep.fitness = 1.05;
  rep.phase_seconds = {{"timing", 0.75}, {"free", 0.25}};
  EvalReport rb = report_from_json(to_json(rep));
  EXPECT_EQ(rb.phase_seconds, rep.phase_seconds);
  EXPECT_EQ(rb.verdict, "fail");
  EXPECT_EQ(rb.reasons, rep.reasons);
  ASSERT_EQ(rb.shapes.size(), 1u);
  EXPECT_DOUBLE_EQ(rb.shapes[0].rel_l2.at("out"), 0.1);
  ASSERT_TRUE(rb.shapes[0].speedup.has_value());
  EXPECT_TRUE(rb.shapes[0].speedup->significant());
  EXPECT_DOUBLE_EQ(*rb.fitness, 1.05);
  EXPECT_EQ(reason_code(rep.reasons[0]), "tolerance");
}

}  // namespace
// The search's copy of a report holds no held-out shape and no reason naming one.
TEST(EvalTypes, RedactHeldoutCutsTheShapesAndTheReasonsThatNameThem) {
  EvalReport r;
  r.verdict = "fail";
  ShapeReport corr, held;
  corr.shape = {{"M", 1}};
  held.shape = {{"M", 777}};
  held.cls = ShapeClass::Heldout;
  held.passed = false;
  held.reasons = {"tolerance: x"};
  r.shapes = {corr, held};
  r.reasons = {"tolerance: rel_l2 0.3 > 0.005 (output 'out') [heldout shape M=777, normal inputs]",
               "launch-failed: something [correctness shape M=1, normal inputs]"};
  const HeldoutResults h = redact_heldout(r);
  ASSERT_EQ(r.shapes.size(), 1u);
  EXPECT_EQ(r.shapes[0].cls, ShapeClass::Correctness);
  ASSERT_EQ(r.reasons.size(), 2u);
  EXPECT_EQ(r.reasons[0], "launch-failed: something [correctness shape M=1, normal inputs]");
  EXPECT_EQ(r.reasons[1], kHeldoutFailed);
  EXPECT_EQ(reason_code(r.reasons[1]), "heldout");
  EXPECT_TRUE(h.failed);
  ASSERT_EQ(h.shapes.size(), 1u);
  ASSERT_EQ(h.reasons.size(), 1u);
  EXPECT_NE(to_json(h).dump().find("M=777"), std::string::npos);
  // A passing held-out shape leaves no reason behind; redacting twice changes nothing.
  EvalReport ok;
  ShapeReport passed;
  passed.shape = {{"M", 5}};
  passed.cls = ShapeClass::Heldout;
  ok.shapes = {passed};
  EXPECT_FALSE(redact_heldout(ok).failed);
  EXPECT_TRUE(ok.reasons.empty());
  EXPECT_TRUE(redact_heldout(ok).empty());
}

}  // namespace ptxevo::evaluator
