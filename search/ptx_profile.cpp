#include "search/ptx_profile.hpp"

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "ir/analysis/cfg.hpp"
#include "ir/analysis/dominators.hpp"
#include "ir/analysis/loops.hpp"
#include "ir/analysis/memory_summary.hpp"
#include "ir/parser.hpp"

namespace ptxevo::search {

using json = nlohmann::json;

namespace {

PtxProfile profile_function(const ir::Function& f) {
  PtxProfile p;
  p.function = f.name;
  const ir::Cfg g = ir::build_cfg(f);
  const ir::LoopInfo loops = ir::find_loops(g, ir::compute_dominators(g));
  p.max_loop_depth = loops.max_depth();
  for (std::size_t i = 0; i < f.body.size(); ++i) {
    const auto* ins = std::get_if<ir::Instruction>(&f.body[i].node);
    if (!ins) continue;
    p.instructions += 1;
    p.by_category[static_cast<std::size_t>(ir::categorize(*ins))] += 1;
    const int block = g.block_of_statement(i);
    if (block >= 0 && loops.loop_depth(block) > 0) p.in_loops += 1;
  }
  for (const auto& a : ir::summarize_memory(f, g, loops).accesses) {
    if (a.direction == ir::MemDirection::Async) {
      // cp.async from global memory is a load in flight like any other (bulk copies: width 0).
      p.async_copies += 1;
      if (a.source == ir::MemSpace::Global) p.global_load_bytes += a.width_bits / 8.0;
      continue;
    }
    if (a.space != ir::MemSpace::Global) continue;
    const bool load = a.direction == ir::MemDirection::Load;
    (load ? p.global_loads : p.global_stores) += 1;
    (load ? p.global_load_bytes : p.global_store_bytes) += a.width_bits / 8.0;
    if (!a.cache.empty()) p.cache_hinted += 1;
  }
  return p;
}

}  // namespace

std::vector<PtxProfile> profile_ptx(std::string_view ptx) {
  const ir::ParseResult r = ir::parse_ptx(ptx);
  if (!r.ok())
    throw std::invalid_argument("profile_ptx: the PTX does not parse: line " + std::to_string(r.error->loc.line) +
                                ": " + r.error->message);
  std::vector<PtxProfile> out;
  for (const ir::Function* f : r.module->functions())
    if (f->is_entry && f->has_body) out.push_back(profile_function(*f));
  return out;
}

std::string ptx_profile_json(const std::vector<PtxProfile>& profiles) {
  json a = json::array();
  for (const auto& p : profiles) {
    json cats = json::object();
    for (std::size_t c = 0; c < ir::kInstrCategoryCount; ++c)
      if (p.by_category[c] > 0) cats[ir::to_string(static_cast<ir::InstrCategory>(c))] = p.by_category[c];
    a.push_back({{"function", p.function},
                 {"instructions", p.instructions},
                 {"categories", cats},
                 {"global_loads", p.global_loads},
                 {"global_stores", p.global_stores},
                 {"global_load_bytes", p.global_load_bytes},
                 {"global_store_bytes", p.global_store_bytes},
                 {"async_copies", p.async_copies},
                 {"cache_hinted", p.cache_hinted},
                 {"in_loops", p.in_loops},
                 {"max_loop_depth", p.max_loop_depth}});
  }
  return a.dump();
}

std::vector<PtxProfile> ptx_profile_from_json(const std::string& text) {
  std::vector<PtxProfile> out;
  if (text.empty()) return out;
  const json a = json::parse(text, nullptr, false);
  if (!a.is_array()) return out;
  for (const auto& j : a) {
    if (!j.is_object()) return {};
    PtxProfile p;
    p.function = j.value("function", std::string());
    p.instructions = j.value("instructions", 0.0);
    const json cats = j.value("categories", json::object());
    for (std::size_t c = 0; c < ir::kInstrCategoryCount; ++c)
      p.by_category[c] = cats.value(ir::to_string(static_cast<ir::InstrCategory>(c)), 0.0);
    p.global_loads = j.value("global_loads", 0.0);
    p.global_stores = j.value("global_stores", 0.0);
    p.global_load_bytes = j.value("global_load_bytes", 0.0);
    p.global_store_bytes = j.value("global_store_bytes", 0.0);
    p.async_copies = j.value("async_copies", 0.0);
    p.cache_hinted = j.value("cache_hinted", 0.0);
    p.in_loops = j.value("in_loops", 0.0);
    p.max_loop_depth = j.value("max_loop_depth", 0);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace ptxevo::search
