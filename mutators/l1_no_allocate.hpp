// l1_no_allocate: ld.global(.nc) without an L1 cache policy -> .L1::no_allocate (bypass-style L1 use).
#pragma once

#include "mutators/pass.hpp"

namespace ptxevo::mutators {

class L1NoAllocatePass final : public PtxPass {
 public:
  std::string name() const override;
  std::string description() const override;
  std::string legality() const override;
  std::map<std::string, std::string> param_defaults() const override;
  PassResult apply(ir::Module& m, const PassParams& params) const override;
};

}  // namespace ptxevo::mutators
