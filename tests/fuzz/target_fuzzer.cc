// libFuzzer entry for one entry point (tests/fuzz/entry_points.h: CheckTarget). Built with -DSPATIAL_FUZZ=ON under clang
// and run by `make fuzz`; a misbehaviour aborts, so libFuzzer keeps the input as a crash. Add a minimized crash to
// entry_points_replay_test.cc.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "tests/fuzz/entry_points.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  google::protobuf::LogSilencer quiet;
  const std::string bad = spatial::fuzz::CheckTarget(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!bad.empty()) {
    std::fprintf(stderr, "misbehaved: %s\n", bad.c_str());
    std::abort();
  }
  return 0;
}
