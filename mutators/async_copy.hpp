// async_copy: ld.global whose value is only stored to shared memory before a barrier -> cp.async
// (sm_80+), with cp.async.commit_group + cp.async.wait_all before the barrier.
// Legality: sm_80+ and PTX 7.0; a weak ld.global of 4/8/16 bytes whose registers are read only by
// one st.shared of the same bytes and guard in the same block; nothing between them writes global
// memory or touches the stored shared bytes; a bar/barrier follows on the straight-line path with
// nothing before it that writes global memory, touches the stored shared bytes or generic memory,
// synchronises (bar.warp.sync too) or branches. Full text: legality() and docs/mutators.md.
#pragma once

#include "mutators/pass.hpp"

namespace ptxevo::mutators {

class AsyncCopyPass final : public PtxPass {
 public:
  std::string name() const override;
  std::string description() const override;
  std::string legality() const override;
  std::map<std::string, std::string> param_defaults() const override;
  PassResult apply(ir::Module& m, const PassParams& params) const override;
};

}  // namespace ptxevo::mutators
