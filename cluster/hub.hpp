// Rank 0's side of a campaign under MPI: one thread that owns every MPI call of the process,
// sends requests to the other ranks and hands their answers back as futures. Builds go to any
// idle building rank; measurements to a chosen rank. Every rank sends a heartbeat each second;
// one silent past the deadline is lost: its build in flight goes to another rank once (then
// fails), its other calls fail with RankLost, and the campaign goes on with the ranks left.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/session.hpp"

namespace ptxevo::cluster {

struct RankLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RankInfo {
  int rank = 0;
  std::string host;
  int local_rank = 0;
  std::string role;  // "build", "measure" or "" before roles are given
  bool alive = true;
};

class Hub {
 public:
  struct Options {
    double silence_limit_s = 60;  // a rank not heard from for this long is lost
    double heartbeat_s = 1;
  };
  // Waits for every other rank's hello (up to the silence limit; missing ones count as lost),
  // then starts the thread. Throws std::runtime_error for a session of one rank.
  Hub(Session& session, Options opt, std::ostream& log);
  ~Hub();
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  std::vector<RankInfo> ranks() const;  // every rank but 0
  void set_role(int rank, const std::string& role);
  std::vector<int> live(const std::string& role) const;
  bool alive(int rank) const;

  // A request to one rank; the future holds the answer's body, or RankLost, or a
  // std::runtime_error with the error the rank answered.
  std::future<nlohmann::json> call(int rank, Tag tag, nlohmann::json body);
  // A build for the first idle building rank. Retried once elsewhere if its rank is lost; fails
  // with RankLost when no building rank is left.
  std::future<nlohmann::json> build(nlohmann::json body);
  // Builds not yet sent to a rank fail at once with BuildsCancelled.
  void cancel_queued_builds();
  void post(int rank, Tag tag, nlohmann::json body);  // no answer expected

  // Tells every live rank the campaign is over (and whether to finalize MPI) and stops the thread.
  void stop();

 private:
  struct Pending {
    std::int64_t id = 0;
    int rank = 0;  // -1 while a build waits for a rank
    Tag tag = kBuild;
    nlohmann::json body;
    int attempts = 0;
    std::promise<nlohmann::json> answer;
  };
  void loop();
  void lose(int rank, const std::string& why);   // under mu_
  void dispatch_builds();                         // under mu_
  bool send_request(Pending& p);                  // under mu_; false (and the call failed) when it cannot go

  Session& session_;
  Options opt_;
  std::ostream& log_;
  mutable std::mutex mu_;
  std::map<int, RankInfo> ranks_;
  std::map<int, double> last_heard_;
  std::deque<std::shared_ptr<Pending>> queued_builds_;
  std::deque<std::shared_ptr<Pending>> to_send_;  // calls and posts made by other threads
  std::map<std::int64_t, std::shared_ptr<Pending>> in_flight_;
  std::int64_t next_id_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

struct BuildsCancelled : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Seconds on a steady clock.
double now_seconds();

}  // namespace ptxevo::cluster
