// The campaign report as one self-contained HTML page: no scripts, fonts or images from
// elsewhere, the plots drawn as inline SVG (ids plot-fitness-evals, plot-fitness-time,
// plot-winner-shapes, plot-failures). The markup is also well-formed XML, so a strict parser
// (and the render test) can check it.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "report/data.hpp"

namespace ptxevo::report {

void write_report_html(const ReportData& r, std::ostream& out);

// Text for HTML/XML content or attribute values: & < > " ' escaped, control characters
// (invalid in XML) shown as '?'.
std::string html_escape(std::string_view s);

}  // namespace ptxevo::report
