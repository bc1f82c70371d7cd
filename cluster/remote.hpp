// Rank 0's view of the other ranks as the campaign's interfaces: a BuildService whose builds run
// on the building ranks, and a Measurer per measuring rank. Rank 0 keeps its own builder for
// what must not wait (the baseline, the winner's rebuild) and for when no building rank is left.
#pragma once

#include <atomic>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/hub.hpp"
#include "search/build_service.hpp"
#include "search/measurer.hpp"

namespace ptxevo::cluster {

class RemoteBuilds : public search::BuildService {
 public:
  RemoteBuilds(Hub& hub, const evaluator::Builder& local, std::ostream& log) : hub_(hub), local_(local), log_(log) {}
  std::vector<evaluator::BuildResult> build_all(const std::vector<search::BuildJob>& jobs,
                                                const std::atomic<bool>* cancel) override;
  std::int64_t built_remotely() const { return remote_.load(); }
  std::int64_t built_locally() const { return local_count_.load(); }

 private:
  Hub& hub_;
  const evaluator::Builder& local_;
  std::ostream& log_;
  std::atomic<std::int64_t> remote_{0}, local_count_{0};
};

class RemoteMeasurer : public search::Measurer {
 public:
  // `ready`: the rank's answer to its measure role (mode, environment, capacity). `gpu_id` names
  // its GPU uniquely in the job (ranks sharing one GPU share it; -1 for a replay).
  RemoteMeasurer(Hub& hub, int rank, int gpu_id, const nlohmann::json& ready, std::ostream& log);
  std::string mode() const override { return mode_; }
  tracedb::Environment environment() const override { return environment_; }
  std::int64_t capacity() const override { return capacity_; }
  // Unique in the job: GPUs of different hosts share device numbers.
  int device() const override { return gpu_id_; }
  // Answers "not-run" (reason "abandoned: ...") for a batch whose rank was lost; later batches go
  // to another live measuring rank of the same mode. Throws when none is left.
  std::vector<evaluator::EvalReport> measure(const evaluator::EvalRequest& common,
                                             const std::vector<search::MeasureItem>& items) override;
  void abandon() override;

 private:
  Hub& hub_;
  const int rank_;
  const int gpu_id_;
  std::string mode_;
  tracedb::Environment environment_;
  std::int64_t capacity_ = 0;
  std::ostream& log_;
  std::mutex mu_;
  int target_;  // the rank measuring now: rank_ until it is lost
  bool abandoned_ = false;
};

}  // namespace ptxevo::cluster
