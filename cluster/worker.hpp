// A rank other than 0 in a campaign under MPI: says hello, takes its role from rank 0 (build or
// measure), then answers requests until told to stop. A build or a measurement runs on a thread
// of its own while the main loop keeps the heartbeat going, so a long build is never taken for a
// lost rank. A rank 0 silent past the deadline ends the worker (the campaign is gone).
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/session.hpp"
#include "evaluator/builder.hpp"
#include "mutators/pass.hpp"
#include "search/measurer.hpp"

namespace ptxevo::cluster {

struct WorkerSetup {
  const evaluator::Builder* builder = nullptr;
  std::shared_ptr<const mutators::PassRegistry> passes;
  // The measurer a "measure" role asks for (its JSON: mode, device, replay path...); nullptr and
  // `error` set when it cannot be made here.
  std::function<std::unique_ptr<search::Measurer>(const nlohmann::json& role, std::string* error)> make_measurer;
  double silence_limit_s = 60;
  double heartbeat_s = 1;
};

// Returns the process's exit status.
int serve(Session& session, const WorkerSetup& setup, std::ostream& log);

}  // namespace ptxevo::cluster
