#include "exporter/text_template.hpp"

namespace ptxevo::exporter {

std::string substitute(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    const std::string token = "@" + key + "@";
    for (auto at = text.find(token); at != std::string::npos; at = text.find(token, at + value.size()))
      text.replace(at, token.size(), value);
  }
  return text;
}

}  // namespace ptxevo::exporter
