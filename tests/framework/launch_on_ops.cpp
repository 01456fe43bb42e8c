// libgpurr_test_launch_on_ops.so: makes a real PyTorch CPU program "launch a
// kernel" inside chosen ops. A global RecordFunction callback, registered
// after the framework layer's, calls the fake recorder's gpurr_test_launch
// at the start of each op named in the list (kernel "<op>_kernel").
#include <dlfcn.h>

#include <ATen/record_function.h>

#include <sstream>
#include <string>
#include <unordered_set>

namespace {
std::unordered_set<std::string> ops;
void (*launch)(const char*) = nullptr;

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
  const std::string name = fn.name();
  if (ops.count(name)) launch((name + "_kernel").c_str());
  return nullptr;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int gpurr_test_launch_on_ops(void* recorder, const char* csv) {
  launch = reinterpret_cast<void (*)(const char*)>(dlsym(recorder, "gpurr_test_launch"));
  if (launch == nullptr) return -1;
  std::stringstream in(csv);
  for (std::string op; std::getline(in, op, ',');) ops.insert(op);
  at::addGlobalCallback(at::RecordFunctionCallback(onStart).scopes({at::RecordScope::FUNCTION}));
  return 0;
}
