// hoist_global_loads: move an independent ld.global earlier within its basic block (more loads in flight).
#pragma once

#include "mutators/pass.hpp"

namespace ptxevo::mutators {

class HoistGlobalLoadsPass final : public PtxPass {
 public:
  std::string name() const override;
  std::string description() const override;
  std::string legality() const override;
  std::map<std::string, std::string> param_defaults() const override;
  PassResult apply(ir::Module& m, const PassParams& params) const override;
};

}  // namespace ptxevo::mutators
