// A candidate as a PyTorch extension: the exported .cu (cuda_export.hpp), a C++ binding that
// validates its inputs against the options the kernel was built for and launches on the current
// stream, and a Python module that builds the extension with torch.utils.cpp_extension.load on
// first use. The binding and module are the op's (Op::torch_export: rmsnorm_fwd's has QuACK's
// names, kda_fwd's FlashKDA's fwd and an FLA backend); ops declared in files get generated ones
// (declared_export.hpp). This file fills in what every export shares: names, sources, the loader.
#pragma once

#include <string>
#include <vector>

#include "evaluator/op.hpp"
#include "evaluator/spec.hpp"

namespace ptxevo::exporter {

struct TorchFiles {
  std::string binding_name, binding;  // "ptxevo_<op>_binding.cpp"
  std::string module_name, module;    // "ptxevo_<op>.py"
};

// "sm_90a" -> {"9.0a", "compute_90a", "sm_90a"}; throws ExportError for other spellings.
struct TorchArch {
  std::string list, compute, sm;
};
TorchArch torch_arch(const std::string& arch);
// nvcc's arguments for the exported kernels' objects, as the torch loader runs them: the .cu
// compiled as relocatable device code ("CU" -> "OBJ"), then device-linked ("OBJ" -> "DLINK");
// the code generation of nvJitLink, which built the candidate that was gated and timed.
std::vector<std::vector<std::string>> device_build_commands(const std::string& arch);
// The Python that names the extension and its files and builds it on first use: the kernels by
// device_build_commands, then the binding with torch.utils.cpp_extension.load linking them, for
// `arch` only: `EXTENSION_NAME`, `CU`, `BINDING`, `DEVICE_BUILD`, `load()`.
std::string torch_loader(const std::string& ext_name, const std::string& cu, const std::string& binding,
                         const std::string& arch);

// `cu_name` is the exported .cu beside them; `tag` makes the extension's name unique per export
// (torch caches builds by name). Throws ExportError for an op without a torch binding.
TorchFiles torch_export(const evaluator::Op& op, const evaluator::Spec& spec, const std::string& cu_name,
                        const std::string& tag, const std::string& launcher_prototype, const std::string& description);

}  // namespace ptxevo::exporter
