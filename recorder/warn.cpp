// Warning output of the recorder.
#include "recorder/warn.h"

#include <unistd.h>

namespace gpurr::recorder {

void warnToStderr(const std::string& message) {
  const std::string line = "gpurr: warning: " + message + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(2, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

}  // namespace gpurr::recorder
