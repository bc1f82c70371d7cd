#include "cluster/remote.hpp"

#include <tbb/parallel_for.h>

#include <chrono>
#include <future>

#include "cluster/wire.hpp"
#include "ir/parser.hpp"
#include "search/genome_build.hpp"

namespace ptxevo::cluster {

using nlohmann::json;

namespace {

evaluator::BuildResult failed(const std::string& stage, const std::string& error) {
  evaluator::BuildResult r;
  r.stage = stage;
  r.error = error;
  return r;
}

}  // namespace

std::vector<evaluator::BuildResult> RemoteBuilds::build_all(const std::vector<search::BuildJob>& jobs,
                                                            const std::atomic<bool>* cancel) {
  std::vector<std::future<json>> answers;
  answers.reserve(jobs.size());
  for (const auto& j : jobs) answers.push_back(hub_.build(build_job_to_json(j)));
  std::vector<evaluator::BuildResult> out(jobs.size());
  std::vector<std::size_t> local;  // jobs no building rank could take
  bool cancelled = false;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    while (answers[i].wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
      if (cancel && cancel->load() && !cancelled) {
        cancelled = true;
        hub_.cancel_queued_builds();
      }
    }
    try {
      out[i] = build_result_from_json(answers[i].get());
      ++remote_;
    } catch (const BuildsCancelled& e) {
      out[i] = failed("cancelled", e.what());
    } catch (const RankLost& e) {
      if (hub_.live("build").empty()) {
        local.push_back(i);
      } else {
        out[i] = failed("rank-lost", std::string("its building rank was lost twice: ") + e.what());
      }
    } catch (const std::exception& e) {
      out[i] = failed("rank-error", e.what());
    }
  }
  if (!local.empty()) {
    log_ << "MPI: no building rank is left; rank 0 builds " << local.size() << " candidates itself" << std::endl;
    std::vector<evaluator::BuildRequest> reqs;
    for (std::size_t i : local) reqs.push_back(jobs[i].request);  // the campaign set their passes
    auto built = local_.build_all(reqs, cancel);
    for (std::size_t k = 0; k < local.size(); ++k) out[local[k]] = std::move(built[k]);
    local_count_ += static_cast<std::int64_t>(local.size());
  }
  // The campaign screens and profiles the module: parse the PTX that came over the wire.
  tbb::parallel_for(std::size_t{0}, out.size(), [&](std::size_t i) {
    auto& r = out[i];
    if (!r.ok || r.module || r.ptx.empty()) return;
    auto parsed = ir::parse_ptx(r.ptx);
    if (!parsed.ok()) {
      r.ok = false;
      r.stage = "parse";
      r.error = "the PTX a building rank returned does not parse: " + parsed.error->format("remote.ptx");
      return;
    }
    r.module = std::make_shared<const ir::Module>(std::move(*parsed.module));
  });
  return out;
}

RemoteMeasurer::RemoteMeasurer(Hub& hub, int rank, int gpu_id, const json& ready, std::ostream& log)
    : hub_(hub), rank_(rank), gpu_id_(gpu_id), log_(log), target_(rank) {
  mode_ = ready.at("mode").get<std::string>();
  environment_ = environment_from_json(ready.at("environment"));
  capacity_ = ready.at("capacity").get<std::int64_t>();
}

std::vector<evaluator::EvalReport> RemoteMeasurer::measure(const evaluator::EvalRequest& common,
                                                           const std::vector<search::MeasureItem>& items) {
  int target;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!hub_.alive(target_)) {
      const auto others = hub_.live("measure");
      if (others.empty()) throw std::runtime_error("every measuring rank is lost");
      log_ << "MPI: rank " << target_ << " is lost; its batches go to rank " << others.front() << std::endl;
      target_ = others.front();
    }
    target = target_;
    if (abandoned_) hub_.post(target, kAbandon, json::object());
  }
  auto answer = hub_.call(target, kMeasure, measure_call_to_json({common, items}));
  try {
    auto reports = reports_from_json(answer.get());
    if (reports.size() != items.size())
      throw std::runtime_error("rank " + std::to_string(target) + " answered " + std::to_string(reports.size()) +
                               " reports for " + std::to_string(items.size()) + " candidates");
    return reports;
  } catch (const RankLost& e) {
    // What was in flight stays built: a resumed campaign measures it.
    std::vector<evaluator::EvalReport> out(items.size());
    for (auto& r : out) r.reasons = {std::string("abandoned: the measuring ") + e.what()};
    return out;
  }
}

void RemoteMeasurer::abandon() {
  std::lock_guard<std::mutex> lk(mu_);
  abandoned_ = true;
  hub_.post(target_, kAbandon, json::object());
}

}  // namespace ptxevo::cluster
