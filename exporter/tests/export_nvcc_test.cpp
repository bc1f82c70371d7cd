// The export, verified with the real nvcc (/usr/local/cuda/bin/nvcc): the exported .cu compiles
// for the spec's arch and its PTX is the candidate's instruction for instruction, for the seed and
// for genomes with PTX edits; the host launcher's plan equals RmsNormFwdOp::launch_plan; a
// campaign's winner exports with its provenance from the trace database.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <dlfcn.h>

#include "evaluator/build_cache.hpp"
#include "evaluator/ptxas.hpp"
#include "evaluator/subprocess.hpp"
#include "exporter/export_files.hpp"
#include "exporter/tests/scratch_dirs.hpp"
#include "exporter/torch_export.hpp"
#include "kernels/builtin_ops.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::exporter {
namespace {

// The registry the CLI hands the exporter.
std::shared_ptr<const evaluator::OpRegistry> registry() {
  return std::make_shared<const evaluator::OpRegistry>(kernels::builtin_ops());
}

namespace fs = std::filesystem;
const std::string kSpec = std::string(PTXEVO_SOURCE_DIR) + "/kernels/rmsnorm/rmsnorm_fwd.spec";

fs::path temp_dir(const std::string& name) { return testing::scratch_dir("ptxevo_export_", name); }

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Exports with nvcc verification on; returns what was written.
ExportOutcome export_verified(ExportRequest r, const std::string& name) {
  r.out_dir = temp_dir(name).string();
  r.verify = true;
  const ResolvedCandidate c = resolve_candidate(r, registry());
  return write_export(r, c);
}

TEST(ExportNvcc, SeedCompilesToTheCandidatesPtx) {
  ASSERT_FALSE(find_nvcc().empty()) << "the export tests need nvcc at $CUDA_HOME or /usr/local/cuda";
  ExportRequest r;
  r.spec = kSpec;
  const ExportOutcome o = export_verified(r, "seed");
  ASSERT_TRUE(o.check.has_value());
  EXPECT_TRUE(o.check->comparison.same) << o.check->comparison.difference;
  EXPECT_TRUE(o.inline_ptx);  // the candidate's own PTX; the template is there under PTXEVO_FROM_TEMPLATE
  EXPECT_EQ(o.check->comparison.entries, 13u);  // tpr8 ... tpr512, the cluster entry, small8 ... small128
  const std::string cu = read(o.files.at(0));
  EXPECT_NE(cu.find("#define THREADS 512"), std::string::npos);
  EXPECT_NE(cu.find("#ifdef PTXEVO_FROM_TEMPLATE"), std::string::npos);
  EXPECT_NE(cu.find("ptxevo_rmsnorm_fwd_launch("), std::string::npos);
}

TEST(ExportNvcc, EditedGenomesBecomeInlinePtxWithTheSameInstructions) {
  ExportRequest r;
  r.spec = kSpec;
  r.edits = "store_streaming,l2_evict_hint";
  ExportOutcome o = export_verified(r, "edited");
  ASSERT_TRUE(o.check.has_value());
  EXPECT_TRUE(o.inline_ptx);
  EXPECT_TRUE(o.check->comparison.same) << o.check->comparison.difference;
  const std::string cu = read(o.files.at(0));
  EXPECT_NE(cu.find("st.global.cs"), std::string::npos);  // the edit is in the file
  EXPECT_NE(cu.find("asm volatile("), std::string::npos);

  // A stage in dynamic shared memory and a smaller CTA: the extern shared array and other entries.
  r.knobs = "STAGE_KB=64,THREADS=256,TPR=16,CLUSTER=4";
  r.edits = "l2_evict_hint:priority=evict_first";
  o = export_verified(r, "edited_stage");
  ASSERT_TRUE(o.check.has_value());
  EXPECT_TRUE(o.check->comparison.same) << o.check->comparison.difference;
  EXPECT_NE(read(o.files.at(0)).find("extern __shared__ __align__(16) unsigned char ptxevo_dynamic_smem[];"),
            std::string::npos);
}

TEST(ExportNvcc, UnknownPassesAndKnobsAreRefusedWithTheirNames) {
  ExportRequest r;
  r.spec = kSpec;
  r.edits = "no_such_pass";
  try {
    resolve_candidate(r, registry());
    FAIL();
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_pass"), std::string::npos) << e.what();
  }
  r.edits = "";
  r.knobs = "NOPE=3";
  try {
    resolve_candidate(r, registry());
    FAIL();
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("NOPE"), std::string::npos) << e.what();
  }
}

// The launcher's plan, compiled by nvcc into a host program (PTX only for the device side, so no
// ptxas run) and printed for many shapes, against RmsNormFwdOp::launch_plan.
void expect_launcher_plan_matches(const std::string& spec, const std::string& knobs, const std::string& name) {
  SCOPED_TRACE(spec + " " + knobs);
  ExportRequest r;
  r.spec = spec;
  r.knobs = knobs;
  r.verify = false;
  r.out_dir = temp_dir(name).string();
  const ResolvedCandidate c = resolve_candidate(r, registry());
  const ExportOutcome o = write_export(r, c);
  const fs::path dir = r.out_dir;
  const std::vector<std::pair<long long, long long>> shapes = {
      {1, 1},      {3, 7},      {5, 1000},   {7, 4097},    {64, 4096},    {33, 8192},         {1000, 256},
      {32768, 256}, {8192, 262144}, {16384, 131072}, {3, 131071}, {129, 12288}, {2, 65536}, {6, 40000},
      {1LL << 27, 8}, {(1LL << 31) + 5, 64}, {512, 4096}, {528, 4096}, {263, 8192}, {264, 8192}, {128, 8192},
      {16384, 7168}};
  std::string main_cu = "#include \"" + fs::path(o.files.at(0)).filename().string() + "\"\n#include <cstdio>\nint main() {\n";
  main_cu += "  const long long s[][2] = {";
  for (const auto& [m, n] : shapes) main_cu += "{" + std::to_string(m) + "LL, " + std::to_string(n) + "LL}, ";
  main_cu += "};\n  for (const auto& x : s) {\n    ptxevo_rmsnorm_fwd_plan_t p;\n    const char* why = 0;\n"
             "    if (ptxevo_rmsnorm_fwd_plan(x[0], x[1], &p, &why)) { std::printf(\"error %s\\n\", why); continue; }\n"
             "    std::printf(\"%s %u %u %u %u %u %u %d\\n\", ptxevo_rmsnorm_fwd_entries[p.entry], p.grid[0], p.grid[1], "
             "p.block[0], p.shared_bytes, p.cluster[0], p.grid[2], p.programmatic);\n  }\n"
             "  const char* why = 0;\n  int dummy = 0;\n"
             "  const int rc = (int)ptxevo_rmsnorm_fwd_launch(&dummy, 0, 0, 0, &dummy, 0, 0, 4, 4, 1e-6f, 0, &why);\n"
             "  std::printf(\"%d %s\\n\", rc, why);\n"
             "  return 0;\n}\n";
  { std::ofstream(dir / "plan_main.cu") << main_cu; }
  // Both device paths of the file (inline PTX, the default, and the template) make a host program.
  std::string output;
  for (const char* variant : {"-DPTXEVO_INLINE_DEFAULT", "-DPTXEVO_FROM_TEMPLATE"}) {
    const auto build = evaluator::run_process({find_nvcc(), variant, "-gencode", "arch=compute_90a,code=compute_90a",
                                               "-o", (dir / "plan_main").string(), (dir / "plan_main.cu").string()});
    ASSERT_EQ(build.exit_code, 0) << variant << "\n" << build.output;
    const auto run = evaluator::run_process({(dir / "plan_main").string()});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    if (!output.empty()) {
      EXPECT_EQ(run.output, output) << variant;
    }
    output = run.output;
  }

  const evaluator::OpRegistry ops = kernels::builtin_ops();
  const evaluator::Op& op = *ops.find("rmsnorm_fwd");
  std::string expected;
  for (const auto& [m, n] : shapes) {
    try {
      const auto plan = op.launch_plan({{"M", m}, {"N", n}}, c.spec.config, c.build.knobs);
      const auto& k = plan.kernels.at(0);
      expected += k.entry + " " + std::to_string(k.grid.x) + " " + std::to_string(k.grid.y) + " " +
                  std::to_string(k.block.x) + " " + std::to_string(k.shared_bytes) + " " + std::to_string(k.cluster.x) +
                  " " + std::to_string(k.grid.z) + " " + (k.programmatic ? "1" : "0") + "\n";
    } catch (const std::invalid_argument&) {
      expected += "error\n";
    }
  }
  // The argument check: a kernel built with a weight refuses w = NULL before touching the GPU.
  std::string got = output.substr(0, output.rfind('\n', output.size() - 2) + 1);
  for (auto at = got.find("error "); at != std::string::npos; at = got.find("error ", at + 5))
    got.erase(at + 5, got.find('\n', at) - at - 5);  // keep the word, drop the message
  EXPECT_EQ(got, expected);
  EXPECT_NE(output.find("built with a weight; pass w"), std::string::npos) << output;
}

TEST(ExportNvcc, LauncherPlanMatchesTheOpsLaunchPlan) {
  expect_launcher_plan_matches(kSpec, "STAGE_KB=112,THREADS=256,TPR=16,CLUSTER=8,ITEMS=2", "plan");
}

// The latency paths of the decode spec: rows spread over more threads and clusters, persistent
// CTAs, the programmatic launch, the wide entry, the small entries.
TEST(ExportNvcc, LauncherPlanMatchesTheOpsLaunchPlanOnTheLatencyPaths) {
  const std::string decode = std::string(PTXEVO_SOURCE_DIR) + "/kernels/rmsnorm/rmsnorm_fwd_decode.spec";
  expect_launcher_plan_matches(decode, "SPREAD_CTAS=528,CLUSTER=8,THREADS=128,ITEMS=1,EARLY_LAUNCH=1", "plan_spread");
  expect_launcher_plan_matches(decode, "PERSISTENT_CTAS=132,ITEMS=2,THREADS=256,SPREAD_CTAS=264", "plan_persistent");
  expect_launcher_plan_matches(decode, "WIDE_ROWS=128,ITEMS=2,PERSISTENT_CTAS=132,CLUSTER=1", "plan_wide");
  expect_launcher_plan_matches(decode, "SMALL_THREADS=256,SMALL_ITEMS=4,SMALL_MIN_BLOCKS=4,SMALL_MIN_ROWS=1,TPR=16",
                               "plan_small");
  expect_launcher_plan_matches(
      decode, "SMALL_THREADS=512,SMALL_ITEMS=2,SMALL_MIN_BLOCKS=4,SMALL_MIN_ROWS=1,SMALL_MIN_CTAS=264,WIDE_ROWS=128",
      "plan_small_min_ctas");
  // SMALL_STAGE: the small CTAs' dynamic shared memory (their rows; twice that with a residual).
  expect_launcher_plan_matches(decode, "SMALL_THREADS=256,SMALL_ITEMS=4,SMALL_MIN_BLOCKS=8,SMALL_MIN_ROWS=1,SMALL_STAGE=1",
                               "plan_small_stage");
  expect_launcher_plan_matches(std::string(PTXEVO_SOURCE_DIR) + "/kernels/rmsnorm/rmsnorm_fwd_decode_residual.spec",
                               "SMALL_THREADS=512,SMALL_MIN_BLOCKS=4,SMALL_MIN_ROWS=1,SMALL_STAGE=1",
                               "plan_small_stage_residual");
}

// The torch module builds the kernels with device_build_commands: relocatable device code and a
// device link, which gives the machine code ptxevo built and timed (nvJitLink's). On the KDA
// forward nvcc's default whole-program build differs (its combine entry: 48 registers against
// the candidate's 78); the loader's build must report every entry's registers and spills as the
// candidate's, and its objects must link into a shared library whose launcher resolves.
TEST(ExportNvcc, TorchLoaderBuildsTheCandidatesMachineCode) {
  const std::string nvcc = find_nvcc();
  ASSERT_FALSE(nvcc.empty()) << "the export tests need nvcc at $CUDA_HOME or /usr/local/cuda";
  ExportRequest r;
  r.spec = std::string(PTXEVO_SOURCE_DIR) + "/kernels/kda/kda_fwd.spec";
  r.seed = "kda_fwd_chunked_seed";
  r.format = "torch";
  r.out_dir = temp_dir("rdc").string();
  const ResolvedCandidate c = resolve_candidate(r, registry());
  write_export(r, c);
  const fs::path dir(r.out_dir);
  const fs::path cu = dir / "ptxevo_kda_fwd.cu", obj = dir / "k.o", dlink = dir / "k_dlink.o";
  ASSERT_TRUE(fs::exists(cu));
  std::string log;
  for (const auto& args : device_build_commands(c.spec.arch)) {
    std::vector<std::string> argv = {nvcc};
    for (const auto& a : args) argv.push_back(a == "CU" ? cu.string() : a == "OBJ" ? obj.string() : a == "DLINK" ? dlink.string() : a);
    if (args.back() == "OBJ") argv.push_back("-Xptxas=-v");
    const auto p = evaluator::run_process(argv);
    ASSERT_EQ(p.exit_code, 0) << p.output;
    log += p.output;
  }
  const auto built = evaluator::parse_ptxas_resources(log);
  std::size_t compared = 0;
  for (const auto& want : c.build.build.resources) {
    if (!want.is_entry) continue;
    for (const auto& got : built) {
      if (got.name != want.name) continue;
      ++compared;
      EXPECT_EQ(got.registers, want.registers) << want.name;
      EXPECT_EQ(got.spill_stores, want.spill_stores) << want.name;
      EXPECT_EQ(got.stack_frame, want.stack_frame) << want.name;
    }
  }
  EXPECT_EQ(compared, 3u) << log;  // prepare, recurrence, the sequence split's combine
  // The objects link into a shared library (torch links them with the binding) and load.
  const fs::path so = dir / "libk.so";
  const auto link = evaluator::run_process({nvcc, "-shared", "-o", so.string(), obj.string(), dlink.string()});
  ASSERT_EQ(link.exit_code, 0) << link.output;
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_NE(dlsym(h, "ptxevo_kda_fwd_launch"), nullptr);
  dlclose(h);
  // The module runs the same commands.
  const std::string module = read(dir / "ptxevo_kda_fwd.py");
  EXPECT_NE(module.find("\"-rdc=true\""), std::string::npos);
  EXPECT_NE(module.find("\"-dlink\""), std::string::npos);
  EXPECT_NE(module.find("extra_ldflags=objects"), std::string::npos);
}

// A campaign in a trace database: the seed and an edited child that passed the gate. The winner
// exports with its lineage, gate evidence, times and environment in the header.
TEST(ExportNvcc, CampaignWinnerCarriesItsProvenance) {
  const fs::path dir = temp_dir("db");
  const fs::path db_path = dir / "t.ptxevo.db";
  {
    auto db = tracedb::TraceDb::open(db_path);
    std::ifstream in(kSpec);
    std::ostringstream ss;
    ss << in.rdbuf();
    const auto camp = db.open_campaign({kSpec, evaluator::sha256_hex(ss.str()), "rmsnorm_fwd", "sm_90a", "{}"});
    search::Genome seed;
    seed.seed = "rmsnorm_fwd_seed";
    search::Genome child = seed;
    child.edits.push_back({"store_streaming", {}});
    const auto a = db.record_candidate(camp.id, {seed.hash(), seed.canonical(), std::nullopt, "seed", 0, 0});
    const auto b = db.record_candidate(camp.id, {child.hash(), child.canonical(), a.id, "store_streaming", 1, 0});
    const auto env = db.record_environment({"NVIDIA H200", "580.65", "13.0", "{\"nvrtc\":\"13.0\"}", "{}"});
    for (auto [id, fitness] : {std::pair{a.id, 1.0}, std::pair{b.id, 1.07}}) {
      evaluator::EvalReport rep;
      rep.verdict = "pass";
      rep.fitness = fitness;
      evaluator::ShapeReport s;
      s.shape = {{"M", 32768}, {"N", 4096}};
      s.cls = evaluator::ShapeClass::Benchmark;
      s.rel_l2 = {{"out", 1.7e-3}};
      s.max_abs = {{"out", 3.9e-3}};
      s.candidate_ms = evaluator::SampleStats{30, 0.1 / fitness, 0.099 / fitness, 0.101 / fitness, 0.1, 0.09, 0.11};
      s.baseline_ms = evaluator::SampleStats{30, 0.1, 0.099, 0.101, 0.1, 0.09, 0.11};
      s.speedup = evaluator::PairedRatio{30, fitness, fitness - 0.01, fitness + 0.01};
      rep.shapes.push_back(s);
      db.record_evaluation(id, env, rep);
    }
  }
  ExportRequest r;
  r.db = db_path.string();
  r.format = "torch";
  r.verify = false;  // the same genome as EditedGenomesBecomeInlinePtx...; here the provenance counts
  r.out_dir = (dir / "out").string();
  const ResolvedCandidate c = resolve_candidate(r, registry());
  ASSERT_EQ(c.genome.edits.size(), 1u);
  const ExportOutcome o = write_export(r, c);
  ASSERT_EQ(o.files.size(), 4u);  // .cu, binding, Python module, export.json
  const std::string cu = read(o.files.at(0));
  EXPECT_NE(cu.find("Lineage (candidate first, operator that made it): #2 store_streaming <- #1 seed"), std::string::npos)
      << cu.substr(0, 3000);
  EXPECT_NE(cu.find("NVIDIA H200, driver 580.65"), std::string::npos);
  EXPECT_NE(cu.find("fitness (geomean speedup over the baseline) 1.07"), std::string::npos);
  EXPECT_NE(cu.find("M=32768,N=4096"), std::string::npos);
  const std::string py = read(o.files.at(2));
  for (const char* name : {"def rmsnorm_fwd(", "def rmsnorm_bwd(", "def rmsnorm(", "torch.utils.cpp_extension"})
    EXPECT_NE(py.find(name), std::string::npos) << name;
  EXPECT_NE(read(o.files.at(1)).find("getCurrentCUDAStream"), std::string::npos);

  r.campaign = 99;
  EXPECT_THROW(resolve_candidate(r, registry()), ExportError);
  r.campaign.reset();
  r.candidate = 12345;
  EXPECT_THROW(resolve_candidate(r, registry()), ExportError);
}

}  // namespace
}  // namespace ptxevo::exporter
