// How `gpurr replay` shows a plan and a replay's outcome: a screen of text, or
// JSON with stable keys (docs/JSON.md style: camelCase, numbers as numbers,
// digests as 16 hex digits).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "replayer/execute.h"
#include "replayer/plan.h"
#include "replayer/stream_execute.h"
#include "replayer/stream_plan.h"

namespace gpurr::replay {

using Json = nlohmann::ordered_json;

// What replaying the launch involves: kernel, image, ranges, inputs, outputs.
std::string formatPlan(const ReplayPlan& plan);
Json planJson(const ReplayPlan& plan);

// The verdict first, then the evidence: distinct results, where outputs
// differ and by how much, what differs between the machines, and warnings.
std::string formatOutcome(const ReplayPlan& plan, const ReplayOutcome& outcome);
Json outcomeJson(const ReplayPlan& plan, const ReplayOutcome& outcome);

// The verdict in one line: "nondeterministic: 31 distinct results in 50 runs".
std::string verdictLine(const ReplayOutcome& outcome);

// Whole-stream replay (--all): what it involves (counts, bytes to restore,
// address space, the first operations, where it stops), and its outcome
// (the verdict first; at a mismatch: where, what differs, how to look closer).
std::string formatStreamPlan(const StreamPlan& plan);
Json streamPlanJson(const StreamPlan& plan);
std::string formatStreamOutcome(const StreamPlan& plan, const StreamOutcome& outcome);
Json streamOutcomeJson(const StreamPlan& plan, const StreamOutcome& outcome);
std::string streamVerdictLine(const StreamPlan& plan, const StreamOutcome& outcome);

}  // namespace gpurr::replay
