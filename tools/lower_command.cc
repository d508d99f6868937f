// `spatial lower`: an op spec and a target -> a validated program, or the lowering's refusal.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "lowerings/graph.h"
#include "lowerings/registry.h"
#include "proto/op.pb.h"
#include "spatial/proto_file.h"
#include "spatial/proto_io.h"
#include "spatial/status_macros.h"
#include "spatial/validate.h"
#include "tools/command_common.h"
#include "tools/commands.h"

namespace spatial {
namespace {

using cli::FlagSpec;

// --attention-form's value, or a usage error's text.
absl::StatusOr<proto::AttentionSpec::Form> AttentionForm(const std::string& form) {
  if (form == "auto") return proto::AttentionSpec::FORM_AUTO;
  if (form == "sections") return proto::AttentionSpec::FORM_SECTIONS;
  if (form == "flash") return proto::AttentionSpec::FORM_FLASH;
  return absl::InvalidArgumentError(absl::StrCat("--attention-form is sections, flash or auto, not '", form, "'"));
}

int RunLower(const cli::ParsedArgs& args) {
  const std::string cmd = "lower";
  const bool graph = args.Has("graph");
  if (graph && (args.Has("op") || !args.positional.empty())) {
    return cli::UsageError(std::cerr, cmd, "give either an op spec (--op=SPEC or an argument) or --graph=GRAPH");
  }
  if (args.Has("op") && !args.positional.empty()) {
    return cli::UsageError(std::cerr, cmd, "give the op spec either as --op=SPEC or as an argument, not both");
  }
  std::string spec_path = graph             ? args.Get("graph")
                          : args.Has("op")  ? args.Get("op")
                          : args.positional.empty() ? ""
                                                    : args.positional[0];
  if (spec_path.empty()) return cli::UsageError(std::cerr, cmd, "missing --op=SPEC.textproto (or --graph=GRAPH)");
  const std::string where = cli::DisplayName(spec_path);

  // An op spec is a graph of one op; a graph's ops are lowered in order and joined (lowerings/graph.h).
  proto::OpGraph g;
  if (graph) {
    if (absl::Status st = ReadProtoFile(spec_path, &g); !st.ok()) {
      cli::PrintError(std::cerr, where, st);
      return cli::kExitUsage;
    }
  } else if (absl::Status st = ReadProtoFile(spec_path, g.add_ops()); !st.ok()) {
    cli::PrintError(std::cerr, where, st);
    return cli::kExitUsage;
  }
  if (args.Has("attention-form")) {
    absl::StatusOr<proto::AttentionSpec::Form> f = AttentionForm(args.Get("attention-form"));
    if (!f.ok()) return cli::UsageError(std::cerr, cmd, std::string(f.status().message()));
    int attentions = 0;
    for (proto::OpSpec& op : *g.mutable_ops()) {
      if (op.kind_case() != proto::OpSpec::kAttention) continue;
      op.mutable_attention()->set_form(*f);
      ++attentions;
    }
    // auto is what an op without the flag gets: asking for it is never wrong.
    if (attentions == 0 && *f != proto::AttentionSpec::FORM_AUTO) {
      return cli::UsageError(std::cerr, cmd,
                             graph ? absl::StrCat("--attention-form applies to an attention op; ", where, " has none")
                                   : absl::StrCat("--attention-form applies to an attention op; ", where, " is '",
                                                  OpKindName(g.ops(0)), "'"));
    }
  }
  int exit_code = cli::kExitOk;
  std::optional<Target> target = LoadTargetOrReport(args.Get("target"), cmd, &exit_code);
  if (!target) return exit_code;

  absl::StatusOr<Composition> c = [&]() -> absl::StatusOr<Composition> {
    if (!graph) return Lower(g.ops(0), *target);
    ASSIGN_OR_RETURN(const std::vector<GraphOp> ops, GraphOps(g));
    ASSIGN_OR_RETURN(LoweredGraph lowered, LowerGraph(g.name().empty() ? "graph" : g.name(), ops, nullptr, *target));
    return std::move(lowered.program);
  }();
  if (!c.ok()) {
    if (IsRefusal(c.status())) {
      cli::PrintError(std::cerr, where, absl::StrCat("refused: ", c.status().message()));
      return cli::kExitFailed;
    }
    cli::PrintError(std::cerr, where, c.status());
    // A malformed spec is bad input; anything else is a failure of the lowering.
    return c.status().code() == absl::StatusCode::kInvalidArgument ? cli::kExitUsage : cli::kExitFailed;
  }
  const std::string what = graph ? "graph's" : OpKindName(g.ops(0));
  // A lowering promises a valid program; check it so a bug shows here and not as a confusing VM fault later.
  if (absl::Status st = ValidateComposition(*c); !st.ok()) {
    cli::PrintError(std::cerr, where,
                    absl::StrCat("the ", what, " lowering produced an invalid program: ", st.message()));
    return cli::kExitFailed;
  }
  // A lowering promises a program its target certifies: a program that fails is a lowering bug, said as such
  // rather than written for `certify` to reject later.
  if (CertifyResult r = Certify(*c, *target); !r.ok()) {
    cli::PrintError(std::cerr, where,
                    absl::StrCat("internal: the ", what, " lowering produced a program that does not certify on ",
                                 target->name(), ": ", "[", r.diagnostics.front().code(), "] ",
                                 r.diagnostics.front().message()));
    return cli::kExitFailed;
  }
  // The program records the full description of its target, so it runs on that machine wherever it goes.
  proto::Composition wire = ToProto(*c);
  *wire.mutable_target_description() = target->proto();
  std::string out = args.Get("o", "-");
  if (absl::Status st = WriteProtoFile(out, wire); !st.ok()) {
    cli::PrintError(std::cerr, "spatial lower", st);
    return cli::kExitFailed;
  }
  return cli::kExitOk;
}

}  // namespace

Subcommand LowerCommand() {
  cli::CommandSpec s;
  s.name = "lower";
  s.summary = "lower an op spec (spatial.proto.OpSpec), or a graph of ops (OpGraph), into a program for a target";
  s.positional = "[SPEC]";
  s.max_positional = 1;
  s.flags = {
      {"target", FlagSpec::Kind::kValue, "NAME|FILE", "shipped target name (wormhole_n150, ...) or a target .textproto",
       /*required=*/true},
      {"op", FlagSpec::Kind::kValue, "SPEC", "the op spec file (.textproto text, .binpb binary, '-' stdin)"},
      {"graph", FlagSpec::Kind::kValue, "GRAPH",
       "instead of an op: a spatial.proto.OpGraph, ops lowered in order into one program (each reads the results of "
       "the ops before it by name)"},
      {"o", FlagSpec::Kind::kValue, "FILE",
       "write the program here (default '-': stdout, text; .binpb binary; .json JSON)", false, FlagSpec::Output::kFile},
      {"attention-form", FlagSpec::Kind::kValue, "sections|flash|auto",
       "an attention's form: the three flat sections, the flash fold (refused where the heads are not whole "
       "tiles), or the lowering's choice (default; the spec's `form` field when given)"},
  };
  s.description =
      "Reads a spatial.proto.OpSpec, lowers it for the target, validates and certifies the program and writes it,\n"
      "with the target's full description recorded in it (so `certify` and `simulate` use exactly that target).\n"
      "A lowering that cannot map the op prints 'SPEC: error: refused: <reason>' and exits 1.\n"
      "--graph lowers a spatial.proto.OpGraph instead: its ops in order, joined into one program where each op reads\n"
      "the results of the ops before it by name (between a matrix and a flat row the values are moved), the\n"
      "program's inputs the names read before any op produces them.";
  s.examples = {"spatial lower --target=wormhole_n150 --op=examples/ops/silu.textproto -o silu.textproto",
                "spatial lower --target=wormhole_n150 --op=examples/ops/attention.textproto --attention-form=flash "
                "-o attn.textproto",
                "spatial lower --target=wormhole_n150 --graph=examples/graphs/composed_attention.textproto "
                "-o parts.textproto"};
  return {s, &RunLower};
}

}  // namespace spatial
