// Bit widths read off an instruction's modifiers: the element type (.f32, .b16, .f16x2), the
// vector count (.v2/.v4/.v8) and the resulting width of a memory access.
#pragma once

#include <string_view>

#include "ir/module.hpp"

namespace ptxevo::ir {

// Bits of a type modifier such as ".f32" (32), ".bf16x2" (32), ".b128" (128); 0 when `m` is
// not a data type (".global", ".v4", ".pred", ".rn").
int type_bits(std::string_view m);

// The last data-type modifier of `ins` ("" when none): for ld/st/atom/arithmetic this is the
// operation type; for cvt it is the source type.
std::string_view data_type(const Instruction& ins);

// 2, 4 or 8 for .v2/.v4/.v8, otherwise 1.
int vector_lanes(const Instruction& ins);

// Bits one thread moves with a memory instruction: lanes x element bits (ld.global.v4.f32 =
// 128); the copy size of cp.async (its cp-size operand, in bytes) or of a bulk copy whose size
// is an immediate; 32 per register of the fragment operand of ldmatrix/stmatrix/wmma.load/
// wmma.store. 0 when only known at run time (tensor copies, register sizes).
int access_width_bits(const Instruction& ins);

}  // namespace ptxevo::ir
