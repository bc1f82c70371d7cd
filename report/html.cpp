#include "report/html.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <vector>

#include "report/text.hpp"

namespace ptxevo::report {

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      case '\t':
      case '\n':
      case '\r': out += ch; break;
      default: {
        const auto u = static_cast<unsigned char>(ch);
        out += (u < 0x20 || u == 0x7f) ? '?' : ch;
      }
    }
  }
  return out;
}

namespace {

std::string esc(std::string_view s) { return html_escape(s); }

// An SVG coordinate: one decimal is below a pixel and keeps the page small.
std::string num(double v) { return format_fixed(v, 1); }

// A numeric axis rounded out to "nice" ticks (1, 2 or 5 times a power of ten).
struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
  int decimals = 0;
};

Axis nice_axis(double lo, double hi, bool integer, int target_ticks = 6) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo < 1e-12) {  // one value: open a window around it
    const double pad = std::max(std::abs(lo) * 0.05, integer ? 1.0 : 1e-3);
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / target_ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  if (integer) step = std::max(step, 1.0);
  Axis a;
  a.lo = std::floor(lo / step) * step;
  a.hi = std::ceil(hi / step) * step;
  const int n = static_cast<int>(std::lround((a.hi - a.lo) / step));
  for (int i = 0; i <= n; ++i) {
    const double t = a.lo + i * step;
    a.ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);  // no "-0.00"
  }
  a.decimals = integer ? 0 : std::clamp(static_cast<int>(std::ceil(-std::log10(step) - 1e-9)), 0, 6);
  return a;
}

// The plot area inside an SVG of width x height, and the maps from data to pixels.
struct Frame {
  double width = 720, height = 320;
  double left = 72, right = 24, top = 24, bottom = 56;
  Axis xa, ya;
  double x(double v) const { return left + (v - xa.lo) / (xa.hi - xa.lo) * (width - left - right); }
  double y(double v) const { return height - bottom - (v - ya.lo) / (ya.hi - ya.lo) * (height - top - bottom); }
  double plot_w() const { return width - left - right; }
  double plot_h() const { return height - top - bottom; }
};

void svg_open(std::ostream& o, const std::string& id, const Frame& f, const std::string& label) {
  o << "<svg id=\"" << id << "\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << num(f.width) << ' '
    << num(f.height) << "\" width=\"" << num(f.width) << "\" height=\"" << num(f.height)
    << "\" role=\"img\" aria-label=\"" << esc(label) << "\">\n<title>" << esc(label) << "</title>\n";
  o << "<rect class=\"area\" x=\"" << num(f.left) << "\" y=\"" << num(f.top) << "\" width=\"" << num(f.plot_w())
    << "\" height=\"" << num(f.plot_h()) << "\"/>\n";
}

void svg_message(std::ostream& o, const Frame& f, const std::string& text) {
  o << "<text class=\"msg\" x=\"" << num(f.left + f.plot_w() / 2) << "\" y=\"" << num(f.top + f.plot_h() / 2)
    << "\" text-anchor=\"middle\">" << esc(text) << "</text>\n";
}

void svg_replay_mark(std::ostream& o, const Frame& f, bool replay) {
  if (!replay) return;
  o << "<text class=\"replay-mark\" x=\"" << num(f.width - f.right - 8) << "\" y=\"" << num(f.top + 18)
    << "\" text-anchor=\"end\">REPLAY</text>\n";
}

// Horizontal grid lines with labels on the y axis.
void svg_y_axis(std::ostream& o, const Frame& f, const std::string& label, const std::string& suffix = "") {
  for (const double t : f.ya.ticks) {
    const double y = f.y(t);
    o << "<line class=\"grid\" x1=\"" << num(f.left) << "\" x2=\"" << num(f.width - f.right) << "\" y1=\"" << num(y)
      << "\" y2=\"" << num(y) << "\"/>\n";
    o << "<text class=\"tick\" x=\"" << num(f.left - 6) << "\" y=\"" << num(y + 4) << "\" text-anchor=\"end\">"
      << format_fixed(t, f.ya.decimals) << suffix << "</text>\n";
  }
  const double cy = f.top + f.plot_h() / 2;
  o << "<text class=\"label\" x=\"16\" y=\"" << num(cy) << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
    << num(cy) << ")\">" << esc(label) << "</text>\n";
}

// Tick marks with labels on the x axis.
void svg_x_axis(std::ostream& o, const Frame& f, const std::string& label) {
  const double base = f.height - f.bottom;
  for (const double t : f.xa.ticks) {
    const double x = f.x(t);
    o << "<line class=\"tick-mark\" x1=\"" << num(x) << "\" x2=\"" << num(x) << "\" y1=\"" << num(base)
      << "\" y2=\"" << num(base + 5) << "\"/>\n";
    o << "<text class=\"tick\" x=\"" << num(x) << "\" y=\"" << num(base + 19) << "\" text-anchor=\"middle\">"
      << format_fixed(t, f.xa.decimals) << "</text>\n";
  }
  o << "<text class=\"label\" x=\"" << num(f.left + f.plot_w() / 2) << "\" y=\"" << num(f.height - 10)
    << "\" text-anchor=\"middle\">" << esc(label) << "</text>\n";
}

void svg_axis_lines(std::ostream& o, const Frame& f) {
  o << "<path class=\"axis\" d=\"M" << num(f.left) << ' ' << num(f.top) << " V" << num(f.height - f.bottom) << " H"
    << num(f.width - f.right) << "\"/>\n";
}

void svg_baseline(std::ostream& o, const Frame& f) {
  const double y = f.y(1.0);
  o << "<line class=\"baseline\" x1=\"" << num(f.left) << "\" x2=\"" << num(f.width - f.right) << "\" y1=\"" << num(y)
    << "\" y2=\"" << num(y) << "\"/>\n";
  o << "<text class=\"baseline-label\" x=\"" << num(f.left + 6) << "\" y=\"" << num(y - 5) << "\">baseline 1.0x</text>\n";
}

// A time axis in the unit that keeps its numbers short.
struct TimeUnit {
  double divisor;
  const char* name;
};
TimeUnit time_unit(double max_seconds) {
  if (max_seconds < 120) return {1, "seconds"};
  if (max_seconds < 7200) return {60, "minutes"};
  return {3600, "hours"};
}

// Plots 1 and 2: the best fitness so far as a step line, every passing evaluation as a dot.
void fitness_plot(std::ostream& o, const ReportData& r, bool by_time) {
  const std::string id = by_time ? "plot-fitness-time" : "plot-fitness-evals";
  const TimeUnit unit = time_unit(r.elapsed_s);
  const auto xval = [&](const FitnessPoint& p) {
    return by_time ? p.elapsed_s / unit.divisor : static_cast<double>(p.index);
  };
  Frame f;
  std::optional<double> lo, hi;
  for (const auto& p : r.series)
    for (const auto v : {p.fitness, p.best})
      if (v) {
        lo = std::min(lo.value_or(*v), *v);
        hi = std::max(hi.value_or(*v), *v);
      }
  const std::string what = by_time ? "Best fitness vs time" : "Best fitness vs evaluations";
  const std::string xlabel = by_time ? std::string(unit.name) + " since the first evaluation" : "evaluation";
  if (!lo) {
    svg_open(o, id, f, what);
    svg_message(o, f, r.empty() ? "no evaluations yet" : "no passing evaluation yet");
    o << "</svg>\n";
    return;
  }
  f.ya = nice_axis(std::min(*lo, 1.0), std::max(*hi, 1.0), false);
  // A campaign of one instant still gets a readable time axis (0 to 1, not a window of 1e-3).
  f.xa = by_time ? nice_axis(0, std::max(xval(r.series.back()), 1.0), false)
                 : nice_axis(1, xval(r.series.back()), true);
  svg_open(o, id, f, what);
  svg_y_axis(o, f, "fitness (speedup over baseline)", "x");
  svg_x_axis(o, f, xlabel);
  svg_baseline(o, f);
  for (const auto& p : r.series)
    if (p.fitness)
      o << "<circle class=\"eval\" cx=\"" << num(f.x(xval(p))) << "\" cy=\"" << num(f.y(*p.fitness))
        << "\" r=\"3\"><title>evaluation " << p.index << ": " << format_speedup(*p.fitness) << "</title></circle>\n";
  std::string d;
  for (const auto& p : r.series) {
    if (!p.best) continue;
    d += d.empty() ? "M" + num(f.x(xval(p))) + ' ' + num(f.y(*p.best))
                   : " H" + num(f.x(xval(p))) + " V" + num(f.y(*p.best));
  }
  o << "<path class=\"best\" d=\"" << d << "\"/>\n";
  svg_axis_lines(o, f);
  svg_replay_mark(o, f, r.campaign.replay);
  o << "</svg>\n";
}

std::string shortened(const std::string& s, std::size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

// Plot 3: the winner's speedup per timed shape, bars from the baseline (1.0x) with the 95% CI
// as whiskers. Bars start at 1.0 because the question is "faster or slower, and how sure".
void winner_plot(std::ostream& o, const ReportData& r) {
  Frame f;
  const std::string what = "Winner's speedup over the baseline per shape";
  if (!r.winner || r.winner->shapes.empty()) {
    svg_open(o, "plot-winner-shapes", f, what);
    svg_message(o, f, r.empty() ? "no evaluations yet" : !r.winner ? "no passing evaluation yet" : "no timed shapes");
    o << "</svg>\n";
    return;
  }
  const auto& shapes = r.winner->shapes;
  const auto n = static_cast<double>(shapes.size());
  std::size_t longest = 0;
  for (const auto& s : shapes) longest = std::max(longest, std::min<std::size_t>(s.shape.size(), 28));
  const bool tilt = shapes.size() > 4 || longest > 14;
  f.bottom = tilt ? 40 + 6.0 * static_cast<double>(longest) : 56;
  f.width = std::max(720.0, f.left + f.right + 64 * n);
  double lo = 1, hi = 1;
  for (const auto& s : shapes) {
    lo = std::min({lo, s.speedup, s.ci_low.value_or(s.speedup)});
    hi = std::max({hi, s.speedup, s.ci_high.value_or(s.speedup)});
  }
  f.ya = nice_axis(lo, hi, false);
  f.xa = {0, n, {}, 0};
  svg_open(o, "plot-winner-shapes", f, what);
  svg_y_axis(o, f, "speedup over baseline", "x");
  const double band = f.plot_w() / n;
  const double bar_w = std::min(48.0, band * 0.6);
  const double base = f.height - f.bottom;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto& s = shapes[i];
    const double cx = f.x(static_cast<double>(i) + 0.5);
    const double y1 = f.y(1.0), ys = f.y(s.speedup);
    o << "<rect class=\"bar " << (s.speedup >= 1 ? "faster" : "slower") << "\" x=\"" << num(cx - bar_w / 2)
      << "\" y=\"" << num(std::min(y1, ys)) << "\" width=\"" << num(bar_w) << "\" height=\""
      << num(std::max(std::abs(y1 - ys), 1.0)) << "\"><title>" << esc(s.shape) << ": " << format_speedup(s.speedup)
      << "</title></rect>\n";
    if (s.ci_low && s.ci_high) {
      const double yl = f.y(*s.ci_low), yh = f.y(*s.ci_high), cap = std::min(8.0, bar_w / 3);
      o << "<path class=\"whisker\" d=\"M" << num(cx) << ' ' << num(yl) << " V" << num(yh) << " M" << num(cx - cap)
        << ' ' << num(yl) << " H" << num(cx + cap) << " M" << num(cx - cap) << ' ' << num(yh) << " H"
        << num(cx + cap) << "\"/>\n";
    }
    const double label_y = std::min(ys, s.ci_high ? f.y(*s.ci_high) : ys) - 6;
    o << "<text class=\"value\" x=\"" << num(cx) << "\" y=\"" << num(label_y) << "\" text-anchor=\"middle\">"
      << format_fixed(s.speedup, 3) << "</text>\n";
    o << "<line class=\"tick-mark\" x1=\"" << num(cx) << "\" x2=\"" << num(cx) << "\" y1=\"" << num(base)
      << "\" y2=\"" << num(base + 5) << "\"/>\n";
    const std::string label = esc(shortened(s.shape, 28));
    if (tilt)
      o << "<text class=\"tick\" x=\"" << num(cx) << "\" y=\"" << num(base + 16) << "\" text-anchor=\"end\" "
        << "transform=\"rotate(-35 " << num(cx) << ' ' << num(base + 16) << ")\">" << label << "</text>\n";
    else
      o << "<text class=\"tick\" x=\"" << num(cx) << "\" y=\"" << num(base + 19) << "\" text-anchor=\"middle\">"
        << label << "</text>\n";
  }
  svg_baseline(o, f);
  svg_axis_lines(o, f);
  svg_replay_mark(o, f, r.campaign.replay);
  o << "</svg>\n";
}

// Plot 4: failures per reason code as horizontal bars (labels can be long).
void failures_plot(std::ostream& o, const ReportData& r) {
  Frame f;
  const std::string what = "Failures by reason";
  const auto& fails = r.failures_by_reason;
  if (fails.empty()) {
    f.height = 160;
    svg_open(o, "plot-failures", f, what);
    svg_message(o, f, r.candidates == 0 ? "no candidates yet" : "no failures");
    o << "</svg>\n";
    return;
  }
  std::size_t longest = 0;
  std::int64_t most = 0;
  for (const auto& n : fails) {
    longest = std::max(longest, std::min<std::size_t>(n.name.size(), 32));
    most = std::max(most, n.count);
  }
  const double row = 26;
  f.left = std::clamp(16 + 7.0 * static_cast<double>(longest), 90.0, 260.0);
  f.height = f.top + f.bottom + row * static_cast<double>(fails.size());
  f.xa = nice_axis(0, static_cast<double>(most), true);
  f.ya = {0, static_cast<double>(fails.size()), {}, 0};
  svg_open(o, "plot-failures", f, what);
  for (const double t : f.xa.ticks) {
    const double x = f.x(t);
    o << "<line class=\"grid\" x1=\"" << num(x) << "\" x2=\"" << num(x) << "\" y1=\"" << num(f.top) << "\" y2=\""
      << num(f.height - f.bottom) << "\"/>\n";
  }
  svg_x_axis(o, f, "count (evaluations; candidates for build:*)");
  for (std::size_t i = 0; i < fails.size(); ++i) {
    const auto& n = fails[i];
    const double top = f.top + row * static_cast<double>(i);
    const bool build = n.name.rfind("build:", 0) == 0;
    const double w = f.x(static_cast<double>(n.count)) - f.x(0);
    o << "<rect class=\"bar " << (build ? "build" : "fail") << "\" x=\"" << num(f.x(0)) << "\" y=\"" << num(top + 4)
      << "\" width=\"" << num(std::max(w, 1.0)) << "\" height=\"" << num(row - 8) << "\"><title>" << esc(n.name)
      << ": " << n.count << "</title></rect>\n";
    o << "<text class=\"tick\" x=\"" << num(f.left - 6) << "\" y=\"" << num(top + row / 2 + 4)
      << "\" text-anchor=\"end\">" << esc(shortened(n.name, 32)) << "</text>\n";
    o << "<text class=\"value\" x=\"" << num(f.x(0) + w + 4) << "\" y=\"" << num(top + row / 2 + 4) << "\">"
      << n.count << "</text>\n";
  }
  svg_axis_lines(o, f);
  o << "</svg>\n";
}

constexpr const char* kStyle = R"css(
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; max-width: 1040px;
       margin: 24px auto; padding: 0 16px; }
h1 { font-size: 1.5em; margin-bottom: 4px; }
h2 { font-size: 1.15em; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.replay { background: #b00020; color: #fff; font-weight: bold; font-size: 1.3em; padding: 12px 16px;
          border-radius: 6px; margin: 12px 0; }
.empty { background: #fff8e1; border: 1px solid #ffcc80; padding: 10px 14px; border-radius: 6px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 3px 12px 3px 0; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 0.9em; }
pre { white-space: pre-wrap; word-break: break-all; background: #f6f6f6; padding: 8px; }
figure { margin: 12px 0; overflow-x: auto; }
figcaption { color: #555; font-size: 0.9em; }
svg text { font-size: 12px; fill: #333; }
svg .label { font-size: 13px; fill: #111; }
svg .msg { font-size: 16px; fill: #777; }
svg .replay-mark { font-size: 16px; font-weight: bold; fill: #b00020; }
svg .area { fill: #fbfbfb; stroke: #ccc; }
svg .grid { stroke: #e6e6e6; }
svg .tick-mark, svg .axis { stroke: #444; fill: none; }
svg .best { fill: none; stroke: #1565c0; stroke-width: 2; }
svg .eval { fill: #78909c; fill-opacity: 0.55; }
svg .baseline { stroke: #c62828; stroke-dasharray: 5 4; }
svg .baseline-label { fill: #c62828; font-size: 11px; }
svg .bar.faster { fill: #2e7d32; }
svg .bar.slower { fill: #c62828; }
svg .bar.fail { fill: #ef6c00; }
svg .bar.build { fill: #6d4c41; }
svg .whisker { stroke: #111; stroke-width: 1.5; fill: none; }
)css";

void fact(std::ostream& o, const std::string& name, const std::string& value_html) {
  o << "<tr><th>" << esc(name) << "</th><td>" << value_html << "</td></tr>\n";
}

std::string count_list(const std::vector<NamedCount>& counts) {
  std::string out;
  for (const auto& n : counts) out += (out.empty() ? "" : ", ") + std::to_string(n.count) + " " + esc(n.name);
  return out;
}

void write_facts(std::ostream& o, const ReportData& r) {
  const auto& c = r.campaign;
  o << "<table class=\"facts\">\n";
  fact(o, "spec", "<code>" + esc(c.spec_path) + "</code> (sha256 <code>" + esc(c.spec_hash) + "</code>)");
  fact(o, "database", "<code>" + esc(r.db_path) + "</code> (schema v" + std::to_string(r.schema_version) + ")");
  fact(o, "status", esc(c.status));
  if (!c.mode.empty()) fact(o, "mode", esc(c.mode));
  fact(o, "created", esc(c.created_at));
  fact(o, "candidates", std::to_string(r.candidates) + (r.candidates_by_state.empty() ? "" : ": ") +
                            count_list(r.candidates_by_state));
  if (r.empty()) {
    fact(o, "evaluations", "0: no evaluations yet");
  } else {
    fact(o, "evaluations", std::to_string(r.evaluations) + ": " + count_list(r.evaluations_by_verdict));
    fact(o, "time", esc(r.first_evaluation_at) + " to " + esc(r.last_evaluation_at) + " (" +
                        format_duration(r.elapsed_s) + ")");
  }
  if (r.winner)
    fact(o, "best fitness",
         "<strong>" + format_speedup(r.winner->fitness) + "</strong>" +
             (r.winner->fitness_low && r.winner->fitness_high
                  ? " (" + format_fixed(*r.winner->fitness_low, 3) + " to " + format_fixed(*r.winner->fitness_high, 3) +
                        ")"
                  : "") +
             (c.replay ? " (replayed)" : "") +
             ", candidate " + std::to_string(r.winner->candidate_id) + " (" + esc(r.winner->operator_name) +
             "), evaluation " + std::to_string(r.winner->evaluation_id));
  else if (!r.empty())
    fact(o, "best fitness", "none: no evaluation passed yet");
  fact(o, "engine settings", "<code>" + esc(c.config_json) + "</code>");
  o << "</table>\n";
}

void write_winner_table(std::ostream& o, const ReportWinner& w) {
  o << "<table class=\"shapes\">\n<tr><th>shape</th><th>speedup</th><th>95% CI</th><th>candidate ms</th>"
       "<th>baseline ms</th><th>fraction of floor</th></tr>\n";
  const auto opt = [](const std::optional<double>& v, int digits) { return v ? format_fixed(*v, digits) : "n/a"; };
  for (const auto& s : w.shapes)
    o << "<tr><td><code>" << esc(s.shape) << "</code></td><td class=\"n\">" << format_speedup(s.speedup)
      << "</td><td class=\"n\">"
      << (s.ci_low && s.ci_high ? format_fixed(*s.ci_low, 3) + " to " + format_fixed(*s.ci_high, 3) : "n/a")
      << "</td><td class=\"n\">" << opt(s.candidate_ms, 4) << "</td><td class=\"n\">" << opt(s.baseline_ms, 4)
      << "</td><td class=\"n\">" << opt(s.fraction_of_floor, 2) << "</td></tr>\n";
  o << "</table>\n<details><summary>winner's genome (candidate " << w.candidate_id << ", <code>"
    << esc(w.genome_hash) << "</code>)</summary><pre>" << esc(w.genome_json) << "</pre></details>\n";
}

void write_count_table(std::ostream& o, const std::string& title, const std::vector<NamedCount>& counts) {
  o << "<table class=\"counts\"><tr><th>" << esc(title) << "</th><th>count</th></tr>\n";
  for (const auto& n : counts)
    o << "<tr><td><code>" << esc(n.name) << "</code></td><td class=\"n\">" << n.count << "</td></tr>\n";
  o << "</table>\n";
}

void write_environments(std::ostream& o, const ReportData& r) {
  o << "<h2>Environments</h2>\n";
  if (r.environments.empty()) {
    o << "<p>None recorded.</p>\n";
    return;
  }
  o << "<table class=\"environments\">\n<tr><th>#</th><th>GPU</th><th>driver</th><th>CUDA</th><th>toolchain</th>"
       "<th>clocks</th><th>evaluations</th></tr>\n";
  for (const auto& e : r.environments)
    o << "<tr><td>" << e.id << "</td><td>" << esc(e.gpu) << "</td><td>" << esc(e.driver) << "</td><td>"
      << esc(e.cuda) << "</td><td><code>" << esc(e.toolchain_json) << "</code></td><td><code>"
      << esc(e.clocks_json) << "</code></td><td class=\"n\">" << e.evaluations << "</td></tr>\n";
  o << "</table>\n";
}

}  // namespace

void write_report_html(const ReportData& r, std::ostream& out) {
  std::ostringstream o;  // built whole, so a failure midway never leaves half a page on `out`
  const auto& c = r.campaign;
  const std::string title = "ptxevo report: campaign " + std::to_string(c.id) + ", " + c.op + " on " + c.arch;
  o << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
       "<meta charset=\"utf-8\"/>\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>"
    << esc(title) << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
  if (c.replay) o << "<div class=\"replay\" id=\"replay-banner\">" << kReplayBanner << "</div>\n";
  o << "<h1>" << esc(title) << "</h1>\n";
  write_facts(o, r);
  if (r.empty()) o << "<p class=\"empty\" id=\"no-evaluations\">This campaign has no evaluations yet.</p>\n";

  o << "<h2>Best fitness</h2>\n<figure>\n";
  fitness_plot(o, r, false);
  o << "<figcaption>Best fitness so far (line) and each passing evaluation's fitness (dots) against the "
       "evaluation number. Fitness is the geometric-mean speedup over the baseline.</figcaption>\n</figure>\n"
       "<figure>\n";
  fitness_plot(o, r, true);
  o << "<figcaption>The same against the time since the campaign's first evaluation.</figcaption>\n</figure>\n";

  o << "<h2>Winner per shape</h2>\n<figure>\n";
  winner_plot(o, r);
  o << "<figcaption>Speedup of the best candidate's latest passing evaluation on each timed shape; bars start "
       "at the baseline (1.0x), whiskers are the 95% confidence interval of the paired ratio.</figcaption>\n"
       "</figure>\n";
  if (r.winner && !r.winner->shapes.empty()) write_winner_table(o, *r.winner);

  o << "<h2>Failures</h2>\n<figure>\n";
  failures_plot(o, r);
  o << "<figcaption>Evaluations that did not pass, counted once per reason code (the text before ':'); "
       "build:STAGE counts candidates whose build failed at that stage.</figcaption>\n</figure>\n";
  if (!r.failures_by_reason.empty()) write_count_table(o, "reason", r.failures_by_reason);
  if (r.heldout_failed > 0) {
    // The user's view of the held-out shapes; the search only ever saw "a held-out shape failed".
    o << "<h2>Held-out shapes</h2>\n<p id=\"heldout\">" << r.heldout_failed
      << " evaluations failed a held-out shape (never shown to the search). The first distinct reasons:</p>\n<ul>\n";
    for (const auto& reason : r.heldout_reasons) o << "<li><code>" << esc(reason) << "</code></li>\n";
    o << "</ul>\n";
  }

  o << "<h2>Counts</h2>\n";
  write_count_table(o, "candidate state", r.candidates_by_state);
  write_count_table(o, "evaluation verdict", r.evaluations_by_verdict);
  write_environments(o, r);
  if (c.replay) o << "<div class=\"replay\">" << kReplayBanner << "</div>\n";
  o << "<footer><p>Generated by <code>ptxevo report</code> from <code>" << esc(r.db_path)
    << "</code>.</p></footer>\n</body>\n</html>\n";
  out << o.str();
}

}  // namespace ptxevo::report
