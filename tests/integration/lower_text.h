// Lowering an op spec written as a text proto, for the integration tests: a failure to parse or to lower fails the
// test where it is called and yields an empty composition.
#ifndef TESTS_INTEGRATION_LOWER_TEXT_H_
#define TESTS_INTEGRATION_LOWER_TEXT_H_

#include <string>

#include "gtest/gtest.h"
#include "lowerings/registry.h"
#include "spatial/proto_file.h"

namespace spatial {

inline Composition LowerText(const std::string& text, const Target& t) {
  proto::OpSpec spec;
  EXPECT_TRUE(ParseTextProto(text, "spec", &spec).ok());
  absl::StatusOr<Composition> c = Lower(spec, t);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Composition{};
}

}  // namespace spatial

#endif  // TESTS_INTEGRATION_LOWER_TEXT_H_
