#include "evaluator/op.hpp"

#include <stdexcept>

namespace ptxevo::evaluator {

std::string shape_to_string(const Shape& s) {
  std::string out;
  for (const auto& [k, v] : s) out += (out.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return out;
}

std::int64_t knob_int(const Knobs& k, const std::string& name, std::int64_t fallback) {
  auto it = k.find(name);
  if (it == k.end()) return fallback;
  if (const auto* v = std::get_if<std::int64_t>(&it->second)) return *v;
  throw std::invalid_argument("knob " + name + " must be an integer, got '" + std::get<std::string>(it->second) + "'");
}

const char* to_string(Role r) {
  switch (r) {
    case Role::In: return "in";
    case Role::Out: return "out";
    case Role::InOut: return "inout";
    case Role::Scratch: return "scratch";
  }
  return "?";
}

const char* to_string(Distribution d) {
  switch (d) {
    case Distribution::Normal: return "normal";
    case Distribution::LargeUniform: return "large_uniform";
    case Distribution::SparseSpikes: return "sparse_spikes";
    case Distribution::HeavyTail: return "heavy_tail";
  }
  return "?";
}

const std::vector<Distribution>& all_distributions() {
  static const std::vector<Distribution> k = {Distribution::Normal, Distribution::LargeUniform,
                                              Distribution::SparseSpikes, Distribution::HeavyTail};
  return k;
}

std::string Op::device_reference_source(const OpConfig&) const { return {}; }

DeviceReferencePlan Op::device_reference_plan(const Shape&, const OpConfig&) const { return {}; }

void Op::fill_fixed(const TensorDesc& d, std::mt19937_64&, HostTensor&) const {
  throw std::logic_error("op " + name() + " marks '" + d.name + "' as fixed_distribution but does not fill it");
}

void OpRegistry::add(std::unique_ptr<Op> op) {
  const std::string n = op->name();
  if (ops_.count(n)) throw std::logic_error("op '" + n + "' registered twice");
  ops_[n] = std::move(op);
}

const Op* OpRegistry::find(const std::string& n) const {
  auto it = ops_.find(n);
  return it == ops_.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : ops_) out.push_back(k);
  return out;
}

}  // namespace ptxevo::evaluator
