// The campaign under mpirun: rank 0 hands the builds and measurements to the other ranks
// (cluster/), the other ranks serve them. Run alone, none of this is used.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "cli/campaign_command.hpp"
#include "cluster/hub.hpp"
#include "cluster/remote.hpp"
#include "cluster/session.hpp"
#include "evaluator/builder.hpp"

namespace ptxevo::cli {

// A rank other than 0: serves builds or measurements until rank 0 says stop.
int serve_campaign_rank(const CampaignCliOptions& o, cluster::Session& session, std::ostream& err);

// Rank 0's side once it knows its mode ("gpu", "replay", "static"): the hub, the roles given and
// taken, the measurers and the build service to hand the campaign.
struct MpiCampaign {
  std::unique_ptr<cluster::Hub> hub;
  std::unique_ptr<cluster::RemoteBuilds> builds;
  std::vector<std::unique_ptr<cluster::RemoteMeasurer>> measurers;
  std::string banner;
};
// nullptr and `error` set when no rank could take the measurements of a measured mode.
std::unique_ptr<MpiCampaign> start_mpi_campaign(const CampaignCliOptions& o, cluster::Session& session,
                                                const std::string& mode, const std::string& replay_path,
                                                const evaluator::Builder& builder, std::ostream& log,
                                                std::string* error);

}  // namespace ptxevo::cli
