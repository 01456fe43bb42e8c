// Warning output of the recorder.
#include "recorder/warn.h"

#include <unistd.h>

namespace gpurr::recorder {

namespace {

void writeLine(const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(2, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void warnToStderr(const std::string& message) { writeLine("gpurr: warning: " + message + "\n"); }

void sayToStderr(const std::string& message) { writeLine("gpurr: " + message + "\n"); }

}  // namespace gpurr::recorder
