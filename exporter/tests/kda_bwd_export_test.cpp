// kda_bwd exported as CUDA source and as a PyTorch module, checked with the real nvcc: every entry
// compiles to the candidate's PTX; the host launcher (compiled into a program and run, no GPU
// needed: it plans and checks arguments before any CUDA call) plans what KdaBwdOp::launch_plan
// plans on batched and packed shapes and refuses what the kernels were not built for; the torch
// module is valid Python with bwd() and attach_forward().
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <variant>

#include "evaluator/subprocess.hpp"
#include "exporter/cuda_export.hpp"
#include "exporter/export_files.hpp"
#include "kernels/builtin_ops.hpp"
#include "kernels/kda/kda_bwd_op.hpp"
#include "kernels/kda/kda_shape.hpp"

namespace ptxevo::exporter {
namespace {

namespace fs = std::filesystem;
const std::string kSpec = std::string(PTXEVO_SOURCE_DIR) + "/kernels/kda/kda_bwd.spec";

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("ptxevo_kda_bwd_export_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

struct Dims {
  long long b, t, h, n;
};

std::vector<Dims> shapes() {
  std::vector<Dims> s = {{1, 1, 1, 1}, {1, 8192, 96, 1}, {2, 65, 4, 2}, {3, 17, 1, 3}, {8, 1024, 64, 8}};
  for (const long long n : {2, 3, 6}) {
    long long t = 0;
    for (auto l : kernels::kda_length_set(n)) t += l;
    s.push_back({1, t, 4, n});
  }
  return s;
}

// One line per launch: entry, grid, block, then the workspace offsets the launch takes.
std::string op_plan(const evaluator::Op& op, const evaluator::OpConfig& cfg, const evaluator::Knobs& knobs,
                    const Dims& s) {
  std::ostringstream out;
  const auto plan = op.launch_plan({{"B", s.b}, {"T", s.t}, {"H", s.h}, {"N", s.n}}, cfg, knobs);
  for (const auto& k : plan.kernels) {
    out << k.entry << " " << k.grid.x << " " << k.grid.y << " " << k.grid.z << " " << k.block.x;
    for (const auto& a : k.args)
      if (const auto* v = std::get_if<std::int64_t>(&a)) out << " " << *v;
    out << "\n";
  }
  const auto d = kernels::kda_dims({{"B", s.b}, {"T", s.t}, {"H", s.h}, {"N", s.n}});
  const auto g = kernels::KdaBwdOp::geometry(knobs);
  out << "workspace "
      << (kernels::KdaBwdOp::layout_words(d, 128 / g.bv) + (g.prep ? kernels::KdaBwdOp::prep_words(d) : 0)) * 4
      << "\n--\n";
  return out.str();
}

// The same lines from the exported launcher's ptxevo_kda_bwd_plan, and its answers to `calls`.
std::string exported_plans(const fs::path& dir, const std::string& cu, const std::string& calls) {
  std::string main_cu = "#include \"" + cu + "\"\n#include <cstdio>\nint main() {\n  const long long s[][4] = {";
  for (const auto& s : shapes())
    main_cu += "{" + std::to_string(s.b) + "LL, " + std::to_string(s.t) + "LL, " + std::to_string(s.h) + "LL, " +
               std::to_string(s.n) + "LL}, ";
  main_cu +=
      "};\n  const char* names[3] = {\"kda_bwd_recurrent\", \"kda_bwd_finish\", \"kda_bwd_reduce\"};\n"
      "  for (const auto& x : s) {\n    ptxevo_kda_bwd_plan_t p;\n    if (ptxevo_kda_bwd_plan(x[0], x[1], x[2], x[3], &p)) {\n"
      "      std::printf(\"error\\n--\\n\");\n      continue;\n    }\n"
      "    if (p.prep_offset >= 0)\n"
      "      std::printf(\"kda_bwd_prepare %u %u 1 128 %lld %lld\\n\", p.grid[1][0], p.grid[1][1], x[0] * x[1], "
      "p.prep_offset);\n"
      "    for (int i = 0; i < 3; ++i) {\n"
      "      std::printf(\"%s %u %u %u 128\", names[i], p.grid[i][0], p.grid[i][1], p.grid[i][2]);\n"
      "      if (i == 0) std::printf(p.prep_offset >= 0 ? \" %lld %lld %lld\\n\" : \" %lld %lld\\n\", x[1], "
      "p.share_offset, p.prep_offset);\n"
      "      if (i == 1) std::printf(\" %lld %lld %lld\\n\", x[0] * x[1], p.share_offset, p.sums_offset);\n"
      "      if (i == 2) std::printf(\" %lld\\n\", p.sums_offset);\n    }\n"
      "    std::printf(\"workspace %lld\\n--\\n\", ptxevo_kda_bwd_workspace_bytes(x[0], x[1], x[2], x[3]));\n  }\n"
      "  int d = 0;\n  float f = 0;\n  long long cu[3] = {0, 1, 2};\n  const char* why = 0;\n" +
      calls + "  return 0;\n}\n";
  { std::ofstream(dir / "plan_main.cu") << main_cu; }
  const auto build = evaluator::run_process({find_nvcc(), "-gencode", "arch=compute_90a,code=compute_90a", "-o",
                                             (dir / "plan_main").string(), (dir / "plan_main.cu").string()});
  EXPECT_EQ(build.exit_code, 0) << build.output;
  if (build.exit_code != 0) return "";
  const auto run = evaluator::run_process({(dir / "plan_main").string()});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return run.output;
}

// A launcher call with every pointer given (d, f: dummies never dereferenced) but for the changes
// in `args`, printing what it answers.
std::string call(const std::string& label, const std::string& args) {
  return "  {\n    why = 0;\n    const int rc = (int)ptxevo_kda_bwd_launch(" + args + ", 0, &why);\n    std::printf(\"" +
         label + " %d %s\\n\", rc, why ? why : \"(none)\");\n  }\n";
}

// q k v g beta A_log dt_bias cu s0 d_out d_fs dq dk dv dg dbeta dA_log ddt_bias ds0 ws ws_bytes B T H N scale bound
const std::string kPointers = "&d, &d, &d, &d, &d, &f, &f, ";
const std::string kGrads = "&f, &f, &f, &f, &f, &f, &f, ";

TEST(KdaBwdExport, LauncherPlansWhatTheOpPlansAndRefusesWhatItWasNotBuiltFor) {
  ASSERT_FALSE(find_nvcc().empty()) << "the export tests need nvcc at $CUDA_HOME or /usr/local/cuda";
  for (const std::string knobs : {"", "BV=32,CKPT=128,SUB=2", "BV=32,CKPT=32,SUB=8,PREP=1"}) {
    SCOPED_TRACE(knobs);
    const TempDir dir(knobs.empty() ? "defaults" : knobs.find("PREP") != std::string::npos ? "prep" : "bv32");
    ExportRequest r;
    r.spec = kSpec;
    r.knobs = knobs;
    r.verify = true;
    r.out_dir = dir.path.string();
    auto ops = std::make_shared<const evaluator::OpRegistry>(kernels::builtin_ops());
    const ResolvedCandidate c = resolve_candidate(r, ops);
    const ExportOutcome o = write_export(r, c);
    ASSERT_TRUE(o.check.has_value());
    EXPECT_TRUE(o.check->comparison.same) << o.check->comparison.difference;
    std::string calls = call("ok_small_ws", kPointers + "0, &f, &d, &f, " + kGrads + "&f, &d, 16, 1, 64, 2, 1, 0.1f, -5.0f");
    calls += call("no_initial", kPointers + "0, 0, &d, &f, " + kGrads + "&f, &d, 1LL << 40, 1, 64, 2, 1, 0.1f, -5.0f");
    calls += call("no_d_initial", kPointers + "0, &f, &d, &f, " + kGrads + "0, &d, 1LL << 40, 1, 64, 2, 1, 0.1f, -5.0f");
    calls += call("no_d_final", kPointers + "0, &f, &d, 0, " + kGrads + "&f, &d, 1LL << 40, 1, 64, 2, 1, 0.1f, -5.0f");
    calls += call("cu_batched", kPointers + "cu, &f, &d, &f, " + kGrads + "&f, &d, 1LL << 40, 1, 64, 2, 1, 0.1f, -5.0f");
    calls += call("bound", kPointers + "0, &f, &d, &f, " + kGrads + "&f, &d, 1LL << 40, 1, 64, 2, 1, 0.1f, 0.5f");
    calls += call("packed_B2", kPointers + "cu, &f, &d, &f, " + kGrads + "&f, &d, 1LL << 40, 2, 64, 2, 3, 0.1f, -5.0f");
    calls += call("no_dq", kPointers + "0, &f, &d, &f, 0, &f, &f, &f, &f, &f, &f, &f, &d, 1LL << 40, 1, 64, 2, 1, 0.1f, -5.0f");
    const std::string output = exported_plans(dir.path, fs::path(o.files.at(0)).filename().string(), calls);
    const evaluator::OpRegistry registry = kernels::builtin_ops();
    const evaluator::Op& op = *registry.find("kda_bwd");
    std::string expected;
    for (const auto& s : shapes()) expected += op_plan(op, c.spec.config, c.build.knobs, s);
    EXPECT_EQ(output.substr(0, output.find("ok_small_ws")), expected);
    for (const char* want :
         {"ok_small_ws 1 ptxevo_kda_bwd: the workspace is smaller", "no_initial 1 ptxevo_kda_bwd: these kernels were built for an initial state",
          "no_d_initial 1 ptxevo_kda_bwd: these kernels were built for an initial state",
          "no_d_final 1 ptxevo_kda_bwd: these kernels were built for a final state",
          "cu_batched 1 ptxevo_kda_bwd: cu_seqlens is for packed sequences",
          "bound 1 ptxevo_kda_bwd: lower_bound must be in [-5, 0)", "packed_B2 1 ptxevo_kda_bwd: N must equal B",
          "no_dq 1 ptxevo_kda_bwd: q, k, v, g, beta"})
      EXPECT_NE(output.find(want), std::string::npos) << want << "\n" << output;
  }
}

// The chunked seed's launcher: the op's plan (grids, the workspace offsets every chunked kernel
// takes, the dynamic shared memory, the workspace) on batched and packed shapes, for every CHUNK
// and BV, with and without SLICE_LOOP; the entries compile to the candidate's PTX.
TEST(KdaBwdExport, ChunkedLauncherPlansWhatTheOpPlans) {
  ASSERT_FALSE(find_nvcc().empty()) << "the export tests need nvcc at $CUDA_HOME or /usr/local/cuda";
  for (const std::string knobs : {"CHUNK=64,BV=32", "CHUNK=32,BV=64,MMA=1,SLICE_LOOP=0",
                                  "CHUNK=32,BV=32,MMA=1,SLICE_LOOP=1", "CHUNK=32,BV=32,MMA=1,FINISH_IN_SLICES=1"}) {
    SCOPED_TRACE(knobs);
    const TempDir dir(knobs.find("FINISH") != std::string::npos       ? "finish_in_slices"
                      : knobs.find("SLICE_LOOP=1") != std::string::npos ? "slice_loop"
                      : knobs.find("BV=64") != std::string::npos        ? "chunk32"
                                                                        : "chunk64");
    ExportRequest r;
    r.spec = kSpec;
    r.seed = "kda_bwd_chunked_seed";
    r.knobs = knobs;
    r.verify = true;
    r.out_dir = dir.path.string();
    auto ops = std::make_shared<const evaluator::OpRegistry>(kernels::builtin_ops());
    const ResolvedCandidate c = resolve_candidate(r, ops);
    const ExportOutcome o = write_export(r, c);
    ASSERT_TRUE(o.check.has_value());
    EXPECT_TRUE(o.check->comparison.same) << o.check->comparison.difference;
    std::string main_cu = "#include \"" + fs::path(o.files.at(0)).filename().string() +
                          "\"\n#include <cstdio>\nint main() {\n  const long long s[][4] = {";
    for (const auto& x : shapes())
      main_cu += "{" + std::to_string(x.b) + "LL, " + std::to_string(x.t) + "LL, " + std::to_string(x.h) + "LL, " +
                 std::to_string(x.n) + "LL}, ";
    main_cu +=
        "};\n  const char* names[6] = {\"kda_bwd_chunk_prepare\", \"kda_bwd_chunk_states\", \"kda_bwd_chunk_dstates\", "
        "\"kda_bwd_chunk_slices\", \"kda_bwd_chunk_finish\", \"kda_bwd_reduce\"};\n"
        "  for (const auto& x : s) {\n    ptxevo_kda_bwd_plan_t p;\n    if (ptxevo_kda_bwd_plan(x[0], x[1], x[2], x[3], &p)) {\n"
        "      std::printf(\"error\\n--\\n\");\n      continue;\n    }\n"
        "    for (int n = 0; n <= ptxevo_kda_bwd_kernels; ++n) {\n"
        "      const int i = n < ptxevo_kda_bwd_kernels ? n : 5;\n"
        "      std::printf(\"%s %u %u %u 128 %u\", names[i], p.grid[i][0], p.grid[i][1], p.grid[i][2], i < 5 ? p.shared_bytes[i] : 0u);\n"
        "      if (i < 5) std::printf(\" %lld %lld %lld %lld %lld %lld %lld %lld\\n\", x[1], p.slots, p.dstate_offset, "
        "p.prep_offset, p.y_offset, p.mat_offset, p.share_offset, p.sums_offset);\n"
        "      else std::printf(\" %lld\\n\", p.sums_offset);\n    }\n"
        "    std::printf(\"workspace %lld\\n--\\n\", ptxevo_kda_bwd_workspace_bytes(x[0], x[1], x[2], x[3]));\n  }\n"
        "  return 0;\n}\n";
    { std::ofstream(dir.path / "plan_main.cu") << main_cu; }
    const auto build = evaluator::run_process({find_nvcc(), "-gencode", "arch=compute_90a,code=compute_90a", "-o",
                                               (dir.path / "plan_main").string(), (dir.path / "plan_main.cu").string()});
    ASSERT_EQ(build.exit_code, 0) << build.output;
    const auto run = evaluator::run_process({(dir.path / "plan_main").string()});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const evaluator::OpRegistry registry = kernels::builtin_ops();
    const evaluator::Op& op = *registry.find("kda_bwd");
    std::string expected;
    for (const auto& x : shapes()) {
      const evaluator::Shape sh = {{"B", x.b}, {"T", x.t}, {"H", x.h}, {"N", x.n}};
      for (const auto& k : op.launch_plan(sh, c.spec.config, c.build.knobs).kernels) {
        expected += k.entry + " " + std::to_string(k.grid.x) + " " + std::to_string(k.grid.y) + " " +
                    std::to_string(k.grid.z) + " " + std::to_string(k.block.x) + " " + std::to_string(k.shared_bytes);
        for (const auto& a : k.args)
          if (const auto* v = std::get_if<std::int64_t>(&a)) expected += " " + std::to_string(*v);
        expected += "\n";
      }
      const auto g = kernels::KdaBwdOp::geometry(c.build.knobs);
      expected += "workspace " +
                  std::to_string(kernels::KdaBwdOp::chunked_layout(kernels::kda_dims(sh), g.chunk, g.bv, g.slice_loop).words * 4) +
                  "\n--\n";
    }
    EXPECT_EQ(run.output, expected);
  }
}

TEST(KdaBwdExport, TorchModuleHasBwdAndTheAutogradPairing) {
  const TempDir dir("torch");
  ExportRequest r;
  r.spec = kSpec;
  r.format = "torch";
  r.verify = false;
  r.out_dir = dir.path.string();
  auto ops = std::make_shared<const evaluator::OpRegistry>(kernels::builtin_ops());
  const ExportOutcome o = write_export(r, resolve_candidate(r, ops));
  std::string module;
  for (const auto& f : o.files)
    if (fs::path(f).extension() == ".py") module = f;
  ASSERT_FALSE(module.empty());
  // The module imports (against a stand-in torch: the real one may be absent here, and the import
  // needs none of it) and has what docs/export.md promises.
  const std::string import_it =
      "import sys, types, importlib.util\n"
      "t = types.ModuleType('torch'); t.Tensor = object\n"
      "t.autograd = types.SimpleNamespace(Function=object); sys.modules['torch'] = t\n"
      "spec = importlib.util.spec_from_file_location('m', sys.argv[1]); m = importlib.util.module_from_spec(spec)\n"
      "spec.loader.exec_module(m)\n"
      "assert callable(m.bwd) and callable(m.attach_forward) and callable(m.load), dir(m)\n"
      "assert m.CONFIG['op'] == 'kda_bwd'\n";
  const auto py = evaluator::run_process({"/usr/bin/env", "python3", "-c", import_it, module});
  EXPECT_EQ(py.exit_code, 0) << py.output;
  std::ifstream in(module);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* want : {"def bwd(", "def attach_forward(", "class KdaFunction(torch.autograd.Function)",
                           "\"op\": \"kda_bwd\"", "\"initial_state\": True", "\"final_state\": True"})
    EXPECT_NE(text.find(want), std::string::npos) << want;
}

}  // namespace
}  // namespace ptxevo::exporter
