// libgpurr_test_launch_on_ops.so: makes a real PyTorch CPU program "launch a
// kernel" inside chosen ops. A global RecordFunction callback, registered
// after the framework layer's, calls the fake recorder's gpurr_test_launch_with
// at the start of each op named in the list (kernel "<op>_kernel"), its
// parameters the addresses of the op's tensor arguments (their data, as a
// real kernel is given them), or none where GPURR_TEST_LAUNCH_WORDS is 0.
#include <dlfcn.h>

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

namespace {
std::unordered_set<std::string> ops;
void (*launch)(const char*, const uint64_t*, uint32_t) = nullptr;
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
}  // namespace

extern "C" __attribute__((visibility("default"))) int gpurr_test_launch_on_ops(void* recorder, const char* csv) {
  launch = reinterpret_cast<void (*)(const char*, const uint64_t*, uint32_t)>(
      dlsym(recorder, "gpurr_test_launch_with"));
  if (launch == nullptr) return -1;
  const char* w = std::getenv("GPURR_TEST_LAUNCH_WORDS");
  words = w == nullptr || std::string(w) != "0";
  std::stringstream in(csv);
  for (std::string op; std::getline(in, op, ',');) ops.insert(op);
  at::addGlobalCallback(
      at::RecordFunctionCallback(onStart).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  return 0;
}
