// What the machine records of a run for the timeline outputs: one span per engine per stage invocation. Kept free
// of SystemC so the trace and VCD writers (and their tests) need no simulation kernel.
#ifndef SIM_REPORT_SPAN_H_
#define SIM_REPORT_SPAN_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spatial {

// The engines of one site (DESIGN §8), in the order they appear in reports and as trace threads.
enum class Engine : uint8_t { kReader = 0, kUnpack = 1, kMatrix = 2, kSfpu = 3, kPack = 4, kWriter = 5 };
inline constexpr int kNumEngines = 6;

inline std::string_view EngineName(Engine e) {
  static constexpr std::array<std::string_view, kNumEngines> kNames = {"reader", "unpack", "matrix",
                                                                      "sfpu",   "pack",   "writer"};
  return kNames[static_cast<int>(e)];
}

// An engine busy from start to start + dur (cycles) on one stage invocation.
struct Span {
  double start = 0.0;
  double dur = 0.0;
  int32_t site = 0;
  int32_t section = 0;
  int32_t stage = 0;
  int32_t block = 0;  // the fold block of a body stage, else -1
  int64_t item = 0;   // the work item's id
  Engine engine = Engine::kReader;
};

// The names a timeline needs: sites by coordinate, stages by section.
struct TimelineInfo {
  double clock_hz = 1e9;
  int64_t grid_y = 1;
  int64_t grid_x = 1;
  std::vector<std::string> section_names;
  std::vector<std::vector<std::string>> stage_names;  // [section][stage]
};

}  // namespace spatial

#endif  // SIM_REPORT_SPAN_H_
