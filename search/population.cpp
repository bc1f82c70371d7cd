#include "search/population.hpp"

#include <algorithm>
#include <cmath>

namespace ptxevo::search {

bool significantly_better(const Member& a, const Member& b, double min_gain) {
  return a.fitness_low > b.fitness && a.fitness > b.fitness * (1.0 + min_gain);
}

Population::Population(PopulationOptions o) : opt_(o) {
  islands_.resize(static_cast<std::size_t>(std::max(1, opt_.islands)));
}

bool Population::empty() const { return size() == 0; }

std::size_t Population::size() const {
  std::size_t n = 0;
  for (const auto& i : islands_) n += i.size();
  return n;
}

bool Population::contains(std::int64_t candidate_id) const {
  for (const auto& isl : islands_)
    for (const auto& m : isl)
      if (m.candidate_id == candidate_id) return true;
  return false;
}

std::string Population::offer(int island, const Member& child, std::optional<std::int64_t> parent_id) {
  auto& isl = islands_.at(static_cast<std::size_t>(island) % islands_.size());
  for (const auto& m : isl)
    if (m.candidate_id == child.candidate_id) return "rejected: already a member";
  if (parent_id) {
    auto parent = std::find_if(isl.begin(), isl.end(), [&](const Member& m) { return m.candidate_id == *parent_id; });
    if (parent != isl.end() && significantly_better(child, *parent, opt_.min_gain)) {
      *parent = child;
      return "displaced-parent";
    }
  }
  if (static_cast<int>(isl.size()) < opt_.island_size) {
    isl.push_back(child);
    return "joined";
  }
  // Full: the child may take the worst member's place, never the elite's, and never its own
  // parent's (that needs the significance test above).
  auto worst = std::min_element(isl.begin(), isl.end(), [](const Member& a, const Member& b) { return a.fitness < b.fitness; });
  auto elite = std::max_element(isl.begin(), isl.end(), [](const Member& a, const Member& b) { return a.fitness < b.fitness; });
  if (worst == elite) return "rejected: island holds only its elite";
  if (parent_id && worst->candidate_id == *parent_id) return "rejected: not significantly better than its parent";
  if (significantly_better(child, *worst, opt_.min_gain)) {
    *worst = child;
    return "replaced-worst";
  }
  return "rejected: not significantly better than the island's worst";
}

const Member* Population::select(int island, std::mt19937_64& rng) const {
  const auto& isl = islands_.at(static_cast<std::size_t>(island) % islands_.size());
  if (isl.empty()) return nullptr;
  std::uniform_int_distribution<std::size_t> pick(0, isl.size() - 1);
  const Member* best = nullptr;
  for (int t = 0; t < std::max(1, opt_.tournament); ++t) {
    const Member& m = isl[pick(rng)];
    if (!best || m.fitness > best->fitness) best = &m;
  }
  return best;
}

const Member* Population::best() const {
  const Member* best = nullptr;
  for (const auto& isl : islands_)
    for (const auto& m : isl)
      if (!best || m.fitness > best->fitness) best = &m;
  return best;
}

int Population::migrate() {
  if (islands_.size() < 2) return 0;
  std::vector<std::optional<Member>> migrants;
  for (const auto& isl : islands_) {
    auto it = std::max_element(isl.begin(), isl.end(), [](const Member& a, const Member& b) { return a.fitness < b.fitness; });
    migrants.push_back(it == isl.end() ? std::nullopt : std::optional<Member>(*it));
  }
  int accepted = 0;
  for (std::size_t i = 0; i < islands_.size(); ++i) {
    if (!migrants[i]) continue;
    const int dest = static_cast<int>((i + 1) % islands_.size());
    const std::string r = offer(dest, *migrants[i], std::nullopt);
    if (r.rfind("rejected", 0) != 0) ++accepted;
  }
  return accepted;
}

void Population::remeasured(std::int64_t candidate_id, double fitness, double low, double high) {
  for (auto& isl : islands_)
    for (auto& m : isl)
      if (m.candidate_id == candidate_id) {
        const double n = m.measurements;
        m.fitness = std::exp((std::log(m.fitness) * n + std::log(fitness)) / (n + 1));
        m.fitness_low = low;
        m.fitness_high = high;
        m.measurements += 1;
      }
}

}  // namespace ptxevo::search
