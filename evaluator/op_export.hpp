// What an op compiled into ptxevo hands `ptxevo export` beyond its launch plan: the host side of
// the exported .cu (plan and launcher, with the knobs baked in) and its PyTorch binding. The op
// writes them because only it knows its plan and its users' calling convention; exporter/ lowers
// the kernels, assembles the files and verifies them. Ops declared in files get both generated
// from their declaration instead (exporter/declared_export.hpp).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "evaluator/tensor.hpp"

namespace ptxevo::evaluator {

// A kernel parameter as the exported C++ declares it, in PTX parameter order.
struct ExportParam {
  std::string type;        // e.g. "const XT* __restrict__", "long long", "float"
  std::string name;        // e.g. "x"
  std::string constraint;  // asm operand constraint: "l" (64-bit), "r" (32-bit int), "f" (float)
};

struct HostExport {
  std::vector<std::string> entries;  // the entries the plan may launch (the export lowers these)
  // Every entry's parameters; an entry missing here takes `kernel_params`.
  std::map<std::string, std::vector<ExportParam>> params_by_entry;
  std::vector<ExportParam> kernel_params;
  std::string code;            // plan + launcher: host code after the kernels, inside #ifndef __CUDACC_RTC__
  std::string prototype;       // the launcher's declarations, for bindings
  std::string plan_prototype;  // the plan function's declaration
};

// Texts of the PyTorch binding (C++) and module (Python). The exporter fills @BINDING@, @CU@,
// @ARCH@, @TAG@ (unique per export), @DESCRIPTION@, @PROTOTYPE@ (HostExport::prototype) and
// @LOADER@ (the Python that builds the extension: EXTENSION_NAME, CU, BINDING, load()).
struct TorchExport {
  std::string binding, module;
};

// The torch bindings' argument check, as C++ text for their templates (@CHECK_TENSOR@): a CUDA
// tensor on `anchor`'s device, of the dtype and shape the kernel was built for, contiguous.
inline constexpr const char* kTorchCheckTensor =
    R"cpp(void check_tensor(const at::Tensor& t, const char* name, at::ScalarType dtype, at::IntArrayRef shape,
                  const at::Tensor& anchor) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
  TORCH_CHECK(t.device() == anchor.device(), name, " must be on ", anchor.device(), " like the other tensors, got ",
              t.device());
  TORCH_CHECK(t.scalar_type() == dtype, name, " must be ", dtype, " (the exported kernel was built for it), got ",
              t.scalar_type());
  TORCH_CHECK(t.sizes() == shape, name, " must have shape ", shape, ", got ", t.sizes());
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
})cpp";

// "@KEY@" -> value, for every key.
std::string substitute(std::string text, const std::map<std::string, std::string>& values);
// The ATen and Python names of a dtype ("at::kBFloat16", "torch.bfloat16").
const char* torch_dtype_cpp(DType t);
const char* torch_dtype_py(DType t);

}  // namespace ptxevo::evaluator
