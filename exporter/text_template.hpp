// Filling the exporter's source templates: every "@KEY@" replaced by its value.
#pragma once

#include <map>
#include <string>

namespace ptxevo::exporter {

std::string substitute(std::string text, const std::map<std::string, std::string>& values);

}  // namespace ptxevo::exporter
