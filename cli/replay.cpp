// gpurr replay TRACE --launch K [--repeat N] [--json]: re-executes one
// recorded kernel launch from its recorded inputs, bitwise, without the
// original program, and says whether it is deterministic and equal to the
// recording. The driver is resolved at run time (dlopen), so `gpurr` itself
// starts on machines without one; replay then fails with a clear message.
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "trace_format/trace.h"

#if GPURR_HAVE_REPLAYER
#include "replayer/execute.h"
#include "replayer/plan.h"
#include "replayer/report.h"
#endif

namespace gpurr::cli {
namespace {

struct ReplayCliOptions {
  std::string trace;
  uint64_t launch = 0;
  uint32_t repeat = 1;
  bool json = false;
  bool planOnly = false;
  bool relocate = false;
  std::string elementType;
  int device = -1;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "gpurr replay: error: %s\n", message.c_str());
  return kExitTrouble;
}

#if GPURR_HAVE_REPLAYER
int run(const ReplayCliOptions& opts) {
  replay::ReplayOptions options;
  options.repeat = opts.repeat;
  options.forceRelocate = opts.relocate;
  options.device = opts.device;
  if (!opts.elementType.empty()) {
    options.elementType = replay::parseElementType(opts.elementType);
    if (!options.elementType) {
      return fail("--element-type: unknown type '" + opts.elementType +
                  "' (expected one of f32, f16, bf16, f64, i32, u8)");
    }
  }
  try {
    trace::TraceReader reader(opts.trace);
    if (reader.damage().unclosed) {
      std::fprintf(stderr, "gpurr replay: warning: %s: %s\n", opts.trace.c_str(), reader.damage().detail.c_str());
    }
    const replay::ReplayPlan plan = replay::planReplay(reader, opts.launch);
    if (opts.planOnly) {
      if (opts.json) {
        std::cout << replay::planJson(plan).dump(2) << '\n';
      } else {
        std::cout << replay::formatPlan(plan);
      }
      return kExitOk;
    }
    const replay::ReplayOutcome outcome = replay::executeReplay(reader, plan, options);
    if (opts.json) {
      std::cout << replay::outcomeJson(plan, outcome).dump(2) << '\n';
    } else {
      std::cout << replay::formatOutcome(plan, outcome);
    }
    return replay::exitCode(outcome.verdict.kind);
  } catch (const replay::ReplayError& e) {
    return fail(e.what());
  } catch (const trace::TraceError& e) {
    return fail(e.what());
  }
}
#else
int run(const ReplayCliOptions&) {
  return fail("this gpurr was built without its GPU parts (GPURR_CUDA=OFF); rebuild with -DGPURR_CUDA=ON to replay");
}
#endif

}  // namespace

void addReplayCommand(CLI::App& app, Action& chosen) {
  auto opts = std::make_shared<ReplayCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Re-execute one recorded kernel launch from its recorded inputs, bitwise, without the original program.\n"
      "Restores the input snapshots at their recorded addresses, launches the recorded image with the\n"
      "recorded parameters N times and compares the outputs with the recording and with each other.\n"
      "Exit status: 0 deterministic and equal to the recording, 1 nondeterministic or different, 2 trouble.");
  cmd->add_option("trace", opts->trace, "Trace directory (from gpurr record)")->required();
  cmd->add_option("--launch,-l", opts->launch, "Event number of the launch (as `gpurr dump` shows it)")
      ->required();
  cmd->add_option("--repeat,-n", opts->repeat, "Launch N times, each from freshly restored inputs")
      ->check(CLI::Range(1u, 1000000u));
  cmd->add_flag("--json", opts->json, "Print the result as JSON");
  cmd->add_flag("--plan", opts->planOnly, "Only print what the replay would restore and compare (no GPU needed)");
  cmd->add_flag("--relocate", opts->relocate,
                "Place every range away from its recorded address (checks that the kernel does not depend on "
                "its addresses)");
  cmd->add_option("--element-type", opts->elementType,
                  "Read outputs as this type when comparing elements: f32, f16, bf16, f64, i32, u8 "
                  "(default: guessed, float32 for 4-byte multiples)");
  cmd->add_option("--device", opts->device, "CUDA device to replay on (default: the first of the recorded "
                                            "architecture)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([opts, &chosen] { chosen = [opts] { return run(*opts); }; });
}

}  // namespace gpurr::cli
