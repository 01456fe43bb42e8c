// PhiloxCudaState as PyTorch itself defines it: the header of the installed
// torch wheel (scripts/setup.sh installs 2.11) compiled here, and the kernel
// names of its libtorch_cuda.so.
#include <catch2/catch.hpp>

#ifdef GPURR_TORCH_INCLUDE
#include <cxxabi.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>

#include <ATen/cuda/detail/PhiloxCudaStateRaw.cuh>

#include "recorder/rng_params.h"

using namespace gpurr;
using namespace gpurr::recorder;

namespace {

// The layout the recorder assumes for the installed torch, from its version.
PhiloxLayout layoutForInstalledTorch() {
  const std::optional<PhiloxLayout> l = philoxLayout(GPURR_TORCH_VERSION, sizeof(at::PhiloxCudaState));
  REQUIRE(l);
  return *l;
}

// A fused_dropout_kernel_vec launch of torch 2.11 (libtorch_cuda.so): three
// TensorInfo<T, unsigned> (a pointer, 25 sizes, 25 strides, dims: 216 bytes),
// unsigned, float, PhiloxCudaState.
const char* kDropoutVec =
    "_ZN2at6native43_GLOBAL__N__50f1b6c4_10_Dropout_cu_0e96ed3824fused_dropout_kernel_vecIN3c104HalfEfjLi1ELi16EbEEvNS_"
    "4cuda6detail10TensorInfoIKT_T1_EENS7_IS8_SA_EENS7_IT4_SA_EESA_T0_NS_15PhiloxCudaStateE";

std::vector<trace::ParamInfo> dropoutLayout() {
  const uint32_t philoxAt = (656 + alignof(at::PhiloxCudaState) - 1) / alignof(at::PhiloxCudaState) *
                            alignof(at::PhiloxCudaState);
  return {{0, 216}, {216, 216}, {432, 216}, {648, 4}, {652, 4}, {philoxAt, sizeof(at::PhiloxCudaState)}};
}

}  // namespace

TEST_CASE("the recorder's Philox layout is the installed PyTorch's own", "[recorder][rng][torch]") {
  INFO("torch " << GPURR_TORCH_VERSION << ": sizeof(at::PhiloxCudaState) = " << sizeof(at::PhiloxCudaState));
  const PhiloxLayout l = layoutForInstalledTorch();
  CHECK(l.size == sizeof(at::PhiloxCudaState));
  CHECK(l.intragraphBytes == sizeof(at::PhiloxCudaState{}.offset_intragraph_));
  CHECK(l.capturedByte == offsetof(at::PhiloxCudaState, captured_));
  CHECK(offsetof(at::PhiloxCudaState, seed_) == 0);
  CHECK(offsetof(at::PhiloxCudaState, offset_) == 8);
  CHECK(offsetof(at::PhiloxCudaState, offset_intragraph_) == 16);
}

TEST_CASE("a real PyTorch Philox state in a real dropout kernel's parameters is decoded", "[recorder][rng][torch]") {
  const std::vector<trace::ParamInfo> layout = dropoutLayout();
  const std::vector<PhiloxParam> found = philoxParams(kDropoutVec, layout, GPURR_TORCH_VERSION);
  REQUIRE(found.size() == 1);
  CHECK(found[0].offset == layout.back().offset);
  std::vector<uint8_t> params(layout.back().offset + layout.back().size, 0xAB);

  // Eager mode: seed and offset by value.
  const at::PhiloxCudaState eager(0x1234'5678'9abc'def0ULL, 4096);
  std::memcpy(params.data() + found[0].offset, &eager, sizeof(eager));
  auto states = decodePhilox(params, found);
  REQUIRE(states.size() == 1);
  CHECK(states[0].seed == 0x1234'5678'9abc'def0ULL);
  CHECK(states[0].offset == 4096);
  CHECK(states[0].generator.empty());

  // Captured into a CUDA graph: seed and offset are device pointers, and the
  // intra-graph offset is a 64-bit value since 2.10.
  int64_t seedCell = 0, offsetCell = 0;
  const uint64_t intragraph = (uint64_t{1} << 33) + 5;
  const at::PhiloxCudaState captured(&seedCell, &offsetCell, intragraph);
  std::memcpy(params.data() + found[0].offset, &captured, sizeof(captured));
  states = decodePhilox(params, found);
  REQUIRE(states.size() == 1);
  CHECK(states[0].seed == reinterpret_cast<uint64_t>(&seedCell));
  CHECK(states[0].generator.find("captured") != std::string::npos);
  CHECK(states[0].generator.find(std::to_string(intragraph)) != std::string::npos);
}

#ifdef GPURR_TORCH_CUDA_LIB
namespace {

// Every mangled name in `path` that mentions PhiloxCudaState ("_Z..." runs
// of identifier characters; a kernel's host stub "__device_stub__Z..." is
// the kernel "_Z...").
std::set<std::string> philoxNamesIn(const char* path) {
  std::set<std::string> names;
  const int fd = open(path, O_RDONLY);
  REQUIRE(fd >= 0);
  struct stat st {};
  REQUIRE(fstat(fd, &st) == 0);
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  REQUIRE(map != MAP_FAILED);
  const char* data = static_cast<const char*>(map);
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  constexpr std::string_view kKey = "15PhiloxCudaState";
  for (const char* p = data; (p = static_cast<const char*>(memmem(p, size - (p - data), kKey.data(), kKey.size())));
       p += kKey.size()) {
    const char* b = p;
    while (b > data && ident(b[-1])) --b;
    const char* e = p;
    while (e < data + size && ident(*e)) ++e;
    std::string name(b, e);
    if (name.rfind("__device_stub__Z", 0) == 0) name = "_" + name.substr(15);
    if (name.rfind("_Z", 0) == 0) names.insert(name);
  }
  munmap(map, size);
  return names;
}

// "at::native::(anonymous namespace)::fused_dropout_kernel_vec" of a
// demangled "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<...>(...)".
std::string functionName(const std::string& demangled) {
  std::string s = demangled;
  for (size_t at; (at = s.find("(anonymous namespace)")) != std::string::npos;) s.replace(at, 21, "anon");
  const size_t end = s.find_first_of("<(");
  s = s.substr(0, end);
  return s.substr(s.rfind(':') == std::string::npos ? 0 : s.rfind(':') + 1);
}

}  // namespace

TEST_CASE("PyTorch's kernels that take a PhiloxCudaState parameter are all found by name",
          "[recorder][rng][torch]") {
  const std::set<std::string> names = philoxNamesIn(GPURR_TORCH_CUDA_LIB);
  INFO(GPURR_TORCH_CUDA_LIB);
  REQUIRE(names.size() > 1000);
  // The kernels of torch 2.11 that take it as a parameter of their own; the
  // others (bernoulli with a tensor p, gamma, poisson through
  // kernelPointwiseApply2) hold it inside a lambda and are not labelled.
  const std::set<std::string> topLevel = {
      "distribution_elementwise_grid_stride_kernel", "fused_dropout_kernel_vec", "fused_dropout_kernel",
      "rrelu_with_noise_cuda_kernel", "distribution_binary_elementwise_kernel", "randperm_handle_duplicate_keys_kernel",
      "bernoulli_tensor_cuda_kernel", "sampleMultinomialWithReplacement", "distribution_binary_kernel",
      "gamma_cuda_kernel", "poisson_cuda_kernel", "rand_uniform_kernel"};
  std::set<std::string> labelled, notLabelled;
  size_t kernels = 0, dropouts = 0;
  for (const std::string& name : names) {
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
                                                  &std::free);
    if (status != 0 || !d || std::strncmp(d.get(), "void ", 5) != 0) continue;  // not a kernel
    ++kernels;
    const std::vector<std::string> params = demangledParameters(d.get());
    // A layout as the driver reports it: one entry per parameter, the
    // PhiloxCudaState ones at their true size.
    std::vector<trace::ParamInfo> layout;
    uint32_t offset = 0;
    for (const std::string& p : params) {
      const bool philox = p.size() >= 15 && p.compare(p.size() - 15, 15, "PhiloxCudaState") == 0;
      const uint32_t size = philox ? sizeof(at::PhiloxCudaState) : 8;
      layout.push_back({offset, size});
      offset += size;
    }
    const std::string fn = functionName(d.get());
    (philoxParams(name, layout, GPURR_TORCH_VERSION).size() == 1 ? labelled : notLabelled).insert(fn);
    // The diff takes only numbers for values (common/demangle.h): dropout's
    // element count and probability, not its TensorInfo structs or state.
    if (fn == "fused_dropout_kernel_vec") {
      ++dropouts;
      std::vector<bool> numbers;
      for (const std::string& p : params) numbers.push_back(arithmeticType(p));
      CHECK(numbers == std::vector<bool>{false, false, false, true, true, false});
    }
  }
  CHECK(dropouts > 0);
  INFO(kernels << " kernels mention PhiloxCudaState");
  CHECK(labelled == topLevel);
  CHECK(notLabelled == std::set<std::string>{"kernelPointwiseApply2"});
}
#endif  // GPURR_TORCH_CUDA_LIB

#else
TEST_CASE("the recorder's Philox layout is the installed PyTorch's own", "[recorder][rng][torch]") {
  FAIL("PyTorch's headers were not found when the build was configured: run scripts/setup.sh, which installs "
       "torch into /opt/gpurr-venv, then configure again (or set GPURR_TEST_VENV)");
}
#endif  // GPURR_TORCH_INCLUDE
