#include "sim/report/svg.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spatial/proto_file.h"

namespace spatial {
namespace {

// Layout, in pixels. The plot area is the same for the section strip and the site lanes so they share one axis.
constexpr double kWidth = 1200;
constexpr double kLeft = 110;  // the label column
constexpr double kRight = 40;  // room for the last tick label, centred on the plot's right edge
constexpr double kPlotW = kWidth - kLeft - kRight;
constexpr double kTitleY = 22;
constexpr double kLegendY = 40;
constexpr double kSectionY = 52;
constexpr double kSectionH = 18;
constexpr double kAxisY = 86;  // tick label baseline
constexpr double kChartY = 94;
constexpr double kLaneH = 4;
constexpr double kLanePitch = 5;
constexpr double kSiteGap = 8;
constexpr double kSitePitch = kNumEngines * kLanePitch + kSiteGap;
constexpr double kNoteH = 16;
constexpr double kBottom = 16;
// Bounds on the drawing: a browser stays responsive whatever the run's size.
constexpr int kMaxSites = 64;
constexpr size_t kMaxRectsPerLane = 2000;
constexpr double kMergeGapPx = 0.5;  // closer intervals are indistinguishable on screen
constexpr double kMinRectW = 0.5;    // a one-cycle burst on a long run still shows

// Plain C strings: the system Abseil's StrCat does not take std::string_view.
constexpr std::array<const char*, kNumEngines> kEngineColors = {"#4e79a7", "#f28e2b", "#e15759",
                                                                "#76b7b2", "#59a14f", "#b07aa1"};
constexpr std::array<const char*, 2> kSectionColors = {"#c6dbef", "#9ecae1"};

std::string Eng(int e) { return std::string(EngineName(static_cast<Engine>(e))); }

// Text for element content and attribute values. Control characters XML 1.0 forbids are dropped, not escaped
// (no escape makes them legal).
std::string XmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') break;
        out.push_back(ch);
    }
  }
  return out;
}

// A coordinate: two decimals at most, no trailing zeros (keeps big lanes small), never "-0".
std::string Num(double v) {
  std::string s = absl::StrFormat("%.2f", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string Percent(double fraction) { return absl::StrFormat("%.1f%%", fraction * 100.0); }

// The smallest 1/2/2.5/5 x 10^k (>= 1 cycle) giving fewer than 10 steps over extent: 6 to 10 ticks counting 0.
double NiceStep(double extent) {
  for (double mag = 1;; mag *= 10) {
    for (double m : {1.0, 2.0, 2.5, 5.0}) {
      if (m == 2.5 && mag < 10) continue;  // ticks stay whole cycles
      if (extent / (m * mag) < 10) return m * mag;
    }
  }
}

// A rough width of sans-serif text at font-size 11, to decide whether a label fits in its bar.
double TextWidth(std::string_view s, double font = 11) { return 0.6 * font * static_cast<double>(s.size()); }

void Rect(std::string& out, double x, double y, double w, double h, const std::string& attrs) {
  absl::StrAppend(&out, "<rect x=\"", Num(x), "\" y=\"", Num(y), "\" width=\"", Num(w), "\" height=\"", Num(h),
                  "\" ", attrs, "/>\n");
}

void Text(std::string& out, double x, double y, const std::string& attrs, const std::string& escaped) {
  absl::StrAppend(&out, "<text x=\"", Num(x), "\" y=\"", Num(y), "\"", attrs.empty() ? "" : " ", attrs, ">", escaped,
                  "</text>\n");
}

// Sorted [start, end) cycle intervals with overlaps and touching ends merged: the lane's exact busy time.
std::vector<std::pair<double, double>> Union(std::vector<std::pair<double, double>> iv) {
  std::sort(iv.begin(), iv.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& [s, e] : iv) {
    if (!out.empty() && s <= out.back().second) {
      out.back().second = std::max(out.back().second, e);
    } else {
      out.emplace_back(s, e);
    }
  }
  return out;
}

// One engine lane of one site: an exact rect per interval once intervals closer than half a pixel merge, or, when
// that still leaves too many, one rect per run of pixel columns with the same busy fraction (as opacity).
void DrawLane(std::string& out, const std::vector<std::pair<double, double>>& busy, double scale, double y,
              const std::string& cls) {
  std::vector<std::pair<double, double>> px;  // in pixels from the plot's left edge
  for (const auto& [s, e] : busy) {
    const double x0 = s * scale, x1 = e * scale;
    if (!px.empty() && x0 - px.back().second < kMergeGapPx) {
      px.back().second = std::max(px.back().second, x1);
    } else {
      px.emplace_back(x0, x1);
    }
  }
  const std::string attrs = absl::StrCat("class=\"", cls, "\"");
  if (px.size() <= kMaxRectsPerLane) {
    for (const auto& [x0, x1] : px) Rect(out, kLeft + x0, y, std::max(x1 - x0, kMinRectW), kLaneH, attrs);
    return;
  }
  const int cols = static_cast<int>(std::ceil(kPlotW));
  std::vector<double> frac(cols, 0.0);
  for (const auto& [s, e] : busy) {
    const double x0 = s * scale, x1 = e * scale;
    for (int c = std::max(0, static_cast<int>(x0)); c < cols && c < x1; ++c) {
      frac[c] += std::min<double>(x1, c + 1) - std::max<double>(x0, c);
    }
  }
  // Opacity in tenths so neighbouring columns share a rect; any activity stays visible (at least 0.2).
  auto level = [&](int c) {
    const double f = std::min(1.0, frac[c]);
    return f <= 0 ? 0 : std::max(2, static_cast<int>(std::lround(f * 10)));
  };
  for (int c = 0; c < cols;) {
    const int q = level(c);
    int end = c + 1;
    while (end < cols && level(end) == q) ++end;
    if (q > 0) {
      const std::string a = q == 10 ? attrs : absl::StrCat(attrs, " fill-opacity=\"", Num(q / 10.0), "\"");
      Rect(out, kLeft + c, y, end - c, kLaneH, a);
    }
    c = end;
  }
}

}  // namespace

std::string RenderSvg(const TimelineInfo& info, const std::vector<Span>& spans, const proto::SimReport& report) {
  // The shared time axis covers the run, every section and every span, so nothing is drawn past the plot.
  double extent = static_cast<double>(report.total_cycles());
  for (const proto::SectionStats& s : report.sections()) {
    extent = std::max(extent, static_cast<double>(s.start_cycle() + s.cycles()));
  }
  std::vector<const Span*> valid;
  for (const Span& s : spans) {
    if (!std::isfinite(s.start) || !std::isfinite(s.dur) || s.start < 0) continue;
    if (static_cast<int>(s.engine) >= kNumEngines) continue;  // no lane to draw it in
    valid.push_back(&s);
    extent = std::max(extent, s.start + s.dur);
  }
  if (!(extent > 0) || !std::isfinite(extent)) extent = 1;
  const double scale = kPlotW / extent;
  const int64_t grid_x = std::max<int64_t>(1, info.grid_x);
  const int64_t grid_sites = std::max<int64_t>(1, info.grid_y * info.grid_x);

  // Used sites in ascending order; only the first kMaxSites get lanes. std::map keeps the output deterministic.
  std::map<int32_t, int> row_of;
  for (const Span* s : valid) row_of.emplace(s->site, 0);
  const int used = static_cast<int>(row_of.size());
  const int drawn = std::min(used, kMaxSites);
  {
    int r = 0;
    for (auto& [site, row] : row_of) row = r++;
  }
  std::vector<std::vector<std::pair<double, double>>> lanes(static_cast<size_t>(drawn) * kNumEngines);
  for (const Span* s : valid) {
    const int row = row_of[s->site];
    if (row >= drawn || s->dur <= 0) continue;
    lanes[static_cast<size_t>(row) * kNumEngines + static_cast<int>(s->engine)].emplace_back(s->start,
                                                                                              s->start + s->dur);
  }

  const int notes = (valid.empty() ? 1 : 0) + (used > drawn ? 1 : 0);
  const double chart_bottom = kChartY + drawn * kSitePitch;
  const double height = std::ceil(chart_bottom + notes * kNoteH + kBottom);
  const std::string w = Num(kWidth), h = Num(height);

  std::string out;
  absl::StrAppend(&out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"",
                  w, "\" height=\"", h, "\" viewBox=\"0 0 ", w, " ", h,
                  "\" font-family=\"sans-serif\" font-size=\"11\">\n<style>");
  // Busy rects are coloured by class so the biggest part of the file does not repeat a fill per rect.
  for (int e = 0; e < kNumEngines; ++e) {
    absl::StrAppend(&out, ".busy.", Eng(e), "{fill:", kEngineColors[e], "}");
  }
  absl::StrAppend(&out, "</style>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");

  // Title: what ran where, and how long.
  const double clock_hz = report.clock_hz() > 0 ? report.clock_hz() : info.clock_hz;
  const double us = clock_hz > 0 ? static_cast<double>(report.total_cycles()) / clock_hz * 1e6 : 0.0;
  const std::string name = report.composition().empty() ? "simulation" : report.composition();
  Text(out, 10, kTitleY, "font-size=\"15\" font-weight=\"bold\"",
       XmlEscape(absl::StrCat(name, " on ", report.target().empty() ? "?" : report.target(), ": ",
                              report.total_cycles(), " cycles, ", absl::StrFormat("%.2f", us), " us")));

  // Legend: engine colours with their busy fraction over the whole grid.
  for (int e = 0; e < kNumEngines; ++e) {
    const std::string engine = Eng(e);
    std::string label = engine;
    for (const proto::EngineStats& st : report.engines()) {
      if (st.engine() == engine) absl::StrAppend(&label, " ", Percent(st.busy_fraction()), " busy");
    }
    const double x = kLeft + e * 150;
    Rect(out, x, kLegendY - 9, 10, 10, absl::StrCat("fill=\"", kEngineColors[e], "\""));
    Text(out, x + 14, kLegendY, "", XmlEscape(label));
  }
  Text(out, kLeft + kNumEngines * 150, kLegendY, "",
       XmlEscape(absl::StrCat(used, " of ", grid_sites, " sites used")));

  // Section strip: one bar per section; the label goes inside when it fits, the tooltip always has it all.
  Text(out, kLeft - 6, kSectionY + 13, "text-anchor=\"end\"", "sections");
  for (int i = 0; i < report.sections_size(); ++i) {
    const proto::SectionStats& s = report.sections(i);
    const double x = kLeft + static_cast<double>(s.start_cycle()) * scale;
    const double bw = std::max(static_cast<double>(s.cycles()) * scale, kMinRectW);
    std::string full = absl::StrCat(s.name(), ": ", s.cycles(), " cycles");
    if (s.has_roofline()) {
      absl::StrAppend(&full, ", ", Percent(s.roofline().fraction()), " of roofline");
      if (!s.roofline().limited_by().empty()) absl::StrAppend(&full, " (", s.roofline().limited_by(), ")");
    }
    absl::StrAppend(&out, "<rect x=\"", Num(x), "\" y=\"", Num(kSectionY), "\" width=\"", Num(bw), "\" height=\"",
                    Num(kSectionH), "\" fill=\"", kSectionColors[i % 2], "\" stroke=\"#6b8fb3\" stroke-width=\"0.5\">",
                    "<title>", XmlEscape(full), "</title></rect>\n");
    const std::string shorter = absl::StrCat(s.name(), " ", s.cycles());
    const std::string& label = TextWidth(full) + 6 <= bw ? full : shorter;
    if (TextWidth(label) + 6 <= bw) Text(out, x + 3, kSectionY + 13, "", XmlEscape(label));
  }

  // Time axis: round tick values in cycles, with grid lines down through the lanes.
  Text(out, kLeft - 6, kAxisY, "text-anchor=\"end\"", "cycles");
  const double step = NiceStep(extent);
  const double grid_bottom = std::max(chart_bottom - kSiteGap, kChartY);
  for (int64_t k = 0; static_cast<double>(k) * step <= extent * (1 + 1e-12); ++k) {
    const double t = static_cast<double>(k) * step;
    const double x = kLeft + t * scale;
    absl::StrAppend(&out, "<line x1=\"", Num(x), "\" y1=\"", Num(kAxisY + 3), "\" x2=\"", Num(x), "\" y2=\"",
                    Num(grid_bottom), "\" stroke=\"#dddddd\" stroke-width=\"1\"/>\n");
    Text(out, x, kAxisY, "text-anchor=\"middle\"", absl::StrFormat("%.0f", t));
  }

  // Per-site tooltips from the report's site statistics, keyed by coordinate.
  std::map<std::pair<int64_t, int64_t>, const proto::SiteStats*> stats;
  for (const proto::SiteStats& st : report.site_stats()) stats.emplace(std::make_pair(st.y(), st.x()), &st);

  for (const auto& [site, row] : row_of) {
    if (row >= drawn) break;
    const double top = kChartY + row * kSitePitch;
    const int64_t y = site / grid_x, x = site % grid_x;
    std::string tip = absl::StrCat("site (", y, ",", x, ")");
    if (auto it = stats.find({y, x}); it != stats.end()) {
      absl::StrAppend(&tip, ": ", it->second->items(), " items");
      for (const proto::EngineStats& e : it->second->engines()) {
        absl::StrAppend(&tip, ", ", e.engine(), " ", Percent(e.busy_fraction()));
      }
    }
    absl::StrAppend(&out, "<g>\n<text x=\"", Num(kLeft - 6), "\" y=\"",
                    Num(top + kNumEngines * kLanePitch / 2 + 4), "\" text-anchor=\"end\">site (", y, ",", x,
                    ")<title>", XmlEscape(tip), "</title></text>\n");
    Rect(out, kLeft, top, kPlotW, kNumEngines * kLanePitch - (kLanePitch - kLaneH), "fill=\"#f4f4f4\"");
    for (int e = 0; e < kNumEngines; ++e) {
      DrawLane(out, Union(lanes[static_cast<size_t>(row) * kNumEngines + e]), scale, top + e * kLanePitch,
               absl::StrCat("busy ", Eng(e)));
    }
    absl::StrAppend(&out, "</g>\n");
  }

  double note_y = chart_bottom + 12;
  if (valid.empty()) {
    Text(out, kLeft, note_y, "fill=\"#555555\"", "no engine spans recorded");
    note_y += kNoteH;
  }
  if (used > drawn) {
    Text(out, kLeft, note_y, "fill=\"#555555\"", absl::StrCat("... ", used - drawn, " more sites not drawn"));
  }
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

absl::Status WriteSvg(const std::string& path, const TimelineInfo& info, const std::vector<Span>& spans,
                      const proto::SimReport& report) {
  // One writer of whole files for the project ("-" is stdout), as the report and programs use.
  return WriteStringToFile(path, RenderSvg(info, spans, report));
}

}  // namespace spatial
