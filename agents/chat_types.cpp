#include "agents/chat_types.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace ptxevo::agents {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Retryable: return "retryable";
    case ErrorKind::Fatal: return "fatal";
    case ErrorKind::OutOfQuota: return "out_of_quota";
    case ErrorKind::Truncated: return "truncated";
    case ErrorKind::Malformed: return "malformed";
  }
  return "unknown";
}

ErrorKind classify_status(int http_status) {
  // 408 request timeout and 409 lock conflict are transient per the OpenAI/Anthropic SDKs;
  // 429 is refined by the body (quota vs rate limit); every 5xx, including Anthropic's 529
  // "overloaded", is transient.
  if (http_status == 408 || http_status == 409 || http_status == 429 || http_status >= 500) {
    return ErrorKind::Retryable;
  }
  return ErrorKind::Fatal;
}

bool mentions_out_of_quota(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // OpenAI: insufficient_quota and billing/spend-limit codes; Anthropic: billing_error,
  // enforced_spend_limit_reached, "Your credit balance is too low ...".
  static constexpr std::array<std::string_view, 6> kNeedles = {
      "insufficient_quota", "credit balance", "billing_hard_limit", "billing_error",
      "spend_limit",        "spend limit"};
  return std::any_of(kNeedles.begin(), kNeedles.end(),
                     [&](std::string_view n) { return lower.find(n) != std::string::npos; });
}

std::string clip(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t cut = max_bytes;
  // Back off continuation bytes so the clipped text stays valid UTF-8 for JSON/logs.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

}  // namespace ptxevo::agents
