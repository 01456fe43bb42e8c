// Thread-local re-entrancy flag (see reentrancy.h).
#include "recorder/reentrancy.h"
#include "recorder/thread_local_ref.h"

namespace gpurr::recorder {

namespace {
thread_local ThreadFlags tlsFlags;
}

ThreadFlags& threadFlags() { return threadLocalRef(tlsFlags); }
bool inRecorder() { return tlsFlags.inside; }
bool& inRecorderFlag() { return threadLocalRef(tlsFlags).inside; }
ReentrancyGuard::ReentrancyGuard() : ReentrancyGuard(inRecorderFlag()) {}
ReentrancyGuard::ReentrancyGuard(bool& flag) : flag_(&flag), previous_(flag) { flag = true; }
ReentrancyGuard::~ReentrancyGuard() { *flag_ = previous_; }

}  // namespace gpurr::recorder
