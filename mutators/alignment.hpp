// Known alignment of address registers, proven from the IR (used by widen_vector).
//
// Every register gets the largest power of two its value is provably a multiple of. Roots:
// `ld.param` of a kernel pointer parameter declared `.ptr(.global) .align N` gives N; the
// address of a variable (`mov %r, sym`, `[sym+off]`) gives the variable's `.align` (or its
// element size when no `.align` is written). Arithmetic carries it: add/sub/or/xor/selp/min of
// two values -> the smaller; mul.lo/mul.wide/mad.lo -> the product; shl by k -> << k; and ->
// the larger; mov, neg, cvta and integer cvt (no .sat) keep it; an integer immediate c gives its
// lowest set bit. Anything else (a loaded value, %tid.x, a float op, a call) gives 1.
// Flow-insensitive: a register's alignment is the minimum over all its definitions, iterated
// from "unbounded" down to a fixed point, so a loop-carried `add %r, %r, 16` keeps 16. A
// register with no definition in the function (a .func parameter) gets 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/module.hpp"

namespace ptxevo::mutators {

inline constexpr std::uint64_t kMaxKnownAlign = 4096;  // cap: no access needs more

class AlignmentInfo {
 public:
  AlignmentInfo(const ir::Module& m, const ir::Function& f);

  // Alignment of a register, symbol or integer immediate operand (1 for anything else).
  std::uint64_t of(const ir::Operand& op) const;
  // Alignment of the address [base+offset] of a memory operand (kind Address).
  std::uint64_t of_address(const ir::Operand& addr) const;
  // Alignment of a variable's address: its .align, else its element size; 1 when unknown.
  std::uint64_t of_symbol(const std::string& name) const;

 private:
  std::uint64_t value_of(const ir::Instruction& ins) const;

  const ir::Module& m_;
  const ir::Function& f_;
  std::vector<std::uint64_t> regs_;
};

// Lowest set bit of v (kMaxKnownAlign for 0 or anything above it).
std::uint64_t low_bit(std::int64_t v);

}  // namespace ptxevo::mutators
