// Where a campaign's builds run when not on this process's cores: other processes (cluster/: MPI
// ranks on any host). A job is the request plus the genome's PTX edits as data, because the
// request's pass is a closure that cannot travel: the remote side rebuilds it from the edits.
#pragma once

#include <atomic>
#include <vector>

#include "evaluator/builder.hpp"
#include "search/genome.hpp"

namespace ptxevo::search {

struct BuildJob {
  evaluator::BuildRequest request;  // request.ptx_pass is set for a local build; remote sides ignore it
  std::vector<PtxEdit> edits;
};

class BuildService {
 public:
  virtual ~BuildService() = default;
  // Results in job order, each with its module parsed (as evaluator::Builder::build_all gives
  // them). `cancel` set from any thread: jobs not started yet fail at stage "cancelled".
  virtual std::vector<evaluator::BuildResult> build_all(const std::vector<BuildJob>& jobs,
                                                        const std::atomic<bool>* cancel) = 0;
};

}  // namespace ptxevo::search
