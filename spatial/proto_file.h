// Reading and writing protos from files with safe limits and GNU-style errors ("file:line:col: error: ...").
// Format comes from the extension: .binpb/.pb binary, .json protobuf's JSON mapping, anything else (.textproto,
// .txtpb, .pbtxt) text. "-" is stdin/stdout: read as whatever the bytes are (DetectFormat), written as text unless
// `binary`.
#ifndef SPATIAL_PROTO_FILE_H_
#define SPATIAL_PROTO_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"

namespace spatial {

// Limits for untrusted input: total bytes and nesting depth.
inline constexpr int64_t kMaxProtoBytes = int64_t{256} << 20;
inline constexpr int kMaxProtoDepth = 64;

enum class ProtoFormat { kText, kBinary, kJson };
// From the extension; "-" and unknown extensions are text.
ProtoFormat FormatOf(std::string_view path);
// From the bytes (for stdin): JSON when the first non-blank character is '{', binary when any control byte other
// than white space occurs, else text.
ProtoFormat DetectFormat(std::string_view data);

// Reads a whole file ("-": stdin). NotFound / InvalidArgument name the path.
absl::Status ReadFileToString(const std::string& path, std::string* out);
absl::Status WriteStringToFile(const std::string& path, std::string_view data);

// Parses text format; errors are "filename:line:col: error: msg" (1-based). Unknown fields are errors.
// `info`, when given, records where each field came from (for semantic errors found after parsing).
absl::Status ParseTextProto(std::string_view text, const std::string& filename, google::protobuf::Message* msg,
                            google::protobuf::TextFormat::ParseInfoTree* info = nullptr);
// Parses binary wire format within the limits; errors name the file.
absl::Status ParseBinaryProto(std::string_view bytes, const std::string& filename, google::protobuf::Message* msg);

// Parses protobuf's JSON mapping; unknown fields are errors.
absl::Status ParseJsonProto(std::string_view json, const std::string& filename, google::protobuf::Message* msg);

// The path of the first unknown field (kept by the wire parser) inside `msg`, or "" when there is none.
std::string UnknownFieldPath(const google::protobuf::Message& msg);
// The path of the first string field (not bytes) whose value is not valid UTF-8, or "" (proto3 strings are UTF-8).
std::string InvalidUtf8Path(const google::protobuf::Message& msg);

absl::Status ReadProtoFile(const std::string& path, google::protobuf::Message* msg);
absl::Status WriteProtoFile(const std::string& path, const google::protobuf::Message& msg, bool binary = false);

// A deterministic text rendering (one printer configuration everywhere, never DebugString).
std::string ToTextProto(const google::protobuf::Message& msg);

}  // namespace spatial

#endif  // SPATIAL_PROTO_FILE_H_
