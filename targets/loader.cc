#include "targets/loader.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <system_error>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "spatial/proto_file.h"
#include "spatial/status_macros.h"

namespace spatial {

// Generated at build time from targets/*.textproto (targets/CMakeLists.txt), sorted by name.
namespace targets_internal {
struct EmbeddedTarget {
  const char* name;
  const char* text;
  std::size_t size;
};
extern const EmbeddedTarget kEmbeddedTargets[];
extern const std::size_t kNumEmbeddedTargets;
}  // namespace targets_internal

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::TextFormat;

constexpr int64_t kMaxTileDim = 1024;   // larger tiles exist on no known machine; catches unit mix-ups
constexpr int64_t kMaxGridDim = 4096;   // ditto for the grid

// A 1-based source position.
struct Loc {
  int line = 1;
  int col = 1;
};

// One message being checked: where it came from in the text (when known) and its dotted path for messages.
// Locations of absent fields fall back to the enclosing message's own line, so an error about a missing field
// points at the block that should have held it.
class Scope {
 public:
  Scope(const Descriptor* desc, const TextFormat::ParseInfoTree* tree, Loc loc, std::string path)
      : desc_(desc), tree_(tree), loc_(loc), path_(std::move(path)) {}

  Loc loc() const { return loc_; }

  // Where field `name` (its `index`-th value when repeated) was written; the scope's own location otherwise.
  Loc FieldLoc(const char* name, int index = -1) const {
    const FieldDescriptor* f = Field(name);
    if (tree_ == nullptr || f == nullptr) return loc_;
    if (!f->is_repeated()) index = -1;
    TextFormat::ParseLocation l = tree_->GetLocation(f, index);
    // The list syntax `f: [A, B]` records one location for the whole list, under index 0.
    if (l.line < 0 && index > 0) l = tree_->GetLocation(f, 0);
    if (l.line < 0) return loc_;
    return Loc{l.line + 1, l.column + 1};
  }

  // Whether field `name` appears in the text (always false without location information).
  bool Written(const char* name) const {
    const FieldDescriptor* f = Field(name);
    if (tree_ == nullptr || f == nullptr) return false;
    return tree_->GetLocation(f, f->is_repeated() ? 0 : -1).line >= 0;
  }

  // The scope of nested message field `name`.
  Scope Nested(const char* name, int index = -1) const {
    const FieldDescriptor* f = Field(name);
    const TextFormat::ParseInfoTree* sub = nullptr;
    if (tree_ != nullptr && f != nullptr) sub = tree_->GetTreeForNested(f, f->is_repeated() ? index : -1);
    std::string path = Path(name);
    if (index >= 0) absl::StrAppend(&path, "[", index, "]");
    return Scope(f != nullptr ? f->message_type() : nullptr, sub, FieldLoc(name, index), std::move(path));
  }

  std::string Path(const char* name) const { return path_.empty() ? name : absl::StrCat(path_, ".", name); }
  const std::string& path() const { return path_; }

 private:
  const FieldDescriptor* Field(const char* name) const {
    return desc_ != nullptr ? desc_->FindFieldByName(name) : nullptr;
  }

  const Descriptor* desc_;
  const TextFormat::ParseInfoTree* tree_;
  Loc loc_;
  std::string path_;
};

std::string EnumName(const google::protobuf::EnumDescriptor* e, int v) {
  const google::protobuf::EnumValueDescriptor* d = e->FindValueByNumber(v);
  return d != nullptr ? d->name() : absl::StrCat(v);
}
std::string PrecisionString(int p) { return EnumName(proto::Precision_descriptor(), p); }

// Collects every semantic error of one target, GNU-style.
class Checker {
 public:
  explicit Checker(std::string filename) : filename_(std::move(filename)) {}

  void Error(Loc at, const std::string& msg) {
    errors_.push_back(absl::StrCat(filename_, ":", at.line, ":", at.col, ": error: ", msg));
  }

  // A required int64: absent (zero and not written) is "missing"; otherwise it must lie in [lo, hi].
  void RequireInt(const Scope& s, const char* name, int64_t v, int64_t lo, int64_t hi) {
    if (v == 0 && !s.Written(name) && lo > 0) {
      Error(s.loc(), absl::StrCat("missing required field '", s.Path(name), "'"));
    } else if (v < lo || v > hi) {
      Error(s.FieldLoc(name), absl::StrCat(s.Path(name), " must be in [", lo, ", ", hi, "], got ", v));
    }
  }

  // A required positive, finite double.
  void RequirePositive(const Scope& s, const char* name, double v) {
    if (v == 0 && !s.Written(name)) {
      Error(s.loc(), absl::StrCat("missing required field '", s.Path(name), "'"));
    } else if (!(v > 0) || !std::isfinite(v)) {
      Error(s.FieldLoc(name), absl::StrCat(s.Path(name), " must be a finite number > 0, got ", v));
    }
  }

  // An optional non-negative, finite double (0 = none).
  void RequireNonNegative(const Scope& s, const char* name, double v) {
    if (!(v >= 0) || !std::isfinite(v)) {
      Error(s.FieldLoc(name), absl::StrCat(s.Path(name), " must be a finite number >= 0, got ", v));
    }
  }

  // A required enum: UNSPECIFIED (0) is missing.
  void RequireEnum(const Scope& s, const char* name, int v, const google::protobuf::EnumDescriptor* e) {
    if (v != 0) return;
    if (s.Written(name)) {
      Error(s.FieldLoc(name), absl::StrCat(s.Path(name), " must not be ", EnumName(e, 0)));
    } else {
      Error(s.loc(), absl::StrCat("missing required field '", s.Path(name), "'"));
    }
  }

  // A required message field; returns whether it is present.
  bool RequireMessage(const Scope& parent, const char* name, bool present) {
    if (!present) Error(parent.loc(), absl::StrCat("missing required field '", parent.Path(name), "'"));
    return present;
  }

  absl::Status Result() const {
    if (errors_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
  }

 private:
  std::string filename_;
  std::vector<std::string> errors_;
};

void CheckAcc(const proto::Target& t, const Scope& top, Checker& c) {
  if (t.acc_size() == 0) {
    c.Error(top.loc(), "missing required field 'acc' (accumulator tiles per precision)");
    return;
  }
  std::set<int> seen;
  for (int i = 0; i < t.acc_size(); ++i) {
    const proto::AccCapacity& a = t.acc(i);
    Scope s = top.Nested("acc", i);
    c.RequireEnum(s, "precision", a.precision(), proto::Precision_descriptor());
    if (a.precision() != 0 && !seen.insert(a.precision()).second) {
      c.Error(s.FieldLoc("precision"),
              absl::StrCat("duplicate accumulator precision ", PrecisionString(a.precision()), " in ", s.path()));
    }
    c.RequireInt(s, "tiles_full_sync", a.tiles_full_sync(), 1, int64_t{1} << 20);
    c.RequireInt(s, "tiles_double_buf", a.tiles_double_buf(), 1, int64_t{1} << 20);
    if (a.tiles_double_buf() > a.tiles_full_sync() && a.tiles_full_sync() > 0) {
      c.Error(s.FieldLoc("tiles_double_buf"),
              absl::StrCat(s.Path("tiles_double_buf"), " (", a.tiles_double_buf(), ") exceeds ",
                           s.Path("tiles_full_sync"), " (", a.tiles_full_sync(),
                           "): double buffering uses half of the register, never more than all of it"));
    }
  }
}

void CheckDatapaths(const proto::Target& t, const Scope& top, Checker& c) {
  if (!c.RequireMessage(top, "datapaths", t.has_datapaths())) return;
  const proto::Datapaths& d = t.datapaths();
  Scope s = top.Nested("datapaths");

  std::set<int> storage;
  if (d.storage_size() == 0) c.Error(s.loc(), absl::StrCat("missing required field '", s.Path("storage"), "'"));
  for (int i = 0; i < d.storage_size(); ++i) {
    int p = d.storage(i);
    if (p == 0) {
      c.Error(s.FieldLoc("storage", i), absl::StrCat(s.Path("storage"), "[", i, "] must not be PRECISION_UNSPECIFIED"));
    } else if (!storage.insert(p).second) {
      c.Error(s.FieldLoc("storage", i), absl::StrCat("duplicate storage precision ", PrecisionString(p)));
    }
  }
  auto in_storage = [&](const char* name, int p, int index) {
    if (p != 0 && !storage.empty() && storage.count(p) == 0) {
      c.Error(s.FieldLoc(name, index), absl::StrCat(s.Path(name), index >= 0 ? absl::StrCat("[", index, "]") : "",
                                                    " is ", PrecisionString(p),
                                                    ", which is not among the storage precisions"));
    }
  };

  if (d.elementwise_float() != 0 && !IsFloat(static_cast<Precision>(d.elementwise_float()))) {
    c.Error(s.FieldLoc("elementwise_float"), absl::StrCat(s.Path("elementwise_float"), " must be a float precision, got ",
                                                          PrecisionString(d.elementwise_float())));
  }
  in_storage("elementwise_float", d.elementwise_float(), -1);
  if (d.elementwise_int() != 0 && !IsInteger(static_cast<Precision>(d.elementwise_int()))) {
    c.Error(s.FieldLoc("elementwise_int"), absl::StrCat(s.Path("elementwise_int"), " must be an integer precision, got ",
                                                        PrecisionString(d.elementwise_int())));
  }
  in_storage("elementwise_int", d.elementwise_int(), -1);
  in_storage("matrix_in", d.matrix_in(), -1);

  // A matrix engine has both an operand and an accumulator precision, and its accumulator needs Dst capacity.
  if ((d.matrix_in() == 0) != (d.matrix_acc() == 0)) {
    const char* missing = d.matrix_in() == 0 ? "matrix_in" : "matrix_acc";
    const char* present = d.matrix_in() == 0 ? "matrix_acc" : "matrix_in";
    c.Error(s.FieldLoc(present), absl::StrCat(s.Path(present), " is set but ", s.Path(missing),
                                              " is not: a matrix engine needs both"));
  }
  if (d.matrix_acc() != 0) {
    bool has_acc = false;
    for (const auto& a : t.acc()) has_acc |= a.precision() == d.matrix_acc();
    if (!has_acc && t.acc_size() > 0) {
      c.Error(s.FieldLoc("matrix_acc"), absl::StrCat(s.Path("matrix_acc"), " is ", PrecisionString(d.matrix_acc()),
                                                     " but no acc entry gives capacity at that precision"));
    }
  }

  if (d.index_precisions_size() == 0) {
    c.Error(s.loc(), absl::StrCat("missing required field '", s.Path("index_precisions"),
                                  "' (an index rides an integer, never the float datapath)"));
  }
  for (int i = 0; i < d.index_precisions_size(); ++i) {
    int p = d.index_precisions(i);
    if (!IsInteger(static_cast<Precision>(p))) {
      c.Error(s.FieldLoc("index_precisions", i),
              absl::StrCat(s.Path("index_precisions"), "[", i, "] is ", PrecisionString(p),
                           ", not an integer precision (bf16 holds integers exactly only up to 256)"));
    } else {
      in_storage("index_precisions", p, i);
    }
  }
}

void CheckCosts(const proto::Target& t, const Scope& top, Checker& c) {
  if (!c.RequireMessage(top, "costs", t.has_costs())) return;
  const proto::Costs& k = t.costs();
  Scope s = top.Nested("costs");
  c.RequirePositive(s, "matmul_lofi", k.matmul_lofi());
  c.RequirePositive(s, "matmul_hifi2", k.matmul_hifi2());
  c.RequirePositive(s, "matmul_hifi3", k.matmul_hifi3());
  c.RequirePositive(s, "matmul_hifi4", k.matmul_hifi4());
  // Each fidelity phase adds passes over the mantissa bits: a higher fidelity is never cheaper.
  const std::pair<const char*, double> fid[] = {{"matmul_lofi", k.matmul_lofi()},
                                                {"matmul_hifi2", k.matmul_hifi2()},
                                                {"matmul_hifi3", k.matmul_hifi3()},
                                                {"matmul_hifi4", k.matmul_hifi4()}};
  for (int i = 1; i < 4; ++i) {
    if (fid[i].second > 0 && fid[i - 1].second > 0 && fid[i].second < fid[i - 1].second) {
      c.Error(s.FieldLoc(fid[i].first), absl::StrCat(s.Path(fid[i].first), " (", fid[i].second, ") is less than ",
                                                     s.Path(fid[i - 1].first), " (", fid[i - 1].second,
                                                     "): a higher fidelity is never cheaper"));
    }
  }
  c.RequirePositive(s, "eltwise_add_per_tile", k.eltwise_add_per_tile());
  c.RequirePositive(s, "eltwise_mul_per_tile", k.eltwise_mul_per_tile());
  c.RequirePositive(s, "sfpu_op_per_tile", k.sfpu_op_per_tile());
  c.RequirePositive(s, "unpack_bytes_per_cycle", k.unpack_bytes_per_cycle());
  c.RequirePositive(s, "pack_bytes_per_cycle", k.pack_bytes_per_cycle());
  c.RequireNonNegative(s, "pipeline_latency", k.pipeline_latency());
  std::set<std::pair<int, bool>> seen;
  for (int i = 0; i < k.sfpu_size(); ++i) {
    const proto::SfpuCost& f = k.sfpu(i);
    Scope fs = s.Nested("sfpu", i);
    c.RequireEnum(fs, "kind", f.kind(), proto::SfpuKind_descriptor());
    c.RequirePositive(fs, "cycles_per_tile", f.cycles_per_tile());
    if (f.kind() != 0 && !seen.insert({f.kind(), f.approx()}).second) {
      c.Error(fs.loc(), absl::StrCat("duplicate SFPU cost for ", EnumName(proto::SfpuKind_descriptor(), f.kind()),
                                     " (approx: ", f.approx() ? "true" : "false", ") in ", fs.path()));
    }
    if (f.cycles_per_tile() > 0 && k.sfpu_op_per_tile() > 0 && f.cycles_per_tile() < k.sfpu_op_per_tile()) {
      c.Error(fs.FieldLoc("cycles_per_tile"),
              absl::StrCat(fs.Path("cycles_per_tile"), " (", f.cycles_per_tile(), ") is below ",
                           s.Path("sfpu_op_per_tile"), " (", k.sfpu_op_per_tile(),
                           "): no SFPU function is faster than one instruction row over the tile"));
    }
  }
}

void CheckNumerics(const proto::Target& t, const Scope& top, Checker& c) {
  if (!c.RequireMessage(top, "numerics", t.has_numerics())) return;
  const proto::Numerics& n = t.numerics();
  Scope s = top.Nested("numerics");
  c.RequireEnum(s, "sfpu_mad", n.sfpu_mad(), proto::Rounding_descriptor());
  c.RequireEnum(s, "sfpu_store", n.sfpu_store(), proto::Rounding_descriptor());
  c.RequireEnum(s, "pack", n.pack(), proto::Rounding_descriptor());
  c.RequireEnum(s, "unpack", n.unpack(), proto::Rounding_descriptor());
  c.RequireEnum(s, "exp", n.exp(), proto::ExpAlgorithm_descriptor());
  c.RequireEnum(s, "recip", n.recip(), proto::RecipAlgorithm_descriptor());
  c.RequireEnum(s, "rsqrt", n.rsqrt(), proto::RsqrtAlgorithm_descriptor());
  c.RequireEnum(s, "silu", n.silu(), proto::SiluAlgorithm_descriptor());
  c.RequireEnum(s, "fidelity", n.fidelity(), proto::Fidelity_descriptor());
  c.RequireInt(s, "recip_newton_iters", n.recip_newton_iters(), 0, 8);
  c.RequireInt(s, "rsqrt_newton_iters", n.rsqrt_newton_iters(), 0, 8);
}

}  // namespace

namespace {

absl::Status Validate(const proto::Target& t, const std::string& filename, const TextFormat::ParseInfoTree* tree) {
  Checker c(filename);
  Scope top(proto::Target::descriptor(), tree, Loc{1, 1}, "");

  if (t.name().empty()) {
    if (top.Written("name")) {
      c.Error(top.FieldLoc("name"), "name must not be empty");
    } else {
      c.Error(top.loc(), "missing required field 'name'");
    }
  }
  if (c.RequireMessage(top, "tile", t.has_tile())) {
    Scope s = top.Nested("tile");
    c.RequireInt(s, "rows", t.tile().rows(), 1, kMaxTileDim);
    c.RequireInt(s, "cols", t.tile().cols(), 1, kMaxTileDim);
  }
  if (c.RequireMessage(top, "grid", t.has_grid())) {
    Scope s = top.Nested("grid");
    c.RequireInt(s, "y", t.grid().y(), 1, kMaxGridDim);
    c.RequireInt(s, "x", t.grid().x(), 1, kMaxGridDim);
  }
  c.RequireInt(top, "local_mem_bytes", t.local_mem_bytes(), 1, int64_t{1} << 40);
  if (t.local_mem_reserved() < 0) {
    c.Error(top.FieldLoc("local_mem_reserved"),
            absl::StrCat("local_mem_reserved must be >= 0, got ", t.local_mem_reserved()));
  } else if (t.local_mem_bytes() > 0 && t.local_mem_reserved() >= t.local_mem_bytes()) {
    c.Error(top.FieldLoc("local_mem_reserved"),
            absl::StrCat("local_mem_reserved (", t.local_mem_reserved(), ") must be less than local_mem_bytes (",
                         t.local_mem_bytes(), "): no local memory would be left for buffers"));
  }
  CheckAcc(t, top, c);
  CheckDatapaths(t, top, c);
  c.RequirePositive(top, "clock_hz", t.clock_hz());
  CheckCosts(t, top, c);

  if (c.RequireMessage(top, "noc", t.has_noc())) {
    Scope s = top.Nested("noc");
    c.RequirePositive(s, "link_bytes_per_cycle", t.noc().link_bytes_per_cycle());
    c.RequireNonNegative(s, "hop_cycles", t.noc().hop_cycles());
    c.RequireNonNegative(s, "niu_cycles", t.noc().niu_cycles());
  }
  if (c.RequireMessage(top, "dram", t.has_dram())) {
    Scope s = top.Nested("dram");
    c.RequireInt(s, "channels", t.dram().channels(), 1, 1 << 16);
    c.RequirePositive(s, "bytes_per_second", t.dram().bytes_per_second());
    double e = t.dram().efficiency();
    if (e == 0 && !s.Written("efficiency")) {
      c.Error(s.loc(), absl::StrCat("missing required field '", s.Path("efficiency"), "'"));
    } else if (!(e > 0 && e <= 1)) {
      c.Error(s.FieldLoc("efficiency"),
              absl::StrCat(s.Path("efficiency"), " must be in (0, 1] (a measured fraction of peak), got ", e));
    }
    c.RequireNonNegative(s, "latency_cycles", t.dram().latency_cycles());
    if (t.dram().capacity_bytes() < 0) {
      c.Error(s.FieldLoc("capacity_bytes"),
              absl::StrCat(s.Path("capacity_bytes"), " must be >= 0 (0: not given), got ", t.dram().capacity_bytes()));
    }
  }
  CheckNumerics(t, top, c);

  if (t.num_cbs() < 0 || (t.num_cbs() == 0 && top.Written("num_cbs"))) {
    c.Error(top.FieldLoc("num_cbs"),
            absl::StrCat("num_cbs must be > 0 (omit it when the target has no limit), got ", t.num_cbs()));
  }
  return c.Result();
}

const targets_internal::EmbeddedTarget* FindShipped(std::string_view name) {
  for (std::size_t i = 0; i < targets_internal::kNumEmbeddedTargets; ++i) {
    if (name == targets_internal::kEmbeddedTargets[i].name) return &targets_internal::kEmbeddedTargets[i];
  }
  return nullptr;
}

}  // namespace

absl::Status ValidateTarget(const proto::Target& target, const std::string& filename) {
  return Validate(target, filename, nullptr);
}

absl::StatusOr<Target> ParseTarget(std::string_view text, const std::string& filename) {
  proto::Target p;
  TextFormat::ParseInfoTree tree;
  RETURN_IF_ERROR(ParseTextProto(text, filename, &p, &tree));
  RETURN_IF_ERROR(Validate(p, filename, &tree));
  return Target(std::move(p));
}

absl::StatusOr<Target> LoadTarget(const std::string& name_or_path) {
  if (const auto* e = FindShipped(name_or_path); e != nullptr) {
    return ParseTarget(std::string_view(e->text, e->size), absl::StrCat("targets/", e->name, ".textproto"));
  }
  std::error_code ec;
  if (std::filesystem::is_directory(name_or_path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(name_or_path, ": error: is a directory, not a target file"));
  }
  std::string data;
  absl::Status read = ReadFileToString(name_or_path, &data);
  if (!read.ok()) {
    if (read.code() != absl::StatusCode::kNotFound) return read;
    return absl::NotFoundError(absl::StrCat("unknown target '", name_or_path,
                                            "': neither a shipped target nor a readable file; shipped targets: ",
                                            absl::StrJoin(ShippedTargetNames(), ", ")));
  }
  if (FormatOf(name_or_path) == ProtoFormat::kBinary) {
    proto::Target p;
    RETURN_IF_ERROR(ParseBinaryProto(data, name_or_path, &p));
    RETURN_IF_ERROR(ValidateTarget(p, name_or_path));
    return Target(std::move(p));
  }
  return ParseTarget(data, name_or_path);
}

std::vector<std::string> ShippedTargetNames() {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < targets_internal::kNumEmbeddedTargets; ++i) {
    names.emplace_back(targets_internal::kEmbeddedTargets[i].name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::string_view> ShippedTargetText(std::string_view name) {
  const auto* e = FindShipped(name);
  if (e == nullptr) return std::nullopt;
  return std::string_view(e->text, e->size);
}

}  // namespace spatial
