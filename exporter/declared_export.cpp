#include "exporter/declared_export.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <set>

#include "evaluator/expression.hpp"
#include "evaluator/toml_reader.hpp"

namespace ptxevo::exporter {

namespace {

using declared_ops::ArgKind;
using declared_ops::DeclaredOp;
using declared_ops::OpDeclaration;
using declared_ops::TensorDecl;
using evaluator::DType;
using evaluator::substitute;
using evaluator::torch_dtype_cpp;
using evaluator::torch_dtype_py;
using evaluator::ExprKind;
using evaluator::Role;

// What the generators share: the typed options, the constants expressions fold (options and
// knobs), the dims as runtime names, and the tensors present for these options.
struct Context {
  const OpDeclaration& d;
  DeclaredOp::Options options;
  evaluator::Bindings constants;
  std::set<std::string> dims;
  std::vector<const TensorDecl*> tensors;  // present, in declaration order
  std::map<std::string, DType> dtypes;
};

Context context(const DeclaredOp& op, const evaluator::OpConfig& cfg, const evaluator::Knobs& knobs) {
  Context c{op.declaration(), {}, {}, {}, {}, {}};
  try {
    c.options = op.options(cfg);
  } catch (const std::invalid_argument& e) {
    throw ExportError(e.what());
  }
  c.constants = c.options.values;
  for (const auto& [name, kind] : c.d.knobs) {
    auto it = knobs.find(name);
    if (it == knobs.end()) throw ExportError(c.d.name + ": the launch plan reads knob '" + name + "', which the candidate does not set");
    if (const auto* i = std::get_if<std::int64_t>(&it->second)) c.constants[name] = *i;
    else c.constants[name] = std::get<std::string>(it->second);
  }
  c.dims.insert(c.d.dims.begin(), c.d.dims.end());
  // The generated launcher's own variables; a tensor or dim of the same name would shadow them.
  static const std::set<std::string> kReserved = {"k", "n", "i", "e", "plan", "out", "why", "stream", "ignored", "args"};
  const auto reserved = [&](const std::string& name) {
    return kReserved.count(name) || (name.size() > 1 && name[0] == 'p' && std::all_of(name.begin() + 1, name.end(), ::isdigit));
  };
  for (const auto& dim : c.d.dims)
    if (reserved(dim)) throw ExportError(c.d.name + ": dimension '" + dim + "' has a name the generated launcher uses; rename it");
  for (const auto& t : c.d.tensors)
    if (reserved(t.name)) throw ExportError(c.d.name + ": tensor '" + t.name + "' has a name the generated launcher uses; rename it");
  for (const auto& [name, e] : c.d.lets)
    if (reserved(name)) throw ExportError(c.d.name + ": let value '" + name + "' has a name the generated launcher uses; rename it");
  for (const auto& t : c.d.tensors) {
    if (!t.present.empty() && !evaluator::evaluate_condition(t.present, c.options.values)) continue;
    c.tensors.push_back(&t);
    c.dtypes[t.name] = op.dtype_of(t, c.options);
  }
  return c;
}

std::string cpp(const Context& c, const std::string& e, ExprKind k = ExprKind::Int) {
  return evaluator::expression_to_cpp(e, c.constants, c.dims, k);
}
std::string py(const Context& c, const std::string& e) {
  return evaluator::expression_to_python(e, c.constants, c.dims, ExprKind::Int);
}

bool is_input(Role r) { return r == Role::In; }

const char* param_c_type(ArgKind k) {
  switch (k) {
    case ArgKind::I32: return "int";
    case ArgKind::I64: return "long long";
    case ArgKind::F32: return "float";
    case ArgKind::F64: return "double";
    default: return "";
  }
}
const char* param_constraint(ArgKind k) {
  switch (k) {
    case ArgKind::I32: return "r";
    case ArgKind::F32: return "f";
    case ArgKind::F64: return "d";
    default: return "l";
  }
}

std::string shape_text(const TensorDecl& t) {
  std::string s;
  for (const auto& e : t.shape) s += (s.empty() ? "" : ", ") + e;
  return "[" + s + "]";
}

std::string launcher_signature(const Context& c) {
  std::string s = "extern \"C\" cudaError_t ptxevo_" + c.d.name + "_launch(";
  for (const auto* t : c.tensors) s += std::string(is_input(t->role) ? "const void* " : "void* ") + t->name + ", ";
  for (const auto& dim : c.d.dims) s += "long long " + dim + ", ";
  return s + "cudaStream_t stream, const char** why)";
}

}  // namespace

OpLauncher declared_launcher(const DeclaredOp& op, const evaluator::OpConfig& cfg, const evaluator::Knobs& knobs,
                             const std::set<std::string>& defined) {
  bool any_defined = false;
  for (const auto& launch : op.declaration().launches) any_defined |= defined.count(launch.entry) > 0;
  Context c = context(op, cfg, knobs);
  // The let values are variables of the plan function, computed in order after the dim checks.
  std::string lets;
  for (const auto& [name, e] : c.d.lets) {
    lets += "  const std::int64_t " + name + " = " + cpp(c, e) + ";\n";
    c.dims.insert(name);
  }
  const std::string fn = "ptxevo_" + c.d.name;
  OpLauncher l;
  std::set<std::string> present;
  for (const auto* t : c.tensors) present.insert(t->name);
  std::string plan, body;
  for (std::size_t li = 0; li < c.d.launches.size(); ++li) {
    const auto& launch = c.d.launches[li];
    const bool exported = !any_defined || defined.count(launch.entry) > 0;
    if (exported && l.entries.end() == std::find(l.entries.begin(), l.entries.end(), launch.entry))
      l.entries.push_back(launch.entry);
    std::vector<KernelParam> params;
    std::string values, args;
    for (std::size_t i = 0; i < launch.args.size(); ++i) {
      const auto& a = launch.args[i];
      const std::string p = "p" + std::to_string(i);
      if (a.kind == ArgKind::TensorMap)
        throw ExportError(c.d.name + ": launch '" + launch.entry + "' passes a tensor map; export cannot generate its encoding yet");
      if (a.kind == ArgKind::Tensor) {
        const TensorDecl* t = c.d.tensor(a.text);
        const bool in = t && is_input(t->role);
        const std::string ctype = t ? declared_ops::cuda_type(op.dtype_of(*t, c.options)) : "void";
        params.push_back({std::string(in ? "const " : "") + ctype + "* __restrict__", a.text, "l"});
        values += "        " + std::string(in ? "const void* " : "void* ") + p + " = " + (present.count(a.text) ? a.text : "nullptr") + ";\n";
      } else {
        params.push_back({param_c_type(a.kind), "s" + std::to_string(i), param_constraint(a.kind)});
        const auto real = c.options.reals.find(a.text);
        const std::string v = real != c.options.reals.end() ? evaluator::number_to_string(real->second) : cpp(c, a.text);
        values += "        " + std::string(param_c_type(a.kind)) + " " + p + " = (" + param_c_type(a.kind) + ")(" + v + ");\n";
      }
      args += (args.empty() ? "" : ", ") + ("(void*)&" + p);
    }
    if (auto it = l.params_by_entry.find(launch.entry); it != l.params_by_entry.end()) {
      bool same = it->second.size() == params.size();
      for (std::size_t i = 0; same && i < params.size(); ++i) same = it->second[i].constraint == params[i].constraint;
      if (!same) throw ExportError(c.d.name + ": entry '" + launch.entry + "' is launched with two different argument lists");
    }
    if (exported) l.params_by_entry[launch.entry] = params;
    auto dim3 = [&](const std::vector<std::string>& es) {
      std::string s3;
      for (std::size_t i = 0; i < 3; ++i) s3 += (i ? ", " : "") + (i < es.size() ? cpp(c, es[i]) : std::string("1LL"));
      return s3;
    };
    const std::string index = std::to_string(li);
    plan += "  if (" + (launch.when.empty() ? std::string("true") : cpp(c, launch.when, ExprKind::Bool)) + ") {  // " + launch.entry + "\n";
    plan += "    @T@ k = {" + index + ", \"" + launch.entry + "\", {" + dim3(launch.grid) + "}, {" + dim3(launch.block) + "}, {" +
            dim3(launch.cluster) + "}, " + cpp(c, launch.shared_bytes) + ", " + (launch.programmatic ? "1" : "0") + "};\n";
    plan += "    if (!ptxevo_fits(k.grid, k.block, k.cluster, k.shared_bytes)) {\n";
    plan += "      *why = \"" + fn + ": launch " + launch.entry + ": grid, block, cluster or shared memory out of range for these dims\";\n";
    plan += "      return -1;\n    }\n";
    plan += "    out[n++] = k;\n  }\n";
    if (!exported) {
      body += "      case " + index + ":  // " + launch.entry + "\n";
      body += "        *why = \"" + fn + ": the plan needs entry " + launch.entry +
              " for these dims, which this export's kernel (its knobs) does not define\";\n";
      body += "        return cudaErrorInvalidValue;\n";
      continue;
    }
    body += "      case " + index + ": {  // " + launch.entry + "\n" + values;
    body += "        void* args[] = {" + args + "};\n";
    body += "        e = ptxevo_launch((const void*)" + launch.entry + ", k, stream, args, why);\n        break;\n      }\n";
  }
  std::string checks;
  for (const auto& dim : c.d.dims) checks += (checks.empty() ? "" : " || ") + dim + " < 1";
  std::string null_checks;
  for (const auto* t : c.tensors) null_checks += (null_checks.empty() ? "!" : " || !") + t->name;
  std::string doc;
  for (const auto* t : c.tensors)
    doc += "//   " + t->name + ": " + evaluator::to_string(t->role) + ", " + evaluator::to_string(c.dtypes.at(t->name)) + " " +
           shape_text(*t) + "\n";
  l.prototype = launcher_signature(c) + ";";
  std::string dim_params, dim_args;
  for (const auto& dim : c.d.dims) {
    dim_params += "long long " + dim + ", ";
    dim_args += dim + ", ";
  }
  const std::string plan_type = fn + "_launch_t";
  const std::string plan_signature = "extern \"C\" int " + fn + "_plan(" + dim_params + plan_type + "* out, const char** why)";
  l.plan_prototype = plan_signature + ";";
  l.code = R"cpp(
// ---- host launcher (NVRTC, which compiles device code only, skips it) ----
#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace {
[[maybe_unused]] inline std::int64_t ptxevo_cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
[[maybe_unused]] inline std::int64_t ptxevo_next_pow2(std::int64_t a) {
  std::int64_t p = 1;
  while (p < a) p *= 2;
  return p;
}

bool ptxevo_fits(const long long* grid, const long long* block, const long long* cluster, long long shared) {
  if (grid[0] < 1 || grid[0] > 2147483647LL || grid[1] < 1 || grid[1] > 65535 || grid[2] < 1 || grid[2] > 65535) return false;
  if (block[0] < 1 || block[1] < 1 || block[2] < 1 || block[0] * block[1] * block[2] > 1024) return false;
  if (cluster[0] < 1 || cluster[1] < 1 || cluster[2] < 1) return false;
  return shared >= 0 && shared <= 0xFFFFFFFFLL;
}

}  // namespace

// One kernel launch of the plan: which [[launch]] of the declaration, and how.
typedef struct {
  int launch;          // index of the [[launch]] in the declaration
  const char* entry;
  long long grid[3], block[3], cluster[3], shared_bytes;
  int programmatic;
} @T@;

// The launches for these dims, in order, into out[0..@MAX@): how many, or -1 with *why.
@PLAN_SIGNATURE@ {
  const char* ignored = 0;
  if (!why) why = &ignored;
  if (@DIM_CHECKS@) {
    *why = "@FN@: every dimension must be >= 1";
    return -1;
  }
  int n = 0;
@LETS@@PLAN@  return n;
}

namespace {

cudaError_t ptxevo_launch(const void* kernel, const @T@& k, cudaStream_t stream, void** args, const char** why) {
  cudaError_t e = cudaSuccess;
  if (k.shared_bytes > 48 * 1024) {
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k.shared_bytes);
    if (e != cudaSuccess) {
      *why = "cudaFuncSetAttribute(MaxDynamicSharedMemorySize) failed";
      return e;
    }
  }
  if (k.cluster[0] * k.cluster[1] * k.cluster[2] > 8) {  // non-portable cluster sizes must be allowed per kernel
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (e != cudaSuccess) {
      *why = "cudaFuncSetAttribute(NonPortableClusterSizeAllowed) failed";
      return e;
    }
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)k.grid[0], (unsigned)k.grid[1], (unsigned)k.grid[2]);
  cfg.blockDim = dim3((unsigned)k.block[0], (unsigned)k.block[1], (unsigned)k.block[2]);
  cfg.dynamicSmemBytes = (size_t)k.shared_bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (k.cluster[0] * k.cluster[1] * k.cluster[2] > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = (unsigned)k.cluster[0];
    attr[n].val.clusterDim.y = (unsigned)k.cluster[1];
    attr[n].val.clusterDim.z = (unsigned)k.cluster[2];
    ++n;
  }
  if (k.programmatic) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  e = cudaLaunchKernelExC(&cfg, kernel, args);
  if (e != cudaSuccess) *why = cudaGetErrorString(e);
  return e;
}
}  // namespace

// @OP@ (@SUMMARY@), generated from @DECL@.
// Tensors (dense, row-major; dims @DIMS@):
@DOC@// Every pointer is required. Returns cudaSuccess, or an error with *why (when why is not NULL)
// saying what was wrong. Launches on `stream`.
@SIGNATURE@ {
  const char* ignored = 0;
  if (!why) why = &ignored;
  if (@NULL_CHECKS@) {
    *why = "@FN@: every tensor pointer is required";
    return cudaErrorInvalidValue;
  }
  @T@ plan[@MAX@];
  const int n = ptxevo_@OP@_plan(@DIM_ARGS@plan, why);
  if (n < 0) return cudaErrorInvalidValue;
  for (int i = 0; i < n; ++i) {
    const @T@& k = plan[i];
    cudaError_t e = cudaSuccess;
    switch (k.launch) {
@BODY@      default:
        *why = "@FN@: the plan named a launch this file lacks";
        return cudaErrorInvalidValue;
    }
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}
#endif  // __CUDACC_RTC__
)cpp";
  std::string dims;
  for (const auto& d : c.d.dims) dims += (dims.empty() ? "" : ", ") + d;
  l.code = substitute(l.code, {{"OP", c.d.name},
                               {"SUMMARY", c.d.summary.empty() ? "a declared op" : c.d.summary},
                               {"DECL", c.d.path},
                               {"DIMS", dims},
                               {"DOC", doc},
                               {"SIGNATURE", launcher_signature(c)},
                               {"DIM_CHECKS", checks},
                               {"NULL_CHECKS", null_checks.empty() ? "false" : null_checks},
                               {"FN", fn},
                               {"BODY", body},
                               {"PLAN", plan},
                               {"LETS", lets},
                               {"PLAN_SIGNATURE", plan_signature},
                               {"DIM_ARGS", dim_args},
                               {"MAX", std::to_string(c.d.launches.size())},
                               {"T", plan_type}});
  return l;
}

TorchFiles declared_torch_export(const DeclaredOp& op, const evaluator::Spec& spec, const std::string& cu_name,
                                 const std::string& tag, const std::string& launcher_prototype,
                                 const std::string& description) {
  // Shapes depend on dims and options only: the knobs' values do not matter here.
  Context c = context(op, spec.config, [&] {
    evaluator::Knobs k;
    for (const auto& [name, kind] : op.declaration().knobs) k[name] = kind == ExprKind::Int ? evaluator::KnobValue{std::int64_t{1}} : evaluator::KnobValue{std::string()};
    return k;
  }());
  const std::string& name = c.d.name;
  // Each dim is read from the first tensor extent that is exactly its name; the others are arguments.
  std::map<std::string, std::pair<const TensorDecl*, std::size_t>> source;
  for (const auto* t : c.tensors)
    if (t->role == Role::In || t->role == Role::InOut)
      for (std::size_t i = 0; i < t->shape.size(); ++i)
        if (c.dims.count(t->shape[i]) && !source.count(t->shape[i])) source[t->shape[i]] = {t, i};
  std::vector<std::string> explicit_dims;
  for (const auto& d : c.d.dims)
    if (!source.count(d)) explicit_dims.push_back(d);

  std::vector<const TensorDecl*> inputs, outputs, inouts;
  for (const auto* t : c.tensors) {
    if (t->role == Role::In) inputs.push_back(t);
    else if (t->role == Role::Out) outputs.push_back(t);
    else if (t->role == Role::InOut) inouts.push_back(t);
  }
  const TensorDecl* anchor = !inputs.empty() ? inputs.front() : !inouts.empty() ? inouts.front() : nullptr;
  if (!anchor) throw ExportError(name + ": the torch export needs at least one input tensor (it gives the device)");

  // ---- C++ binding ----
  std::string params, infer, checks, alloc, call, ret;
  for (const auto* t : inputs) params += "const at::Tensor& " + t->name + ", ";
  for (const auto* t : inouts) params += "at::Tensor& " + t->name + ", ";
  for (const auto* t : c.tensors)
    if (t->role == Role::Out || t->role == Role::Scratch) params += "c10::optional<at::Tensor> " + t->name + "_given, ";
  for (const auto& d : explicit_dims) params += "int64_t " + d + "_arg, ";
  if (!params.empty()) params.resize(params.size() - 2);
  std::set<std::string> rank_checked;
  for (const auto& d : c.d.dims) {
    if (auto it = source.find(d); it != source.end()) {
      const TensorDecl* t = it->second.first;
      if (rank_checked.insert(t->name).second)
        infer += "  TORCH_CHECK(" + t->name + ".dim() == " + std::to_string(t->shape.size()) + ", \"" + t->name + " must have " +
               std::to_string(t->shape.size()) + " dimensions " + shape_text(*t) + ", got \", " + t->name + ".dim());\n";
      infer += "  const int64_t " + d + " = " + t->name + ".size(" + std::to_string(it->second.second) + ");\n";
    } else {
      infer += "  const int64_t " + d + " = " + d + "_arg;\n";
    }
    infer += "  TORCH_CHECK(" + d + " >= 1, \"dimension " + d + " must be >= 1, got \", " + d + ");\n";
  }
  for (const auto* t : c.tensors) {
    std::string shape;
    for (const auto& e : t->shape) shape += (shape.empty() ? "" : ", ") + ("(int64_t)" + cpp(c, e));
    const std::string want = "std::vector<int64_t>{" + shape + "}";
    if (t->role == Role::Out || t->role == Role::Scratch) {
      alloc += "  at::Tensor " + t->name + " = " + t->name + "_given.has_value() ? *" + t->name + "_given : at::empty(" + want +
               ", " + anchor->name + ".options().dtype(" + torch_dtype_cpp(c.dtypes.at(t->name)) + "));\n";
    }
    checks += "  check_tensor(" + t->name + ", \"" + t->name + "\", " + torch_dtype_cpp(c.dtypes.at(t->name)) + ", " + want + ", " +
              anchor->name + ");\n";
    call += t->name + ".data_ptr(), ";
  }
  for (const auto& d : c.d.dims) call += d + ", ";
  for (const auto* t : outputs) ret += (ret.empty() ? "" : ", ") + t->name;
  std::string pyargs;
  for (const auto* t : inputs) pyargs += ", pybind11::arg(\"" + t->name + "\")";
  for (const auto* t : inouts) pyargs += ", pybind11::arg(\"" + t->name + "\")";
  for (const auto* t : c.tensors)
    if (t->role == Role::Out || t->role == Role::Scratch) pyargs += ", pybind11::arg(\"" + t->name + "\") = pybind11::none()";
  for (const auto& d : explicit_dims) pyargs += ", pybind11::arg(\"" + d + "\")";

  const std::string binding_template = R"cpp(// @BINDING@: PyTorch binding of @CU@ (generated by `ptxevo export --format torch` from @DECL@).
// @DESCRIPTION@
// Tensors are checked against the declaration and the options the kernel was built for; outputs
// not given are allocated; the launch goes on the current CUDA stream of @ANCHOR@'s device.
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

@PROTOTYPE@

namespace {

[[maybe_unused]] inline int64_t ptxevo_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
[[maybe_unused]] inline int64_t ptxevo_next_pow2(int64_t a) {
  int64_t p = 1;
  while (p < a) p *= 2;
  return p;
}

void check_tensor(const at::Tensor& t, const char* name, at::ScalarType dtype, const std::vector<int64_t>& shape,
                  const at::Tensor& anchor) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
  TORCH_CHECK(t.device() == anchor.device(), name, " must be on ", anchor.device(), ", got ", t.device());
  TORCH_CHECK(t.scalar_type() == dtype, name, " must be ", dtype, " (the exported kernel was built for it), got ",
              t.scalar_type());
  TORCH_CHECK(t.sizes() == at::IntArrayRef(shape), name, " must have shape ", at::IntArrayRef(shape), ", got ", t.sizes());
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

}  // namespace

// The op's outputs (@RET_DOC@); outputs given are written in place.
std::vector<at::Tensor> run(@PARAMS@) {
@INFER@@ALLOC@@CHECKS@  const c10::cuda::CUDAGuard guard(@ANCHOR@.device());
  const char* why = nullptr;
  const cudaError_t e = ptxevo_@OP@_launch(@CALL@at::cuda::getCurrentCUDAStream().stream(), &why);
  TORCH_CHECK(e == cudaSuccess, why ? why : "launch failed", " (", cudaGetErrorString(e), ")");
  return {@RET@};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("run", &run, "@OP@: returns [@RET_DOC@]"@PYARGS@);
}
)cpp";

  // ---- Python module ----
  // The custom op's meta function (torch.library's register_fake): the outputs' shapes and dtypes
  // from the inputs' shapes, which torch.compile traces with instead of running the kernel.
  std::string sig, sig_names, meta_dims, meta_outputs, annot, out_names, mutates;
  for (const auto* t : inputs) { sig += t->name + ": Tensor, "; sig_names += t->name + ", "; }
  for (const auto* t : inouts) { sig += t->name + ": Tensor, "; sig_names += t->name + ", "; mutates += "\"" + t->name + "\", "; }
  for (const auto& d : explicit_dims) { sig += d + ": int, "; sig_names += d + ", "; }
  if (!sig.empty()) { sig.resize(sig.size() - 2); sig_names.resize(sig_names.size() - 2); }
  for (const auto& d : c.d.dims) {
    if (auto it = source.find(d); it != source.end())
      meta_dims += "    " + d + " = " + it->second.first->name + ".shape[" + std::to_string(it->second.second) + "]\n";
  }
  for (const auto* t : outputs) {
    std::string shape;
    for (const auto& e : t->shape) shape += py(c, e) + ", ";
    meta_outputs += (meta_outputs.empty() ? "" : ", ") + anchor->name + ".new_empty((" + shape + "), dtype=" + torch_dtype_py(c.dtypes.at(t->name)) + ")";
    out_names += (out_names.empty() ? "" : ", ") + t->name;
  }
  if (outputs.empty()) annot = "None";
  else if (outputs.size() == 1) annot = "Tensor";
  else annot = "Tuple[" + [&] { std::string s; for (std::size_t i = 0; i < outputs.size(); ++i) s += (i ? ", " : "") + std::string("Tensor"); return s; }() + "]";
  std::string meta_body = meta_dims + "    return " + (outputs.empty() ? std::string("None") : outputs.size() == 1 ? meta_outputs : "(" + meta_outputs + ")") + "\n";
  std::string op_body = "    outs = load().run(" + [&] {
    std::string s;
    for (const auto* t : inputs) s += t->name + ", ";
    for (const auto* t : inouts) s += t->name + ", ";
    for (const auto* t : c.tensors) if (t->role == Role::Out || t->role == Role::Scratch) s += "None, ";
    for (const auto& d : explicit_dims) s += d + ", ";
    if (!s.empty()) s.resize(s.size() - 2);
    return s;
  }() + ")\n    return " + (outputs.empty() ? std::string("None") : outputs.size() == 1 ? "outs[0]" : "tuple(outs)") + "\n";
  std::string out_params;
  for (const auto* t : c.tensors) if (t->role == Role::Out) out_params += ", " + t->name + ": Tensor";
  std::string out_call;
  for (const auto* t : inputs) out_call += t->name + ", ";
  for (const auto* t : inouts) out_call += t->name + ", ";
  for (const auto* t : c.tensors) out_call += t->role == Role::Out ? t->name + ", " : t->role == Role::Scratch ? "None, " : "";
  for (const auto& d : explicit_dims) out_call += d + ", ";
  if (!out_call.empty()) out_call.resize(out_call.size() - 2);
  std::string config;
  for (const auto& [k, v] : spec.config) config += "    \"" + k + "\": \"" + v + "\",\n";

  const std::string module_template = R"py("""@OP@ on a kernel exported by ptxevo (`ptxevo export --format torch`), from @DECL@.

@SUMMARY@
@DESCRIPTION@

@OP@(@SIG_NAMES@) is a torch.library custom op (ptxevo::@OP_QUALNAME@): it works in eager mode, under
torch.compile and in CUDA graphs, and returns the outputs (@OUT_NAMES@). @OP@_out(...) writes into
outputs you allocated. Tensors must be CUDA, contiguous and of the dtypes in CONFIG; the binding
checks every shape against the declaration. The extension is compiled on first use with
torch.utils.cpp_extension.load (nvcc and a host compiler are needed once; torch caches the build).
"""
import os
from typing import Optional, Tuple

import torch
from torch import Tensor

CONFIG = {
    "op": "@OP@",
    "arch": "@ARCH@",
    "options": {
@CONFIG@    },
}
@LOADER@

# C's truncating division, as the declaration's expressions use it.
def ptxevo_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def ptxevo_mod(a: int, b: int) -> int:
    return a - b * ptxevo_div(a, b)


def ptxevo_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def ptxevo_next_pow2(a: int) -> int:
    p = 1
    while p < a:
        p *= 2
    return p


@torch.library.custom_op("ptxevo::@OP_QUALNAME@", mutates_args=(@MUTATES@))
def @OP@(@SIG@) -> @ANNOT@:
@OP_BODY@

@DECORATOR@.register_fake
def _(@SIG@) -> @ANNOT@:
@META_BODY@

def @OP@_out(@SIG@@OUT_PARAMS@) -> None:
    """Writes the outputs into the tensors given (not a registered op: eager mode only)."""
    load().run(@OUT_CALL@)
)py";

  TorchFiles f;
  f.binding_name = "ptxevo_" + name + "_binding.cpp";
  f.module_name = "ptxevo_" + name + ".py";
  std::map<std::string, std::string> values = {
      {"BINDING", f.binding_name}, {"CU", cu_name}, {"OP", name}, {"DECL", c.d.path}, {"ARCH", spec.arch},
      {"DESCRIPTION", description}, {"PROTOTYPE", launcher_prototype}, {"ANCHOR", anchor->name},
      {"PARAMS", params}, {"INFER", infer}, {"ALLOC", alloc}, {"CHECKS", checks}, {"CALL", call}, {"RET", ret},
      {"RET_DOC", out_names}, {"PYARGS", pyargs}, {"SUMMARY", c.d.summary}, {"SIG", sig}, {"SIG_NAMES", sig_names},
      {"OUT_NAMES", out_names}, {"OP_QUALNAME", name + "_" + tag}, {"MUTATES", mutates}, {"ANNOT", annot},
      {"OP_BODY", op_body}, {"META_BODY", meta_body}, {"OUT_PARAMS", out_params}, {"OUT_CALL", out_call},
      {"CONFIG", config}, {"DECORATOR", "@" + name}};
  values["LOADER"] = torch_loader("ptxevo_" + name + "_" + tag, cu_name, f.binding_name, spec.arch);
  f.binding = substitute(binding_template, values);
  f.module = substitute(module_template, values);
  return f;
}

}  // namespace ptxevo::exporter
