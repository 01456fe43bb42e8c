// gpurr replay TRACE --launch K [--repeat N] [--json]: re-executes one
// recorded kernel launch from its recorded inputs, bitwise, without the
// original program, and says whether it is deterministic and equal to the
// recording. gpurr replay TRACE --all [--until K]: re-runs the whole recorded
// GPU command stream of a --full trace and checks every launch's outputs
// against the recorded digests, stopping at the first mismatch. The driver
// is resolved at run time (dlopen), so `gpurr` itself starts on machines
// without one; replay then fails with a clear message.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "report/event_json.h"
#include "trace_format/trace.h"

#if GPURR_HAVE_REPLAYER
#include "replayer/execute.h"
#include "replayer/plan.h"
#include "replayer/report.h"
#include "replayer/stream_execute.h"
#include "replayer/stream_plan.h"
#endif

namespace gpurr::cli {
namespace {

struct ReplayCliOptions {
  std::string trace;
  std::optional<uint64_t> launch;
  bool all = false;
  std::optional<uint64_t> until;
  bool repeatGiven = false;
  uint32_t repeat = 1;
  bool json = false;
  bool planOnly = false;
  bool relocate = false;
  std::string elementType;
  int device = -1;
};

// With --json, a replay that cannot be done still gives one object, its
// message on standard error as well.
int fail(const ReplayCliOptions& opts, const std::string& message, const char* more = "") {
  if (opts.json) {
    std::cout << report::jsonText(report::Json{{"trace", opts.trace}, {"verdict", "error"}, {"error", message}})
              << '\n';
  }
  std::cerr << "gpurr replay: error: " << message << "\n" << more;
  return kExitTrouble;
}

#if GPURR_HAVE_REPLAYER
int usage(const ReplayCliOptions& opts, const std::string& message) {
  return fail(opts, message, "Run with --help for more information.\n");
}

int runStream(const ReplayCliOptions& opts, const trace::TraceReader& reader,
              std::optional<replay::ElementType> elementType) {
  replay::StreamPlanOptions planOptions;
  planOptions.until = opts.until;
  const replay::StreamPlan plan = replay::planStreamReplay(reader, planOptions);
  if (opts.planOnly) {
    if (opts.json) {
      std::cout << report::jsonText(replay::streamPlanJson(plan)) << '\n';
    } else {
      std::cout << replay::formatStreamPlan(plan);
    }
    return kExitOk;
  }
  replay::StreamReplayOptions options;
  options.forceRelocate = opts.relocate;
  options.device = opts.device;
  options.elementType = elementType;
  const replay::StreamOutcome outcome = replay::executeStreamReplay(reader, plan, options);
  if (opts.json) {
    std::cout << report::jsonText(replay::streamOutcomeJson(plan, outcome)) << '\n';
  } else {
    std::cout << replay::formatStreamOutcome(plan, outcome);
  }
  return replay::exitCode(outcome.verdict);
}

int run(const ReplayCliOptions& opts) {
  if (opts.all && opts.launch) return usage(opts, "--all replays every launch: give it or --launch K, not both");
  if (!opts.all && !opts.launch) {
    return usage(opts, "--launch is required (the event number of one launch, as `gpurr dump` shows it), or --all "
                       "to replay the whole stream of a --full recording");
  }
  if (opts.until && !opts.all) return usage(opts, "--until applies to --all (the whole-stream replay)");
  if (opts.all && opts.repeatGiven) {
    return usage(opts, "--repeat applies to one launch: `gpurr replay TRACE --launch K --repeat N`");
  }
  replay::ReplayOptions options;
  options.repeat = opts.repeat;
  options.forceRelocate = opts.relocate;
  options.device = opts.device;
  if (!opts.elementType.empty()) {
    options.elementType = replay::parseElementType(opts.elementType);
    if (!options.elementType) {
      return fail(opts, "--element-type: unknown type '" + opts.elementType +
                            "' (expected one of f32, f16, bf16, f64, i32, u8)");
    }
  }
  try {
    std::optional<trace::TraceReader> opened;
    try {
      opened.emplace(opts.trace);
    } catch (const trace::TraceError& e) {
      return fail(opts, e.what());  // a directory of traces: the reader names one
    }
    const trace::TraceReader& reader = *opened;
    if (reader.damage().incomplete()) {
      std::cerr << "gpurr replay: warning: " << opts.trace << ": " << reader.damage().detail << "\n";
    }
    if (opts.all) return runStream(opts, reader, options.elementType);
    const replay::ReplayPlan plan = replay::planReplay(reader, *opts.launch);
    if (opts.planOnly) {
      if (opts.json) {
        std::cout << report::jsonText(replay::planJson(plan)) << '\n';
      } else {
        std::cout << replay::formatPlan(plan);
      }
      return kExitOk;
    }
    const replay::ReplayOutcome outcome = replay::executeReplay(reader, plan, options);
    if (opts.json) {
      std::cout << report::jsonText(replay::outcomeJson(plan, outcome)) << '\n';
    } else {
      std::cout << replay::formatOutcome(plan, outcome);
    }
    return replay::exitCode(outcome.verdict.kind);
  } catch (const replay::ReplayError& e) {
    return fail(opts, e.what());
  } catch (const trace::TraceError& e) {
    return fail(opts, e.what());
  }
}
#else
int run(const ReplayCliOptions& opts) {
  return fail(opts,
              "this gpurr was built without its GPU parts (GPURR_CUDA=OFF); rebuild with -DGPURR_CUDA=ON to replay");
}
#endif

}  // namespace

void addReplayCommand(CLI::App& app, Action& chosen) {
  auto opts = std::make_shared<ReplayCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "Re-execute recorded kernels, bitwise, without the original program: one launch, or the whole stream.");
  cmd->footer(
      "--launch K: restores the launch's input snapshots at their recorded addresses, launches the recorded\n"
      "image with the recorded parameters N times and compares the outputs with the recording and with each\n"
      "other. Exit status: 0 deterministic and equal to the recording, 1 nondeterministic or different, 2 trouble.\n"
      "--all: re-runs the whole recorded GPU command stream of a `gpurr record --full` trace (copies from the\n"
      "recorded host bytes, sets, copies and launches, in recorded order) and checks every launch's outputs\n"
      "against the recorded digests, stopping at the first mismatch. Exit status: 0 every check equal, 1 a\n"
      "mismatch, 2 trouble or stopped early (at a CUDA graph launch, say). Details: replayer/README.md.");
  cmd->add_option("trace", opts->trace, "Trace (one process's, from gpurr record)")->required();
  cmd->add_option("--launch,-l", opts->launch, "Event number of the launch (as `gpurr dump` shows it)")
      ->check(kWholeNumber);
  cmd->add_flag("--all", opts->all, "Replay the whole recorded stream (a --full trace) and check every launch");
  cmd->add_option("--until", opts->until, "With --all: stop after event K (as `gpurr dump` numbers events)")
      ->check(kWholeNumber);
  cmd->add_option("--repeat,-n", opts->repeat, "Launch N times, each from freshly restored inputs")
      ->check(CLI::Range(1u, 1000000u))
      ->each([opts](const std::string&) { opts->repeatGiven = true; });
  cmd->add_flag("--json", opts->json, "Print the result as JSON");
  cmd->add_flag("--plan", opts->planOnly,
                "Only print what the replay would restore, run and compare (no GPU needed)");
  cmd->add_flag("--relocate", opts->relocate,
                "Place every range away from its recorded address (checks that the kernel does not depend on "
                "its addresses)");
  cmd->add_option("--element-type", opts->elementType,
                  "Read outputs as this type when comparing elements: f32, f16, bf16, f64, i32, u8 "
                  "(default: guessed, float32 for 4-byte multiples)");
  cmd->add_option("--device", opts->device, "CUDA device to replay on (default: the first of the recorded "
                                            "architecture)")
      ->check(kWholeNumber);
  cmd->callback([opts, &chosen] { chosen = [opts] { return run(*opts); }; });
}

}  // namespace gpurr::cli
