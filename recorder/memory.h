// MemoryRecorder: the memory calls (cuMemAlloc*, frees, host memory, VMM
// reservations, mappings and their access, IPC handles, imported pool
// allocations, module globals) kept in the map of live allocations, each
// one emitted as an Allocation or Free event; and what the other handlers
// ask of that map: which allocation an address lies in, what a context's
// device can read, which device a context is on.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "recorder/allocation_map.h"
#include "recorder/callback_table.h"
#include "recorder/device.h"
#include "recorder/generation.h"
#include "recorder/options.h"
#include "recorder/session_output.h"

namespace gpurr::recorder {

class MemoryRecorder {
 public:
  // `mu`: the session's lock (session.h), which guards the map.
  MemoryRecorder(std::mutex& mu, const RecorderOptions& options, Device& device, SessionOutput& out);

  // EXIT of a memory call (callback_table.h); does nothing when it failed.
  void onExit(Handler h, const CUpti_CallbackData& cb);
  // The context is going away: its device is forgotten.
  void contextDestroying(uint64_t context);

  // The device of `context` (asked of the driver once: the callback's
  // context is current). Each thread keeps its last answer, given again
  // without the session's lock while no context has gone since.
  uint32_t deviceOf(uint64_t context);
  trace::DeviceRange deviceRange(uint64_t address, uint64_t size);  // resolved against the map (locked)
  bool isDevicePointer(uint64_t address);
  // Whether a kernel in `context` can read all of `range` (only such ranges
  // are hashed: reading memory the device cannot reach faults).
  bool readableIn(uint64_t context, const trace::DeviceRange& range);
  // The live allocations: read them with the session's lock held.
  const AllocationMap& allocations() const { return allocations_; }

 private:
  // Allocation bookkeeping; emit the Allocation / Free events.
  void addAllocation(uint64_t address, uint64_t size, trace::AllocationKind kind, uint64_t stream,
                     uint64_t context);
  void removeAllocation(uint64_t address);
  // Memory that another process allocated (IPC handle, imported pool
  // allocation), at `address`: its size is asked of the device.
  void addImported(uint64_t address, uint64_t context, const char* call);

  std::mutex& mu_;  // guards everything below
  const RecorderOptions& options_;
  Device& device_;
  SessionOutput& out_;
  AllocationMap allocations_;
  std::unordered_map<uint64_t, uint32_t> deviceByContext_;  // context -> device ordinal
  Generation contexts_;  // bumped under mu_ when a context goes: a thread's kept device holds until then
  std::unordered_map<uint64_t, uint32_t> ipcOpens_;         // IPC-opened address -> open count
};

}  // namespace gpurr::recorder
