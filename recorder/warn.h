// The recorder's only way to speak: one "gpurr: warning: " line on stderr.
#pragma once

#include <functional>
#include <string>

namespace gpurr::recorder {

using WarnFn = std::function<void(const std::string& message)>;

// Writes "gpurr: warning: <message>\n" to stderr in one write(2), so lines of
// concurrent processes do not interleave.
void warnToStderr(const std::string& message);

}  // namespace gpurr::recorder
