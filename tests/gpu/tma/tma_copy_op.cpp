#include "tma_copy_op.hpp"

#include <stdexcept>

namespace ptxevo::tests {

using namespace evaluator;

std::string TmaCopyOp::validate(const OpConfig& cfg) const {
  return cfg.empty() ? "" : "tma_copy_2d takes no options";
}

std::vector<TensorDesc> TmaCopyOp::tensors(const Shape& s, const OpConfig&) const {
  const std::int64_t m = s.at("M"), n = s.at("N");
  if (m % kTile != 0 || n % kTile != 0) throw std::invalid_argument("M and N must be multiples of 32");
  return {{"x", DType::F32, {m, n}, Role::In, false}, {"out", DType::F32, {m, n}, Role::Out, false}};
}

LaunchPlan TmaCopyOp::launch_plan(const Shape& s, const OpConfig&, const Knobs& k) const {
  const std::int64_t m = s.at("M"), n = s.at("N");
  const auto threads = static_cast<std::uint32_t>(knob_int(k, "THREADS", 128));
  if (threads == 0 || threads > 1024) throw std::invalid_argument("THREADS must be 1..1024");
  ArgTensorMap map;
  map.tensor = "x";
  map.dims = {static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(m)};
  map.strides_bytes = {static_cast<std::uint64_t>(n) * 4};
  map.box = {kTile, kTile};
  KernelLaunch l;
  l.entry = "tma_copy_2d";
  l.grid = {static_cast<std::uint32_t>(n / kTile), static_cast<std::uint32_t>(m / kTile), 1};
  l.block = {threads, 1, 1};
  l.args = {map, ArgTensor{"out"}, static_cast<std::int64_t>(m), static_cast<std::int64_t>(n)};
  return {{l}};
}

void TmaCopyOp::reference(const Shape&, const OpConfig&, const std::vector<HostTensor>& tensors,
                          std::vector<HostTensor>& reference) const {
  const HostTensor& x = tensors.at(0);
  HostTensor out("out", DType::F64, x.shape);
  for (std::int64_t i = 0; i < x.numel(); ++i) out.set(i, x.get(i));
  reference.push_back(std::move(out));
}

double TmaCopyOp::bytes(const Shape& s, const OpConfig&) const {
  return 8.0 * static_cast<double>(s.at("M")) * static_cast<double>(s.at("N"));
}

}  // namespace ptxevo::tests
