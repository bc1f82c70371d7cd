// The parameter count of `.entry name(...)` in a module's PTX, for tests that check a launch plan's
// arguments against the kernel it names; -1 when the entry is missing.
#pragma once

#include <string>

namespace ptxevo::kernels::testing {

inline int entry_params(const std::string& ptx, const std::string& name) {
  const auto at = ptx.find(".entry " + name + "(");
  if (at == std::string::npos) return -1;
  const auto end = ptx.find(')', at);
  const std::string sig = ptx.substr(at, end - at);
  int n = 0;
  for (std::size_t p = sig.find(".param"); p != std::string::npos; p = sig.find(".param", p + 1)) ++n;
  return n;
}

}  // namespace ptxevo::kernels::testing
