// expect: out-of-bounds
// loophole: reading outside an input (before its start): memory there is mapped and readable unless guard pages make it fault
// Defect: thread 0 of row 0 also reads the byte just before x; the value only steers a branch that is never
// taken, so every output is right.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: reads the byte just before x. A volatile load: neither NVVM nor ptxas drops it (ptxas
// removed a plain one, knowing a byte never equals 0x1FF); the result is unchanged.
#define KB_BEFORE_ROW_SUM                                                                                        \
  if (active && row == 0 && t == 0) {                                                                            \
    unsigned int before;                                                                                         \
    asm volatile("ld.volatile.global.u8 %0, [%1];" : "=r"(before) : "l"(reinterpret_cast<const char*>(x) - 1)); \
    if (before == 0x1FFu) ss += 1.f;                                                                             \
  }

#include "base.cuh"
