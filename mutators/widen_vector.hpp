// widen_vector: adjacent scalar/.v2 ld/st of one base at consecutive offsets -> one .v2/.v4
// access, when the IR proves the vector's alignment.
// Legality: same kind (ld or st), .global or .shared, modifiers, guard and base; offsets o, o+w, ...;
// one basic block with nothing between that transfers control, synchronises (bar.warp.sync too),
// writes memory or (for stores) reads the same space, and no register hazard for moving a load up
// to the first or a store down to the last; base + o proven a multiple of the vector's bytes by
// mutators/alignment.hpp (.ptr .align N parameters, variable .align, aligned arithmetic). Full text:
// legality() and docs/mutators.md.
#pragma once

#include "mutators/pass.hpp"

namespace ptxevo::mutators {

class WidenVectorPass final : public PtxPass {
 public:
  std::string name() const override;
  std::string description() const override;
  std::string legality() const override;
  std::map<std::string, std::string> param_defaults() const override;
  PassResult apply(ir::Module& m, const PassParams& params) const override;
};

}  // namespace ptxevo::mutators
