// The budget reserves the worst case, refuses what would cross a cap, settles from usage (or
// keeps the worst case without it), and never counts an unpriced model as free.
#include <gtest/gtest.h>

#include "agents/llm_budget.hpp"

namespace ptxevo::agents {
namespace {

TEST(LlmBudget, ReservationThatWouldCrossACapBlocksTheCall) {
  Budget b({.max_calls = {}, .max_input_tokens = {}, .max_output_tokens = 1000, .max_usd = {}}, std::nullopt, "m");
  auto first = b.reserve(100, 600);
  ASSERT_TRUE(std::holds_alternative<Reservation>(first));
  // 600 in flight + 600 more would pass 1000, though nothing is settled yet.
  auto second = b.reserve(100, 600);
  ASSERT_TRUE(std::holds_alternative<std::string>(second));
  EXPECT_NE(std::get<std::string>(second).find("--llm-max-output-tokens"), std::string::npos);
  b.settle(std::get<Reservation>(first), 90, 200);
  EXPECT_TRUE(std::holds_alternative<Reservation>(b.reserve(100, 600)));
}

TEST(LlmBudget, SettlesFromUsageOrKeepsTheWorstCase) {
  Budget b({}, Price{2.0, 10.0}, "m");
  auto r = std::get<Reservation>(b.reserve(1000, 500));
  ASSERT_TRUE(r.usd.has_value());
  EXPECT_DOUBLE_EQ(*r.usd, (1000 * 2.0 + 500 * 10.0) / 1e6);
  EXPECT_DOUBLE_EQ(*b.settle(r, 800, 100), (800 * 2.0 + 100 * 10.0) / 1e6);
  auto r2 = std::get<Reservation>(b.reserve(1000, 500));
  b.settle(r2, std::nullopt, std::nullopt);  // the server sent no usage
  const Spend s = b.spent();
  EXPECT_EQ(s.calls, 2);
  EXPECT_EQ(s.input_tokens, 1800);
  EXPECT_EQ(s.output_tokens, 600);
}

TEST(LlmBudget, ReleasedReservationChargesNothing) {
  Budget b({.max_calls = 1, .max_input_tokens = {}, .max_output_tokens = {}, .max_usd = {}}, std::nullopt, "m");
  b.release(std::get<Reservation>(b.reserve(10, 10)));  // never sent
  EXPECT_EQ(b.spent().calls, 0);
  EXPECT_TRUE(std::holds_alternative<Reservation>(b.reserve(10, 10)));
}

TEST(LlmBudget, UnknownPriceIsNotFree) {
  Budget b({.max_calls = {}, .max_input_tokens = {}, .max_output_tokens = {}, .max_usd = 5.0}, std::nullopt, "mystery");
  auto refused = b.reserve(10, 10);
  ASSERT_TRUE(std::holds_alternative<std::string>(refused));
  EXPECT_NE(std::get<std::string>(refused).find("mystery has no price"), std::string::npos);
  Budget uncapped({}, std::nullopt, "mystery");
  auto r = std::get<Reservation>(uncapped.reserve(10, 10));
  EXPECT_FALSE(uncapped.settle(r, 10, 10).has_value());  // cost unknown, not $0
  EXPECT_EQ(uncapped.spent().unpriced_calls, 1);
}

TEST(LlmBudget, DollarAndCallCapsAndRestore) {
  Budget b({.max_calls = 3, .max_input_tokens = {}, .max_output_tokens = {}, .max_usd = 0.01}, Price{1.0, 1.0}, "m");
  b.restore(Spend{2, 100, 100, 0.0002, 0});
  EXPECT_TRUE(std::holds_alternative<Reservation>(b.reserve(10, 10)));
  auto over = b.reserve(10, 10);  // the 4th call
  ASSERT_TRUE(std::holds_alternative<std::string>(over));
  EXPECT_NE(std::get<std::string>(over).find("call cap"), std::string::npos);
  Budget dollars({.max_calls = {}, .max_input_tokens = {}, .max_output_tokens = {}, .max_usd = 0.01}, Price{1.0, 1.0}, "m");
  EXPECT_TRUE(std::holds_alternative<std::string>(dollars.reserve(5000, 6000)));  // $0.011 worst case
}

}  // namespace
}  // namespace ptxevo::agents
