#include "cluster/roles.hpp"

#include <algorithm>
#include <set>

namespace ptxevo::cluster {

using nlohmann::json;

std::map<int, json> assign_roles(const std::vector<RankInfo>& ranks, const RoleOptions& opt) {
  std::map<int, json> roles;
  std::map<std::string, std::vector<const RankInfo*>> by_host;
  for (const auto& r : ranks)
    if (r.alive) by_host[r.host].push_back(&r);
  for (auto& [host, rs] : by_host)
    std::sort(rs.begin(), rs.end(), [](const RankInfo* a, const RankInfo* b) {
      return a->local_rank != b->local_rank ? a->local_rank < b->local_rank : a->rank < b->rank;
    });
  std::set<int> measuring;
  if (opt.mode == "gpu") {
    for (const auto& [host, rs] : by_host)
      for (int i = 0; i < std::min<int>(opt.gpus_per_host * std::max(1, opt.ranks_per_gpu), static_cast<int>(rs.size()));
           ++i) {
        roles[rs[static_cast<std::size_t>(i)]->rank] = {{"role", "measure"},
                                                        {"mode", "gpu"},
                                                        {"device", i / std::max(1, opt.ranks_per_gpu)},
                                                        {"timeout_s", opt.timeout_s}};
        measuring.insert(rs[static_cast<std::size_t>(i)]->rank);
      }
  } else if (opt.mode == "replay") {
    int lowest = -1;
    for (const auto& r : ranks)
      if (r.alive && (lowest < 0 || r.rank < lowest)) lowest = r.rank;
    if (lowest >= 0) {
      roles[lowest] = {{"role", "measure"}, {"mode", "replay"}, {"replay", opt.replay_path}};
      measuring.insert(lowest);
    }
  }
  for (const auto& r : ranks)
    if (r.alive && !measuring.count(r.rank)) roles[r.rank] = {{"role", "build"}};
  return roles;
}

namespace {

std::string rank_list(const std::vector<int>& rs) {
  if (rs.empty()) return "none";
  std::string out;
  for (std::size_t i = 0; i < rs.size();) {
    std::size_t j = i;
    while (j + 1 < rs.size() && rs[j + 1] == rs[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(rs[i]) + (j > i ? "-" + std::to_string(rs[j]) : "");
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string describe_roles(const std::map<int, json>& roles, int hosts) {
  std::vector<int> measure, build;
  std::string mode;
  for (const auto& [r, role] : roles) {
    const std::string what = role.at("role").get<std::string>();
    if (what == "measure") {
      measure.push_back(r);
      mode = role.value("mode", std::string());
    } else {
      build.push_back(r);
    }
  }
  std::string s = std::to_string(roles.size() + 1) + " ranks on " + std::to_string(hosts) + (hosts == 1 ? " host" : " hosts") +
                  ": rank 0 runs the search and owns the trace database";
  const bool one_measures = measure.size() == 1, one_builds = build.size() == 1;
  if (!measure.empty())
    s += std::string("; rank") + (one_measures ? " " : "s ") + rank_list(measure) + (one_measures ? " measures (" : " measure (") + mode + ")";
  if (build.empty())
    s += "; no rank builds (rank 0 builds itself)";
  else
    s += std::string("; rank") + (one_builds ? " " : "s ") + rank_list(build) + (one_builds ? " builds" : " build");
  return s;
}

}  // namespace ptxevo::cluster
