#include "cli/report_command.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "report/data.hpp"
#include "report/html.hpp"
#include "report/text.hpp"

namespace ptxevo::cli {

namespace {

constexpr const char* kDefaultDb = "ptxevo.db";

// Written next to the target and renamed over it, so a reader never sees half a page.
bool write_html(const report::ReportData& data, const std::string& path, std::ostream& err) {
  const std::filesystem::path target(path);
  std::filesystem::path tmp = target;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) {
      err << "ptxevo report: cannot write " << tmp.string() << ": does its directory exist and is it writable?\n";
      return false;
    }
    report::write_report_html(data, f);
    f.flush();
    if (!f) {
      err << "ptxevo report: writing " << tmp.string() << " failed (disk full?)\n";
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    err << "ptxevo report: cannot move " << tmp.string() << " to " << path << ": " << ec.message() << "\n";
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace

int run_report(const ReportOptions& o, std::ostream& out, std::ostream& err) {
  std::string db = o.db;
  if (db.empty()) {
    // The campaigns' run folders (ptxevo-runs/<spec>/campaign.db), then an older ./ptxevo.db.
    std::error_code ec;
    std::vector<std::string> found;
    for (const auto& d : std::filesystem::directory_iterator("ptxevo-runs", ec))
      if (std::filesystem::exists(d.path() / "campaign.db", ec)) found.push_back((d.path() / "campaign.db").string());
    std::sort(found.begin(), found.end());
    if (found.size() == 1) {
      db = found.front();
    } else if (found.size() > 1) {
      err << "ptxevo report: several campaigns' run folders here; pass --db with one of:\n";
      for (const auto& f : found) err << "  " << f << "\n";
      return 2;
    } else if (std::filesystem::exists(kDefaultDb, ec)) {
      db = kDefaultDb;
    } else {
      err << "ptxevo report: no ptxevo-runs/*/campaign.db or " << kDefaultDb << " in the current directory ("
          << std::filesystem::current_path(ec).string() << "); pass --db FILE with the campaign's trace database\n";
      return 2;
    }
  }
  report::ReportData data;
  try {
    data = report::load_report(db, o.campaign);
  } catch (const report::ReportError& e) {
    err << "ptxevo report: " << e.what() << "\n";
    return e.kind() == report::ReportError::Kind::Usage ? 2 : 1;
  } catch (const std::exception& e) {
    err << "ptxevo report: cannot read " << db << ": " << e.what() << "\n";
    return 1;
  }
  report::write_report_text(data, out);
  if (!o.html.empty()) {
    if (!write_html(data, o.html, err)) return 1;
    out << "\nwrote " << o.html << "\n";
  }
  return 0;
}

}  // namespace ptxevo::cli
