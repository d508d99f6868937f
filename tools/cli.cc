#include "tools/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace spatial::cli {
namespace {

const FlagSpec* FindFlag(const CommandSpec& spec, const std::string& name) {
  for (const FlagSpec& f : spec.flags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// "--target" or "-o": how a flag is spelled on the command line.
std::string Spelled(const std::string& name) { return name.size() == 1 ? "-" + name : "--" + name; }

std::string FlagList(const CommandSpec& spec) {
  std::string s;
  for (const FlagSpec& f : spec.flags) absl::StrAppend(&s, s.empty() ? "" : ", ", Spelled(f.name));
  return s.empty() ? "none" : s;
}

}  // namespace

std::string ParsedArgs::Get(const std::string& flag, const std::string& def) const {
  auto it = values_.find(flag);
  return it == values_.end() || it->second.empty() ? def : it->second.back();
}

const std::vector<std::string>& ParsedArgs::GetAll(const std::string& flag) const {
  static const std::vector<std::string> kEmpty;
  auto it = values_.find(flag);
  return it == values_.end() ? kEmpty : it->second;
}

absl::StatusOr<ParsedArgs> ParseArgs(const CommandSpec& spec, const std::vector<std::string>& args) {
  ParsedArgs out;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (flags_done || a == "-" || a.empty() || a[0] != '-') {
      out.positional.push_back(a);
      continue;
    }
    if (a == "--") {
      flags_done = true;
      continue;
    }
    if (a == "--help" || a == "-h" || a == "-help") {
      out.help = true;
      continue;
    }
    // Both "--name" and "-name" name a flag (as in absl flags); "-o" is the one-letter output flag.
    std::string body = a.substr(a.rfind("--", 0) == 0 ? 2 : 1);
    std::string name = body, value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    // Accept snake_case spellings of kebab-case flags (--output_dir), since absl-style tools use them.
    const FlagSpec* f = FindFlag(spec, name);
    if (f == nullptr) {
      std::string kebab = name;
      std::replace(kebab.begin(), kebab.end(), '_', '-');
      f = FindFlag(spec, kebab);
    }
    if (f == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", a.substr(0, a.find('=')), "' (flags of '", spec.name, "': ", FlagList(spec),
                       ")"));
    }
    if (f->kind == FlagSpec::Kind::kBool) {
      if (!has_value) value = "true";
      if (value != "true" && value != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat("flag ", Spelled(f->name), " takes no value or =true/=false, got '", value, "'"));
      }
    } else if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag ", Spelled(f->name), " needs a value (", Spelled(f->name), " ", f->value_name, ")"));
      }
      value = args[++i];
    }
    if (f->kind == FlagSpec::Kind::kValue && out.Has(f->name)) {
      return absl::InvalidArgumentError(absl::StrCat("flag ", Spelled(f->name), " given more than once"));
    }
    out.Add(f->name, value);
  }
  if (out.help) return out;
  for (const FlagSpec& f : spec.flags) {
    if (f.required && !out.Has(f.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing ", Spelled(f.name), f.name.size() == 1 ? " " : "=", f.value_name));
    }
  }
  int n = static_cast<int>(out.positional.size());
  if (n < spec.min_positional) {
    return absl::InvalidArgumentError(absl::StrCat("missing argument ", spec.positional));
  }
  if (n > spec.max_positional) {
    if (spec.max_positional == 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", out.positional[0], "'"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", out.positional[spec.max_positional], "' (expected ", spec.positional,
                     ")"));
  }
  return out;
}

namespace {

// Why `dir` cannot hold a new entry, or "" when it can.
std::string DirectoryProblem(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return absl::StrCat("'", dir.string(), "' is not a directory");
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::StrCat("directory '", dir.string(), "' is not writable: ", std::strerror(errno));
  }
  return "";
}

// Why `path` cannot be written as the flag's kind of output, or "" when it can.
std::string OutputProblem(FlagSpec::Output kind, const std::filesystem::path& path) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (kind == FlagSpec::Output::kDir) {
    if (exists) return DirectoryProblem(path);
    // The directories are made later: the nearest one that exists must let them be.
    std::filesystem::path up = path.parent_path();
    while (!up.empty() && !std::filesystem::exists(up, ec)) up = up.parent_path();
    return DirectoryProblem(up.empty() ? std::filesystem::path(".") : up);
  }
  if (exists) {
    if (std::filesystem::is_directory(path, ec)) return "it is a directory";
    if (access(path.c_str(), W_OK) != 0) return absl::StrCat("not writable: ", std::strerror(errno));
    return "";
  }
  const std::filesystem::path dir = path.parent_path();
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    return absl::StrCat("directory '", dir.string(), "' does not exist");
  }
  return DirectoryProblem(dir.empty() ? std::filesystem::path(".") : dir);
}

}  // namespace

absl::Status CheckOutputPaths(const CommandSpec& spec, const ParsedArgs& args) {
  for (const FlagSpec& f : spec.flags) {
    if (f.output == FlagSpec::Output::kNone) continue;
    for (const std::string& v : args.GetAll(f.name)) {
      if (v == "-" && f.output == FlagSpec::Output::kFile) continue;
      if (v.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(Spelled(f.name), " needs a path, got ''"));
      }
      if (std::string why = OutputProblem(f.output, v); !why.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot write ", Spelled(f.name), f.name.size() == 1 ? " " : "=", v, ": ", why));
      }
    }
  }
  return absl::OkStatus();
}

std::string CommandHelp(const CommandSpec& spec) {
  std::string s = absl::StrCat("usage: spatial ", spec.name);
  for (const FlagSpec& f : spec.flags) {
    std::string one = Spelled(f.name);
    if (f.kind != FlagSpec::Kind::kBool) absl::StrAppend(&one, f.name.size() == 1 ? " " : "=", f.value_name);
    if (f.kind == FlagSpec::Kind::kRepeated) absl::StrAppend(&one, "...");
    absl::StrAppend(&s, f.required ? absl::StrCat(" ", one) : absl::StrCat(" [", one, "]"));
  }
  if (!spec.positional.empty()) absl::StrAppend(&s, " ", spec.positional);
  absl::StrAppend(&s, "\n\n", spec.summary, "\n");
  if (!spec.description.empty()) absl::StrAppend(&s, "\n", spec.description, "\n");
  absl::StrAppend(&s, "\nflags:\n");
  size_t width = 0;
  std::vector<std::string> heads;
  for (const FlagSpec& f : spec.flags) {
    std::string h = Spelled(f.name);
    if (f.kind != FlagSpec::Kind::kBool) absl::StrAppend(&h, f.name.size() == 1 ? " " : "=", f.value_name);
    width = std::max(width, h.size());
    heads.push_back(h);
  }
  heads.push_back("-h, --help");
  width = std::max(width, heads.back().size());
  for (size_t i = 0; i < heads.size(); ++i) {
    std::string help = i < spec.flags.size() ? spec.flags[i].help : "show this help and exit";
    if (i < spec.flags.size() && spec.flags[i].kind == FlagSpec::Kind::kRepeated) help += " (repeatable)";
    absl::StrAppend(&s, "  ", heads[i], std::string(width - heads[i].size() + 2, ' '), help, "\n");
  }
  if (!spec.examples.empty()) {
    absl::StrAppend(&s, "\nexample", spec.examples.size() > 1 ? "s" : "", ":\n");
    for (const std::string& e : spec.examples) absl::StrAppend(&s, "  ", e, "\n");
  }
  return s;
}

bool HasLocation(const std::string& message) {
  std::string first = message.substr(0, message.find('\n'));
  size_t at = first.find(": error: ");
  if (at == std::string::npos || at == 0) return false;
  // A location is a file name, optionally with :line:col; it has no spaces or quotes (a message such as
  // "section 'x': error: ..." is not a location).
  std::string loc = first.substr(0, at);
  return loc.find_first_of(" '\"") == std::string::npos || absl::StartsWith(loc, "spatial ");
}

std::string DisplayName(const std::string& path) { return path == "-" ? "<stdin>" : path; }

void PrintError(std::ostream& err, const std::string& where, const std::string& message) {
  if (HasLocation(message)) {
    err << message << "\n";
  } else {
    err << where << ": error: " << message << "\n";
  }
}

void PrintError(std::ostream& err, const std::string& where, const absl::Status& status) {
  PrintError(err, where, std::string(status.message()));
}

int UsageError(std::ostream& err, const std::string& command, const std::string& message) {
  std::string who = command.empty() ? "spatial" : "spatial " + command;
  err << who << ": error: " << message << "\n";
  err << "run '" << who << " --help' for usage\n";
  return kExitUsage;
}

}  // namespace spatial::cli
