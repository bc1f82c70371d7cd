#include "mutators/hoist_global_loads.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include "ir/analysis/instruction_mix.hpp"
#include "ir/analysis/memory_summary.hpp"
#include "ir/def_use.hpp"
#include "mutators/pass_util.hpp"

namespace ptxevo::mutators {
namespace {

// Instructions a load may never move above: anything that writes memory, orders memory or
// synchronises threads, or transfers control. (Block ends are excluded already by the walk
// stopping at labels; branches end the previous block.)
bool is_barrier_to_motion(const ir::Instruction& ins) {
  using C = ir::InstrCategory;
  switch (ir::categorize(ins)) {
    case C::Atomic:
    case C::AsyncCopy:
    case C::Mbarrier:
    case C::BarrierFence:
    case C::Control:
      return true;
    default:
      break;
  }
  if (has_ordering_qualifier(ins)) return true;  // e.g. ld.acquire: later loads stay after it
  if (ir::is_memory_access(ins) && ir::describe_access(ins).direction != ir::MemDirection::Load) return true;
  static const std::set<std::string> kOthers = {"call", "setmaxnreg", "wgmma", "tcgen05", "griddepcontrol",
                                                "nanosleep", "trap", "exit", "ret", "bra", "brx", "pmevent"};
  return kOthers.count(ins.opcode) != 0;
}

bool intersects(const std::vector<int>& a, const std::vector<int>& b) {
  for (int x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  return false;
}

}  // namespace

std::string HoistGlobalLoadsPass::name() const { return "hoist_global_loads"; }
std::string HoistGlobalLoadsPass::description() const {
  return "move each ld.global up to `distance` instructions earlier within its basic block, so its latency "
         "overlaps the work it is independent of";
}
std::string HoistGlobalLoadsPass::legality() const {
  return "the load is weak (no .volatile/.relaxed/.acquire/.mmio, no scope); it moves only within its basic block "
         "(never past a label, scope brace or directive other than .loc) and only past instructions that neither "
         "define a register it reads (address, guard), nor read or define a register it defines, nor write memory, "
         "atomically access it, order it (fences, barriers, mbarrier, acquire/release accesses, async copies), "
         "nor transfer control (bra, call, ret, exit, trap). Weak loads may be reordered with respect to such "
         "instructions under the PTX memory model; register pressure is the cost model's concern";
}
std::map<std::string, std::string> HoistGlobalLoadsPass::param_defaults() const {
  return {{"targets", ""}, {"distance", "8"}};
}

PassResult HoistGlobalLoadsPass::apply(ir::Module& m, const PassParams& params) const {
  CommonParams p;
  if (auto err = prepare(*this, params, &p)) return finish(0, *err);
  const std::string& ds = p.values.at("distance");
  int distance = 0;
  auto [ptr, ec] = std::from_chars(ds.data(), ds.data() + ds.size(), distance);
  if (ec != std::errc() || ptr != ds.data() + ds.size() || distance < 1 || distance > 1000)
    return finish(0, "distance must be an integer between 1 and 1000 (got '" + ds + "')");

  int changes = 0, seen = 0;
  for (auto* f : m.functions()) {
    auto& body = f->body;
    for (std::size_t i = 0; i < body.size(); ++i) {
      const auto* ld = std::get_if<ir::Instruction>(&body[i].node);
      if (!ld || !is_global_load(*ld) || !p.selected(*ld)) continue;
      ++seen;
      if (has_ordering_qualifier(*ld)) continue;
      const ir::DefUse ldu = ir::def_use(*ld);
      std::size_t dest = i;
      int crossed = 0;
      for (std::size_t j = i; j-- > 0 && crossed < distance;) {
        if (const auto* d = std::get_if<ir::Directive>(&body[j].node)) {
          if (d->name == ".loc") continue;
          break;
        }
        const auto* other = std::get_if<ir::Instruction>(&body[j].node);
        if (!other || is_barrier_to_motion(*other)) break;
        const ir::DefUse du = ir::def_use(*other);
        if (intersects(du.defs, ldu.uses) || intersects(du.defs, ldu.defs) || intersects(du.uses, ldu.defs)) break;
        dest = j;
        ++crossed;
      }
      if (dest == i) continue;
      std::rotate(body.begin() + static_cast<std::ptrdiff_t>(dest), body.begin() + static_cast<std::ptrdiff_t>(i),
                  body.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      ++changes;
    }
  }
  return finish(changes, seen == 0 ? "no ld.global instruction" + std::string(p.targets ? " among the targets" : "")
                                   : "no ld.global can move: each depends on, or is fenced by, the instruction before it");
}

}  // namespace ptxevo::mutators
