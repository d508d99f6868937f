// `spatial targets` and `spatial ops`: what is shipped, one line each, for a person to read and a script to cut
// (fields are separated by two or more spaces; the first is the name to pass to --target or to write in a spec).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "lowerings/family.h"
#include "lowerings/registry.h"
#include "proto/op.pb.h"
#include "targets/loader.h"
#include "tools/commands.h"

namespace spatial {
namespace {

int RunTargets(const cli::ParsedArgs& args) {
  (void)args;
  for (const std::string& name : ShippedTargetNames()) {
    absl::StatusOr<Target> t = LoadTarget(name);
    if (!t.ok()) {
      std::cerr << "spatial targets: error: shipped target '" << name << "' does not load: " << t.status().message()
                << "\n";
      return cli::kExitFailed;
    }
    const proto::Target& p = t->proto();
    std::cout << absl::StrFormat("%-16s  %2dx%-2d sites  tile %dx%d  %4.0f MHz  L1 %4d KiB/site  %-6s  %s\n", name,
                                 t->grid_y(), t->grid_x(), t->tile_rows(), t->tile_cols(), p.clock_hz() / 1e6,
                                 p.local_mem_bytes() / 1024,
                                 proto::Fidelity_Name(p.numerics().fidelity()), p.description());
  }
  return cli::kExitOk;
}

int RunOps(const cli::ParsedArgs& args) {
  const std::vector<std::string> lowered = LoweredKinds();
  const google::protobuf::OneofDescriptor* kind = proto::OpSpec::descriptor()->FindOneofByName("kind");
  for (int i = 0; i < kind->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = kind->field(i);
    const bool is_lowered = std::find(lowered.begin(), lowered.end(), f->name()) != lowered.end();
    const OpFamily* family = FindFamily(f->name());
    std::string tolerance = "-";
    if (is_lowered && family != nullptr) {
      tolerance = family->rel_l2 == 0 ? "bit-exact" : absl::StrFormat("rel L2 <= %.2g", family->rel_l2);
    }
    std::cout << absl::StrFormat("%-18s  %-24s  %-15s  %s\n", f->name(), f->message_type()->name(),
                                 is_lowered ? "lowered" : "not lowered yet", tolerance);
    if (args.GetBool("why") && family != nullptr) std::cout << "    " << family->why << "\n";
  }
  return cli::kExitOk;
}

}  // namespace

Subcommand TargetsCommand() {
  cli::CommandSpec s;
  s.name = "targets";
  s.summary = "list the shipped targets: grid, tile, clock, local memory, fidelity";
  s.description =
      "One line per shipped target: the name to pass to --target, its grid of sites, tile, clock, local memory per\n"
      "site, default matrix fidelity and description. --target also takes a target .textproto file.";
  s.examples = {"spatial targets"};
  return {s, &RunTargets};
}

Subcommand OpsCommand() {
  cli::CommandSpec s;
  s.name = "ops";
  s.summary = "list the op kinds of an op spec (spatial.proto.OpSpec) and whether each is lowered";
  s.description =
      "One line per op kind: the field to set in an OpSpec, its spec message (proto/op.proto), whether\n"
      "`spatial lower` maps it, and the bound the test suite holds the simulator's values to against the exact VM\n"
      "over its shapes and drawn inputs (relative L2; --why prints the reasoning and measurement behind it).\n"
      "`spatial simulate --compare-vm` checks each output against its section's numerics claim instead: 3.1% by\n"
      "default, wider where a claim says so (a 16-bit Dst, LoFi, the fast exp, a bfp4_b result), for any shape\n"
      "and inputs. examples/ops/ has a spec per lowered kind at a real model's shape.";
  s.flags = {{"why", cli::FlagSpec::Kind::kBool, "", "print why each kind's tolerance is what it is"}};
  s.examples = {"spatial ops", "spatial ops --why"};
  return {s, &RunOps};
}

}  // namespace spatial
