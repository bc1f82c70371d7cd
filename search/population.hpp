// The campaign's population: islands of measured genomes with tournament selection, elitism and
// migration. Selection is noise-aware: a measured fitness is a geometric mean of paired speedups
// with a confidence interval, and a child displaces a member only when it is better by more than
// that noise (its lower bound above the member's estimate, and a minimum relative gain, since a
// kernel timed against itself shows about 1% bias at some shapes).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "search/genome.hpp"

namespace ptxevo::search {

struct Member {
  std::int64_t candidate_id = 0;
  Genome genome;
  double fitness = 0;       // geometric mean speedup over the baseline
  double fitness_low = 0;   // geometric mean of the per-shape CI lower bounds
  double fitness_high = 0;
  int measurements = 1;
};

struct PopulationOptions {
  int islands = 4;
  int island_size = 8;
  int tournament = 3;
  double min_gain = 0.01;  // relative gain a displacement needs beyond the confidence bound
};

// Significantly better: `a` beats `b` by more than the noise.
bool significantly_better(const Member& a, const Member& b, double min_gain);

class Population {
 public:
  explicit Population(PopulationOptions o);

  int islands() const { return static_cast<int>(islands_.size()); }
  const std::vector<Member>& members(int island) const { return islands_.at(static_cast<std::size_t>(island)); }
  bool empty() const;
  std::size_t size() const;

  // Offers a measured, passing child bred on `island` from `parent_id`. Returns what happened:
  // "displaced-parent", "joined", "replaced-worst", or "rejected: ..." with the reason.
  std::string offer(int island, const Member& child, std::optional<std::int64_t> parent_id);
  // Tournament over the island (nullptr when it is empty).
  const Member* select(int island, std::mt19937_64& rng) const;
  // The best member over all islands (nullptr when empty).
  const Member* best() const;
  // Copies each island's best into the next island (ring), replacing its worst non-elite member
  // when the migrant is significantly better. Returns the number of migrants accepted.
  int migrate();
  // A re-measurement of a member: its fitness becomes the geometric mean of its measurements
  // and its bounds those of the newest one.
  void remeasured(std::int64_t candidate_id, double fitness, double low, double high);
  bool contains(std::int64_t candidate_id) const;

 private:
  PopulationOptions opt_;
  std::vector<std::vector<Member>> islands_;
};

}  // namespace ptxevo::search
