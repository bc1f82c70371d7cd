#include "cli/arch_option.hpp"

#include "search/campaign.hpp"

namespace ptxevo::cli {

bool apply_arch_option(const std::string& given, evaluator::Spec& spec, std::ostream& err) {
  const std::string wanted = given.empty() ? spec.arch : given;
  const std::string arch = search::normalize_arch(wanted);
  if (arch.empty()) {
    err << "error: --arch " << wanted
        << " is not a target ptxevo knows (use sm_90a or sm_100a; sm_90 and sm_100 are accepted)\n";
    return false;
  }
  spec.arch = arch;
  return true;
}

}  // namespace ptxevo::cli
