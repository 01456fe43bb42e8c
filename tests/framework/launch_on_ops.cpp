// libgpurr_test_launch_on_ops.so: makes a real PyTorch CPU program "launch a
// kernel" inside chosen ops. A global RecordFunction callback, registered
// after the framework layer's, calls the fake recorder's gpurr_test_launch_with
// at the start of each op named in the list (kernel "<op>_kernel"), its
// parameters the addresses of the op's first tensor arguments, as a real
// kernel would be given them.
#include <dlfcn.h>

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <exception>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

namespace {
std::unordered_set<std::string> ops;
void (*launch)(const char*, const uint64_t*, uint32_t) = nullptr;

// The address of a tensor argument's data; 0 for any other argument, or a
// tensor without storage (a functional or fake tensor's wrapper).
uint64_t addressOf(const c10::IValue& v) {
  if (!v.isTensor()) return 0;
  const at::Tensor& t = v.toTensor();
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
  std::vector<uint64_t> words;
  for (const c10::IValue& v : fn.inputs()) {
    if (words.size() == 4) break;
    words.push_back(addressOf(v));
  }
  launch((name + "_kernel").c_str(), words.data(), static_cast<uint32_t>(words.size()));
  return nullptr;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int gpurr_test_launch_on_ops(void* recorder, const char* csv) {
  launch = reinterpret_cast<void (*)(const char*, const uint64_t*, uint32_t)>(
      dlsym(recorder, "gpurr_test_launch_with"));
  if (launch == nullptr) return -1;
  std::stringstream in(csv);
  for (std::string op; std::getline(in, op, ',');) ops.insert(op);
  at::addGlobalCallback(
      at::RecordFunctionCallback(onStart).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  return 0;
}
