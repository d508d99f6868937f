// NumPy .npy files (format versions 1.0, 2.0 and 3.0) for the tensors a run is given and produces.
//
// Reading is built for untrusted files: the header length, the shape's element count and the data size are all
// checked against the bytes actually present before anything is allocated, so a hostile header cannot make the
// reader allocate more than the file's size or crash. Every error names the file and what is wrong with it.
//
// Supported element types: <f4 <f8 <i1 <i2 <i4 <i8 <u1 <u2 <u4 (and the byte-order-free |i1 |u1, and the
// big-endian '>' forms, which are byte-swapped). C order only. Writing produces <f8 (float precisions) or <i8
// (integer precisions) with a 2-D shape (rows, cols), version 1.0, header padded to 64 bytes as NumPy does.
#ifndef TOOLS_NPY_H_
#define TOOLS_NPY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "spatial/program.h"
#include "spatial/tensor_data.h"

namespace spatial {

// Largest header NumPy-compatible readers are asked to accept; real headers are under 200 bytes.
inline constexpr int64_t kMaxNpyHeaderBytes = int64_t{1} << 16;
// Largest .npy file read (element data included).
inline constexpr int64_t kMaxNpyFileBytes = int64_t{4} << 30;

// An array as stored: its shape and its values converted to f64 in C order.
struct NpyArray {
  std::string descr;           // as written in the header, e.g. "<f4"
  bool integer = false;        // an integer element type (values are exact)
  std::vector<int64_t> shape;  // () for a scalar
  std::vector<double> values;  // product(shape) values, row-major
};

// Parses a whole .npy file held in memory. `filename` only names the file in errors ("FILE: error: ...").
absl::StatusOr<NpyArray> ParseNpy(std::string_view bytes, const std::string& filename);
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

// "(2, 3)", "(3072,)", "()": the shape as NumPy prints it.
std::string NpyShapeString(const std::vector<int64_t>& shape);

// Checks an array against the program's tensor it is given for and converts it: shapes (n,) and (1, n) fit a
// 1 x n tensor, (rows, cols) any tensor, () a 1 x 1 tensor. An integer tensor must receive integral values within
// its precision's range. The result carries the tensor's precision.
absl::StatusOr<TensorData> NpyToTensor(const NpyArray& a, const Tensor& t, const std::string& filename);

// The integers a run input of integer precision `p` may hold: its type's range, within ±2^53 (the VM keeps integers
// exactly only that far). A .npy file's elements and --input's literal numbers are both checked against it.
struct RunIntRange {
  int64_t lo = 0;
  int64_t hi = 0;
};
RunIntRange RunInputIntRange(Precision p);

// The .npy bytes of a tensor: <f8 for float precisions, <i8 for integer ones, shape (rows, cols).
std::string EncodeNpy(const TensorData& t);
absl::Status WriteNpy(const std::string& path, const TensorData& t);

}  // namespace spatial

#endif  // TOOLS_NPY_H_
