// The kernels' names and layouts kept for the process (see kernel_text.h).
#include "recorder/kernel_text.h"

#include <type_traits>

#include "recorder/kept_once.h"

namespace gpurr::recorder {

namespace {

KeptOnce<KernelText>& kept() {
  static auto* k = new KeptOnce<KernelText>;  // never destroyed: entries written at exit point here
  return *k;
}

}  // namespace

const KernelText* keptKernelText(const std::string& name, const std::vector<trace::ParamInfo>& layout) {
  // The name, then each parameter's offset and size as bytes.
  static_assert(std::has_unique_object_representations_v<trace::ParamInfo>, "a layout's bytes name it");
  std::string key = name;
  key.push_back('\0');
  key.append(reinterpret_cast<const char*>(layout.data()), layout.size() * sizeof(trace::ParamInfo));
  return kept().keep(std::move(key), [&] { return KernelText{name, layout}; });
}

size_t keptKernelTexts() { return kept().size(); }

}  // namespace gpurr::recorder
