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

// `j` as text, `indent` spaces a level (-1: one line). Strings come from
// the recorded program (its command line, environment, kernel names) and
// need not be UTF-8: bytes that are not are written as U+FFFD, so that the
// text is JSON still. DEL is written \u007f, as the other control
// characters are escaped, so that no raw one reaches a terminal.
inline std::string jsonText(const Json& j, int indent = 2) {
  std::string s = j.dump(indent, ' ', false, Json::error_handler_t::replace);
  for (size_t at = s.find('\x7f'); at != std::string::npos; at = s.find('\x7f', at)) s.replace(at, 1, "\\u007f");
  return s;
}

}  // namespace gpurr::report
