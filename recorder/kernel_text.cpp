// The kernels' names and layouts kept for the process (see kernel_text.h).
#include "recorder/kernel_text.h"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace gpurr::recorder {

namespace {

struct Kept {
  std::mutex mu;
  // By name; a name's layouts, each its own copy (node-stable: pointers stay).
  std::unordered_map<std::string, std::vector<std::unique_ptr<const KernelText>>> byName;
  size_t count = 0;
};

Kept& kept() {
  static auto* k = new Kept;  // never destroyed: entries written at exit point here
  return *k;
}

}  // namespace

const KernelText* keptKernelText(const std::string& name, const std::vector<trace::ParamInfo>& layout) {
  Kept& k = kept();
  std::lock_guard lock(k.mu);
  auto& same = k.byName[name];
  for (const auto& t : same)
    if (t->layout == layout) return t.get();
  same.push_back(std::make_unique<const KernelText>(KernelText{name, layout}));
  ++k.count;
  return same.back().get();
}

size_t keptKernelTexts() {
  Kept& k = kept();
  std::lock_guard lock(k.mu);
  return k.count;
}

}  // namespace gpurr::recorder
