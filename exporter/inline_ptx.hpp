// Lowering an edited PTX entry back into CUDA C++: a __global__ function whose body is one
// `asm volatile` block holding the entry's PTX body. What ptxas and nvcc require, and how it is met:
// - Kernel parameters become asm input operands; each `ld.param` of the body becomes a `mov`
//   from its operand, in place (NVVM may sink parameter loads into branches).
// - The body's registers are declared inside the asm's `{ }` scope and renamed with a prefix
//   (%r5 -> %x_r5): an operand the compiler substitutes (its own %rd1) would otherwise be shadowed
//   by the body's %rd1 and read an uninitialised register.
// - Labels get the entry's name as prefix, so they are unique in the module.
// - Shared variables the entry uses are declared inside the scope (PTX allows .shared at function
//   scope; NVVM itself emits "demoted" ones there). A dynamic (extern) shared array cannot be
//   declared in a function, so it becomes one file-scope `extern __shared__` array that the asm
//   names and that a dummy operand keeps alive (nvcc drops unreferenced declarations).
// - Performance directives become C++ attributes: .maxntid/.minnctapersm/.maxclusterrank ->
//   __launch_bounds__, .maxnreg -> __maxnreg__, .reqnctapercluster -> __cluster_dims__.
// What cannot be expressed (device-function calls, .global/.const variables, parameters read at
// an offset or by address, .reqntid, .maxnreg together with .maxntid) is refused with a message.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "evaluator/op_export.hpp"
#include "ir/module.hpp"

namespace ptxevo::exporter {

class ExportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A kernel parameter as the exported C++ declares it, in PTX parameter order.
using KernelParam = evaluator::ExportParam;

// The name of the file-scope dynamic shared array that lowered entries refer to.
inline constexpr const char* kDynamicSmemName = "ptxevo_dynamic_smem";
// Prefix of the body's registers inside the asm scope.
inline constexpr const char* kRegisterPrefix = "x_";

struct LoweredEntry {
  std::string definition;        // the extern "C" __global__ function
  bool uses_dynamic_smem = false;  // needs the file-scope extern __shared__ declaration
  unsigned dynamic_smem_align = 16;
};

// Throws ExportError naming the entry and what is not supported.
LoweredEntry lower_entry(const ir::Module& m, const ir::Function& entry, const std::vector<KernelParam>& params);

// C++ attributes for the entry's performance directives ("" for none); throws ExportError.
std::string launch_attributes(const ir::Function& entry);

// The C string literal of `text` (quotes and backslashes escaped), without the surrounding quotes.
std::string c_escape(const std::string& text);

}  // namespace ptxevo::exporter
