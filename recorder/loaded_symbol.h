// Finding a library's own definition of an entry point that the recorder
// also exports (interpose.cpp), wherever and however the library was loaded.
#pragma once

#include <vector>

namespace gpurr::recorder {

// The libraries the wrappers stand in front of; each is looked for under its
// usual sonames first.
enum class WrappedLibrary { Cudnn, Cublas, CublasLt, Curand, Nccl };

// The sonames `library` is looked for under, the current one first.
const std::vector<const char*>& librarySonames(WrappedLibrary library);

// The address of `name` as defined by a loaded object other than the one
// holding this code, or nullptr when no loaded object defines it (yet).
// Looked for, in order:
//  1. dlsym(RTLD_NEXT): the next definition in the global scope (libraries
//     the program links, or that were opened RTLD_GLOBAL);
//  2. in each of `library`'s sonames that is loaded (dlopen RTLD_NOLOAD), also
//     when it was opened RTLD_LOCAL, as Python's imports and ctypes.CDLL (and
//     so PyTorch) open cuBLAS, cuBLASLt and cuDNN: RTLD_NEXT cannot see those;
//  3. in every other loaded object (dl_iterate_phdr): the library under
//     another name, or a copy linked into another library.
// Remembers nothing: a name missing now is looked for again on the next call,
// after the library may have been loaded. Callers may keep a hit.
void* findLoadedSymbol(const char* name, WrappedLibrary library);

}  // namespace gpurr::recorder
