// CopyRecorder: copies (cuMemcpy*: host, device, peer, 2D, 3D), sets
// (cuMemset*) and synchronisations (context, stream, event), each recorded
// at the EXIT of a successful call. What a copy or set wrote is hashed on
// its stream and vouched for in the write history; what it wrote without a
// digest is forgotten there.
#pragma once

#include <cupti.h>

#include "recorder/callback_table.h"
#include "recorder/device.h"
#include "recorder/hashing.h"
#include "recorder/memory.h"
#include "recorder/options.h"
#include "recorder/session_output.h"

namespace gpurr::recorder {

class CopyRecorder {
 public:
  CopyRecorder(const RecorderOptions& options, Device& device, SessionOutput& out, MemoryRecorder& memory,
               HashRules& hashing);

  void copyExit(Handler h, bool perThread, const CUpti_CallbackData& cb);
  void setExit(Handler h, bool perThread, const CUpti_CallbackData& cb);
  void syncExit(Handler h, bool perThread, const CUpti_CallbackData& cb);

 private:
  const RecorderOptions& options_;
  Device& device_;
  SessionOutput& out_;
  MemoryRecorder& memory_;
  HashRules& hashing_;
};

}  // namespace gpurr::recorder
