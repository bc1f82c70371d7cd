// kda_fwd exported as CUDA source, checked with the real nvcc: every entry of the plan compiles to
// the candidate's PTX, and the host launcher (compiled into a program and run, no GPU needed: it
// plans and checks arguments before any CUDA call) plans what KdaFwdOp::launch_plan plans, for
// the split pair with and without the sequence split, persistent prepare CTAs, the fused kernel and
// the recurrent seed, on batched and packed shapes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <variant>

#include "evaluator/subprocess.hpp"
#include "exporter/cuda_export.hpp"
#include "exporter/export_files.hpp"
#include "exporter/tests/scratch_dirs.hpp"
#include "kernels/builtin_ops.hpp"
#include "kernels/kda/kda_shape.hpp"

namespace ptxevo::exporter {
namespace {

namespace fs = std::filesystem;
const std::string kSpec = std::string(PTXEVO_SOURCE_DIR) + "/kernels/kda/kda_fwd.spec";

fs::path temp_dir(const std::string& name) { return testing::scratch_dir("ptxevo_kda_export_", name); }

struct KdaShape {
  long long b, t, h, n;
};

// Batched rows, packed sets (T their sum), sequence-split shapes (few chains) and the targets.
std::vector<KdaShape> shapes() {
  std::vector<KdaShape> s = {{1, 1, 1, 1},    {1, 8192, 96, 1}, {1, 8192, 64, 1}, {2, 65, 4, 2},
                             {3, 17, 1, 3},   {1, 1000, 4, 1},  {4, 1024, 2, 4},  {1, 100000, 1, 1},
                             {8, 4096, 1, 8}, {2, 8192, 16, 2}};
  for (const long long n : {2, 3, 4, 6, 8}) {
    const auto lengths = kernels::kda_length_set(n);
    long long t = 0;
    for (auto l : lengths) t += l;
    if (t > 0) {
      s.push_back({1, t, 4, n});
      s.push_back({1, t, 96, n});
    }
  }
  return s;
}

long long longest(const KdaShape& s) {
  if (s.n == s.b) return s.t;
  const auto lengths = kernels::kda_length_set(s.n);
  return *std::max_element(lengths.begin(), lengths.end());
}

std::int32_t int_arg(const evaluator::KernelArg& a) { return std::get<std::int32_t>(a); }

// One line per launch, as the exported program prints it.
std::string op_plan(const evaluator::Op& op, const evaluator::OpConfig& cfg, const evaluator::Knobs& knobs,
                    const KdaShape& s) {
  std::string out;
  try {
    const auto plan = op.launch_plan({{"B", s.b}, {"T", s.t}, {"H", s.h}, {"N", s.n}}, cfg, knobs);
    for (const auto& k : plan.kernels) {
      int segments = 1, pass = 0;
      if (k.entry == "kda_fwd_recurrence") {
        segments = int_arg(k.args.at(11));
        pass = int_arg(k.args.at(12));
      } else if (k.entry == "kda_fwd_seg_combine") {
        segments = int_arg(k.args.at(5));
      }
      out += k.entry + " " + std::to_string(k.grid.x) + " " + std::to_string(k.grid.y) + " " +
             std::to_string(k.grid.z) + " " + std::to_string(k.block.x) + " " + std::to_string(k.shared_bytes) + " " +
             (k.programmatic ? "1" : "0") + " " + std::to_string(segments) + " " + std::to_string(pass) + "\n";
    }
  } catch (const std::invalid_argument&) {
    out += "error\n";
  }
  return out + "--\n";
}

struct Exported {
  ResolvedCandidate candidate;
  ExportOutcome outcome;
  fs::path dir;
};

Exported export_kda(const std::string& seed, const std::string& knobs, const std::string& name, bool verify) {
  ExportRequest r;
  r.spec = kSpec;
  r.seed = seed;
  r.knobs = knobs;
  r.verify = verify;
  r.out_dir = temp_dir(name).string();
  auto ops = std::make_shared<const evaluator::OpRegistry>(kernels::builtin_ops());
  Exported e{resolve_candidate(r, ops), {}, r.out_dir};
  e.outcome = write_export(r, e.candidate);
  return e;
}

// Compiles a host program around the exported file that prints the plan of every shape, then
// calls the launcher with `bad_call` (arguments it must refuse before any CUDA call).
std::string run_plan_program(const Exported& e, const std::string& bad_calls) {
  std::string main_cu = "#include \"" + fs::path(e.outcome.files.at(0)).filename().string() +
                        "\"\n#include <cstdio>\nint main() {\n  const long long s[][5] = {";
  for (const auto& s : shapes())
    main_cu += "{" + std::to_string(s.b) + "LL, " + std::to_string(s.t) + "LL, " + std::to_string(s.h) + "LL, " +
               std::to_string(s.n) + "LL, " + std::to_string(longest(s)) + "LL}, ";
  main_cu +=
      "};\n  for (const auto& x : s) {\n    ptxevo::kda_plan::Plan p;\n    const char* why = 0;\n"
      "    if (ptxevo_kda_fwd_plan(x[0], x[1], x[2], x[3], x[4], &p, &why) == 0) {\n"
      "      for (int i = 0; i < p.count; ++i) {\n"
      "        const ptxevo::kda_plan::Launch& l = p.launches[i];\n"
      "        std::printf(\"%s %u %u %u %u %u %d %d %d\\n\", ptxevo::kda_plan::entry_name(l.kernel), l.grid[0], "
      "l.grid[1], l.grid[2], l.block[0], l.shared_bytes, l.programmatic ? 1 : 0, (int)l.segments, (int)l.pass);\n"
      "      }\n    } else {\n      std::printf(\"error\\n\");\n    }\n    std::printf(\"--\\n\");\n  }\n"
      "  int d = 0;\n  float st = 0;\n  long long cu[3] = {0, 1, 2};\n  const char* why = 0;\n" +
      bad_calls + "  return 0;\n}\n";
  { std::ofstream(e.dir / "plan_main.cu") << main_cu; }
  const auto build = evaluator::run_process({find_nvcc(), "-gencode", "arch=compute_90a,code=compute_90a", "-o",
                                             (e.dir / "plan_main").string(), (e.dir / "plan_main.cu").string()});
  EXPECT_EQ(build.exit_code, 0) << build.output;
  if (build.exit_code != 0) return "";
  const auto run = evaluator::run_process({(e.dir / "plan_main").string()});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return run.output;
}

// A launcher call with q .. workspace all given (d, st: dummies never dereferenced) but for the
// changes in `args`, printing what it answers.
std::string call(const std::string& label, const std::string& args) {
  return "  {\n    why = 0;\n    const int rc = (int)ptxevo_kda_fwd_launch(" + args + ", 0, &why);\n    std::printf(\"" +
         label + " %d %s\\n\", rc, why ? why : \"(none)\");\n  }\n";
}

void expect_plans_match(const std::string& seed, const std::string& knobs, const std::string& name) {
  SCOPED_TRACE(seed + " " + knobs);
  ASSERT_FALSE(find_nvcc().empty()) << "the export tests need nvcc at $CUDA_HOME or /usr/local/cuda";
  const Exported e = export_kda(seed, knobs, name, /*verify=*/true);
  ASSERT_TRUE(e.outcome.check.has_value());
  EXPECT_TRUE(e.outcome.check->comparison.same) << e.outcome.check->comparison.difference;
  // The spec reads and writes states: leaving either out, a cu_seqlens for batched rows, a workspace
  // too small and a lower bound outside [-5, 0) are refused.
  std::string bad = call("ok_args_small_ws", "&d, &d, &d, &d, &d, &st, &st, 0, &st, &d, &st, &d, 16, 1, 64, 2, 1, 64, 0.1f, -5.0f");
  bad += call("no_initial", "&d, &d, &d, &d, &d, &st, &st, 0, 0, &d, &st, &d, 1LL << 40, 1, 64, 2, 1, 64, 0.1f, -5.0f");
  bad += call("no_final", "&d, &d, &d, &d, &d, &st, &st, 0, &st, &d, 0, &d, 1LL << 40, 1, 64, 2, 1, 64, 0.1f, -5.0f");
  bad += call("cu_batched", "&d, &d, &d, &d, &d, &st, &st, cu, &st, &d, &st, &d, 1LL << 40, 1, 64, 2, 1, 64, 0.1f, -5.0f");
  bad += call("bound", "&d, &d, &d, &d, &d, &st, &st, 0, &st, &d, &st, &d, 1LL << 40, 1, 64, 2, 1, 64, 0.1f, 0.5f");
  bad += call("packed_B2", "&d, &d, &d, &d, &d, &st, &st, cu, &st, &d, &st, &d, 1LL << 40, 2, 64, 2, 3, 64, 0.1f, -5.0f");
  const std::string output = run_plan_program(e, bad);
  const std::string plans = output.substr(0, output.find("ok_args_small_ws"));
  const evaluator::OpRegistry ops = kernels::builtin_ops();
  const evaluator::Op& op = *ops.find("kda_fwd");
  std::string expected;
  for (const auto& s : shapes()) expected += op_plan(op, e.candidate.spec.config, e.candidate.build.knobs, s);
  EXPECT_EQ(plans, expected);
  EXPECT_NE(output.find("ok_args_small_ws 1 ptxevo_kda_fwd: the workspace is smaller"), std::string::npos) << output;
  EXPECT_NE(output.find("no_initial 1 ptxevo_kda_fwd: these kernels were built to read an initial state"),
            std::string::npos) << output;
  EXPECT_NE(output.find("no_final 1 ptxevo_kda_fwd: these kernels were built to write the final state"),
            std::string::npos) << output;
  EXPECT_NE(output.find("cu_batched 1 ptxevo_kda_fwd: cu_seqlens is for packed sequences"), std::string::npos)
      << output;
  EXPECT_NE(output.find("bound 1 ptxevo_kda_fwd: lower_bound must be in [-5, 0)"), std::string::npos) << output;
  EXPECT_NE(output.find("packed_B2 1 ptxevo_kda_fwd: N must equal B"), std::string::npos) << output;
}

TEST(KdaExport, SplitDefaultsWithTheSequenceSplit) {
  expect_plans_match("kda_fwd_chunked_seed", "", "split");
}

TEST(KdaExport, PersistentPrepareCtasLaunchTheRecurrenceProgrammatically) {
  expect_plans_match("kda_fwd_chunked_seed", "PREPARE_CTAS=396,SEQSPLIT=1", "persistent");
}

TEST(KdaExport, FusedKernelAndRecurrentSeed) {
  expect_plans_match("kda_fwd_chunked_seed",
                     "FUSED=1,BV=32,STAGE=1,U0_BITS=32,STATE_HI_LO=1,U_HI_LO=1,LMTERMS=3,WY_IN_RECURRENCE=0,BULK=0,"
                     "SEQSPLIT=1",
                     "fused");
  expect_plans_match("", "BV=64,KSPLIT=2", "recurrent");
}

TEST(KdaExport, UnknownSeedIsNamed) {
  ExportRequest r;
  r.spec = kSpec;
  r.seed = "no_such_seed";
  r.out_dir = temp_dir("seed").string();
  auto ops = std::make_shared<const evaluator::OpRegistry>(kernels::builtin_ops());
  try {
    resolve_candidate(r, ops);
    FAIL() << "an unknown seed was accepted";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("has no such seed (seeds: kda_fwd_recurrent_seed, kda_fwd_chunked_seed"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ptxevo::exporter
