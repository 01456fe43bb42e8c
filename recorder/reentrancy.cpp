// Thread-local re-entrancy flag (see reentrancy.h).
#include "recorder/reentrancy.h"

namespace gpurr::recorder {

namespace {
thread_local bool tlsInRecorder = false;
}

bool inRecorder() { return tlsInRecorder; }
ReentrancyGuard::ReentrancyGuard() : previous_(tlsInRecorder) { tlsInRecorder = true; }
ReentrancyGuard::~ReentrancyGuard() { tlsInRecorder = previous_; }

}  // namespace gpurr::recorder
