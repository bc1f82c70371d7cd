#include "report/text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

namespace ptxevo::report {

std::string format_fixed(double v, int digits) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string format_speedup(double v) { return format_fixed(v, 3) + "x"; }

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "n/a";
  char buf[64];
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  } else if (seconds < 3600) {
    const auto s = static_cast<long long>(std::llround(seconds));
    std::snprintf(buf, sizeof buf, "%lld min %02lld s", s / 60, s % 60);
  } else {
    const auto m = static_cast<long long>(std::llround(seconds / 60));
    std::snprintf(buf, sizeof buf, "%lld h %02lld min", m / 60, m % 60);
  }
  return buf;
}

namespace {

// Text from the database goes to a terminal: control characters (escape sequences, stray
// carriage returns) would rewrite the screen, so they show as '?'.
std::string printable(const std::string& s) {
  std::string out = s;
  for (char& ch : out) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7f) ch = '?';
  }
  return out;
}

std::string pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

std::string count_list(const std::vector<NamedCount>& counts) {
  std::string out;
  for (const auto& n : counts) out += (out.empty() ? "" : ", ") + std::to_string(n.count) + " " + printable(n.name);
  return out;
}

void write_header(const ReportData& r, std::ostream& out) {
  const auto& c = r.campaign;
  if (c.replay) out << "*** " << kReplayBanner << " ***\n";
  out << "campaign " << c.id << ": " << printable(c.op) << " on " << printable(c.arch) << " (" << printable(c.status)
      << ")\n";
  out << "  spec      " << printable(c.spec_path) << " (sha256 " << printable(c.spec_hash.substr(0, 12)) << ")\n";
  out << "  database  " << printable(r.db_path) << " (schema v" << r.schema_version << ")\n";
  out << "  created   " << printable(c.created_at) << "\n";
  if (!c.mode.empty()) out << "  mode      " << printable(c.mode) << "\n";
  out << "\n";
}

void write_counts(const ReportData& r, std::ostream& out) {
  out << "candidates   " << r.candidates;
  if (!r.candidates_by_state.empty()) out << ": " << count_list(r.candidates_by_state);
  out << "\n";
  if (r.empty()) {
    out << "evaluations  0: no evaluations yet\n";
    return;
  }
  out << "evaluations  " << r.evaluations << " in " << format_duration(r.elapsed_s) << ": "
      << count_list(r.evaluations_by_verdict) << "\n";
  out << "             " << printable(r.first_evaluation_at) << " to " << printable(r.last_evaluation_at) << "\n";
  if (r.winner) {
    const auto& w = *r.winner;
    out << "best         " << format_speedup(w.fitness);
    if (w.fitness_low && w.fitness_high)
      out << " [" << format_fixed(*w.fitness_low, 3) << ", " << format_fixed(*w.fitness_high, 3) << "]";
    out << (r.campaign.replay ? " (replayed)" : "") << "  candidate "
        << w.candidate_id << " (" << printable(w.operator_name) << "), evaluation " << w.evaluation_id << "\n";
  } else {
    out << "best         none: no evaluation passed yet\n";
  }
}

// The points where the best fitness rose: how the search progressed, in a few lines.
void write_progress(const ReportData& r, std::ostream& out) {
  std::vector<const FitnessPoint*> rises;
  std::optional<double> best;
  for (const auto& p : r.series)
    if (p.best && (!best || *p.best > *best)) {
      best = p.best;
      rises.push_back(&p);
    }
  if (rises.empty()) return;
  constexpr std::size_t kShown = 10;
  out << "\nbest fitness so far, at each improvement\n";
  out << "  " << pad("evaluation", 12) << pad("elapsed", 16) << "fitness\n";
  if (rises.size() > kShown) out << "  (" << rises.size() - kShown << " earlier improvements not shown)\n";
  for (std::size_t i = rises.size() > kShown ? rises.size() - kShown : 0; i < rises.size(); ++i)
    out << "  " << pad(std::to_string(rises[i]->index), 12) << pad(format_duration(rises[i]->elapsed_s), 16)
        << format_speedup(*rises[i]->best) << "\n";
}

void write_failures(const ReportData& r, std::ostream& out) {
  if (r.failures_by_reason.empty()) return;
  out << "\nfailures (evaluations by reason code, builds by failing stage)\n";
  std::size_t width = 12;
  for (const auto& n : r.failures_by_reason) width = std::max(width, n.name.size() + 2);
  for (const auto& n : r.failures_by_reason) out << "  " << pad(printable(n.name), width) << n.count << "\n";
}

void write_heldout(const ReportData& r, std::ostream& out) {
  if (r.heldout_failed == 0) return;
  out << "\nheld-out shapes (never shown to the search): " << r.heldout_failed
      << " evaluations failed one; the first distinct reasons:\n";
  for (const auto& reason : r.heldout_reasons) out << "  " << printable(reason) << "\n";
}

void write_winner_shapes(const ReportData& r, std::ostream& out) {
  if (!r.winner || r.winner->shapes.empty()) return;
  out << "\nwinner per shape (speedup over the baseline, 95% CI, fraction of the copy-bandwidth floor)\n";
  std::size_t width = 16;
  for (const auto& s : r.winner->shapes) width = std::max(width, s.shape.size() + 2);
  for (const auto& s : r.winner->shapes) {
    out << "  " << pad(printable(s.shape), width) << pad(format_speedup(s.speedup), 10);
    if (s.ci_low && s.ci_high)
      out << pad("[" + format_fixed(*s.ci_low, 3) + ", " + format_fixed(*s.ci_high, 3) + "]", 18);
    else
      out << pad("[no CI]", 18);
    out << (s.fraction_of_floor ? "floor " + format_fixed(*s.fraction_of_floor, 2) : std::string("floor n/a")) << "\n";
  }
}

void write_environments(const ReportData& r, std::ostream& out) {
  if (r.environments.empty()) return;
  out << "\nenvironments\n";
  for (const auto& e : r.environments)
    out << "  #" << e.id << " " << printable(e.gpu) << ", driver " << printable(e.driver) << ", CUDA "
        << printable(e.cuda) << ": " << e.evaluations << (e.evaluations == 1 ? " evaluation" : " evaluations") << "\n";
}

}  // namespace

void write_report_text(const ReportData& r, std::ostream& out) {
  write_header(r, out);
  write_counts(r, out);
  write_progress(r, out);
  write_failures(r, out);
  write_heldout(r, out);
  write_winner_shapes(r, out);
  write_environments(r, out);
  if (r.campaign.replay) out << "\n*** " << kReplayBanner << " ***\n";
}

}  // namespace ptxevo::report
