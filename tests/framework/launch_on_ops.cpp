// libgpurr_test_launch_on_ops.so: makes a real PyTorch CPU program "launch a
// kernel" inside chosen ops. A global RecordFunction callback, registered
// after the framework layer's, calls the fake recorder's gpurr_test_launch_with
// at the start of each op named in the list (kernel "<op>_kernel"), its
// parameters the addresses of the op's tensor arguments (their data, as a
// real kernel is given them), or none where GPURR_TEST_LAUNCH_WORDS is 0.
// With GPURR_TEST_HASH set, the launch is made at the op's end instead (the
// callback registered before the layer's, by launch_in.py, so that the op
// is still open in the layer when it runs), its parameters the addresses
// of the op's tensors in and out (tensor lists included), and the CPU
// allocator reports what it hands out and takes back as allocations: the
// fake recorder hashes the tensors as a GPU's recorder hashes a kernel's
// buffers.
#include <dlfcn.h>

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

namespace {
std::unordered_set<std::string> ops;
void (*launch)(const char*, const uint64_t*, uint32_t) = nullptr;
void (*allocated)(uint64_t, uint64_t) = nullptr;
void (*freed)(uint64_t) = nullptr;
bool words = true;

// The address of a tensor argument's data; 0 for a tensor without storage
// (a functional or fake tensor's wrapper).
uint64_t addressOf(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return 0;
  try {
    return reinterpret_cast<uint64_t>(t.const_data_ptr());
  } catch (const std::exception&) {
    return 0;
  }
}

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
  const std::string name = fn.name();
  if (!ops.count(name)) return nullptr;
  std::vector<uint64_t> addresses;
  if (words) {
    for (const c10::IValue& v : fn.inputs()) {
      if (v.isTensor()) addresses.push_back(addressOf(v.toTensor()));
    }
  }
  launch((name + "_kernel").c_str(), addresses.data(), static_cast<uint32_t>(addresses.size()));
  return nullptr;
}

// Each defined tensor with storage among `values`, tensor lists' included.
template <typename F>
void eachTensor(const c10::ArrayRef<c10::IValue>& values, F f) {
  for (const c10::IValue& v : values) {
    if (v.isTensor()) {
      f(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) f(t);
    }
  }
}

bool stored(const at::Tensor& t) { return t.defined() && t.has_storage() && t.storage().nbytes() > 0; }

// GPURR_TEST_HASH: an op's input tensors, kept to its end (its inputs are
// not).
struct Began : at::ObserverContext {
  std::vector<at::Tensor> inputs;
};

std::unique_ptr<at::ObserverContext> onStartHashed(const at::RecordFunction& fn) {
  if (!ops.count(fn.name())) return nullptr;
  auto began = std::make_unique<Began>();
  eachTensor(fn.inputs(), [&](const at::Tensor& t) {
    if (stored(t)) began->inputs.push_back(t);
  });
  return began;
}

void onEndHashed(const at::RecordFunction& fn, at::ObserverContext* context) {
  if (context == nullptr) return;
  std::vector<uint64_t> addresses;
  auto add = [&](const at::Tensor& t) {
    if (stored(t)) addresses.push_back(reinterpret_cast<uint64_t>(t.const_data_ptr()));
  };
  for (const at::Tensor& t : static_cast<Began*>(context)->inputs) add(t);
  eachTensor(fn.outputs(), add);
  launch((std::string(fn.name()) + "_kernel").c_str(), addresses.data(), static_cast<uint32_t>(addresses.size()));
}

// GPURR_TEST_HASH: the CPU allocator, its allocations reported to the
// recorder as cuMemAlloc's and cuMemFree's are, so that tensors are
// allocations with their lifetimes (as cudaMalloc's without PyTorch's
// caching). Keeps the raw interface of the allocator it wraps.
c10::Allocator* inner = nullptr;
c10::DeleterFnPtr innerDelete = nullptr;

void deleteReported(void* data) {
  freed(reinterpret_cast<uint64_t>(data));
  innerDelete(data);
}

struct ReportingAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr p = inner->allocate(n);
    if (p.get() == nullptr || p.get() != p.get_context()) return p;
    void* data = p.release_context();
    allocated(reinterpret_cast<uint64_t>(data), n);
    return {data, data, &deleteReported, p.device()};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &deleteReported; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
}  // namespace

extern "C" __attribute__((visibility("default"))) int gpurr_test_launch_on_ops(void* recorder, const char* csv) {
  launch = reinterpret_cast<void (*)(const char*, const uint64_t*, uint32_t)>(
      dlsym(recorder, "gpurr_test_launch_with"));
  if (launch == nullptr) return -1;
  const char* w = std::getenv("GPURR_TEST_LAUNCH_WORDS");
  words = w == nullptr || std::string(w) != "0";
  std::stringstream in(csv);
  for (std::string op; std::getline(in, op, ',');) ops.insert(op);
  if (std::getenv("GPURR_TEST_HASH") != nullptr) {
    allocated = reinterpret_cast<decltype(allocated)>(dlsym(recorder, "gpurr_test_allocated"));
    freed = reinterpret_cast<decltype(freed)>(dlsym(recorder, "gpurr_test_freed"));
    if (allocated == nullptr || freed == nullptr) return -1;
    inner = c10::GetCPUAllocator();
    innerDelete = inner->raw_deleter();
    if (innerDelete == nullptr) return -1;
    c10::SetCPUAllocator(new ReportingAllocator, 100);
    at::addGlobalCallback(at::RecordFunctionCallback(onStartHashed, onEndHashed)
                              .needsInputs(true)
                              .needsOutputs(true)
                              .scopes({at::RecordScope::FUNCTION}));
    return 0;
  }
  at::addGlobalCallback(
      at::RecordFunctionCallback(onStart).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  return 0;
}
