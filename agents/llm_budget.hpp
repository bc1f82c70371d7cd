// The per-campaign LLM budget (docs/agents.md, "Budget"). Before each call the worst case is
// reserved: the most tokens the prompt can take plus the full max_tokens, and its dollar cost when the
// model is priced. A call whose reservation would cross a cap is not sent. After the call the
// reservation is settled with the reply's usage, or kept whole when the server reported none.
// A model without a price is never counted as free: its cost is "unknown", and a dollar cap
// refuses every call to it. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

namespace ptxevo::agents {

struct Price {
  double usd_per_million_input = 0;
  double usd_per_million_output = 0;
};

struct BudgetCaps {
  std::optional<std::int64_t> max_calls;
  std::optional<std::int64_t> max_input_tokens;
  std::optional<std::int64_t> max_output_tokens;
  std::optional<double> max_usd;
};

struct Spend {
  std::int64_t calls = 0;
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  double usd = 0;              // of the priced calls
  std::int64_t unpriced_calls = 0;  // calls whose cost is unknown (no price)
};

struct Reservation {
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  std::optional<double> usd;  // nullopt: unpriced
};

// The most tokens a prompt of `bytes` bytes in `messages` messages can take: byte-level BPE
// tokenizers (OpenAI's, Llama's with byte fallback, Claude's) never make a token shorter than
// one byte, plus the chat template's few tokens per message. Real prompts of code take about a
// third of this; the reservation is settled with the reported usage after the call.
[[nodiscard]] std::int64_t worst_case_input_tokens(std::size_t bytes, std::size_t messages);

class Budget {
 public:
  Budget(BudgetCaps caps, std::optional<Price> price, std::string model);

  // The reservation, or why the call must not be sent (a message a user can act on).
  [[nodiscard]] std::variant<Reservation, std::string> reserve(std::int64_t input_estimate, std::int64_t max_output);
  // Settles a reservation with the reply's usage (nullopt: none reported, the reservation stays
  // spent). Returns the cost charged (nullopt when unpriced).
  std::optional<double> settle(const Reservation& reserved, std::optional<std::int64_t> input_tokens,
                               std::optional<std::int64_t> output_tokens);
  // Drops a reservation whose request never left (circuit open): nothing is charged.
  void release(const Reservation& reserved);
  // What a resumed campaign already spent (summed from the trace database).
  void restore(const Spend& spent);

  [[nodiscard]] Spend spent() const;
  [[nodiscard]] const BudgetCaps& caps() const { return caps_; }
  [[nodiscard]] bool priced() const { return price_.has_value(); }
  [[nodiscard]] std::optional<double> cost(std::int64_t input_tokens, std::int64_t output_tokens) const;

 private:
  BudgetCaps caps_;
  std::optional<Price> price_;
  std::string model_;
  mutable std::mutex mutex_;
  Spend spent_;     // settled
  Spend reserved_;  // in flight
};

}  // namespace ptxevo::agents
