#include "spatial/proto_file.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/json_util.h"

namespace spatial {
namespace {

// Collects the parser's 0-based positions as 1-based GNU-style lines.
class Collector : public google::protobuf::io::ErrorCollector {
 public:
  explicit Collector(std::string filename) : filename_(std::move(filename)) {}
  void AddError(int line, int column, const std::string& message) override {
    errors_.push_back(absl::StrCat(filename_, ":", line + 1, ":", column + 1, ": error: ", message));
  }
  void AddWarning(int line, int column, const std::string& message) override {}
  std::string Joined() const {
    std::string s;
    for (const auto& e : errors_) absl::StrAppend(&s, s.empty() ? "" : "\n", e);
    return s;
  }

 private:
  std::string filename_;
  std::vector<std::string> errors_;
};

}  // namespace

ProtoFormat FormatOf(std::string_view path) {
  absl::string_view p(path.data(), path.size());
  if (absl::EndsWith(p, ".binpb") || absl::EndsWith(p, ".pb")) return ProtoFormat::kBinary;
  if (absl::EndsWith(p, ".json")) return ProtoFormat::kJson;
  return ProtoFormat::kText;
}

ProtoFormat DetectFormat(std::string_view data) {
  size_t i = 0;
  while (i < data.size() && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r')) ++i;
  if (i < data.size() && data[i] == '{') return ProtoFormat::kJson;  // a text proto never opens with a brace
  // Text format is printable UTF-8; the wire format opens with a field tag and carries raw varints and lengths.
  // Any control byte other than white space means binary.
  for (unsigned char ch : data) {
    if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r' && ch != '\f' && ch != '\v') return ProtoFormat::kBinary;
  }
  return ProtoFormat::kText;
}

absl::Status ReadFileToString(const std::string& path, std::string* out) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    *out = ss.str();
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": error: is a directory, not a file"));
    }
    std::ifstream f(path, std::ios::binary);
    if (!f) return absl::NotFoundError(absl::StrCat(path, ": error: cannot open file"));
    f.seekg(0, std::ios::end);
    std::streamoff size = f.tellg();
    if (size > kMaxProtoBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": error: file is ", size, " bytes; the limit is ", kMaxProtoBytes));
    }
    f.seekg(0);
    out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  if (static_cast<int64_t>(out->size()) > kMaxProtoBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": error: input larger than ", kMaxProtoBytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status WriteStringToFile(const std::string& path, std::string_view data) {
  if (path == "-") {
    std::cout.write(data.data(), static_cast<std::streamsize>(data.size()));
    std::cout.flush();
    return std::cout ? absl::OkStatus() : absl::InternalError("error writing to stdout");
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError(absl::StrCat(path, ": error: cannot write file"));
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  f.close();
  if (!f) return absl::InternalError(absl::StrCat(path, ": error: write failed"));
  return absl::OkStatus();
}

absl::Status ParseTextProto(std::string_view text, const std::string& filename, google::protobuf::Message* msg,
                            google::protobuf::TextFormat::ParseInfoTree* info) {
  Collector collector(filename);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.AllowUnknownField(false);
  parser.SetRecursionLimit(kMaxProtoDepth);
  if (info != nullptr) parser.WriteLocationsTo(info);
  google::protobuf::io::ArrayInputStream in(text.data(), static_cast<int>(text.size()));
  if (!parser.Parse(&in, msg)) {
    std::string errs = collector.Joined();
    if (errs.empty()) errs = absl::StrCat(filename, ": error: cannot parse ", msg->GetTypeName());
    return absl::InvalidArgumentError(errs);
  }
  // The text parser takes escaped bytes ("\377") into string fields; the wire parser refuses a string that is not
  // UTF-8, and so would every proto this one is copied into (a simulation's report). Refused here too, so a file
  // means the same in either format.
  if (const std::string bad = InvalidUtf8Path(*msg); !bad.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(filename, ": error: ", msg->GetDescriptor()->name(), ".", bad, " is not valid UTF-8"));
  }
  return absl::OkStatus();
}

absl::Status ParseBinaryProto(std::string_view bytes, const std::string& filename, google::protobuf::Message* msg) {
  if (static_cast<int64_t>(bytes.size()) > kMaxProtoBytes) {
    return absl::InvalidArgumentError(absl::StrCat(filename, ": error: input larger than ", kMaxProtoBytes));
  }
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(static_cast<int>(kMaxProtoBytes));
  in.SetRecursionLimit(kMaxProtoDepth);
  if (!msg->ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    return absl::InvalidArgumentError(
        absl::StrCat(filename, ": error: not a valid binary ", msg->GetTypeName(), " (malformed or truncated)"));
  }
  // The text parser rejects unknown fields; the wire parser keeps them. Reject them here too, so a file means the
  // same in either format (and a misspelled or future field is never silently ignored).
  if (std::string where = UnknownFieldPath(*msg); !where.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(filename, ": error: unknown field in binary ", msg->GetTypeName(),
                                                   " at ", where));
  }
  return absl::OkStatus();
}

absl::Status ParseJsonProto(std::string_view json, const std::string& filename, google::protobuf::Message* msg) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), msg, options);
  if (!st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(filename, ": error: not a valid JSON ", msg->GetTypeName(), ": ", st.message().as_string()));
  }
  return absl::OkStatus();
}

absl::Status ReadProtoFile(const std::string& path, google::protobuf::Message* msg) {
  std::string data;
  if (absl::Status s = ReadFileToString(path, &data); !s.ok()) return s;
  std::string name = path == "-" ? "<stdin>" : path;
  switch (path == "-" ? DetectFormat(data) : FormatOf(path)) {
    case ProtoFormat::kBinary: return ParseBinaryProto(data, name, msg);
    case ProtoFormat::kJson: return ParseJsonProto(data, name, msg);
    case ProtoFormat::kText: break;
  }
  return ParseTextProto(data, name, msg);
}

absl::Status WriteProtoFile(const std::string& path, const google::protobuf::Message& msg, bool binary) {
  const ProtoFormat format = binary ? ProtoFormat::kBinary : FormatOf(path);
  if (format == ProtoFormat::kBinary) {
    std::string out;
    if (!msg.SerializeToString(&out)) return absl::InternalError("cannot serialize " + msg.GetTypeName());
    return WriteStringToFile(path, out);
  }
  if (format == ProtoFormat::kJson) {
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    std::string out;
    const auto st = google::protobuf::util::MessageToJsonString(msg, &out, options);
    if (!st.ok()) return absl::InternalError(absl::StrCat("cannot write JSON: ", st.message().as_string()));
    return WriteStringToFile(path, out);
  }
  return WriteStringToFile(path, ToTextProto(msg));
}

std::string UnknownFieldPath(const google::protobuf::Message& msg) {
  const google::protobuf::Reflection* r = msg.GetReflection();
  if (!r->GetUnknownFields(msg).empty()) {
    return absl::StrCat(msg.GetDescriptor()->name(), " (field number ", r->GetUnknownFields(msg).field(0).number(),
                        ")");
  }
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(msg, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(msg, f); ++i) {
        std::string inner = UnknownFieldPath(r->GetRepeatedMessage(msg, f, i));
        if (!inner.empty()) return absl::StrCat(f->name(), "[", i, "].", inner);
      }
    } else {
      std::string inner = UnknownFieldPath(r->GetMessage(msg, f));
      if (!inner.empty()) return absl::StrCat(f->name(), ".", inner);
    }
  }
  return "";
}

namespace {

// RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(n) >= s.size()) return false;  // the continuation bytes run past the end
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

}  // namespace

std::string InvalidUtf8Path(const google::protobuf::Message& msg) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = msg.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(msg, &fields);
  for (const FieldDescriptor* f : fields) {
    const int n = f->is_repeated() ? r->FieldSize(msg, f) : 1;
    for (int i = 0; i < n; ++i) {
      const std::string at = f->is_repeated() ? absl::StrCat(f->name(), "[", i, "]") : std::string(f->name());
      if (f->type() == FieldDescriptor::TYPE_STRING) {
        const std::string v = f->is_repeated() ? r->GetRepeatedString(msg, f, i) : r->GetString(msg, f);
        if (!ValidUtf8(v)) return at;
      } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const std::string inner =
            InvalidUtf8Path(f->is_repeated() ? r->GetRepeatedMessage(msg, f, i) : r->GetMessage(msg, f));
        if (!inner.empty()) return absl::StrCat(at, ".", inner);
      }
    }
  }
  return "";
}

std::string ToTextProto(const google::protobuf::Message& msg) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetUseShortRepeatedPrimitives(true);
  std::string out;
  printer.PrintToString(msg, &out);
  return out;
}

}  // namespace spatial
