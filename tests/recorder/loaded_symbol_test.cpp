// Finding a wrapped library's own definition of a function (loaded_symbol.h),
// with the real cuDNN: not loaded, then opened RTLD_LOCAL as Python opens it.
#include "recorder/loaded_symbol.h"

#include <catch2/catch.hpp>
#include <dlfcn.h>

using namespace gpurr::recorder;

#ifdef GPURR_TEST_CUDNN_LIBRARY
TEST_CASE("a library opened RTLD_LOCAL is found, once it is loaded") {
  // Nothing in this program loads cuDNN: a miss, remembered nowhere.
  REQUIRE(dlopen("libcudnn.so.9", RTLD_LAZY | RTLD_NOLOAD) == nullptr);
  CHECK(findLoadedSymbol("cudnnBackendExecute", WrappedLibrary::Cudnn) == nullptr);

  void* cudnn = dlopen(GPURR_TEST_CUDNN_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(cudnn != nullptr);
  CHECK(dlsym(RTLD_DEFAULT, "cudnnBackendExecute") == nullptr);  // what RTLD_NEXT sees too
  void* own = dlsym(cudnn, "cudnnBackendExecute");
  REQUIRE(own != nullptr);
  CHECK(findLoadedSymbol("cudnnBackendExecute", WrappedLibrary::Cudnn) == own);
  // Under a family it does not belong to: found by going through every
  // loaded object.
  CHECK(findLoadedSymbol("cudnnBackendExecute", WrappedLibrary::Curand) == own);
  CHECK(findLoadedSymbol("cudnnNoSuchFunction", WrappedLibrary::Cudnn) == nullptr);
  dlclose(cudnn);
}
#endif

TEST_CASE("a function defined by a library the program links is found") {
  // cuBLASLt is linked to this test.
  void* lt = dlopen("libcublasLt.so.13", RTLD_LAZY | RTLD_NOLOAD);
  REQUIRE(lt != nullptr);
  void* own = dlsym(lt, "cublasLtMatmul");
  dlclose(lt);
  CHECK(own != nullptr);
  CHECK(findLoadedSymbol("cublasLtMatmul", WrappedLibrary::CublasLt) == own);
}
