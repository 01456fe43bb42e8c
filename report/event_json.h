// The JSON view of trace contents, used by `--json` outputs. Keys are stable:
// they are part of gpurr's documented output (docs/JSON.md).
#pragma once

#include <nlohmann/json.hpp>

#include "trace_format/events.h"

namespace gpurr::report {

using Json = nlohmann::ordered_json;

Json toJson(const trace::Header& header);
Json toJson(const trace::Event& event);
Json toJson(const trace::Origin& origin);  // "origin" of an event (docs/JSON.md)
Json toJson(const trace::Annotation& annotation);
Json toJson(const trace::RangeDigest& range);

}  // namespace gpurr::report
