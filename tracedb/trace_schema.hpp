// The trace database's schema as an ordered list of migrations. Migration i (0-based) takes a
// file from schema version i to i + 1; PRAGMA user_version records the version reached. A
// released migration is never edited: a schema change appends a new one.
#pragma once

#include <span>
#include <string_view>

namespace ptxevo::tracedb {

std::span<const std::string_view> trace_migrations();

}  // namespace ptxevo::tracedb
