// libFuzzer entry for the parse -> FromProto -> Validate -> Certify -> VM path (tests/fuzz/pipeline.h), built as
// `parse_certify_vm_fuzzer` with -DSPATIAL_FUZZ=ON under clang (every library instrumented) and run by `make fuzz`,
// which seeds its corpus with the golden programs, each prefixed with a NUL byte so that it reads as text.
//
// The first byte picks the encoding (even: text, odd: binary); the rest is the program. Any misbehaviour the
// replay test would report (an error without a message, an unknown diagnostic code, a VM error that names no
// fault, a certified program faulting the VM on an address) aborts, so libFuzzer keeps the input as a crash.
// Minimize a crash with -minimize_crash=1 and add it as a case to parse_certify_vm_test.cc.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "google/protobuf/stubs/logging.h"
#include "tests/fuzz/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  google::protobuf::LogSilencer quiet;  // mutants are often invalid UTF-8; protobuf would log each one
  const bool text = (data[0] & 1) == 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const spatial::fuzz::Outcome o = spatial::fuzz::RunPipeline(bytes, text, size);
  if (!o.misbehaved.empty()) {
    std::fprintf(stderr, "misbehaved: %s\n", o.misbehaved.c_str());
    std::abort();
  }
  return 0;
}
