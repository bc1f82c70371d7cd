#include "agents/llm_budget.hpp"

#include <utility>

namespace ptxevo::agents {

std::int64_t worst_case_input_tokens(std::size_t bytes, std::size_t messages) {
  return static_cast<std::int64_t>(bytes + 8 * (messages + 1));
}

Budget::Budget(BudgetCaps caps, std::optional<Price> price, std::string model)
    : caps_(caps), price_(price), model_(std::move(model)) {}

std::optional<double> Budget::cost(std::int64_t input_tokens, std::int64_t output_tokens) const {
  if (!price_) return std::nullopt;
  return (static_cast<double>(input_tokens) * price_->usd_per_million_input +
          static_cast<double>(output_tokens) * price_->usd_per_million_output) /
         1e6;
}

std::variant<Reservation, std::string> Budget::reserve(std::int64_t input_estimate, std::int64_t max_output) {
  std::lock_guard lock(mutex_);
  Reservation r{input_estimate, max_output, cost(input_estimate, max_output)};
  const auto over = [](std::int64_t used, std::int64_t in_flight, std::int64_t want, std::optional<std::int64_t> cap) {
    return cap && used + in_flight + want > *cap;
  };
  if (over(spent_.calls, reserved_.calls, 1, caps_.max_calls)) {
    return "LLM call cap reached (" + std::to_string(*caps_.max_calls) + " calls); raise --llm-max-calls";
  }
  if (over(spent_.input_tokens, reserved_.input_tokens, r.input_tokens, caps_.max_input_tokens)) {
    return "LLM input-token cap would be crossed (" + std::to_string(spent_.input_tokens) + " spent + " +
           std::to_string(r.input_tokens) + " reserved > " + std::to_string(*caps_.max_input_tokens) +
           "); raise --llm-max-input-tokens";
  }
  if (over(spent_.output_tokens, reserved_.output_tokens, r.output_tokens, caps_.max_output_tokens)) {
    return "LLM output-token cap would be crossed (" + std::to_string(spent_.output_tokens) + " spent + " +
           std::to_string(r.output_tokens) + " reserved > " + std::to_string(*caps_.max_output_tokens) +
           "); raise --llm-max-output-tokens or lower --llm-max-tokens";
  }
  if (caps_.max_usd) {
    if (!r.usd) {
      return "model " + model_ + " has no price, so the dollar cap cannot be kept; give --llm-price IN,OUT "
             "(USD per million tokens) or drop --llm-max-usd";
    }
    if (spent_.usd + reserved_.usd + *r.usd > *caps_.max_usd) {
      return "LLM dollar cap would be crossed ($" + std::to_string(spent_.usd) + " spent + $" + std::to_string(*r.usd) +
             " worst case > $" + std::to_string(*caps_.max_usd) + "); raise --llm-max-usd";
    }
  }
  reserved_.calls += 1;
  reserved_.input_tokens += r.input_tokens;
  reserved_.output_tokens += r.output_tokens;
  reserved_.usd += r.usd.value_or(0);
  return r;
}

std::optional<double> Budget::settle(const Reservation& r, std::optional<std::int64_t> input_tokens,
                                     std::optional<std::int64_t> output_tokens) {
  std::lock_guard lock(mutex_);
  reserved_.calls -= 1;
  reserved_.input_tokens -= r.input_tokens;
  reserved_.output_tokens -= r.output_tokens;
  reserved_.usd -= r.usd.value_or(0);
  // No usage reported: the worst case stands, so an unreporting server cannot hide spend.
  const std::int64_t in = input_tokens.value_or(r.input_tokens);
  const std::int64_t out = output_tokens.value_or(r.output_tokens);
  const auto charged = cost(in, out);
  spent_.calls += 1;
  spent_.input_tokens += in;
  spent_.output_tokens += out;
  if (charged) spent_.usd += *charged;
  else spent_.unpriced_calls += 1;
  return charged;
}

void Budget::release(const Reservation& r) {
  std::lock_guard lock(mutex_);
  reserved_.calls -= 1;
  reserved_.input_tokens -= r.input_tokens;
  reserved_.output_tokens -= r.output_tokens;
  reserved_.usd -= r.usd.value_or(0);
}

void Budget::restore(const Spend& s) {
  std::lock_guard lock(mutex_);
  spent_ = s;
}

Spend Budget::spent() const {
  std::lock_guard lock(mutex_);
  return spent_;
}

}  // namespace ptxevo::agents
