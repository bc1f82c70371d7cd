// The engine side of GPU evaluation: one worker process per GPU (`ptxevo worker`), fed over
// pipes. A candidate that faults, traps or hangs takes down only its worker: the failure comes
// back as a report (verdict "fault" or "timeout") and the next evaluation starts a fresh worker.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/eval_types.hpp"
#include "evaluator/worker_protocol.hpp"

namespace ptxevo::evaluator {

struct RunnerOptions {
  std::string worker_exe;  // the ptxevo binary (its `worker` subcommand)
  int device = 0;
  double timeout_s = 600;  // per evaluation; a hung kernel is killed after this
};

class Runner {
 public:
  explicit Runner(RunnerOptions o) : opt_(std::move(o)) {}
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Starts the worker if needed. False (with the worker's reason, e.g. "no CUDA driver") when
  // no GPU can be used.
  bool available(std::string* reason);
  // Device facts reported by the worker at start-up (name, arch, driver, ...).
  const nlohmann::json& device() const { return device_; }

  EvalReport evaluate(const EvalRequest& req);
  // Several candidates against one baseline on shared inputs (see BatchEvalRequest). When a
  // candidate crashes or hangs the worker, the batch is re-run one candidate at a time.
  std::vector<EvalReport> evaluate_batch(const BatchEvalRequest& req);
  int restarts() const { return restarts_; }
  // From any thread: what is in flight is given up (the worker is killed) and every later call
  // answers "not-run" with the reason "abandoned: ..." at once. A campaign calls it at its deadline.
  void abandon() { abandoned_.store(true); }

 private:
  bool start(std::string* reason);
  void stop(bool force);
  std::optional<Message> exchange(const Message& m, double timeout_s, EvalReport* failure);

  RunnerOptions opt_;
  pid_t pid_ = -1;
  int to_worker_ = -1;
  int from_worker_ = -1;
  nlohmann::json device_;
  int restarts_ = 0;
  std::string unavailable_;
  std::atomic<bool> abandoned_{false};
};

}  // namespace ptxevo::evaluator
