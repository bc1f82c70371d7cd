#include "cli/arch_option.hpp"

#include "search/campaign.hpp"

namespace ptxevo::cli {

bool normalize_arch_option(std::string& arch, std::ostream& err) {
  if (arch.empty()) return true;
  const std::string normal = search::normalize_arch(arch);
  if (normal.empty()) {
    err << "error: --arch " << arch
        << " is not a target ptxevo knows (use sm_90a or sm_100a; sm_90 and sm_100 are accepted)\n";
    return false;
  }
  arch = normal;
  return true;
}

bool apply_arch_option(const std::string& given, evaluator::Spec& spec, std::ostream& err) {
  std::string arch = given.empty() ? spec.arch : given;
  if (!normalize_arch_option(arch, err)) return false;
  spec.arch = arch;
  return true;
}

}  // namespace ptxevo::cli
