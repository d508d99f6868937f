#include "sim/report/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <memory>
#include <tuple>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace spatial {
namespace {

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

// "-" is stdout (through a duplicate of its descriptor, so closing the file leaves stdout open).
absl::StatusOr<File> OpenForWrite(const std::string& path) {
  if (path == "-") {
    std::fflush(stdout);
    const int fd = dup(STDOUT_FILENO);
    File f(fd < 0 ? nullptr : fdopen(fd, "w"));
    if (!f) return absl::NotFoundError(absl::StrCat("cannot write to stdout: ", std::strerror(errno)));
    return f;
  }
  File f(std::fopen(path.c_str(), "w"));
  if (!f) return absl::NotFoundError(absl::StrCat("cannot write '", path, "': ", std::strerror(errno)));
  return f;
}

absl::Status Close(File f, const std::string& path) {
  bool bad = std::ferror(f.get()) != 0;
  bad |= std::fclose(f.release()) != 0;
  if (bad) return absl::DataLossError(absl::StrCat("error writing '", path, "'"));
  return absl::OkStatus();
}

// A JSON string literal body: quotes, backslashes and control characters escaped.
std::string JsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

std::string StageName(const TimelineInfo& info, const Span& s) {
  if (s.section >= 0 && s.section < static_cast<int>(info.stage_names.size())) {
    const auto& names = info.stage_names[s.section];
    if (s.stage >= 0 && s.stage < static_cast<int>(names.size())) return names[s.stage];
  }
  return absl::StrCat("stage", s.stage);
}

std::string SectionName(const TimelineInfo& info, int section) {
  if (section >= 0 && section < static_cast<int>(info.section_names.size())) return info.section_names[section];
  return absl::StrCat("section", section);
}

}  // namespace

absl::Status WriteChromeTrace(const std::string& path, const TimelineInfo& info, const std::vector<Span>& spans) {
  auto f_or = OpenForWrite(path);
  if (!f_or.ok()) return f_or.status();
  File f = std::move(f_or).value();
  FILE* out = f.get();
  // Microseconds per cycle: Chrome trace times are microseconds, fractional allowed.
  const double us = info.clock_hz > 0 ? 1e6 / info.clock_hz : 1e-3;
  std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", out);
  bool first = true;
  auto sep = [&] {
    if (!first) std::fputs(",\n", out);
    first = false;
  };
  const int64_t sites = std::max<int64_t>(1, info.grid_y * info.grid_x);
  for (int64_t p = 0; p < sites; ++p) {
    sep();
    std::fprintf(out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%lld,\"tid\":0,\"args\":{\"name\":\"site (%lld,%lld)\"}}",
                 static_cast<long long>(p), static_cast<long long>(p / info.grid_x),
                 static_cast<long long>(p % info.grid_x));
    sep();
    std::fprintf(out, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%lld,\"tid\":0,\"args\":{\"sort_index\":%lld}}",
                 static_cast<long long>(p), static_cast<long long>(p));
    for (int e = 0; e < kNumEngines; ++e) {
      sep();
      std::fprintf(out, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%lld,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                   static_cast<long long>(p), e, std::string(EngineName(static_cast<Engine>(e))).c_str());
      sep();
      std::fprintf(out, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%lld,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                   static_cast<long long>(p), e, e);
    }
  }
  // Names are escaped once per stage, not once per event.
  std::vector<std::vector<std::string>> names(info.stage_names.size());
  for (size_t s = 0; s < info.stage_names.size(); ++s) {
    for (const std::string& n : info.stage_names[s]) names[s].push_back(JsonEscape(n));
  }
  std::vector<std::string> sections;
  for (size_t s = 0; s < info.section_names.size(); ++s) sections.push_back(JsonEscape(info.section_names[s]));
  for (const Span& s : spans) {
    sep();
    const bool known = s.section >= 0 && s.section < static_cast<int>(names.size()) && s.stage >= 0 &&
                       s.stage < static_cast<int>(names[s.section].size());
    const std::string name = known ? names[s.section][s.stage] : JsonEscape(StageName(info, s));
    const std::string cat = s.section >= 0 && s.section < static_cast<int>(sections.size())
                                ? sections[s.section]
                                : JsonEscape(SectionName(info, s.section));
    std::fprintf(out,
                 "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.6f,\"dur\":%.6f,\"pid\":%d,\"tid\":%d,"
                 "\"args\":{\"cycle\":%.3f,\"cycles\":%.3f,\"item\":%lld,\"block\":%d}}",
                 name.c_str(), cat.c_str(), s.start * us, s.dur * us, s.site, static_cast<int>(s.engine), s.start,
                 s.dur, static_cast<long long>(s.item), s.block);
  }
  std::fputs("\n]}\n", out);
  return Close(std::move(f), path);
}

absl::Status WriteVcd(const std::string& path, const TimelineInfo& info, const std::vector<Span>& spans,
                      int64_t window_cycles) {
  auto f_or = OpenForWrite(path);
  if (!f_or.ok()) return f_or.status();
  File f = std::move(f_or).value();
  FILE* out = f.get();
  const int64_t sites = std::max<int64_t>(1, info.grid_y * info.grid_x);
  const double window = window_cycles > 0 ? static_cast<double>(window_cycles) : INFINITY;
  // Picoseconds per cycle: VCD times are integers in the timescale.
  const double ps = info.clock_hz > 0 ? 1e12 / info.clock_hz : 1000.0;
  auto code = [](int64_t i) {
    std::string c;
    do {
      c.push_back(static_cast<char>(33 + i % 94));
      i /= 94;
    } while (i > 0);
    return c;
  };
  std::fputs("$date simulated $end\n$version spatial sim $end\n$timescale 1ps $end\n$scope module grid $end\n", out);
  for (int64_t p = 0; p < sites; ++p) {
    std::fprintf(out, "$scope module site_%lld_%lld $end\n", static_cast<long long>(p / info.grid_x),
                 static_cast<long long>(p % info.grid_x));
    for (int e = 0; e < kNumEngines; ++e) {
      std::fprintf(out, "$var wire 1 %s %s $end\n", code(p * kNumEngines + e).c_str(),
                   std::string(EngineName(static_cast<Engine>(e))).c_str());
    }
    std::fputs("$upscope $end\n", out);
  }
  std::fputs("$upscope $end\n$enddefinitions $end\n", out);
  // Busy is a count of open spans per wire (an engine's spans may touch end to start); a wire changes only when the
  // count crosses zero.
  struct Change {
    int64_t t;
    int64_t wire;
    int delta;
  };
  std::vector<Change> changes;
  for (const Span& s : spans) {
    if (s.start >= window || s.dur <= 0) continue;
    const int64_t wire = static_cast<int64_t>(s.site) * kNumEngines + static_cast<int>(s.engine);
    const double end = std::min(s.start + s.dur, window);
    changes.push_back({std::llround(s.start * ps), wire, +1});
    changes.push_back({std::llround(end * ps), wire, -1});
  }
  // Ends before starts at the same instant, so back-to-back spans do not glitch.
  std::sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
    return std::tie(a.t, a.wire, a.delta) < std::tie(b.t, b.wire, b.delta);
  });
  std::vector<int> open(static_cast<size_t>(sites * kNumEngines), 0);
  std::vector<char> level(open.size(), 0);
  std::fputs("#0\n$dumpvars\n", out);
  for (size_t w = 0; w < open.size(); ++w) std::fprintf(out, "0%s\n", code(static_cast<int64_t>(w)).c_str());
  std::fputs("$end\n", out);
  size_t i = 0;
  while (i < changes.size()) {
    const int64_t t = changes[i].t;
    std::vector<int64_t> touched;
    for (; i < changes.size() && changes[i].t == t; ++i) {
      open[changes[i].wire] += changes[i].delta;
      touched.push_back(changes[i].wire);
    }
    bool stamped = false;
    int64_t last = -1;
    for (int64_t w : touched) {
      if (w == last) continue;
      last = w;
      const char now = open[w] > 0 ? 1 : 0;
      if (now == level[w]) continue;
      level[w] = now;
      if (!stamped) std::fprintf(out, "#%lld\n", static_cast<long long>(t));
      stamped = true;
      std::fprintf(out, "%c%s\n", now ? '1' : '0', code(w).c_str());
    }
  }
  return Close(std::move(f), path);
}

}  // namespace spatial
