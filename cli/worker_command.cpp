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
    const bool batch = msg->header.value("type", std::string()) == "evaluate_batch";
    std::vector<EvalReport> reports;
    EvalReport failure;
    bool exiting = false;
    try {
      EvalRequest req = request_from_json(msg->header.at("request"));
      const Op* op = nullptr;
      if (!req.op_file.empty()) {
        SpecError why;
        op = registry.load_file(req.op_file, &why);
        if (!op) throw std::invalid_argument("op file: " + why.format());
      } else {
        op = registry.find(req.op);
      }
      if (!op) throw std::invalid_argument("unknown op '" + req.op + "'");
      if (batch) {
        BatchEvalRequest b;
        b.common = std::move(req);
        for (const auto& k : msg->header.at("candidates")) b.knobs.push_back(knobs_from_json(k));
        if (msg->blobs.size() != b.knobs.size() + 1)
          throw std::invalid_argument("batch: " + std::to_string(msg->blobs.size()) + " blobs for " +
                                      std::to_string(b.knobs.size()) + " candidates and a baseline");
        b.common.baseline_cubin = std::move(msg->blobs[0]);
        for (std::size_t i = 1; i < msg->blobs.size(); ++i) b.cubins.push_back(std::move(msg->blobs[i]));
        reports = evaluator.evaluate_batch(*op, b);
      } else {
        if (msg->blobs.size() >= 1) req.candidate_cubin = std::move(msg->blobs[0]);
        if (msg->blobs.size() >= 2) req.baseline_cubin = std::move(msg->blobs[1]);
        reports.push_back(evaluator.evaluate(*op, req));
      }
    } catch (const GpuError& e) {
      failure.verdict = "fault";
      const std::string what = e.what();
      failure.reasons.push_back(what.rfind("out-of-bounds", 0) == 0 ? what : "launch-failed: " + what);
      exiting = e.sticky();
    } catch (const std::exception& e) {
      failure.verdict = "error";
      failure.reasons.push_back(std::string("worker-error: ") + e.what());
    }
    nlohmann::json header;
    if (batch) {
      // A batch that failed as a whole answers with the failure alone; the runner re-runs it
      // one candidate at a time to find the culprit.
      if (reports.empty()) {
        header = {{"type", "batch-failed"}, {"report", to_json(failure)}, {"exiting", exiting}};
      } else {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& r : reports) arr.push_back(to_json(r));
        header = {{"type", "reports"}, {"reports", arr}, {"exiting", exiting}};
      }
    } else {
      header = {{"type", "report"}, {"report", to_json(reports.empty() ? failure : reports.front())}, {"exiting", exiting}};
    }
    if (!write_message(out_fd, {header, {}})) return 1;
    // A faulted context cannot run anything else: end, and let the runner start a fresh worker.
    if (exiting) return 3;
  }
  return 0;
}

}  // namespace ptxevo::cli
