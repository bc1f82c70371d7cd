#include "exporter/torch_export.hpp"

#include <cctype>
#include <map>

#include "exporter/inline_ptx.hpp"

namespace ptxevo::exporter {

namespace {

// The extension's name, sources and the loader that builds it for one arch (both modules use it).
constexpr const char* kLoader = R"py(EXTENSION_NAME = "@EXT_NAME@"
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = [os.path.join(HERE, "@CU@"), os.path.join(HERE, "@BINDING@")]
_extension = None


def load(verbose: bool = False, build_directory: Optional[str] = None):
    """Builds (or takes from torch's cache) and returns the extension."""
    global _extension
    if _extension is None:
        from torch.utils.cpp_extension import load as _load

        # Only the arch the kernel was verified for: its inline PTX may use arch-specific features.
        saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
        os.environ["TORCH_CUDA_ARCH_LIST"] = "@TORCH_ARCH@"
        try:
            _extension = _load(name=EXTENSION_NAME, sources=SOURCES, build_directory=build_directory,
                               extra_cuda_cflags=["-O3", "-gencode=arch=@COMPUTE@,code=@SM@"], verbose=verbose)
        finally:
            if saved is None:
                del os.environ["TORCH_CUDA_ARCH_LIST"]
            else:
                os.environ["TORCH_CUDA_ARCH_LIST"] = saved
    return _extension
)py";

}  // namespace

TorchArch torch_arch(const std::string& arch) {
  const std::string num = arch.size() > 3 ? arch.substr(3) : std::string();
  std::size_t digits = 0;
  while (digits < num.size() && std::isdigit(static_cast<unsigned char>(num[digits]))) ++digits;
  if (arch.rfind("sm_", 0) != 0 || digits < 2) throw ExportError("cannot map arch '" + arch + "' to a torch arch list");
  return {num.substr(0, digits - 1) + "." + num.substr(digits - 1), "compute_" + num, arch};
}

std::string torch_loader(const std::string& ext_name, const std::string& cu, const std::string& binding,
                         const std::string& arch) {
  const TorchArch a = torch_arch(arch);
  return evaluator::substitute(kLoader, {{"EXT_NAME", ext_name}, {"CU", cu}, {"BINDING", binding}, {"TORCH_ARCH", a.list},
                              {"COMPUTE", a.compute}, {"SM", a.sm}});
}

TorchFiles torch_export(const evaluator::Op& op, const evaluator::Spec& spec, const std::string& cu_name,
                        const std::string& tag, const std::string& launcher_prototype, const std::string& description) {
  std::optional<evaluator::TorchExport> t;
  try {
    t = op.torch_export(spec.config);
  } catch (const std::invalid_argument& e) {
    throw ExportError(e.what());
  }
  if (!t)
    throw ExportError("export has no torch binding for op '" + spec.op +
                      "' (ops declared in files, rmsnorm_fwd and kda_fwd have one)");
  TorchFiles f;
  f.binding_name = "ptxevo_" + spec.op + "_binding.cpp";
  f.module_name = "ptxevo_" + spec.op + ".py";
  const std::map<std::string, std::string> values = {
      {"BINDING", f.binding_name},
      {"CU", cu_name},
      {"ARCH", spec.arch},
      {"TAG", tag},
      {"DESCRIPTION", description},
      {"PROTOTYPE", launcher_prototype},
      {"LOADER", torch_loader("ptxevo_" + spec.op + "_" + tag, cu_name, f.binding_name, spec.arch)},
  };
  f.binding = evaluator::substitute(t->binding, values);
  f.module = evaluator::substitute(t->module, values);
  return f;
}

}  // namespace ptxevo::exporter
