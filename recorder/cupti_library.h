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
  std::string where;           // why that one: "the program's own copy", or its candidate's `where`
  std::string checkpointPath;  // the libcheckpoint.so in use; empty when none was found
};

// One place libcupti.so.13 is looked for, and why it is on the list.
struct CuptiCandidate {
  std::string path;   // a file, or a bare soname for the loader's own search
  std::string where;  // "GPURR_CUPTI", "the program's Python environment", ...
};

// Where libcupti.so.13 is looked for, in order, after the copy the process
// has already loaded (PyTorch's own, when torch was imported before cuInit):
// $GPURR_CUPTI (a file the user chose); $GPURR_PYTHON_CUPTI (the
// nvidia-cuda-cupti copy in the recorded program's Python environment, which
// `gpurr record` finds, so that a torch imported later binds to the same
// copy); the CUDA toolkit: $CUDA_HOME, $CUDA_PATH, then /usr/local/cuda, each
// in lib64/, lib/ and extras/CUPTI/lib64/; last the system's, through the
// loader's own search (LD_LIBRARY_PATH, the ld.so cache).
std::vector<CuptiCandidate> cuptiCandidates(const std::function<const char*(const char*)>& getenv);

// Loads CUPTI and the checkpoint library beside it. nullopt with `error`
// (naming where it looked) when no usable libcupti is found.
std::optional<CuptiLibrary> loadCupti(const std::function<const char*(const char*)>& getenv, std::string& error);

}  // namespace gpurr::recorder
