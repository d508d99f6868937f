// A model's architecture facts from its Hugging Face `config.json` (issue #15): the public numbers a layer's op
// specs are built from (no weights). Read with protobuf's JSON parser (proto/model_config.proto); an architecture
// the layer recognizer (models/layer.h) does not know is refused by name.
#ifndef MODELS_MODEL_CONFIG_H_
#define MODELS_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spatial {

struct ModelConfig {
  std::string source;        // the file it was read from
  std::string architecture;  // architectures[0], "Qwen3ForCausalLM"
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_positions = 0;
  double eps = 0;
  double rope_theta = 0;
};

// The architectures the recognizer lowers, sorted.
std::vector<std::string> RecognizedArchitectures();

// The example configs shipped in examples/models (their names: "qwen3-8b"), sorted.
std::vector<std::string> ExampleModelNames();

// Reads `name_or_path`: a config.json path, or the name of an example config. Errors name the file and the field:
// an unreadable file or bad JSON (InvalidArgument), a missing or non-positive size, query heads that do not divide
// among the K/V heads; an architecture not in RecognizedArchitectures() is NotLowered, naming it.
absl::StatusOr<ModelConfig> ReadModelConfig(const std::string& name_or_path);

}  // namespace spatial

#endif  // MODELS_MODEL_CONFIG_H_
