// if_convert: a short forward `@p bra L;` over a few guardable instructions -> those instructions
// predicated on !p, the branch removed (also the if/else diamond `@p bra L; A; bra J; L: B; J:`).
// if_unconvert: the reverse, a run of instructions under one guard -> a branch around them.
// Legality (both): the code has no other way in (no label inside; a diamond's else label named by
// no other branch), holds no control transfer, barrier, fence, atomic, async copy, mbarrier,
// warp-collective, tensor-core or .aligned instruction, and does not redefine the predicate (for
// if_unconvert: only as the run's last instruction). For one thread a false guard and a skipping
// branch are the same. Full text: legality() and docs/mutators.md.
#pragma once

#include "mutators/pass.hpp"

namespace ptxevo::mutators {

class IfConvertPass final : public PtxPass {
 public:
  std::string name() const override;
  std::string description() const override;
  std::string legality() const override;
  std::map<std::string, std::string> param_defaults() const override;
  PassResult apply(ir::Module& m, const PassParams& params) const override;
};

class IfUnconvertPass final : public PtxPass {
 public:
  std::string name() const override;
  std::string description() const override;
  std::string legality() const override;
  std::map<std::string, std::string> param_defaults() const override;
  PassResult apply(ir::Module& m, const PassParams& params) const override;
};

}  // namespace ptxevo::mutators
