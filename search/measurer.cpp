#include "search/measurer.hpp"

namespace ptxevo::search {

GpuMeasurer::GpuMeasurer(std::unique_ptr<evaluator::Runner> runner, std::string toolchain, int device)
    : runner_(std::move(runner)), toolchain_(std::move(toolchain)), device_(device) {}

tracedb::Environment GpuMeasurer::environment() const {
  const auto& d = runner_->device();
  tracedb::Environment e;
  e.gpu = d.value("name", std::string("unknown GPU"));
  e.driver = std::to_string(d.value("driver_version", 0));
  e.cuda = toolchain_;
  e.toolchain_json = nlohmann::json{{"toolchain", toolchain_}}.dump();
  e.clocks_json = nlohmann::json{{"sm_count", d.value("sm_count", 0)}, {"l2_bytes", d.value("l2_bytes", 0)},
                                 {"arch", d.value("arch", std::string())}}
                      .dump();
  return e;
}

std::vector<evaluator::EvalReport> GpuMeasurer::measure(const evaluator::EvalRequest& common,
                                                        const std::vector<MeasureItem>& items) {
  evaluator::BatchEvalRequest b;
  b.common = common;
  for (const auto& it : items) {
    b.knobs.push_back(it.knobs);
    b.cubins.push_back(it.cubin);
  }
  return runner_->evaluate_batch(b);
}

tracedb::Environment ReplayMeasurer::environment() const {
  tracedb::Environment e;
  e.gpu = "replay of " + data_.gpu;
  e.driver = data_.driver;
  e.cuda = data_.toolchain;
  e.toolchain_json = nlohmann::json{{"toolchain", data_.toolchain}, {"replay_of_commit", data_.commit}}.dump();
  e.clocks_json = nlohmann::json{{"recorded_at", data_.recorded_at}}.dump();
  return e;
}

std::vector<evaluator::EvalReport> ReplayMeasurer::measure(const evaluator::EvalRequest&,
                                                           const std::vector<MeasureItem>& items) {
  std::vector<evaluator::EvalReport> out;
  for (const auto& it : items) {
    auto found = data_.records.find(it.genome_hash);
    evaluator::EvalReport r;
    if (found == data_.records.end()) {
      r.verdict = "unmeasured";
      r.reasons.push_back("unmeasured: the replay data has no record of this genome");
    } else if (!found->second.ptx_hash.empty() && found->second.ptx_hash != it.ptx_hash) {
      r.verdict = "unmeasured";
      r.reasons.push_back("unmeasured: this genome builds to different PTX than the recorded one (ptx " +
                          it.ptx_hash.substr(0, 12) + " vs recorded " + found->second.ptx_hash.substr(0, 12) +
                          "); was the toolchain or the template changed?");
    } else {
      r = found->second.report;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ptxevo::search
