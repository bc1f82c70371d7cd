// The operator posterior (issue "Learned prior", first part): Thompson sampling over the
// proposal operators, keyed by (op family, arch, operator) with fallbacks to (arch, operator)
// and (operator), so evidence from other ops and archs helps where the exact key has little.
// Credit comes from the paired comparison of a child with its parent: a failed build or gate is
// a miss, a valid child that is not significantly faster is a miss, a significant speedup earns
// partial credit by its size and a new campaign best a bonus. Old evidence decays toward the
// prior; every applicable operator keeps a floor of probability; pulls in flight count as
// provisional misses so one lucky operator is not drawn for a whole batch; an operator that
// could not apply to a parent is not charged. The state persists in the trace database.
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "search/proposer.hpp"

namespace ptxevo::tracedb {
class TraceDb;
}  // namespace ptxevo::tracedb

namespace ptxevo::search {


struct BetaCounts {
  double hits = 0, misses = 0;  // evidence beyond the Beta(1, 1) prior
};

enum class Outcome { Failed, NotFaster, Faster, NewBest };

struct PosteriorOptions {
  double decay = 0.98;          // evidence kept per update of the same key
  double floor = 0.05;          // probability of a uniform pick among the applicable operators
  double in_flight_weight = 0.5;  // provisional misses per pull in flight
  double speedup_for_full_credit = 1.10;  // a child this much faster than its parent earns a full hit
  double carried_cap = 20;      // at most this much evidence per key carried in from earlier campaigns
};

class OperatorPosterior : public OperatorPolicy {
 public:
  OperatorPosterior(std::string family, std::string arch, PosteriorOptions o = {});

  std::string choose(const std::vector<std::string>& applicable, std::mt19937_64& rng) override;
  // Feedback for one pull of `op` (ends its in-flight count). `speedup` is child / parent fitness.
  void credit(const std::string& op, Outcome outcome, double speedup = 1.0);
  // A pull that never produced a measurable child for reasons not the operator's (not applicable).
  void release(const std::string& op);

  // The posterior mean hit rate the sampler would use for `op` (after fallbacks).
  double mean(const std::string& op) const;
  const std::map<std::string, BetaCounts>& counts() const { return counts_; }

  // Evidence from earlier campaigns (key -> counts, as counts() gives them), each key capped at
  // carried_cap pseudo-observations; replaces what the keys held.
  void carry(const std::map<std::string, BetaCounts>& earlier);
  // Persistence: rows (key, hits, misses) in the trace database's operator_stats table.
  void load(tracedb::TraceDb& db);   // carry() of what the database holds
  void save(tracedb::TraceDb& db) const;

  static std::string key(const std::string& family, const std::string& arch, const std::string& op);

 private:
  BetaCounts effective(const std::string& op) const;  // exact key, else fallbacks
  void add(const std::string& k, double hit, double miss);

  std::string family_, arch_;
  PosteriorOptions opt_;
  std::map<std::string, BetaCounts> counts_;
  std::map<std::string, int> in_flight_;
};

// "rmsnorm_fwd" -> "rmsnorm": ops of one family share what works.
std::string op_family(const std::string& op);

}  // namespace ptxevo::search
