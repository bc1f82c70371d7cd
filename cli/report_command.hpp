// `ptxevo report`: summarise a campaign from the trace database on the terminal, and
// optionally as a self-contained HTML page with plots.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace ptxevo::cli {

struct ReportOptions {
  std::string db;                         // empty: ./ptxevo.db when it exists
  std::optional<std::int64_t> campaign;   // empty: the campaign with the most recent activity
  std::string html;                       // also write the HTML page here
};

// Exit status: 0 with a report (an empty campaign included), 2 when the database or campaign
// named (or the default ./ptxevo.db) is not there, 1 when the file cannot be reported on or
// the page cannot be written.
int run_report(const ReportOptions& o, std::ostream& out, std::ostream& err);

}  // namespace ptxevo::cli
