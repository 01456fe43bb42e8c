// The recorder's only way to speak: one "gpurr: " line on stderr, a warning
// unless `gpurr record --verbose` asked for more.
#pragma once

#include <functional>
#include <string>

namespace gpurr::recorder {

using WarnFn = std::function<void(const std::string& message)>;

// Writes "gpurr: warning: <message>\n" to stderr in one write(2), so lines of
// concurrent processes do not interleave.
void warnToStderr(const std::string& message);

// Writes "gpurr: <message>\n" the same way: what `gpurr record --verbose`
// (GPURR_VERBOSE=1) asks the recorder to tell.
void sayToStderr(const std::string& message);

}  // namespace gpurr::recorder
