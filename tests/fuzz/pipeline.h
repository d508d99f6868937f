// The path DESIGN §10 fuzzes: bytes -> parse (binary or text, with the project's size and depth limits) ->
// FromProto -> ValidateComposition -> Certify -> the f64 VM on seeded random inputs. Shared by the deterministic
// replay test (parse_certify_vm_test.cc) and the libFuzzer entry (fuzz_target.cc).
//
// What "behaved" means at each step: a failure is a clean error (a non-OK status with a message; diagnostics
// with a known code and a message; a VM fault whose message starts with its fault name), never a crash, a hang or
// an exception. And one soundness oracle: a program the certifier ACCEPTS must not fault the VM with
// TileOutOfRange or BadProgram (its addresses are proven in range, its structure checked). Data-dependent faults
// (IndexOutOfRange on random index values, TripOutOfRange, DivisionByZero) remain legitimate outcomes.
#ifndef TESTS_FUZZ_PIPELINE_H_
#define TESTS_FUZZ_PIPELINE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "certify/codes.h"
#include "proto/program.pb.h"
#include "sim/simulate.h"
#include "sim/vm/vm.h"
#include "spatial/proto_file.h"
#include "spatial/proto_io.h"
#include "spatial/tensor_data.h"
#include "spatial/validate.h"
#include "targets/loader.h"

namespace spatial::fuzz {

// How far an input got.
enum class Reached { kParseError, kFromProtoError, kInvalid, kRejected, kCertified };

struct Outcome {
  Reached reached = Reached::kParseError;
  bool vm_ran = false;     // the VM was run (the program was small enough)
  std::string vm_fault;    // the fault's name when it faulted
  bool simulated = false;  // the timing-only machine model ran it (certified, and the VM ran it without a fault)
  std::string misbehaved;  // "" when every step behaved; else what went wrong
};

// Upper bounds for running the VM on a mutant: a mutation that multiplies an extent must not make the replay slow.
inline constexpr double kMaxVmWork = 2e6;           // element operations
inline constexpr int64_t kMaxVmInputElems = 1 << 20;

// A generous estimate of the element operations the VM would do: per section, items x blocks x (each Generic's
// iteration space, each Load/Store's tile elements, each MatmulTiles' multiply-adds).
inline double EstimateWork(const Composition& c) {
  const double tile = static_cast<double>(c.tile_rows) * static_cast<double>(c.tile_cols);
  double work = 0.0;
  for (const Section& s : c.sections) {
    double per_block = 0.0;
    for (const Stage& st : s.stages) {
      if (const auto* g = std::get_if<Generic>(&st.op)) {
        double points = 1.0;
        for (const IterSpec& it : g->iters) points *= std::max<double>(1.0, static_cast<double>(it.extent));
        per_block += points;
      } else if (const auto* l = std::get_if<Load>(&st.op)) {
        per_block += static_cast<double>(l->pattern.block_h) * static_cast<double>(l->pattern.block_w) * tile *
                     std::max<double>(1.0, static_cast<double>(l->num_blocks));
      } else if (const auto* w = std::get_if<Store>(&st.op)) {
        per_block += static_cast<double>(w->pattern.block_h) * static_cast<double>(w->pattern.block_w) * tile;
      } else if (const auto* m = std::get_if<MatmulTiles>(&st.op)) {
        per_block += static_cast<double>(m->m_tiles) * static_cast<double>(m->n_tiles) *
                     static_cast<double>(m->k_tiles) * tile * static_cast<double>(c.tile_cols);
      }
    }
    work += static_cast<double>(std::max<size_t>(1, s.items.size())) *
            std::max<double>(1.0, static_cast<double>(s.num_blocks)) * per_block;
  }
  return work;
}

// splitmix64.
inline uint64_t Mix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Every input of `c`: floats in [-2, 2), integers in [0, 4) (small, so index tensors are often in range and the
// program runs past its guards), or nullopt when they would be too large.
inline std::optional<TensorMap> FuzzInputs(const Composition& c, uint64_t seed) {
  TensorMap in;
  int64_t total = 0;
  for (const Tensor& t : CompositionInputs(c)) {
    if (t.rows <= 0 || t.cols <= 0 || t.rows > kMaxVmInputElems / t.cols) return std::nullopt;
    total += t.rows * t.cols;
    if (total > kMaxVmInputElems) return std::nullopt;
    TensorData d{t.rows, t.cols, t.precision, std::vector<double>(static_cast<size_t>(t.rows * t.cols))};
    for (double& v : d.values) {
      const uint64_t r = Mix(seed);
      v = IsInteger(t.precision) ? static_cast<double>(r % 4) : -2.0 + 4.0 * static_cast<double>(r >> 11) * 0x1.0p-53;
    }
    in[t.name] = std::move(d);
  }
  return in;
}

inline bool KnownDiagnosticCode(const std::string& code) {
  return std::find(codes::kAllCodes.begin(), codes::kAllCodes.end(), code) != codes::kAllCodes.end();
}

// The VM fault a status names, or "" when its message starts with no known fault name.
inline std::string FaultName(const absl::Status& st) {
  for (const char* f : {"BadInput", "BadProgram", "TooLarge", "TileOutOfRange", "IndexOutOfRange", "UnwrittenBuffer",
                        "TripOutOfRange", "StaleStateRead", "DivisionByZero"}) {
    if (absl::StartsWith(st.message(), f)) return f;
  }
  return "";
}

// The shipped targets, loaded once.
inline const std::map<std::string, Target>& ShippedTargets() {
  static const std::map<std::string, Target> targets = [] {
    std::map<std::string, Target> m;
    for (const std::string& name : ShippedTargetNames()) {
      absl::StatusOr<Target> t = LoadTarget(name);
      if (t.ok()) m.emplace(name, *t);
    }
    return m;
  }();
  return targets;
}

// The target a program is certified on: the shipped target it names when that has its tile, else test_tiny.
inline const Target& TargetFor(const std::string& name, int64_t tile_rows, int64_t tile_cols) {
  const std::map<std::string, Target>& targets = ShippedTargets();
  auto it = targets.find(name);
  if (it != targets.end() && it->second.tile_rows() == tile_rows && it->second.tile_cols() == tile_cols) {
    return it->second;
  }
  return targets.at("test_tiny");
}

// Checks that every diagnostic is well formed; returns what is wrong, or "".
inline std::string CheckDiagnostics(const CertifyResult& r) {
  for (const proto::Diagnostic& d : r.diagnostics) {
    if (!KnownDiagnosticCode(d.code())) return absl::StrCat("certify: unknown diagnostic code '", d.code(), "'");
    if (d.message().empty()) return absl::StrCat("certify: ", d.code(), " diagnostic without a message");
  }
  return "";
}

// Runs one input through the whole path: parse, FromProto, validate, certify, the VM, and for a certified program
// the VM ran, the timing-only machine model (`simulate` false leaves it out).
inline Outcome RunPipeline(std::string_view bytes, bool text, uint64_t seed, bool simulate = true) {
  Outcome out;
  proto::Composition p;
  absl::Status parsed = text ? ParseTextProto(bytes, "fuzz.textproto", &p) : ParseBinaryProto(bytes, "fuzz.binpb", &p);
  if (!parsed.ok()) {
    if (parsed.message().empty()) out.misbehaved = "parse failed without a message";
    return out;
  }
  absl::StatusOr<Composition> c = FromProto(p);
  if (!c.ok()) {
    out.reached = Reached::kFromProtoError;
    if (c.status().message().empty()) {
      out.misbehaved = "FromProto failed without a message";
      return out;
    }
    // The certifier's own entry for wire programs must reject it too, with a diagnostic.
    CertifyResult r = CertifyProto(p, TargetFor(p.target(), p.tile_rows(), p.tile_cols()));
    if (r.ok()) out.misbehaved = absl::StrCat("CertifyProto accepted what FromProto rejects: ", c.status().message());
    if (out.misbehaved.empty()) out.misbehaved = CheckDiagnostics(r);
    return out;
  }
  const Target& target = TargetFor(c->target, c->tile_rows, c->tile_cols);
  absl::Status valid = ValidateComposition(*c);
  if (!valid.ok()) {
    out.reached = Reached::kInvalid;
    if (valid.message().empty()) {
      out.misbehaved = "validation failed without a message";
      return out;
    }
    CertifyResult r = Certify(*c, target);
    if (r.ok()) out.misbehaved = absl::StrCat("Certify accepted an invalid program: ", valid.message());
    if (out.misbehaved.empty()) out.misbehaved = CheckDiagnostics(r);
    return out;
  }
  CertifyResult cert = Certify(*c, target);
  out.misbehaved = CheckDiagnostics(cert);
  if (!out.misbehaved.empty()) return out;
  out.reached = cert.ok() ? Reached::kCertified : Reached::kRejected;

  if (EstimateWork(*c) > kMaxVmWork) return out;
  std::optional<TensorMap> inputs = FuzzInputs(*c, seed);
  if (!inputs) return out;
  out.vm_ran = true;
  absl::StatusOr<TensorMap> vm = RunComposition(*c, c->tile_rows, c->tile_cols, *inputs);
  if (vm.ok()) {
    // Certified implies it runs on the machine model too, timing only: every address inside its tensor (the machine
    // checks them itself), no deadlock, no run the model refuses. Simulate forks a child per run.
    if (!cert.ok() || !simulate) return out;
    SimOptions so;
    so.timing_only = true;
    so.timeout_seconds = 60;
    absl::StatusOr<SimResult> sim = Simulate(*c, target, *inputs, so);
    out.simulated = true;
    if (!sim.ok()) {
      out.misbehaved = absl::StrCat("certified and run by the VM, yet the timing-only simulation fails: ",
                                    sim.status().ToString());
    }
    return out;
  }
  out.vm_fault = FaultName(vm.status());
  if (out.vm_fault.empty()) {
    out.misbehaved = absl::StrCat("VM error with no fault name: ", vm.status().ToString());
  } else if (cert.ok() && (out.vm_fault == "TileOutOfRange" || out.vm_fault == "BadProgram")) {
    out.misbehaved = absl::StrCat("certified, yet the VM faults: ", vm.status().message());
  }
  return out;
}

}  // namespace spatial::fuzz

#endif  // TESTS_FUZZ_PIPELINE_H_
