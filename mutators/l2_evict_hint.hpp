// l2_evict_hint: global loads get an L2 eviction priority through createpolicy + .L2::cache_hint.
#pragma once

#include "mutators/pass.hpp"

namespace ptxevo::mutators {

class L2EvictHintPass final : public PtxPass {
 public:
  std::string name() const override;
  std::string description() const override;
  std::string legality() const override;
  std::map<std::string, std::string> param_defaults() const override;
  PassResult apply(ir::Module& m, const PassParams& params) const override;
};

}  // namespace ptxevo::mutators
