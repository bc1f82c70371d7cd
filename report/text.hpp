// The terminal summary of a campaign report, and the number formats it shares with the HTML page.
#pragma once

#include <ostream>
#include <string>

#include "report/data.hpp"

namespace ptxevo::report {

// The banner both outputs show for a replayed campaign.
inline constexpr const char* kReplayBanner = "REPLAY (timings from recorded data, not measured)";

void write_report_text(const ReportData& r, std::ostream& out);

// "%.<digits>f"; "n/a" for a non-finite value.
std::string format_fixed(double v, int digits);
// A speedup: "1.234x".
std::string format_speedup(double v);
// "45.2 s", "12 min 03 s", "3 h 07 min".
std::string format_duration(double seconds);

}  // namespace ptxevo::report
