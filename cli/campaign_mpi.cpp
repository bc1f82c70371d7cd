#include "cli/campaign_mpi.hpp"

#include <future>
#include <map>
#include <set>

#include "cli/spec_context.hpp"
#include "cluster/roles.hpp"
#include "cluster/worker.hpp"
#include "evaluator/build_cache.hpp"
#include "evaluator/runner.hpp"
#include "kernels/builtin_ops.hpp"
#include "mutators/pass.hpp"
#include "search/measurer.hpp"
#include "search/replay.hpp"

namespace ptxevo::cli {

using nlohmann::json;

int serve_campaign_rank(const CampaignCliOptions& o, cluster::Session& session, std::ostream& err) {
  const CachedBuilder cached(o.no_cache);
  const evaluator::Builder& builder = cached.builder();
  cluster::WorkerSetup setup;
  setup.builder = &builder;
  setup.passes = std::make_shared<const mutators::PassRegistry>(mutators::builtin_passes());
  setup.silence_limit_s = o.rank_timeout_s;
  setup.make_measurer = [&o, &builder](const json& role, std::string* error) -> std::unique_ptr<search::Measurer> {
    const std::string mode = role.value("mode", "");
    if (mode == "replay") {
      try {
        search::ReplayData data = search::load_replay(role.at("replay").get<std::string>());
        // As the first rank did: records under the knobs' current names.
        const evaluator::OpRegistry ops = kernels::builtin_ops();
        if (const evaluator::Op* op = ops.find(data.op)) search::canonicalize_replay(data, *op);
        return std::make_unique<search::ReplayMeasurer>(std::move(data));
      } catch (const std::exception& e) {
        *error = e.what();
        return nullptr;
      }
    }
    if (mode == "gpu") {
      evaluator::RunnerOptions ro;
      ro.worker_exe = o.self_exe;
      ro.device = role.value("device", 0);
      ro.timeout_s = role.value("timeout_s", o.timeout_s);
      auto runner = std::make_unique<evaluator::Runner>(ro);
      std::string reason;
      if (!runner->available(&reason)) {
        *error = "no GPU " + std::to_string(ro.device) + " here: " + reason;
        return nullptr;
      }
      return std::make_unique<search::GpuMeasurer>(std::move(runner), builder.toolchain(), ro.device);
    }
    *error = "unknown measuring mode '" + mode + "'";
    return nullptr;
  };
  return cluster::serve(session, setup, err);
}

std::unique_ptr<MpiCampaign> start_mpi_campaign(const CampaignCliOptions& o, cluster::Session& session,
                                                const std::string& mode, const std::string& replay_path,
                                                const evaluator::Builder& builder, std::ostream& log,
                                                std::string* error) {
  auto mc = std::make_unique<MpiCampaign>();
  cluster::Hub::Options ho;
  ho.silence_limit_s = o.rank_timeout_s;
  mc->hub = std::make_unique<cluster::Hub>(session, ho, log);
  const auto ranks = mc->hub->ranks();
  std::set<std::string> hosts{session.host()};
  for (const auto& r : ranks) hosts.insert(r.host);
  cluster::RoleOptions ro;
  ro.mode = mode;
  ro.gpus_per_host = std::max(1, o.gpus);
  ro.ranks_per_gpu = std::max(1, o.workers_per_gpu);
  ro.replay_path = replay_path;
  ro.timeout_s = o.timeout_s;
  const auto roles = cluster::assign_roles(ranks, ro);
  std::map<int, std::future<json>> answers;
  std::map<std::pair<std::string, int>, int> gpu_ids;  // (host, device) -> GPU id unique in the job
  for (const auto& [r, role] : roles) answers.emplace(r, mc->hub->call(r, cluster::kRole, role));
  for (auto& [r, answer] : answers) {
    const json& role = roles.at(r);
    try {
      const json ready = answer.get();
      if (role.at("role") == "measure") {
        int gpu_id = -1;
        if (mode == "gpu") {
          std::string host;
          for (const auto& info : ranks)
            if (info.rank == r) host = info.host;
          const auto key = std::make_pair(host, role.value("device", 0));
          gpu_id = gpu_ids.emplace(key, static_cast<int>(gpu_ids.size())).first->second;
        }
        mc->measurers.push_back(std::make_unique<cluster::RemoteMeasurer>(*mc->hub, r, gpu_id, ready, log));
      }
      mc->hub->set_role(r, role.at("role").get<std::string>());
    } catch (const std::exception& e) {
      log << "MPI: rank " << r << " cannot " << role.at("role").get<std::string>() << ": " << e.what()
          << (role.at("role") == "measure" ? "; it builds instead" : "") << std::endl;
      if (role.at("role") == "measure" && mc->hub->alive(r)) mc->hub->set_role(r, "build");
    }
  }
  if (mode != "static" && mc->measurers.empty()) {
    *error = "no rank could measure (" + mode + "); see the lines above";
    mc->hub->stop();
    return nullptr;
  }
  mc->builds = std::make_unique<cluster::RemoteBuilds>(*mc->hub, builder, log);
  mc->banner = "MPI: " + cluster::describe_roles(roles, static_cast<int>(hosts.size())) + ".";
  return mc;
}

}  // namespace ptxevo::cli
