#include "tools/npy.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace spatial {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// Integers above this are not all representable in the f64 values a TensorData holds.
constexpr double kMaxExactInt = 9007199254740992.0;  // 2^53

absl::Status Bad(const std::string& file, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": error: ", std::string(what)));
}

// ── The header: a Python dict literal such as {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), } ──

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& file) : s_(text), file_(file) {}

  absl::Status Parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    SkipSpace();
    if (!Eat('{')) return Error("header is not a Python dict literal (no '{')");
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      std::string key;
      if (absl::Status st = String(&key); !st.ok()) return st;
      SkipSpace();
      if (!Eat(':')) return Error(absl::StrCat("expected ':' after key '", key, "' in the header"));
      SkipSpace();
      if (key == "descr") {
        if (Peek() == '[') return Error("structured dtypes (a list 'descr') are not supported");
        if (absl::Status st = String(descr); !st.ok()) return st;
        have_descr = true;
      } else if (key == "fortran_order") {
        if (absl::Status st = Bool(fortran); !st.ok()) return st;
        have_fortran = true;
      } else if (key == "shape") {
        if (absl::Status st = Tuple(shape); !st.ok()) return st;
        have_shape = true;
      } else {
        return Error(absl::StrCat("unexpected key '", key, "' in the header"));
      }
      SkipSpace();
      if (Eat(',')) continue;
      if (Eat('}')) break;
      return Error(absl::StrCat("expected ',' or '}' at header offset ", pos_));
    }
    if (!have_descr) return Error("header has no 'descr'");
    if (!have_fortran) return Error("header has no 'fortran_order'");
    if (!have_shape) return Error("header has no 'shape'");
    return absl::OkStatus();
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Eat(char c) {
    if (Peek() != c || pos_ >= s_.size()) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  absl::Status Error(std::string_view what) const { return Bad(file_, what); }

  absl::Status String(std::string* out) {
    char q = Peek();
    if (q != '\'' && q != '"') return Error(absl::StrCat("expected a quoted string at header offset ", pos_));
    ++pos_;
    size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) return Error("unterminated string in the header");
    *out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return absl::OkStatus();
  }

  absl::Status Bool(bool* out) {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      *out = true;
    } else if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      *out = false;
    } else {
      return Error("'fortran_order' is neither True nor False");
    }
    return absl::OkStatus();
  }

  absl::Status NotInts() const {
    std::string found = pos_ < s_.size() ? absl::StrCat("'", std::string(s_.substr(pos_, 1)), "'") : "the end";
    return Error(absl::StrCat("'shape' is not a tuple of integers (unexpected ", found, " at header offset ", pos_, ")"));
  }

  absl::Status Tuple(std::vector<int64_t>* out) {
    out->clear();
    if (!Eat('(')) return Error("'shape' is not a tuple");
    while (true) {
      SkipSpace();
      if (Eat(')')) return absl::OkStatus();
      bool negative = Eat('-');
      if (!(Peek() >= '0' && Peek() <= '9')) return NotInts();
      int64_t v = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return Error("a dimension of 'shape' is too large");
        v = v * 10 + (s_[pos_++] - '0');
      }
      Eat('L');  // Python 2 long literals
      if (negative) return Error(absl::StrCat("'shape' has a negative dimension -", v));
      if (out->size() >= 32) return Error("'shape' has more than 32 dimensions");
      out->push_back(v);
      SkipSpace();
      if (Eat(',')) continue;
      if (Eat(')')) return absl::OkStatus();
      return NotInts();
    }
  }

  std::string_view s_;
  const std::string& file_;
  size_t pos_ = 0;
};

// ── Element types ───────────────────────────────────────────────────────────────────────────────────────────

struct ElemType {
  char kind = 'f';  // 'f', 'i', 'u'
  int size = 8;     // bytes
  bool big_endian = false;
};

absl::StatusOr<ElemType> ParseDescr(const std::string& descr, const std::string& file) {
  auto unsupported = [&] {
    return Bad(file, absl::StrCat("unsupported dtype \"", descr,
                                  "\" (supported: <f4 <f8 <i1 <i2 <i4 <i8 <u1 <u2 <u4, |i1 |u1, and their '>' forms)"));
  };
  if (descr.size() != 3) return unsupported();
  ElemType e;
  char order = descr[0];
  e.kind = descr[1];
  if (descr[2] < '1' || descr[2] > '8') return unsupported();
  e.size = descr[2] - '0';
  bool ok_type = (e.kind == 'f' && (e.size == 4 || e.size == 8)) ||
                 (e.kind == 'i' && (e.size == 1 || e.size == 2 || e.size == 4 || e.size == 8)) ||
                 (e.kind == 'u' && (e.size == 1 || e.size == 2 || e.size == 4));
  if (!ok_type) return unsupported();
  switch (order) {
    case '<': e.big_endian = false; break;
    case '>': e.big_endian = true; break;
    case '=': e.big_endian = std::endian::native == std::endian::big; break;
    case '|':
      if (e.size != 1) return Bad(file, absl::StrCat("dtype \"", descr, "\": byte order '|' needs a 1-byte type"));
      break;
    default: return unsupported();
  }
  return e;
}

double DecodeElem(const unsigned char* p, const ElemType& e) {
  uint64_t u = 0;
  for (int i = 0; i < e.size; ++i) {
    int shift = e.big_endian ? 8 * (e.size - 1 - i) : 8 * i;
    u |= static_cast<uint64_t>(p[i]) << shift;
  }
  switch (e.kind) {
    case 'f':
      if (e.size == 4) return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(u)));
      return std::bit_cast<double>(u);
    case 'u': return static_cast<double>(u);
    default: {
      // Sign-extend from e.size bytes.
      int unused = 64 - 8 * e.size;
      int64_t s = static_cast<int64_t>(u << unused) >> unused;
      return static_cast<double>(s);
    }
  }
}

// An integer tensor's value as int64; the VM keeps integers exact, so rounding only guards against a value that
// is not one (NaN -> 0, out of range -> clamped) instead of invoking undefined behaviour.
int64_t ToInt64(double v) {
  if (!std::isfinite(v)) return 0;
  if (v >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return std::llround(v);
}

std::string Dims(int64_t rows, int64_t cols) { return absl::StrCat(rows, "x", cols); }

}  // namespace

std::string NpyShapeString(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

absl::StatusOr<NpyArray> ParseNpy(std::string_view bytes, const std::string& file) {
  if (bytes.size() >= 2 && bytes.substr(0, 2) == "PK") {
    return Bad(file, "is a .npz archive (zip), not a .npy file; extract the array first");
  }
  if (bytes.size() < kMagicLen || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) {
    return Bad(file, "bad magic: not a .npy file (expected \\x93NUMPY)");
  }
  if (bytes.size() < 10) return Bad(file, "truncated header: the file ends inside the .npy preamble");
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  int major = u[6], minor = u[7];
  if (major < 1 || major > 3) return Bad(file, absl::StrCat("unsupported .npy format version ", major, ".", minor));
  size_t len_bytes = major == 1 ? 2 : 4;
  size_t header_start = 8 + len_bytes;
  if (bytes.size() < header_start) return Bad(file, "truncated header: the file ends inside the header length");
  uint64_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) header_len |= static_cast<uint64_t>(u[8 + i]) << (8 * i);
  if (header_len > static_cast<uint64_t>(kMaxNpyHeaderBytes)) {
    return Bad(file, absl::StrCat("header length ", header_len, " exceeds the limit of ", kMaxNpyHeaderBytes,
                                  " bytes"));
  }
  if (header_start + header_len > bytes.size()) {
    return Bad(file, absl::StrCat("truncated header: it declares ", header_len, " bytes but the file has ",
                                  bytes.size() - header_start, " after the preamble"));
  }
  std::string_view header = bytes.substr(header_start, header_len);

  NpyArray a;
  bool fortran = false;
  HeaderParser hp(header, file);
  if (absl::Status st = hp.Parse(&a.descr, &fortran, &a.shape); !st.ok()) return st;
  if (fortran) return Bad(file, "fortran_order is True; only C-order arrays are supported (use np.ascontiguousarray)");
  absl::StatusOr<ElemType> e = ParseDescr(a.descr, file);
  if (!e.ok()) return e.status();
  a.integer = e->kind != 'f';

  // The element count must fit the data actually present; compare by division so a hostile shape cannot
  // overflow the product.
  uint64_t data_bytes = bytes.size() - header_start - header_len;
  uint64_t max_count = data_bytes / static_cast<uint64_t>(e->size);
  uint64_t count = 1;
  bool too_big = false;
  for (int64_t d : a.shape) {
    if (d == 0) {
      count = 0;
      too_big = false;
      break;
    }
    if (too_big || static_cast<uint64_t>(d) > max_count || count > max_count / static_cast<uint64_t>(d)) {
      too_big = true;
      continue;
    }
    count *= static_cast<uint64_t>(d);
  }
  if (too_big || count > max_count) {
    return Bad(file, absl::StrCat("truncated data: shape ", NpyShapeString(a.shape), " of ", a.descr,
                                  " needs more than the ", data_bytes, " bytes after the header"));
  }
  uint64_t need = count * static_cast<uint64_t>(e->size);
  if (need != data_bytes) {
    return Bad(file, absl::StrCat("size mismatch: shape ", NpyShapeString(a.shape), " of ", a.descr, " needs ", need,
                                  " bytes of data but the file has ", data_bytes, " after the header"));
  }
  a.values.resize(count);
  const unsigned char* data = u + header_start + header_len;
  for (uint64_t i = 0; i < count; ++i) {
    double v = DecodeElem(data + i * e->size, *e);
    if (a.integer && std::fabs(v) > kMaxExactInt) {
      return Bad(file, absl::StrCat("element ", i, " = ", absl::StrFormat("%.0f", v),
                                    " is beyond 2^53, the largest integer a tensor holds exactly"));
    }
    a.values[i] = v;
  }
  return a;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": error: cannot open file"));
  f.seekg(0, std::ios::end);
  std::streamoff size = f.tellg();
  if (size < 0) return Bad(path, "cannot determine the file size");
  if (size > kMaxNpyFileBytes) {
    return Bad(path, absl::StrCat("file is ", static_cast<int64_t>(size), " bytes; the limit is ", kMaxNpyFileBytes));
  }
  f.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (size > 0 && !f.read(bytes.data(), size)) return Bad(path, "read failed");
  return ParseNpy(bytes, path);
}

RunIntRange RunInputIntRange(Precision p) {
  constexpr int64_t kMaxExact = int64_t{1} << 53;
  return {std::max(IntMin(p), -kMaxExact), std::min(IntMax(p), kMaxExact)};
}

absl::StatusOr<TensorData> NpyToTensor(const NpyArray& a, const Tensor& t, const std::string& file) {
  bool fits = false;
  switch (a.shape.size()) {
    case 0: fits = t.rows == 1 && t.cols == 1; break;
    case 1: fits = t.rows == 1 && a.shape[0] == t.cols; break;
    case 2: fits = a.shape[0] == t.rows && a.shape[1] == t.cols; break;
    default: fits = false;
  }
  if (!fits) {
    return Bad(file, absl::StrCat("shape ", NpyShapeString(a.shape), " but the program's tensor '", t.name, "' is ",
                                  Dims(t.rows, t.cols)));
  }
  TensorData d;
  d.rows = t.rows;
  d.cols = t.cols;
  d.precision = t.precision;
  if (IsInteger(t.precision)) {
    const RunIntRange r = RunInputIntRange(t.precision);
    const double lo = static_cast<double>(r.lo), hi = static_cast<double>(r.hi);
    for (size_t i = 0; i < a.values.size(); ++i) {
      double v = a.values[i];
      if (!std::isfinite(v) || v != std::trunc(v)) {
        return Bad(file, absl::StrCat("the program's tensor '", t.name, "' is ", std::string(PrecisionName(t.precision)),
                                      " but element ", i, " is ", absl::StrFormat("%.17g", v),
                                      ", not an integer (dtype ", a.descr, ")"));
      }
      if (v < lo || v > hi) {
        return Bad(file, absl::StrCat("element ", i, " = ", absl::StrFormat("%.0f", v), " does not fit the tensor '",
                                      t.name, "' of precision ", std::string(PrecisionName(t.precision))));
      }
    }
  }
  d.values = a.values;
  return d;
}

std::string EncodeNpy(const TensorData& t) {
  bool integer = IsInteger(t.precision);
  std::string dict = absl::StrCat("{'descr': '", integer ? "<i8" : "<f8", "', 'fortran_order': False, 'shape': (",
                                  t.rows, ", ", t.cols, "), }");
  // NumPy pads the header with spaces so the data starts on a 64-byte boundary, and ends it with '\n'.
  size_t total = kMagicLen + 4 + dict.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicLen);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>((dict.size() >> 8) & 0xff));
  out += dict;
  out.reserve(out.size() + 8 * t.values.size());
  for (double v : t.values) {
    uint64_t u = integer ? static_cast<uint64_t>(ToInt64(v)) : std::bit_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  return out;
}

absl::Status WriteNpy(const std::string& path, const TensorData& t) {
  std::string bytes = EncodeNpy(t);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError(absl::StrCat(path, ": error: cannot write file"));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return absl::InternalError(absl::StrCat(path, ": error: write failed"));
  return absl::OkStatus();
}

}  // namespace spatial
