#include "search/screen.hpp"

#include <algorithm>
#include <stdexcept>

#include "evaluator/ir_checks.hpp"
#include "search/entry_abi_check.hpp"

namespace ptxevo::search {

std::vector<std::string> screen_reasons(const evaluator::Op& op, const evaluator::OpConfig& cfg,
                                        const std::vector<evaluator::ShapeCase>& shapes, const Genome& g,
                                        const evaluator::BuildResult& b, std::int64_t max_spill_bytes) {
  std::vector<std::string> why;
  std::int64_t spills = 0;
  for (const auto& f : b.resources) spills += f.spill_stores;
  if (spills > max_spill_bytes)
    why.push_back("screen-spills: " + std::to_string(spills) + " B of spill stores (bound " +
                  std::to_string(max_spill_bytes) + " B)");
  if (!b.module) return why;
  for (const auto& sc : shapes) {
    evaluator::LaunchPlan plan;
    try {
      plan = op.launch_plan(sc.shape, cfg, g.knobs);
    } catch (const std::invalid_argument& e) {
      why.push_back(std::string("launch-plan: ") + e.what());
      break;
    }
    auto violations = evaluator::check_ir(*b.module, plan);
    if (!g.source.empty())
      for (auto& v : check_entry_params(*b.module, plan)) violations.push_back(std::move(v));
    for (const auto& v : violations) {
      const std::string r = v.rule + ": " + v.message;
      if (std::find(why.begin(), why.end(), r) == why.end()) why.push_back(r);
    }
  }
  return why;
}

}  // namespace ptxevo::search
