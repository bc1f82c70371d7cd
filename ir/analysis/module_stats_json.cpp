// ModuleStats as JSON: stable keys, every category present (zeros included) so scripts can
// index without checking, numbers as numbers.
#include <charconv>

#include "ir/analysis/module_stats.hpp"

namespace ptxevo::ir {
namespace {

constexpr RegClass kClasses[] = {RegClass::Pred, RegClass::B16, RegClass::B32, RegClass::B64, RegClass::B128};

nlohmann::json per_class(const std::array<int, kRegClassCount>& v) {
  nlohmann::json j = nlohmann::json::object();
  for (RegClass c : kClasses) j[to_string(c)] = v[class_index(c)];
  return j;
}

// Perf directive arguments are numbers in practice; anything else stays a string.
nlohmann::json perf_arg(const std::string& a) {
  long long v = 0;
  auto [ptr, ec] = std::from_chars(a.data(), a.data() + a.size(), v);
  if (!a.empty() && ec == std::errc() && ptr == a.data() + a.size()) return v;
  return a;
}

nlohmann::json mix_json(const InstructionMix& mix) {
  nlohmann::json cats = nlohmann::json::object();
  for (std::size_t c = 0; c < kInstrCategoryCount; ++c) cats[to_string(static_cast<InstrCategory>(c))] = mix.by_category[c];
  nlohmann::json widths = nlohmann::json::object();
  for (const auto& [bits, n] : mix.access_width) widths[std::to_string(bits)] = n;
  return {{"total", mix.total}, {"categories", cats}, {"access_width_bits", widths}};
}

nlohmann::json memory_json(const MemorySummary& m) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& [k, n] : m.groups) {
    groups.push_back({{"space", to_string(k.space)},
                      {"source", k.source ? nlohmann::json(to_string(*k.source)) : nlohmann::json(nullptr)},
                      {"direction", to_string(k.direction)},
                      {"width_bits", k.width_bits},
                      {"cache", k.cache},
                      {"loop_depth", k.loop_depth},
                      {"count", n}});
  }
  return {{"accesses", m.accesses.size()}, {"groups", groups}};
}

}  // namespace

nlohmann::json to_json(const FunctionStats& s) {
  nlohmann::json perf = nlohmann::json::object();
  for (const auto& p : s.perf) {
    nlohmann::json args = nlohmann::json::array();
    for (const auto& a : p.args) args.push_back(perf_arg(a));
    perf[p.name.empty() || p.name[0] != '.' ? p.name : p.name.substr(1)] = args;
  }
  return {
      {"name", s.name},
      {"is_entry", s.is_entry},
      {"has_body", s.has_body},
      {"blocks", s.blocks},
      {"edges", s.edges},
      {"unreachable_blocks", s.unreachable_blocks},
      {"loops", {{"count", s.loops}, {"max_depth", s.max_loop_depth}}},
      {"instructions", s.instructions},
      {"registers",
       {{"declared", per_class(s.declared_registers)},
        {"max_live", per_class(s.max_live)},
        {"max_live_slots", s.max_live_slots},
        {"reserved", kReservedRegisters},
        {"estimated", s.estimated_registers}}},
      {"shared_bytes", s.shared_bytes},
      {"local_bytes", s.local_bytes},
      {"callees", s.callees},
      {"perf", perf},
      {"instruction_mix", mix_json(s.mix)},
      {"memory", memory_json(s.memory)},
  };
}

nlohmann::json to_json(const ModuleStats& s) {
  nlohmann::json fns = nlohmann::json::array();
  for (const auto& f : s.functions) fns.push_back(to_json(f));
  return {{"version", s.version},     {"target", s.target},   {"address_size", s.address_size},
          {"global_vars", s.global_vars}, {"entries", s.entries}, {"functions", fns}};
}

}  // namespace ptxevo::ir
