#include "cli/worker_command.hpp"

#include <unistd.h>

#include <iostream>
#include <optional>

#include "evaluator/cuda_driver.hpp"
#include "evaluator/gpu_context.hpp"
#include "evaluator/gpu_evaluation.hpp"
#include "evaluator/worker_protocol.hpp"
#include "kernels/builtin_ops.hpp"

namespace ptxevo::cli {

using namespace evaluator;

int run_worker(int device, int in_fd, int out_fd) {
  auto say_unready = [&](const std::string& why) {
    write_message(out_fd, {{{"ready", false}, {"reason", why}}, {}});
    return 0;
  };
  DriverLoad load = load_cuda_driver();
  if (!load.driver) return say_unready(load.reason);
  std::optional<GpuContext> ctx;
  try {
    ctx.emplace(load.driver, device);
  } catch (const GpuError& e) {
    return say_unready(std::string("no usable GPU: ") + e.what());
  }
  const DeviceInfo& info = ctx->info();
  write_message(out_fd, {{{"ready", true},
                          {"device",
                           {{"name", info.name},
                            {"arch", info.arch()},
                            {"sm_count", info.sm_count},
                            {"l2_bytes", info.l2_bytes},
                            {"driver_version", info.driver_version},
                            {"total_mem", info.total_mem}}}},
                         {}});
  const OpRegistry registry = kernels::builtin_ops();
  GpuEvaluator evaluator(*ctx);
  std::string err;
  while (auto msg = read_message(in_fd, &err)) {
    EvalReport report;
    bool exiting = false;
    try {
      EvalRequest req = request_from_json(msg->header.at("request"));
      if (msg->blobs.size() >= 1) req.candidate_cubin = std::move(msg->blobs[0]);
      if (msg->blobs.size() >= 2) req.baseline_cubin = std::move(msg->blobs[1]);
      const Op* op = registry.find(req.op);
      if (!op) throw std::invalid_argument("unknown op '" + req.op + "'");
      report = evaluator.evaluate(*op, req);
    } catch (const GpuError& e) {
      report.verdict = "fault";
      report.reasons.push_back(std::string("launch-failed: ") + e.what());
      exiting = e.sticky();
    } catch (const std::exception& e) {
      report.verdict = "error";
      report.reasons.push_back(std::string("worker-error: ") + e.what());
    }
    if (!write_message(out_fd, {{{"type", "report"}, {"report", to_json(report)}, {"exiting", exiting}}, {}})) return 1;
    // A faulted context cannot run anything else: end, and let the runner start a fresh worker.
    if (exiting) return 3;
  }
  return 0;
}

}  // namespace ptxevo::cli
