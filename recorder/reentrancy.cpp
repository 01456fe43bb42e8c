// Thread-local re-entrancy flag (see reentrancy.h).
#include "recorder/reentrancy.h"
#include "recorder/thread_local_ref.h"

namespace gpurr::recorder {

namespace {
thread_local bool tlsInRecorder = false;
}

bool inRecorder() { return tlsInRecorder; }
bool& inRecorderFlag() { return threadLocalRef(tlsInRecorder); }
ReentrancyGuard::ReentrancyGuard() : ReentrancyGuard(inRecorderFlag()) {}
ReentrancyGuard::ReentrancyGuard(bool& flag) : flag_(&flag), previous_(flag) { flag = true; }
ReentrancyGuard::~ReentrancyGuard() { *flag_ = previous_; }

}  // namespace gpurr::recorder
