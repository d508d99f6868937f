#include "tools/command_common.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "spatial/proto_io.h"
#include "spatial/validate.h"
#include "targets/loader.h"
#include "tools/cli.h"

namespace spatial {

std::optional<Composition> LoadProgram(const std::string& path, int* exit_code) {
  absl::StatusOr<Composition> c = ReadComposition(path);
  if (!c.ok()) {
    cli::PrintError(std::cerr, cli::DisplayName(path), c.status());
    *exit_code = cli::kExitUsage;
    return std::nullopt;
  }
  if (absl::Status st = ValidateComposition(*c); !st.ok()) {
    cli::PrintError(std::cerr, cli::DisplayName(path), absl::StrCat("invalid program: ", st.message()));
    *exit_code = cli::kExitFailed;
    return std::nullopt;
  }
  return std::move(*c);
}

std::optional<Target> LoadTargetOrReport(const std::string& name_or_path, const std::string& command,
                                         int* exit_code) {
  absl::StatusOr<Target> t = LoadTarget(name_or_path);
  if (!t.ok()) {
    cli::PrintError(std::cerr, absl::StrCat("spatial ", command), t.status());
    *exit_code = cli::kExitUsage;
    return std::nullopt;
  }
  return std::move(*t);
}

}  // namespace spatial
