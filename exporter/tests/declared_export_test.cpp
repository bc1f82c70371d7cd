// Export of ops declared in files (examples/ops), verified with the real nvcc: the .cu compiles
// for sm_90a to the candidate's PTX, its host code compiles, and the generated plan function
// gives the launches DeclaredOp::launch_plan gives, shape for shape; the torch files are written
// and the Python module parses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "evaluator/subprocess.hpp"
#include "exporter/export_files.hpp"
#include "exporter/tests/scratch_dirs.hpp"
#include "kernels/builtin_ops.hpp"

namespace ptxevo::exporter {
namespace {

// The registry the CLI hands the exporter.
std::shared_ptr<const evaluator::OpRegistry> registry() {
  return std::make_shared<const evaluator::OpRegistry>(kernels::builtin_ops());
}

namespace fs = std::filesystem;
const std::string kExamples = std::string(PTXEVO_SOURCE_DIR) + "/examples/ops/";

fs::path temp_dir(const std::string& name) { return testing::scratch_dir("ptxevo_declared_export_", name); }

struct Case {
  std::string op, knobs, edits;
  std::vector<std::pair<long long, long long>> shapes;  // (M, N)
};

TEST(DeclaredExport, LauncherPlanMatchesTheDeclarationAndThePtxIsTheCandidates) {
  ASSERT_FALSE(find_nvcc().empty()) << "the export tests need nvcc at $CUDA_HOME or /usr/local/cuda";
  const std::vector<Case> cases = {
      {"gelu_bias", "THREADS=128,VEC=8,ROWS=4", "l2_evict_hint:priority=evict_first",
       {{1, 1}, {3, 7}, {70000, 8}, {1 << 20, 4096}, {300000, 1}, {2, 70001}}},
      {"row_argmax", "WARPS=16,UNROLL=4", "", {{1, 1}, {1000, 33}, {262144, 256}, {(1LL << 35), 2}}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.op);
    ExportRequest r;
    r.spec = kExamples + k.op + "/" + k.op + ".spec";
    r.knobs = k.knobs;
    r.edits = k.edits;
    r.format = "torch";
    r.verify = true;
    r.out_dir = temp_dir(k.op).string();
    const ResolvedCandidate c = resolve_candidate(r, registry());
    const ExportOutcome o = write_export(r, c);
    ASSERT_TRUE(o.check.has_value());
    EXPECT_TRUE(o.check->comparison.same) << o.check->comparison.difference;
    ASSERT_EQ(o.files.size(), 4u);  // .cu, binding, module, export.json
    const fs::path dir = r.out_dir;
    const std::string fn = "ptxevo_" + k.op;
    std::string main_cu = "#include \"" + fn + ".cu\"\n#include <cstdio>\nint main() {\n  const long long s[][2] = {";
    for (const auto& [m, n] : k.shapes) main_cu += "{" + std::to_string(m) + "LL, " + std::to_string(n) + "LL}, ";
    main_cu += "};\n  for (const auto& x : s) {\n    " + fn + "_launch_t p[4];\n    const char* why = 0;\n"
               "    const int n = " + fn + "_plan(x[0], x[1], p, &why);\n"
               "    if (n < 0) { std::printf(\"error\\n\"); continue; }\n"
               "    for (int i = 0; i < n; ++i) std::printf(\"%s %lld %lld %lld %lld %lld\\n\", p[i].entry, p[i].grid[0], "
               "p[i].grid[1], p[i].block[0], p[i].shared_bytes, p[i].cluster[0]);\n  }\n"
               "  const char* why = 0;\n  const int rc = (int)" + fn + "_launch(0, 0, " + (k.op == "gelu_bias" ? "0, " : "") +
               "4, 4, 0, &why);\n  std::printf(\"%d %s\\n\", rc, why);\n  return 0;\n}\n";
    { std::ofstream(dir / "plan_main.cu") << main_cu; }
    const auto build = evaluator::run_process({find_nvcc(), "-gencode", "arch=compute_90a,code=compute_90a", "-o",
                                               (dir / "plan_main").string(), (dir / "plan_main.cu").string()});
    ASSERT_EQ(build.exit_code, 0) << build.output;
    const auto run = evaluator::run_process({(dir / "plan_main").string()});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    std::string expected;
    for (const auto& [m, n] : k.shapes) {
      try {
        for (const auto& l : c.op->launch_plan({{"M", m}, {"N", n}}, c.spec.config, c.build.knobs).kernels)
          expected += l.entry + " " + std::to_string(l.grid.x) + " " + std::to_string(l.grid.y) + " " + std::to_string(l.block.x) +
                      " " + std::to_string(l.shared_bytes) + " " + std::to_string(l.cluster.x) + "\n";
      } catch (const std::invalid_argument&) {
        expected += "error\n";
      }
    }
    EXPECT_EQ(run.output, expected + std::to_string(1) + " " + fn + ": every tensor pointer is required\n");
    // The module is valid Python (torch itself is only on the GPU machine).
    const auto py = evaluator::run_process({"/usr/bin/env", "python3", "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read())",
                                            (dir / (fn + ".py")).string()});
    EXPECT_EQ(py.exit_code, 0) << py.output;
  }
}

TEST(DeclaredExport, AnEntryMissingFromThePtxIsNamed) {
  const fs::path dir = temp_dir("missing");
  std::ifstream in(kExamples + "gelu_bias/gelu_bias.op.toml");
  std::stringstream s;
  s << in.rdbuf();
  std::string op = s.str();
  op.replace(op.find("entry = \"gelu_bias\""), 19, "entry = \"gelu_bias_v2\"");
  op.replace(op.find("source = \"gelu_bias_ref.cu\""), 27, "source = \"" + kExamples + "gelu_bias/gelu_bias_ref.cu\"");
  std::ofstream(dir / "gelu_bias.op.toml") << op;
  std::ifstream sin(kExamples + "gelu_bias/gelu_bias.spec");
  std::stringstream ss;
  ss << sin.rdbuf();
  std::string spec = ss.str();
  spec.replace(spec.find("source = \"gelu_bias.cu\""), 23, "source = \"" + kExamples + "gelu_bias/gelu_bias.cu\"");
  std::ofstream(dir / "gelu_bias.spec") << spec;
  ExportRequest r;
  r.spec = (dir / "gelu_bias.spec").string();
  r.out_dir = (dir / "out").string();
  const ResolvedCandidate c = resolve_candidate(r, registry());
  try {
    write_export(r, c);
    ADD_FAILURE() << "exported a plan whose entry the PTX lacks";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("names entry gelu_bias_v2, which the candidate's PTX does not define"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ptxevo::exporter
