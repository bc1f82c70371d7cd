#include "ir/analysis/state_space.hpp"

namespace ptxevo::ir {

const char* to_string(MemSpace s) {
  switch (s) {
    case MemSpace::Generic: return "generic";
    case MemSpace::Global: return "global";
    case MemSpace::Shared: return "shared";
    case MemSpace::SharedCluster: return "shared::cluster";
    case MemSpace::Local: return "local";
    case MemSpace::Param: return "param";
    case MemSpace::Const: return "const";
  }
  return "?";
}

bool parse_state_space(std::string_view m, MemSpace* out) {
  MemSpace s = MemSpace::Generic;
  if (m == ".global") s = MemSpace::Global;
  else if (m == ".shared" || m == ".shared::cta") s = MemSpace::Shared;
  else if (m == ".shared::cluster") s = MemSpace::SharedCluster;
  else if (m == ".local") s = MemSpace::Local;
  else if (m == ".param" || m == ".param::entry" || m == ".param::func") s = MemSpace::Param;
  else if (m == ".const") s = MemSpace::Const;
  else return false;
  if (out) *out = s;
  return true;
}

std::vector<MemSpace> state_spaces(const Instruction& ins) {
  std::vector<MemSpace> out;
  for (const auto& m : ins.modifiers) {
    MemSpace s = MemSpace::Generic;
    if (parse_state_space(m, &s)) out.push_back(s);
  }
  return out;
}

}  // namespace ptxevo::ir
