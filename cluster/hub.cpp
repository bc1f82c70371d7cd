#include "cluster/hub.hpp"

#include <algorithm>
#include <chrono>
#include <set>

namespace ptxevo::cluster {

using nlohmann::json;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Hub::Hub(Session& session, Options opt, std::ostream& log) : session_(session), opt_(opt), log_(log) {
  if (session_.size() < 2) throw std::runtime_error("an MPI hub needs at least two ranks");
  const double t0 = now_seconds();
  while (static_cast<int>(ranks_.size()) < session_.size() - 1 && now_seconds() - t0 < opt_.silence_limit_s) {
    auto in = session_.receive();
    if (!in) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    if (in->tag != kHello) continue;
    const json h = unpack(in->bytes);
    RankInfo r;
    r.rank = in->source;
    r.host = h.at("host").get<std::string>();
    r.local_rank = h.at("local_rank").get<int>();
    ranks_[r.rank] = r;
    last_heard_[r.rank] = now_seconds();
  }
  for (int r = 1; r < session_.size(); ++r) {
    if (ranks_.count(r)) continue;
    RankInfo info;
    info.rank = r;
    info.alive = false;
    ranks_[r] = info;
    session_.mark_lost();
    log_ << "MPI: rank " << r << " never said hello within " << opt_.silence_limit_s << " s: going on without it"
         << std::endl;
  }
  thread_ = std::thread([this] { loop(); });
}

Hub::~Hub() { stop(); }

std::vector<RankInfo> Hub::ranks() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<RankInfo> out;
  for (const auto& [r, info] : ranks_) out.push_back(info);
  return out;
}

void Hub::set_role(int rank, const std::string& role) {
  std::lock_guard<std::mutex> lk(mu_);
  ranks_.at(rank).role = role;
}

std::vector<int> Hub::live(const std::string& role) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<int> out;
  for (const auto& [r, info] : ranks_)
    if (info.alive && info.role == role) out.push_back(r);
  return out;
}

bool Hub::alive(int rank) const {
  std::lock_guard<std::mutex> lk(mu_);
  const auto it = ranks_.find(rank);
  return it != ranks_.end() && it->second.alive;
}

std::future<json> Hub::call(int rank, Tag tag, json body) {
  auto p = std::make_shared<Pending>();
  p->rank = rank;
  p->tag = tag;
  p->body = std::move(body);
  auto f = p->answer.get_future();
  std::lock_guard<std::mutex> lk(mu_);
  p->id = next_id_++;
  const auto it = ranks_.find(rank);
  if (it == ranks_.end() || !it->second.alive) {
    p->answer.set_exception(std::make_exception_ptr(RankLost("rank " + std::to_string(rank) + " is lost")));
    return f;
  }
  to_send_.push_back(std::move(p));
  return f;
}

std::future<json> Hub::build(json body) {
  auto p = std::make_shared<Pending>();
  p->rank = -1;
  p->tag = kBuild;
  p->body = std::move(body);
  auto f = p->answer.get_future();
  std::lock_guard<std::mutex> lk(mu_);
  p->id = next_id_++;
  bool any = false;
  for (const auto& [r, info] : ranks_) any = any || (info.alive && info.role == "build");
  if (!any) {
    p->answer.set_exception(std::make_exception_ptr(RankLost("no building rank is left")));
    return f;
  }
  queued_builds_.push_back(std::move(p));
  return f;
}

void Hub::cancel_queued_builds() {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& p : queued_builds_)
    p->answer.set_exception(std::make_exception_ptr(BuildsCancelled("cancelled before a rank took it")));
  queued_builds_.clear();
}

void Hub::post(int rank, Tag tag, json body) {
  auto p = std::make_shared<Pending>();
  p->rank = rank;
  p->tag = tag;
  p->body = std::move(body);
  p->id = 0;  // no answer
  std::lock_guard<std::mutex> lk(mu_);
  to_send_.push_back(std::move(p));
}

bool Hub::send_request(Pending& p) {
  try {
    session_.send(p.rank, p.tag, pack({{"id", p.id}, {"body", p.body}}));
    return true;
  } catch (const std::exception&) {
    if (p.id) p.answer.set_exception(std::current_exception());
    return false;
  }
}

void Hub::dispatch_builds() {
  std::set<int> busy;
  for (const auto& [id, p] : in_flight_)
    if (p->tag == kBuild) busy.insert(p->rank);
  for (const auto& [r, info] : ranks_) {
    if (queued_builds_.empty()) return;
    if (!info.alive || info.role != "build" || busy.count(r)) continue;
    auto p = std::move(queued_builds_.front());
    queued_builds_.pop_front();
    p->rank = r;
    ++p->attempts;
    if (send_request(*p)) in_flight_[p->id] = std::move(p);
  }
}

void Hub::lose(int rank, const std::string& why) {
  auto& info = ranks_.at(rank);
  if (!info.alive) return;
  info.alive = false;
  session_.mark_lost();
  log_ << "MPI: rank " << rank << " (" << info.host << ", " << (info.role.empty() ? "no role" : info.role)
       << ") is lost: " << why << "; its calls in flight "
       << (info.role == "build" ? "go to another building rank once" : "fail") << ", the campaign goes on with the "
       << "ranks left" << std::endl;
  bool builders_left = false;
  for (const auto& [r, i] : ranks_) builders_left = builders_left || (i.alive && i.role == "build");
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    auto& p = it->second;
    if (p->rank != rank) {
      ++it;
      continue;
    }
    if (p->tag == kBuild && p->attempts < 2 && builders_left) {
      p->rank = -1;
      queued_builds_.push_front(p);
    } else {
      p->answer.set_exception(std::make_exception_ptr(
          RankLost("rank " + std::to_string(rank) + " (" + info.host + ") was lost: " + why)));
    }
    it = in_flight_.erase(it);
  }
  if (!builders_left) {
    for (auto& p : queued_builds_)
      p->answer.set_exception(std::make_exception_ptr(RankLost("no building rank is left")));
    queued_builds_.clear();
  }
}

void Hub::loop() {
  double last_beat = 0;
  while (true) {
    bool busy = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      while (!to_send_.empty()) {
        auto p = std::move(to_send_.front());
        to_send_.pop_front();
        if (!ranks_.at(p->rank).alive) {
          if (p->id) p->answer.set_exception(std::make_exception_ptr(RankLost("rank " + std::to_string(p->rank) + " is lost")));
          continue;
        }
        if (send_request(*p) && p->id) in_flight_[p->id] = std::move(p);
        busy = true;
      }
      dispatch_builds();
      if (stopping_) {
        const bool lost = session_.lost();
        for (const auto& [r, info] : ranks_)
          if (info.alive) session_.send(r, kStop, pack({{"id", 0}, {"body", {{"finalize", !lost}}}}));
        session_.mark_workers_stopped();
        session_.progress();
        return;
      }
    }
    while (auto in = session_.receive()) {
      busy = true;
      std::lock_guard<std::mutex> lk(mu_);
      last_heard_[in->source] = now_seconds();
      if (in->tag == kHeartbeat || !ranks_.at(in->source).alive) continue;
      json m;
      try {
        m = unpack(in->bytes);
      } catch (const std::exception& e) {
        lose(in->source, e.what());
        continue;
      }
      const auto it = in_flight_.find(m.value("id", std::int64_t{0}));
      if (it == in_flight_.end()) continue;  // an answer for a call already given up
      auto p = std::move(it->second);
      in_flight_.erase(it);
      if (m.contains("error"))
        p->answer.set_exception(std::make_exception_ptr(std::runtime_error(m.at("error").get<std::string>())));
      else
        p->answer.set_value(std::move(m.at("body")));
    }
    const double now = now_seconds();
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (now - last_beat >= opt_.heartbeat_s) {
        last_beat = now;
        for (const auto& [r, info] : ranks_)
          if (info.alive) session_.send(r, kHeartbeat, pack({{"id", 0}}));
      }
      for (const auto& [r, t] : last_heard_)
        if (ranks_.at(r).alive && now - t > opt_.silence_limit_s)
          lose(r, "silent for " + std::to_string(static_cast<int>(now - t)) + " s");
      session_.progress();
    }
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Hub::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!stopping_) {
      stopping_ = true;
      for (auto& [id, p] : in_flight_)
        p->answer.set_exception(std::make_exception_ptr(RankLost("the campaign is over")));
      in_flight_.clear();
      for (auto& p : queued_builds_) p->answer.set_exception(std::make_exception_ptr(RankLost("the campaign is over")));
      queued_builds_.clear();
    }
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace ptxevo::cluster
