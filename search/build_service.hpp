// Where a campaign's candidate builds run: this process's builder (LocalBuilds, the default) or
// other processes (cluster/: MPI ranks on any host). A job is the request plus the genome's PTX
// edits as data, because the request's pass is a closure that cannot travel: a remote side
// rebuilds it from the edits.
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

// The builds on this process's cores: the builder's own parallel build (the requests' passes
// apply the edits).
class LocalBuilds : public BuildService {
 public:
  explicit LocalBuilds(const evaluator::Builder& builder) : builder_(builder) {}
  std::vector<evaluator::BuildResult> build_all(const std::vector<BuildJob>& jobs,
                                                const std::atomic<bool>* cancel) override {
    std::vector<evaluator::BuildRequest> requests;
    requests.reserve(jobs.size());
    for (const auto& j : jobs) requests.push_back(j.request);
    return builder_.build_all(requests, cancel);
  }

 private:
  const evaluator::Builder& builder_;
};

}  // namespace ptxevo::search
