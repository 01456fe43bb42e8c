// CUPTI, resolved at run time rather than linked: a program that already
// loaded a libcupti (PyTorch's wheel links its own copy into libtorch_cpu.so)
// must not get a second one, and a missing libcupti must cost a warning, not
// the program's cuInit. The checkpoint API (--check-determinism) is not in
// libcupti at all but in libcheckpoint.so beside it.
#pragma once

#include <cupti.h>
#include <cupti_checkpoint.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpurr::recorder {

// The CUPTI checkpoint entry points; null when libcheckpoint.so was not found.
struct CheckpointApi {
  decltype(&NV::Cupti::Checkpoint::cuptiCheckpointSave) save = nullptr;
  decltype(&NV::Cupti::Checkpoint::cuptiCheckpointRestore) restore = nullptr;
  decltype(&NV::Cupti::Checkpoint::cuptiCheckpointFree) free = nullptr;
  decltype(&::cuptiGetResultString) resultString = nullptr;
};

struct CuptiLibrary {
  decltype(&::cuptiSubscribe_v2) subscribe = nullptr;
  decltype(&::cuptiEnableDomain) enableDomain = nullptr;
  decltype(&::cuptiEnableCallback) enableCallback = nullptr;
  decltype(&::cuptiGetResultString) resultString = nullptr;
  CheckpointApi checkpoint;
  std::string path;            // the libcupti in use
  std::string checkpointPath;  // the libcheckpoint.so in use; empty when none was found
};

// Where libcupti.so.13 is looked for, in order, after the copy the process
// has already loaded (PyTorch's own, when torch was imported before cuInit):
// $GPURR_CUPTI (a file), the loader's own search (LD_LIBRARY_PATH, the
// cache), then $CUDA_HOME and $CUDA_PATH, then /usr/local/cuda, each in
// lib64/, lib/ and extras/CUPTI/lib64/.
std::vector<std::string> cuptiCandidates(const std::function<const char*(const char*)>& getenv);

// Loads CUPTI and the checkpoint library beside it. nullopt with `error`
// (naming where it looked) when no usable libcupti is found.
std::optional<CuptiLibrary> loadCupti(const std::function<const char*(const char*)>& getenv, std::string& error);

}  // namespace gpurr::recorder
