#include "cluster/worker.hpp"

#include <chrono>
#include <future>
#include <mutex>
#include <vector>
#include <thread>

#include "cluster/hub.hpp"
#include "search/genome_build.hpp"

namespace ptxevo::cluster {

using nlohmann::json;

namespace {

struct Job {
  std::int64_t id = 0;
  Tag answer_tag = kBuilt;
  std::future<json> result;  // the answer's body; an exception becomes {"error": ...}
};

}  // namespace

int serve(Session& session, const WorkerSetup& setup, std::ostream& log) {
  const std::string me = "MPI rank " + std::to_string(session.rank()) + " (" + session.host() + ")";
  session.send(0, kHello, pack({{"host", session.host()}, {"local_rank", session.local_rank()}}));
  std::shared_ptr<search::Measurer> measurer;
  std::vector<Job> jobs;
  std::mutex measure_mu;  // two measure calls for this rank (after a fail-over) take turns
  double last_heard = now_seconds(), last_beat = 0;
  while (true) {
    bool busy = false;
    while (auto in = session.receive()) {
      busy = true;
      last_heard = now_seconds();
      if (in->source != 0 || in->tag == kHeartbeat) continue;
      json m;
      try {
        m = unpack(in->bytes);
      } catch (const std::exception& e) {
        log << me << ": " << e.what() << std::endl;
        continue;
      }
      const std::int64_t id = m.value("id", std::int64_t{0});
      json body = m.value("body", json::object());
      switch (in->tag) {
        case kStop:
          for (auto& j : jobs) j.result.wait();
          if (!body.value("finalize", true)) session.mark_lost();
          return 0;
        case kAbandon:
          if (measurer) measurer->abandon();
          break;
        case kRole:
          jobs.push_back(Job{id, kReady, std::async(std::launch::async, [&setup, &measurer, body]() -> json {
                      if (body.at("role") != "measure") return json::object();
                      std::string error;
                      auto made = setup.make_measurer(body, &error);
                      if (!made) throw std::runtime_error(error);
                      json ready = {{"mode", made->mode()},
                                    {"environment", environment_to_json(made->environment())},
                                    {"capacity", made->capacity()},
                                    {"device", made->device()}};
                      measurer = std::move(made);
                      return ready;
                    })});
          break;
        case kBuild:
          jobs.push_back(Job{id, kBuilt, std::async(std::launch::async, [&setup, body]() -> json {
                      auto b = build_job_from_json(body);
                      if (!b.edits.empty()) b.request.ptx_pass = search::edit_pass(b.edits, setup.passes);
                      return build_result_to_json(setup.builder->build(b.request));
                    })});
          break;
        case kMeasure:
          jobs.push_back(Job{id, kMeasured, std::async(std::launch::async, [&measurer, &measure_mu, body]() -> json {
                      std::lock_guard<std::mutex> lk(measure_mu);
                      if (!measurer) throw std::runtime_error("this rank has no measurer (no measure role)");
                      const auto call = measure_call_from_json(body);
                      return reports_to_json(measurer->measure(call.common, call.items));
                    })});
          break;
        default:
          log << me << ": unexpected message tag " << in->tag << std::endl;
      }
    }
    for (auto it = jobs.begin(); it != jobs.end();) {
      if (it->result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        ++it;
        continue;
      }
      json answer = {{"id", it->id}};
      try {
        answer["body"] = it->result.get();
      } catch (const std::exception& e) {
        answer["error"] = e.what();
      }
      session.send(0, it->answer_tag, pack(answer));
      it = jobs.erase(it);
      busy = true;
    }
    const double now = now_seconds();
    if (now - last_beat >= setup.heartbeat_s) {
      last_beat = now;
      session.send(0, kHeartbeat, pack({{"id", 0}}));
    }
    if (now - last_heard > setup.silence_limit_s) {
      log << me << ": rank 0 silent for " << static_cast<int>(now - last_heard) << " s: the campaign is gone, stopping"
          << std::endl;
      session.mark_lost();
      return 1;
    }
    session.progress();
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace ptxevo::cluster
