// The messages between ranks: every field survives the trip, and bytes that are not a message
// are refused with an error rather than read as one.
#include <gtest/gtest.h>

#include "cluster/wire.hpp"

namespace ptxevo::cluster {
namespace {

TEST(Wire, ABuildJobKeepsItsRequestAndEdits) {
  search::BuildJob job;
  job.request.name = "rmsnorm_fwd_seed";
  job.request.source = "__global__ void k() {}\n";
  job.request.source_path = "kernels/rmsnorm/rmsnorm_fwd.cu";
  job.request.defines = {{"XT", "__nv_bfloat16"}};
  job.request.knobs = {{"VEC", std::int64_t{8}}, {"MODE", std::string("cluster")}};
  job.request.arch = "sm_100a";
  job.request.opt_level = 2;
  job.request.max_registers = 128;
  job.request.nvrtc_options = {"-lineinfo"};
  job.request.ptx_override = ".version 8.8";
  job.edits.push_back({"ld_global_nc", {}});
  search::PtxEdit unroll;
  unroll.pass = "unroll";
  unroll.params["factor"] = std::int64_t{4};
  job.edits.push_back(unroll);

  const auto back = build_job_from_json(unpack(pack(build_job_to_json(job))));
  EXPECT_EQ(back.request.name, job.request.name);
  EXPECT_EQ(back.request.source, job.request.source);
  EXPECT_EQ(back.request.source_path, job.request.source_path);
  EXPECT_EQ(back.request.defines, job.request.defines);
  EXPECT_EQ(back.request.knobs, job.request.knobs);
  EXPECT_EQ(back.request.arch, "sm_100a");
  EXPECT_EQ(back.request.opt_level, 2);
  EXPECT_EQ(back.request.max_registers, 128);
  EXPECT_EQ(back.request.nvrtc_options, job.request.nvrtc_options);
  EXPECT_EQ(back.request.ptx_override, job.request.ptx_override);
  EXPECT_EQ(back.edits, job.edits);
  EXPECT_FALSE(back.request.ptx_pass);  // rebuilt from the edits by the receiver
}

TEST(Wire, ABuildResultKeepsItsCubinBytesAndResources) {
  evaluator::BuildResult r;
  r.ok = true;
  r.ptx = ".version 8.8\n.target sm_90a\n";
  r.cubin = {0x7f, 'E', 'L', 'F', 0, 1, 2, 255};
  r.resources.push_back({"k", true, 40, 0, 8, 4, 1024});
  r.key = std::string(64, 'a');
  r.cache_hit = true;
  r.seconds = 1.5;
  r.nvrtc_log = "warning";
  r.cache_warning = "cannot write";
  const Bytes wire = pack(build_result_to_json(r));
  const auto back = build_result_from_json(unpack(wire));
  EXPECT_TRUE(back.ok);
  EXPECT_EQ(back.ptx, r.ptx);
  EXPECT_EQ(back.cubin, r.cubin);
  ASSERT_EQ(back.resources.size(), 1u);
  EXPECT_EQ(back.resources[0].name, "k");
  EXPECT_EQ(back.resources[0].registers, 40);
  EXPECT_EQ(back.resources[0].spill_stores, 8);
  EXPECT_EQ(back.resources[0].shared_bytes, 1024);
  EXPECT_EQ(back.key, r.key);
  EXPECT_TRUE(back.cache_hit);
  EXPECT_EQ(back.seconds, 1.5);
  EXPECT_EQ(back.nvrtc_log, "warning");
  EXPECT_EQ(back.cache_warning, "cannot write");
  EXPECT_FALSE(back.module);
  // Cubins travel as bytes: the message is not much larger than its payload.
  r.cubin.assign(1 << 20, 0xab);
  EXPECT_LT(pack(build_result_to_json(r)).size(), (1u << 20) + 4096u);
}

TEST(Wire, AMeasureCallAndItsReportsSurvive) {
  MeasureCall c;
  c.common.op = "rmsnorm_fwd";
  c.common.seed = 42;
  c.common.baseline_cubin = {1, 2, 3};
  search::MeasureItem it;
  it.genome_hash = "g";
  it.ptx_hash = "p";
  it.knobs = {{"VEC", std::int64_t{4}}};
  it.cubin = {9, 8, 7};
  c.items = {it, it};
  const auto back = measure_call_from_json(unpack(pack(measure_call_to_json(c))));
  EXPECT_EQ(back.common.op, "rmsnorm_fwd");
  EXPECT_EQ(back.common.seed, 42u);
  EXPECT_EQ(back.common.baseline_cubin, c.common.baseline_cubin);
  ASSERT_EQ(back.items.size(), 2u);
  EXPECT_EQ(back.items[1].cubin, it.cubin);
  EXPECT_EQ(back.items[1].knobs, it.knobs);
  EXPECT_EQ(back.items[0].genome_hash, "g");

  evaluator::EvalReport rep;
  rep.verdict = "pass";
  rep.fitness = 1.25;
  rep.reasons = {"abandoned: x"};
  rep.seconds = 3;
  const auto reports = reports_from_json(unpack(pack(reports_to_json({rep, evaluator::EvalReport{}}))));
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].verdict, "pass");
  ASSERT_TRUE(reports[0].fitness);
  EXPECT_EQ(*reports[0].fitness, 1.25);
  EXPECT_EQ(reports[0].reasons, rep.reasons);
  EXPECT_EQ(reports[1].verdict, "not-run");
}

TEST(Wire, AnEnvironmentSurvives) {
  tracedb::Environment e{"NVIDIA H200", "580.1", "13.0", "{\"nvrtc\":\"13.0\"}", "{}"};
  const auto back = environment_from_json(unpack(pack(environment_to_json(e))));
  EXPECT_EQ(back.gpu, e.gpu);
  EXPECT_EQ(back.driver, e.driver);
  EXPECT_EQ(back.toolchain_json, e.toolchain_json);
}

TEST(Wire, BytesThatAreNotAMessageAreRefused) {
  EXPECT_THROW(unpack(Bytes{0xc1}), std::runtime_error);  // 0xc1: never used in MessagePack
  EXPECT_THROW(unpack(Bytes{}), std::runtime_error);
  EXPECT_THROW(build_job_from_json(nlohmann::json::object()), std::exception);
}

}  // namespace
}  // namespace ptxevo::cluster
