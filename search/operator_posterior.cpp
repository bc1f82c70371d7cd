#include "search/operator_posterior.hpp"

#include <algorithm>
#include <cmath>

#include "tracedb/queries.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::search {

std::string op_family(const std::string& op) {
  const auto us = op.find('_');
  return us == std::string::npos ? op : op.substr(0, us);
}

OperatorPosterior::OperatorPosterior(std::string family, std::string arch, PosteriorOptions o)
    : family_(std::move(family)), arch_(std::move(arch)), opt_(o) {}

std::string OperatorPosterior::key(const std::string& family, const std::string& arch, const std::string& op) {
  return family + "|" + arch + "|" + op;
}

BetaCounts OperatorPosterior::effective(const std::string& op) const {
  // The most specific key with evidence; the wider ones stand in while it has little.
  for (const auto& k : {key(family_, arch_, op), key("*", arch_, op), key("*", "*", op)}) {
    auto it = counts_.find(k);
    if (it != counts_.end() && it->second.hits + it->second.misses >= 1.0) return it->second;
  }
  return {};
}

double OperatorPosterior::mean(const std::string& op) const {
  const BetaCounts c = effective(op);
  return (1 + c.hits) / (2 + c.hits + c.misses);
}

std::string OperatorPosterior::choose(const std::vector<std::string>& applicable, std::mt19937_64& rng) {
  if (applicable.empty()) return {};
  std::string pick;
  if (std::uniform_real_distribution<double>(0, 1)(rng) < opt_.floor) {
    pick = applicable[std::uniform_int_distribution<std::size_t>(0, applicable.size() - 1)(rng)];
  } else {
    double best = -1;
    for (const auto& op : applicable) {
      const BetaCounts c = effective(op);
      auto fl = in_flight_.find(op);
      const double pending = fl == in_flight_.end() ? 0 : opt_.in_flight_weight * fl->second;
      std::gamma_distribution<double> ga(1 + c.hits, 1), gb(1 + c.misses + pending, 1);
      const double x = ga(rng), y = gb(rng);
      const double draw = x / (x + y);
      if (draw > best) {
        best = draw;
        pick = op;
      }
    }
  }
  ++in_flight_[pick];
  return pick;
}

void OperatorPosterior::add(const std::string& k, double hit, double miss) {
  BetaCounts& c = counts_[k];
  c.hits = c.hits * opt_.decay + hit;
  c.misses = c.misses * opt_.decay + miss;
}

void OperatorPosterior::release(const std::string& op) {
  auto it = in_flight_.find(op);
  if (it != in_flight_.end() && it->second > 0) --it->second;
}

void OperatorPosterior::credit(const std::string& op, Outcome outcome, double speedup) {
  release(op);
  double hit = 0;
  switch (outcome) {
    case Outcome::Failed:
    case Outcome::NotFaster: hit = 0; break;
    case Outcome::Faster:
      hit = std::clamp(std::log(std::max(speedup, 1.0)) / std::log(opt_.speedup_for_full_credit), 0.1, 1.0);
      break;
    case Outcome::NewBest: hit = 1; break;
  }
  const double miss = 1 - hit;
  // A new campaign best earns a bonus hit on top of its full credit.
  const double bonus = outcome == Outcome::NewBest ? 1 : 0;
  for (const auto& k : {key(family_, arch_, op), key("*", arch_, op), key("*", "*", op)}) add(k, hit + bonus, miss);
}

void OperatorPosterior::carry(const std::map<std::string, BetaCounts>& earlier) {
  for (auto [k, c] : earlier) {
    const double total = c.hits + c.misses;
    if (total > opt_.carried_cap) {
      c.hits *= opt_.carried_cap / total;
      c.misses *= opt_.carried_cap / total;
    }
    counts_[k] = c;
  }
}

void OperatorPosterior::load(tracedb::TraceDb& db) {
  std::map<std::string, BetaCounts> earlier;
  for (const auto& r : tracedb::operator_stats(db.connection())) earlier[r.key] = BetaCounts{r.hits, r.misses};
  carry(earlier);
}

void OperatorPosterior::save(tracedb::TraceDb& db) const {
  std::vector<tracedb::OperatorStat> rows;
  for (const auto& [k, c] : counts_) rows.push_back({k, c.hits, c.misses});
  tracedb::save_operator_stats(db.connection(), rows);
}

}  // namespace ptxevo::search
