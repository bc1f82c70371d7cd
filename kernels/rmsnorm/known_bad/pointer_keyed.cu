// expect: timed-output-mismatch|unwritten-output
// loophole: docs/loopholes.md 3 and 4 (a shortcut keyed on buffer addresses: honest on one buffer, idle on rotated ones)
// Defect: returns without writing anything when a hash of the out address is odd, so whether a
// call does the work depends on which buffer it got (any two buffers disagree half the time; the
// hash skips the low 16 bits, which an allocator's alignment may fix).
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: keyed on the address.
#define KB_BODY_START if ((((unsigned long long)out >> 16) * 0x9E3779B97F4A7C15ull) >> 63) return;

#include "base.cuh"
