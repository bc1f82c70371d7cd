#include "evaluator/op.hpp"

#include <filesystem>
#include <mutex>
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

Knobs canonical_knobs(const KnobAliases& aliases, Knobs k) {
  for (const auto& [old_name, name] : aliases) {
    const auto it = k.find(old_name);
    if (it == k.end()) continue;
    if (k.count(name))
      throw std::invalid_argument("knob " + old_name + " was renamed " + name + "; give one of " + old_name + " and " +
                                  name + ", not both");
    KnobValue v = std::move(it->second);
    k.erase(it);
    k.emplace(name, std::move(v));
  }
  return k;
}

Knobs canonical_knobs(const Op& op, Knobs k) { return canonical_knobs(op.knob_aliases(), std::move(k)); }

std::vector<TensorDesc> Op::build_tensors(const Shape& s, const OpConfig& cfg, const Knobs&) const { return tensors(s, cfg); }

std::vector<TensorDesc> batch_tensors(const Op& op, const Shape& s, const OpConfig& cfg, const std::vector<Knobs>& knobs) {
  const std::vector<TensorDesc> all = op.tensors(s, cfg);
  const auto numel = [](const std::vector<std::int64_t>& shape) {
    std::int64_t n = 1;
    for (auto x : shape) n *= x;
    return n;
  };
  std::vector<TensorDesc> out;
  for (const Knobs& k : knobs) {
    std::vector<TensorDesc> b;
    try {
      b = op.build_tensors(s, cfg, k);
    } catch (const std::invalid_argument&) {
      continue;
    }
    if (b.size() != all.size()) throw std::logic_error("op " + op.name() + ": build_tensors and tensors disagree on the tensors");
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (b[i].name != all[i].name || b[i].role != all[i].role || b[i].dtype != all[i].dtype)
        throw std::logic_error("op " + op.name() + ": build_tensors and tensors disagree on tensor '" + all[i].name + "'");
      if (all[i].role != Role::Scratch && b[i].shape != all[i].shape)
        throw std::logic_error("op " + op.name() + ": build_tensors changes the shape of '" + all[i].name + "', not scratch");
    }
    if (out.empty()) {
      out = std::move(b);
      continue;
    }
    for (std::size_t i = 0; i < b.size(); ++i)
      if (b[i].role == Role::Scratch && numel(b[i].shape) > numel(out[i].shape)) out[i].shape = b[i].shape;
  }
  return out.empty() ? all : out;
}

std::string canonical_knob_name(const Op& op, const std::string& name) {
  const KnobAliases aliases = op.knob_aliases();
  const auto it = aliases.find(name);
  return it == aliases.end() ? name : it->second;
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
    case Distribution::DegenerateRows: return "degenerate_rows";
  }
  return "?";
}

const char* to_string(DegenerateRow k) {
  switch (k) {
    case DegenerateRow::Zero: return "zero";
    case DegenerateRow::Constant: return "constant";
    case DegenerateRow::Tiny: return "tiny";
    case DegenerateRow::Denormal: return "denormal";
    case DegenerateRow::LargestFinite: return "largest_finite";
  }
  return "?";
}

std::optional<DegenerateRow> degenerate_row_from(const std::string& name) {
  for (const DegenerateRow k : {DegenerateRow::Zero, DegenerateRow::Constant, DegenerateRow::Tiny, DegenerateRow::Denormal,
                                DegenerateRow::LargestFinite})
    if (name == to_string(k)) return k;
  return std::nullopt;
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

std::string Op::check_seed_knobs(const Knobs&) const { return {}; }

std::optional<HostExport> Op::host_export(const OpConfig&, const Knobs&, const std::set<std::string>&) const {
  return std::nullopt;
}

std::optional<TorchExport> Op::torch_export(const OpConfig&) const { return std::nullopt; }

struct OpRegistry::FileOps {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<Op>> ops;  // by name
  std::map<std::string, std::string> names;        // canonical path -> name
};

OpRegistry::OpRegistry() : files_(std::make_unique<FileOps>()) {}
OpRegistry::OpRegistry(OpFileLoader loader) : loader_(std::move(loader)), files_(std::make_unique<FileOps>()) {}
OpRegistry::OpRegistry(OpRegistry&&) noexcept = default;
OpRegistry& OpRegistry::operator=(OpRegistry&&) noexcept = default;
OpRegistry::~OpRegistry() = default;

void OpRegistry::add(std::unique_ptr<Op> op) {
  const std::string n = op->name();
  if (ops_.count(n)) throw std::logic_error("op '" + n + "' registered twice");
  ops_[n] = std::move(op);
}

const Op* OpRegistry::find(const std::string& n) const {
  auto it = ops_.find(n);
  if (it != ops_.end()) return it->second.get();
  std::lock_guard<std::mutex> g(files_->mu);
  auto f = files_->ops.find(n);
  return f == files_->ops.end() ? nullptr : f->second.get();
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : ops_) out.push_back(k);
  std::lock_guard<std::mutex> g(files_->mu);
  for (const auto& [k, v] : files_->ops) out.push_back(k);
  return out;
}

const Op* OpRegistry::load_file(const std::string& path, SpecError* error) const {
  std::error_code ec;
  std::string key = std::filesystem::weakly_canonical(path, ec).string();
  if (ec) key = path;
  std::lock_guard<std::mutex> g(files_->mu);
  if (auto it = files_->names.find(key); it != files_->names.end()) return files_->ops.at(it->second).get();
  if (!loader_) {
    *error = SpecError{path, 0, 0, "this ptxevo cannot load ops declared in files"};
    return nullptr;
  }
  std::unique_ptr<Op> op = loader_(path, error);
  if (!op) return nullptr;
  const std::string name = op->name();
  if (ops_.count(name) || files_->ops.count(name)) {
    std::string other = "an op compiled into ptxevo";
    for (const auto& [p, n] : files_->names)
      if (n == name) other = p;
    *error = SpecError{path, 0, 0, "op name '" + name + "' is taken (" + other + "); give the op another name"};
    return nullptr;
  }
  files_->names[key] = name;
  return (files_->ops[name] = std::move(op)).get();
}

}  // namespace ptxevo::evaluator
