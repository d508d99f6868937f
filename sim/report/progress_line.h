// A progress line for long runs (DESIGN: progress on long runs). Header-only: the simulator's child process and
// the `vm` subcommand both print one.
#ifndef SIM_REPORT_PROGRESS_LINE_H_
#define SIM_REPORT_PROGRESS_LINE_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"

namespace spatial {

// A progress line on stderr that rewrites itself in place: silent for the first two seconds (short runs print
// nothing) and at most four updates a second; cleared when the run ends so the report starts on a clean line.
class ProgressLine {
 public:
  // `on`: show anything at all (the caller knows stderr is a terminal and the user did not ask for quiet).
  explicit ProgressLine(bool on, std::string who = "simulate")
      : on_(on), who_(std::move(who)), start_(std::chrono::steady_clock::now()) {}
  ~ProgressLine() { Done(); }
  // Clears the line (so what follows starts on a clean one); later updates may show it again.
  void Done() {
    if (shown_) std::fprintf(stderr, "\r%*s\r", static_cast<int>(width_), "");
    shown_ = false;
  }
  void Update(const std::string& what) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    if (elapsed < 2.0 || (shown_ && std::chrono::duration<double>(now - last_).count() < 0.25)) return;
    last_ = now;
    const std::string line = absl::StrFormat("%s: %s (%.0f s)", who_, what, elapsed);
    width_ = std::max(width_, line.size());
    std::fprintf(stderr, "\r%-*s", static_cast<int>(width_), line.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  // A VmOptions::progress callback that names the pass.
  std::function<void(int, int, int64_t, int64_t)> VmCallback(std::string pass) {
    if (!on_) return nullptr;
    return [this, pass](int section, int sections, int64_t item, int64_t items) {
      Update(absl::StrFormat("%s: section %d/%d, item %d/%d", pass, section + 1, sections, item + 1, items));
    };
  }

 private:
  bool on_;
  std::string who_;
  bool shown_ = false;
  size_t width_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace spatial

#endif  // SIM_REPORT_PROGRESS_LINE_H_
