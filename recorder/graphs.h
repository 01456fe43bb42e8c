// GraphRecorder: CUDA graphs. What an executable graph's launches can touch
// is learnt when it is instantiated or updated (its nodes' device
// addresses), and forgotten when it is changed or destroyed; a graph launch
// is hashed before and after like a kernel launch whose pointers are those
// addresses, or, for a graph not known, over every allocation its device
// can read.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "recorder/callback_table.h"
#include "recorder/device.h"
#include "recorder/hashing.h"
#include "recorder/launches.h"
#include "recorder/memory.h"
#include "recorder/modules.h"
#include "recorder/session_output.h"

namespace gpurr::recorder {

class GraphRecorder {
 public:
  // `mu`: the session's lock (session.h), which guards the graphs known.
  GraphRecorder(std::mutex& mu, Device& device, SessionOutput& out, MemoryRecorder& memory,
                ModuleRecorder& modules, HashRules& hashing);

  // Executable graphs instantiated, updated, changed or destroyed (ENTER
  // and EXIT): what their launches can touch.
  void execCall(Handler h, const CUpti_CallbackData& cb);
  // ENTER of cuGraphLaunch: the launch described and its inputs hashed; the
  // PendingLaunch left in the correlation data is finished by
  // LaunchRecorder::processLaunch at EXIT.
  void prepareLaunch(bool perThread, const CUpti_CallbackData& cb);

 private:
  void learnGraph(uint64_t exec, uint64_t graph, uint64_t context);

  std::mutex& mu_;  // guards graphExecs_
  Device& device_;
  SessionOutput& out_;
  MemoryRecorder& memory_;
  ModuleRecorder& modules_;
  HashRules& hashing_;
  // What an executable graph's nodes take as device addresses (each kernel
  // node's 8-byte-aligned parameter words and each copy's and set's
  // addresses) that lay in an allocation when it was instantiated, sorted,
  // and its node count. A launch of a graph not here (instantiated before
  // recording began, changed since, or holding nodes gpurr does not follow)
  // may touch any allocation.
  struct GraphExec {
    uint32_t nodes = 0;
    std::vector<uint64_t> addresses;
  };
  std::unordered_map<uint64_t, GraphExec> graphExecs_;
};

}  // namespace gpurr::recorder
