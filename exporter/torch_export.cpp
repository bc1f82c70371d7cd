#include "exporter/torch_export.hpp"

#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "exporter/inline_ptx.hpp"

namespace ptxevo::exporter {

namespace {

// The extension's name, sources and the loader that builds it for one arch (both modules use it).
// The kernels are compiled as relocatable device code and device-linked before the binding is
// built: ptxevo's candidates are built by nvJitLink, which compiles PTX that way, and nvcc's
// default whole-program build turns the same PTX into other machine code (other register
// counts; the KDA forward's export ran 2-5% slower than its candidate on an H100).
constexpr const char* kLoader = R"py(EXTENSION_NAME = "@EXT_NAME@"
HERE = os.path.dirname(os.path.abspath(__file__))
CU = os.path.join(HERE, "@CU@")
BINDING = os.path.join(HERE, "@BINDING@")
# nvcc's arguments for the kernels' objects (OBJ and DLINK are this build's file names): relocatable
# device code and a device link, the code generation the gate and the timer saw.
DEVICE_BUILD = [
@DEVICE_BUILD@
]
_extension = None


def _device_objects(directory: str, verbose: bool):
    """The kernels' object and device-link object in `directory`, named by the .cu's content."""
    import hashlib
    import subprocess
    from torch.utils.cpp_extension import CUDA_HOME
    with open(CU, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    names = {"OBJ": os.path.join(directory, f"kernels-{digest}.o"),
             "DLINK": os.path.join(directory, f"kernels-{digest}-dlink.o")}
    if all(os.path.exists(p) for p in names.values()):
        return list(names.values())
    os.makedirs(directory, exist_ok=True)
    nvcc = os.path.join(CUDA_HOME or "/usr/local/cuda", "bin", "nvcc")
    for args in DEVICE_BUILD:
        out = names[args[-1]]
        tmp = f"{out}.{os.getpid()}.tmp"  # concurrent builds never see a partial object
        cmd = [nvcc] + [CU if a == "CU" else tmp if a == args[-1] else names.get(a, a) for a in args]
        if verbose:
            print(" ".join(cmd))
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{EXTENSION_NAME}: nvcc failed building the kernels:\n{' '.join(cmd)}\n{r.stderr}")
        os.replace(tmp, out)
    return list(names.values())


def load(verbose: bool = False, build_directory: Optional[str] = None):
    """Builds (or takes from torch's cache) and returns the extension."""
    global _extension
    if _extension is None:
        from torch.utils import cpp_extension

        directory = build_directory or cpp_extension._get_build_directory(EXTENSION_NAME, verbose)
        objects = _device_objects(os.path.join(directory, "kernels"), verbose)
        # Only the arch the kernel was verified for: its inline PTX may use arch-specific features.
        saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
        os.environ["TORCH_CUDA_ARCH_LIST"] = "@TORCH_ARCH@"
        try:
            _extension = cpp_extension.load(name=EXTENSION_NAME, sources=[BINDING], extra_ldflags=objects,
                                            with_cuda=True, build_directory=build_directory, verbose=verbose)
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

std::vector<std::vector<std::string>> device_build_commands(const std::string& arch) {
  const TorchArch a = torch_arch(arch);
  const std::string gencode = "-gencode=arch=" + a.compute + ",code=" + a.sm;
  return {{"-O3", gencode, "-rdc=true", "-std=c++17", "-Xcompiler", "-fPIC", "-c", "CU", "-o", "OBJ"},
          {gencode, "-dlink", "-Xcompiler", "-fPIC", "OBJ", "-o", "DLINK"}};
}

std::string torch_loader(const std::string& ext_name, const std::string& cu, const std::string& binding,
                         const std::string& arch) {
  const TorchArch a = torch_arch(arch);
  std::string commands;
  for (const auto& c : device_build_commands(arch)) {
    commands += "    [";
    for (std::size_t i = 0; i < c.size(); ++i) commands += (i ? ", \"" : "\"") + c[i] + "\"";
    commands += "],\n";
  }
  commands.pop_back();
  return evaluator::substitute(kLoader, {{"EXT_NAME", ext_name}, {"CU", cu}, {"BINDING", binding}, {"TORCH_ARCH", a.list},
                                         {"DEVICE_BUILD", commands}});
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
