// Who builds and who measures, from the ranks' hosts and node-local ranks.
#include <gtest/gtest.h>

#include "cluster/roles.hpp"

namespace ptxevo::cluster {
namespace {

std::vector<RankInfo> ranks(const std::vector<std::pair<std::string, int>>& host_local) {
  std::vector<RankInfo> out;
  int r = 1;
  for (const auto& [h, l] : host_local) {
    RankInfo i;
    i.rank = r++;
    i.host = h;
    i.local_rank = l;
    out.push_back(i);
  }
  return out;
}

TEST(Roles, OneMeasuringRankPerGpuOnEachHostTheRestBuild) {
  // Rank 0 on host a (local 0); ranks 1-3 on a, 4-7 on b.
  const auto rs = ranks({{"a", 1}, {"a", 2}, {"a", 3}, {"b", 0}, {"b", 1}, {"b", 2}, {"b", 3}});
  RoleOptions o;
  o.mode = "gpu";
  o.gpus_per_host = 2;
  const auto roles = assign_roles(rs, o);
  ASSERT_EQ(roles.size(), 7u);
  EXPECT_EQ(roles.at(1).at("role"), "measure");
  EXPECT_EQ(roles.at(1).at("device"), 0);
  EXPECT_EQ(roles.at(2).at("device"), 1);
  EXPECT_EQ(roles.at(3).at("role"), "build");
  EXPECT_EQ(roles.at(4).at("device"), 0);
  EXPECT_EQ(roles.at(5).at("device"), 1);
  EXPECT_EQ(roles.at(6).at("role"), "build");
  EXPECT_EQ(roles.at(7).at("role"), "build");
  EXPECT_EQ(describe_roles(roles, 2),
            "8 ranks on 2 hosts: rank 0 runs the search and owns the trace database; ranks 1-2,4-5 measure (gpu); "
            "ranks 3,6-7 build");
}

TEST(Roles, SeveralMeasuringRanksCanShareAGpu) {
  RoleOptions o;
  o.mode = "gpu";
  o.gpus_per_host = 2;
  o.ranks_per_gpu = 2;
  const auto roles = assign_roles(ranks({{"a", 1}, {"a", 2}, {"a", 3}, {"a", 4}, {"a", 5}}), o);
  EXPECT_EQ(roles.at(1).at("device"), 0);
  EXPECT_EQ(roles.at(2).at("device"), 0);
  EXPECT_EQ(roles.at(3).at("device"), 1);
  EXPECT_EQ(roles.at(4).at("device"), 1);
  EXPECT_EQ(roles.at(5).at("role"), "build");
}

TEST(Roles, AReplayHasOneMeasuringRankAndLostRanksGetNone) {
  auto rs = ranks({{"a", 1}, {"a", 2}, {"a", 3}});
  rs[0].alive = false;
  RoleOptions o;
  o.mode = "replay";
  o.replay_path = "/data/x.replay.json";
  const auto roles = assign_roles(rs, o);
  ASSERT_EQ(roles.size(), 2u);
  EXPECT_EQ(roles.at(2).at("role"), "measure");
  EXPECT_EQ(roles.at(2).at("replay"), "/data/x.replay.json");
  EXPECT_EQ(roles.at(3).at("role"), "build");
  EXPECT_EQ(describe_roles(roles, 1),
            "3 ranks on 1 host: rank 0 runs the search and owns the trace database; rank 2 measures (replay); rank 3 "
            "builds");
}

TEST(Roles, StaticModeEveryoneBuilds) {
  RoleOptions o;
  o.mode = "static";
  const auto roles = assign_roles(ranks({{"a", 1}, {"a", 2}}), o);
  for (const auto& [r, role] : roles) EXPECT_EQ(role.at("role"), "build");
}

}  // namespace
}  // namespace ptxevo::cluster
