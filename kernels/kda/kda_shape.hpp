// How a kda_fwd shape names its problem. A spec shape is a map of positive integers, so a list of
// sequence lengths cannot be written in it; the shape names a length set by its sequence count N
// instead (kda_length_sets below, documented in README.md):
//   B  batch rows, T  tokens per row, H  heads, N  sequences, D  head dim (optional; must be 128)
//   N == B       : B independent rows of T tokens, no cu_seqlens (FlashKDA's batched path)
//   B == 1, N > 1: N packed sequences with the lengths of set N; T must equal their sum, and the
//                  kernel gets cu_seqlens int64 [N + 1]
// Why one set per N: the engine fills cu_seqlens through Op::fill_fixed, which sees only the
// tensor's descriptor (name, dtype, shape = [N + 1]), not the Shape; N is all it can recover.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "evaluator/op.hpp"

namespace ptxevo::kernels {

struct KdaDims {
  std::int64_t batch = 1, tokens = 1, heads = 1, sequences = 1;
  bool packed = false;                   // cu_seqlens is an input
  std::vector<std::int64_t> cu_seqlens;  // N + 1 offsets into the B * T packed tokens (also when not packed)
  std::int64_t total_tokens() const { return batch * tokens; }
};

// Parses and checks a shape; throws std::invalid_argument with a message that says what to fix.
KdaDims kda_dims(const evaluator::Shape& s);

// The lengths of the packed sequences of set N (sequence count N >= 2), or empty if there is none.
std::vector<std::int64_t> kda_length_set(std::int64_t n);
// The N values that have a set, for messages and the README test.
std::vector<std::int64_t> kda_length_set_counts();
// {0, l0, l0 + l1, ...}.
std::vector<std::int64_t> kda_cu_seqlens(const std::vector<std::int64_t>& lengths);
// Throws std::invalid_argument unless c starts at 0, strictly increases and ends at total_tokens.
void check_cu_seqlens(const std::vector<std::int64_t>& c, std::int64_t total_tokens);

}  // namespace ptxevo::kernels
