#include "declared_ops/declared_op.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include "evaluator/toml_reader.hpp"

namespace ptxevo::declared_ops {

using evaluator::Bindings;
using evaluator::DType;
using evaluator::OpConfig;
using evaluator::Role;
using evaluator::Shape;

const char* cuda_type(DType t) {
  switch (t) {
    case DType::F64: return "double";
    case DType::F32: return "float";
    case DType::F16: return "__half";
    case DType::BF16: return "__nv_bfloat16";
    case DType::I64: return "long long";
    case DType::I32: return "int";
    case DType::U8: return "unsigned char";
  }
  return "?";
}

namespace {

bool is_output(Role r) { return r == Role::Out || r == Role::InOut; }

std::invalid_argument op_error(const OpDeclaration& d, const std::string& what) {
  return std::invalid_argument(d.name + ": " + what);
}

}  // namespace

DeclaredOp::Options DeclaredOp::options(const OpConfig& cfg) const {
  for (const auto& [k, v] : cfg)
    if (!d_.option(k)) {
      std::vector<std::string> names;
      for (const auto& o : d_.options) names.push_back(o.name);
      throw op_error(d_, "unknown option '" + k + "'; options: " + (names.empty() ? "(none)" : evaluator::join(names)));
    }
  Options out;
  for (const auto& o : d_.options) {
    auto it = cfg.find(o.name);
    const std::string v = it == cfg.end() ? o.default_value : it->second;
    const std::string bad = "option '" + o.name + "' (" + to_string(o.type) + ") cannot be '" + v + "'";
    switch (o.type) {
      case OptionType::Int: {
        std::size_t used = 0;
        long long i = 0;
        try {
          i = std::stoll(v, &used);
        } catch (const std::exception&) {
          throw op_error(d_, bad);
        }
        if (used != v.size()) throw op_error(d_, bad);
        if ((o.min && static_cast<double>(i) < *o.min) || (o.max && static_cast<double>(i) > *o.max))
          throw op_error(d_, "option '" + o.name + "' = " + v + " is outside its range [" +
                                 (o.min ? evaluator::number_to_string(*o.min) : "") + ", " + (o.max ? evaluator::number_to_string(*o.max) : "") + "]");
        out.values[o.name] = static_cast<std::int64_t>(i);
        break;
      }
      case OptionType::Float: {
        std::size_t used = 0;
        double f = 0;
        try {
          f = std::stod(v, &used);
        } catch (const std::exception&) {
          throw op_error(d_, bad);
        }
        if (used != v.size() || !std::isfinite(f)) throw op_error(d_, bad);
        if ((o.min && f < *o.min) || (o.max && f > *o.max)) throw op_error(d_, "option '" + o.name + "' = " + v + " is outside its range");
        out.reals[o.name] = f;
        break;
      }
      case OptionType::Bool:
        if (v != "true" && v != "false") throw op_error(d_, bad + " (true or false)");
        out.values[o.name] = v == "true";
        break;
      case OptionType::Enum:
      case OptionType::DType:
        if (std::find(o.values.begin(), o.values.end(), v) == o.values.end())
          throw op_error(d_, bad + "; values: " + evaluator::join(o.values));
        out.values[o.name] = v;
        if (o.type == OptionType::DType) evaluator::parse_dtype(v, &out.dtypes[o.name]);
        break;
    }
  }
  return out;
}

std::string DeclaredOp::validate(const OpConfig& cfg) const {
  try {
    options(cfg);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

Bindings DeclaredOp::shape_values(const Shape& s, const Options& o) const {
  Bindings b = o.values;
  for (const auto& dim : d_.dims) {
    auto it = s.find(dim);
    if (it == s.end()) throw op_error(d_, "the shape lacks dimension '" + dim + "' (dims: " + evaluator::join(d_.dims) + ")");
    b[dim] = it->second;
  }
  for (const auto& [k, v] : s)
    if (std::find(d_.dims.begin(), d_.dims.end(), k) == d_.dims.end())
      throw op_error(d_, "the op has no dimension '" + k + "' (dims: " + evaluator::join(d_.dims) + ")");
  return b;
}

DType DeclaredOp::dtype_of(const TensorDecl& t, const Options& o) const {
  if (auto it = o.dtypes.find(t.dtype); it != o.dtypes.end()) return it->second;
  DType dt = DType::F32;
  if (evaluator::parse_dtype(t.dtype, &dt)) return dt;
  std::string name = t.dtype;
  if (auto it = o.values.find(t.dtype); it != o.values.end() && std::holds_alternative<std::string>(it->second))
    name = std::get<std::string>(it->second);  // an enum option whose values are dtypes
  else
    name = evaluator::evaluate_string(t.dtype, o.values);
  if (!evaluator::parse_dtype(name, &dt))
    throw op_error(d_, "the dtype of tensor '" + t.name + "' (" + t.dtype + ") is '" + name + "', which is not a dtype");
  return dt;
}

std::vector<evaluator::TensorDesc> DeclaredOp::tensors(const Shape& s, const OpConfig& cfg) const {
  const Options o = options(cfg);
  const Bindings v = shape_values(s, o);
  std::vector<evaluator::TensorDesc> out;
  for (const auto& t : d_.tensors) {
    if (!t.present.empty() && !evaluator::evaluate_condition(t.present, v)) continue;
    evaluator::TensorDesc desc;
    desc.name = t.name;
    desc.role = t.role;
    desc.dtype = dtype_of(t, o);
    for (const auto& e : t.shape) {
      const std::int64_t n = evaluator::evaluate_int(e, v);
      if (n < 1) throw op_error(d_, "tensor '" + t.name + "' has extent " + std::to_string(n) + " (" + e + ") for shape " + evaluator::shape_to_string(s));
      desc.shape.push_back(n);
    }
    desc.fixed_distribution = (t.role == Role::In || t.role == Role::InOut) && t.fill.kind != FillKind::Gate;
    for (const auto& [kind, when] : t.degenerate_rows)
      if (when.empty() || evaluator::evaluate_condition(when, v)) desc.degenerate_rows.push_back(kind);
    if (t.fill.kind == FillKind::Offsets) {
      desc.fill_total = evaluator::evaluate_int(t.fill.total, v);
      std::int64_t n = 1;
      for (auto x : desc.shape) n *= x;
      if (desc.fill_total < n - 1)
        throw op_error(d_, "tensor '" + t.name + "': " + std::to_string(n - 1) + " segments cannot share a total of " +
                               std::to_string(desc.fill_total) + " (each needs at least one element)");
    }
    out.push_back(std::move(desc));
  }
  return out;
}

std::map<std::string, std::string> DeclaredOp::template_defines(const OpConfig& cfg) const {
  const Options o = options(cfg);
  std::map<std::string, std::string> out;
  for (const auto& t : d_.tensors)
    if (!t.define.empty()) out[t.define] = cuda_type(dtype_of(t, o));
  for (const auto& od : d_.options) {
    if (od.define.empty()) continue;
    switch (od.type) {
      case OptionType::Int: out[od.define] = std::to_string(std::get<std::int64_t>(o.values.at(od.name))); break;
      case OptionType::Float: out[od.define] = evaluator::number_to_string(o.reals.at(od.name)); break;
      case OptionType::Bool: out[od.define] = std::get<bool>(o.values.at(od.name)) ? "1" : "0"; break;
      case OptionType::Enum: out[od.define] = std::get<std::string>(o.values.at(od.name)); break;
      case OptionType::DType: out[od.define] = cuda_type(o.dtypes.at(od.name)); break;
    }
  }
  return out;
}

evaluator::LaunchPlan DeclaredOp::plan(const std::vector<LaunchDecl>& launches, const Bindings& v, const Options& o,
                                       const Shape& s) const {
  const std::string at = " for shape " + evaluator::shape_to_string(s);
  auto dim3 = [&](const std::vector<std::string>& es, const std::string& what, const LaunchDecl& l, bool grid) {
    evaluator::Dim3 d;
    std::uint32_t* parts[3] = {&d.x, &d.y, &d.z};
    for (std::size_t i = 0; i < es.size(); ++i) {
      const std::int64_t n = evaluator::evaluate_int(es[i], v);
      const std::int64_t cap = grid ? (i == 0 ? (std::int64_t{1} << 31) - 1 : 65535) : 1024;
      if (n < 1 || n > cap)
        throw op_error(d_, "launch '" + l.entry + "': " + what + "." + "xyz"[i] + " = " + std::to_string(n) + " (" + es[i] +
                               ") is outside [1, " + std::to_string(cap) + "]" + at);
      *parts[i] = static_cast<std::uint32_t>(n);
    }
    return d;
  };
  std::set<std::string> present;
  for (const auto& t : d_.tensors)
    if (t.present.empty() || evaluator::evaluate_condition(t.present, v)) present.insert(t.name);
  evaluator::LaunchPlan p;
  for (const auto& l : launches) {
    if (!l.when.empty() && !evaluator::evaluate_condition(l.when, v)) continue;
    evaluator::KernelLaunch k;
    k.entry = l.entry;
    k.grid = dim3(l.grid, "grid", l, true);
    k.block = dim3(l.block, "block", l, false);
    if (static_cast<std::uint64_t>(k.block.x) * k.block.y * k.block.z > 1024)
      throw op_error(d_, "launch '" + l.entry + "': more than 1024 threads per block" + at);
    if (!l.cluster.empty()) k.cluster = dim3(l.cluster, "cluster", l, false);
    const std::int64_t smem = evaluator::evaluate_int(l.shared_bytes, v);
    if (smem < 0 || smem > std::numeric_limits<std::uint32_t>::max())
      throw op_error(d_, "launch '" + l.entry + "': shared_bytes = " + std::to_string(smem) + at);
    k.shared_bytes = static_cast<std::uint32_t>(smem);
    k.programmatic = l.programmatic;
    for (const auto& a : l.args) {
      switch (a.kind) {
        case ArgKind::Tensor: {
          // An absent tensor (or the reference output of one) is passed as a null pointer.
          const bool ref = a.text.rfind("ref:", 0) == 0;
          const bool scratch = std::any_of(d_.reference_scratch.begin(), d_.reference_scratch.end(),
                                           [&](const TensorDecl& t) { return t.name == a.text; });
          const bool here = scratch || present.count(ref ? a.text.substr(4) : a.text) > 0;
          k.args.push_back(evaluator::ArgTensor{here ? a.text : std::string()});
          break;
        }
        case ArgKind::I32: {
          const std::int64_t x = evaluator::evaluate_int(a.text, v);
          if (x < std::numeric_limits<std::int32_t>::min() || x > std::numeric_limits<std::int32_t>::max())
            throw op_error(d_, "launch '" + l.entry + "': argument i32: " + a.text + " = " + std::to_string(x) + " does not fit in 32 bits" + at);
          k.args.push_back(static_cast<std::int32_t>(x));
          break;
        }
        case ArgKind::I64: k.args.push_back(evaluator::evaluate_int(a.text, v)); break;
        case ArgKind::F32:
        case ArgKind::F64: {
          auto r = o.reals.find(a.text);
          const double x = r != o.reals.end() ? r->second : static_cast<double>(evaluator::evaluate_int(a.text, v));
          if (a.kind == ArgKind::F32) k.args.push_back(static_cast<float>(x));
          else k.args.push_back(x);
          break;
        }
        case ArgKind::TensorMap: {
          evaluator::ArgTensorMap m;
          m.tensor = a.map.tensor;
          for (const auto& e : a.map.dims) m.dims.push_back(static_cast<std::uint64_t>(evaluator::evaluate_int(e, v)));
          for (const auto& e : a.map.strides_bytes) m.strides_bytes.push_back(static_cast<std::uint64_t>(evaluator::evaluate_int(e, v)));
          for (const auto& e : a.map.box) m.box.push_back(static_cast<std::uint32_t>(evaluator::evaluate_int(e, v)));
          m.swizzle_bytes = a.map.swizzle_bytes;
          m.l2_promotion_bytes = a.map.l2_promotion_bytes;
          m.oob_nan = a.map.oob_nan;
          k.args.push_back(std::move(m));
          break;
        }
      }
    }
    p.kernels.push_back(std::move(k));
  }
  if (p.kernels.empty()) throw op_error(d_, "no [[launch]] applies" + at + " (every 'when' is false)");
  return p;
}

evaluator::LaunchPlan DeclaredOp::launch_plan(const Shape& s, const OpConfig& cfg, const evaluator::Knobs& k) const {
  const Options o = options(cfg);
  Bindings v = shape_values(s, o);
  for (const auto& [name, kind] : d_.knobs) {
    auto it = k.find(name);
    if (it == k.end()) throw op_error(d_, "the launch plan reads knob '" + name + "', which the candidate does not set");
    if (const auto* i = std::get_if<std::int64_t>(&it->second)) {
      if (kind != evaluator::ExprKind::Int) throw op_error(d_, "knob '" + name + "' must be a string");
      v[name] = *i;
    } else {
      if (kind != evaluator::ExprKind::Str) throw op_error(d_, "knob '" + name + "' must be an integer");
      v[name] = std::get<std::string>(it->second);
    }
  }
  for (const auto& [name, e] : d_.lets) v[name] = evaluator::evaluate_int(e, v);
  return plan(d_.launches, v, o, s);
}

void DeclaredOp::reference(const Shape&, const OpConfig&, const std::vector<evaluator::HostTensor>&,
                           std::vector<evaluator::HostTensor>&) const {
  throw std::logic_error("op " + d_.name + " is declared in a file and has no host reference; its reference runs on the GPU");
}

double DeclaredOp::bytes(const Shape& s, const OpConfig& cfg) const {
  const Options o = options(cfg);
  if (!d_.bytes.empty()) return static_cast<double>(evaluator::evaluate_int(d_.bytes, shape_values(s, o)));
  double total = 0;
  for (const auto& t : tensors(s, cfg)) {
    double n = static_cast<double>(evaluator::dtype_size(t.dtype));
    for (auto x : t.shape) n *= static_cast<double>(x);
    total += t.role == Role::InOut ? 2 * n : t.role == Role::Scratch ? 0 : n;
  }
  return total;
}

double DeclaredOp::flops(const Shape& s, const OpConfig& cfg) const {
  if (d_.flops.empty()) return 0;
  return static_cast<double>(evaluator::evaluate_int(d_.flops, shape_values(s, options(cfg))));
}

// Without a declared tolerance: what one rounding to the output's dtype allows (about 3x the
// relative RMS error of a single round-to-nearest, and its worst case twice over); integers exact.
evaluator::Tolerance DeclaredOp::tolerance(const std::string& output, const OpConfig& cfg) const {
  const TensorDecl* t = d_.tensor(output);
  if (!t || !is_output(t->role)) throw op_error(d_, "no output named '" + output + "'");
  const Options o = options(cfg);
  for (const auto& x : t->tolerances)
    if (x.when.empty() || evaluator::evaluate_condition(x.when, o.values)) return x.tol;
  switch (dtype_of(*t, o)) {
    case DType::BF16: return {5e-3, 1e-2};
    case DType::F16: return {2e-3, 4e-3};
    case DType::F32: return {1e-5, 1e-4};
    case DType::F64: return {1e-12, 1e-11};
    default: return {0, 0};
  }
}

std::string DeclaredOp::device_reference_source(const OpConfig& cfg) const {
  std::string src;
  for (const auto& [k, v] : template_defines(cfg)) src += "#define " + k + " " + v + "\n";
  src += "#line 1 \"" + d_.reference_path + "\"\n";
  return src + d_.reference_source;
}

evaluator::DeviceReferencePlan DeclaredOp::device_reference_plan(const Shape& s, const OpConfig& cfg) const {
  const Options o = options(cfg);
  const Bindings v = shape_values(s, o);
  evaluator::DeviceReferencePlan r;
  for (const auto& t : tensors(s, cfg))
    if (is_output(t.role)) r.outputs.push_back(t.name);
  for (const auto& sd : d_.reference_scratch) {
    evaluator::TensorDesc desc;
    desc.name = sd.name;
    desc.role = Role::Scratch;
    desc.dtype = dtype_of(sd, o);
    for (const auto& e : sd.shape) desc.shape.push_back(std::max<std::int64_t>(1, evaluator::evaluate_int(e, v)));
    r.scratch.push_back(std::move(desc));
  }
  r.plan = plan(d_.reference_launches, v, o, s);
  return r;
}

void DeclaredOp::fill_fixed(const evaluator::TensorDesc& desc, std::mt19937_64& rng, evaluator::HostTensor& t) const {
  const TensorDecl* td = d_.tensor(desc.name);
  if (!td) throw std::logic_error("op " + d_.name + " has no tensor '" + desc.name + "'");
  const FillDecl& f = td->fill;
  const std::int64_t n = t.numel();
  switch (f.kind) {
    case FillKind::Gate: throw std::logic_error("tensor '" + desc.name + "' is drawn by the gate");
    case FillKind::Normal: {
      std::normal_distribution<double> nd(f.a, f.b);
      for (std::int64_t i = 0; i < n; ++i) t.set(i, nd(rng));
      break;
    }
    case FillKind::Uniform: {
      std::uniform_real_distribution<double> u(f.a, f.b);
      for (std::int64_t i = 0; i < n; ++i) t.set(i, u(rng));
      break;
    }
    case FillKind::Constant:
      for (std::int64_t i = 0; i < n; ++i) t.set(i, f.a);
      break;
    case FillKind::IntRange: {
      std::uniform_int_distribution<std::int64_t> u(static_cast<std::int64_t>(f.a), static_cast<std::int64_t>(f.b));
      for (std::int64_t i = 0; i < n; ++i) t.set(i, static_cast<double>(u(rng)));
      break;
    }
    case FillKind::Offsets: {
      // n - 1 segments of at least one element each: cut points are n - 2 distinct values in
      // [1, total - 1], drawn without replacement (Floyd's algorithm) and sorted.
      const std::int64_t total = desc.fill_total, cuts = n - 2;
      std::set<std::int64_t> chosen;
      for (std::int64_t j = total - 1 - cuts; j < total - 1 && cuts > 0; ++j) {
        const std::int64_t r = std::uniform_int_distribution<std::int64_t>(0, j)(rng) + 1;
        if (!chosen.insert(r).second) chosen.insert(j + 1);
      }
      t.set(0, 0);
      std::int64_t i = 1;
      for (std::int64_t c : chosen) t.set(i++, static_cast<double>(c));
      if (n > 1) t.set(n - 1, static_cast<double>(total));
      break;
    }
  }
}

std::string DeclaredOp::check_seed_knobs(const evaluator::Knobs& defaults) const {
  for (const auto& [name, kind] : d_.knobs) {
    auto it = defaults.find(name);
    if (it == defaults.end()) return "op " + d_.name + " reads knob '" + name + "' in its launch plan; declare it in the seed's knobs";
    const bool is_int = std::holds_alternative<std::int64_t>(it->second);
    if (is_int != (kind == evaluator::ExprKind::Int))
      return "knob '" + name + "' must be " + (kind == evaluator::ExprKind::Int ? "an integer" : "a string") + " (op " + d_.name + " declares it so)";
  }
  return {};
}

std::unique_ptr<evaluator::Op> load_declared_op(const std::string& path, evaluator::SpecError* error) {
  OpDeclarationResult r = load_op_declaration(path);
  if (!r.decl) {
    *error = *r.error;
    return nullptr;
  }
  return std::make_unique<DeclaredOp>(std::move(*r.decl));
}

}  // namespace ptxevo::declared_ops
