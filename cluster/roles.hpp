// Who does what in a campaign under MPI. Rank 0 runs the search and owns the trace database.
// Measuring on GPUs: on each host, the ranks with the lowest node-local ranks (rank 0 aside)
// measure, ranks_per_gpu per GPU (devices in their order on the host); a replay has one measuring rank (the
// lowest); the other ranks build, one candidate at a time each (start as many building ranks per
// host as it has cores to give).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/hub.hpp"

namespace ptxevo::cluster {

struct RoleOptions {
  std::string mode;         // "gpu", "replay" or "static" (nothing measured)
  int gpus_per_host = 1;    // gpu mode
  int ranks_per_gpu = 1;    // gpu mode: measuring ranks that take turns on one GPU (as --workers-per-gpu)
  std::string replay_path;  // replay mode: the file every measuring rank loads
  double timeout_s = 300;   // gpu mode: seconds per candidate before a hung GPU worker is killed
};

// rank -> its role message ({"role": "build"} or {"role": "measure", "mode", "device", ...}).
std::map<int, nlohmann::json> assign_roles(const std::vector<RankInfo>& ranks, const RoleOptions& opt);

// "rank 0 runs the search ...; ranks 1-2 measure (gpu); ranks 3-17 build" for logs.
std::string describe_roles(const std::map<int, nlohmann::json>& roles, int hosts);

}  // namespace ptxevo::cluster
