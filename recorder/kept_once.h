// Values kept once for the life of the process, one copy for each distinct
// key: every caller with the same key gets the same pointer, which stays good
// after its session ends and is never freed (an entry still on its way to the
// trace thread may point at a copy whose source, a kernel's module or a
// layer's template, has gone since). For what a launch's entry points at
// instead of copying: its kernel's name and layout, a followed step's origin.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace gpurr::recorder {

template <typename T>
class KeptOnce {
 public:
  // The copy kept for `key`, made by `make()` on the first call with it.
  // Thread-safe.
  template <typename Make>
  const T* keep(std::string&& key, Make&& make) {
    std::lock_guard lock(mu_);
    std::unique_ptr<const T>& slot = byKey_[std::move(key)];
    if (!slot) slot = std::make_unique<const T>(std::forward<Make>(make)());
    return slot.get();
  }
  // How many distinct copies are kept (tests, memory accounting).
  size_t size() const {
    std::lock_guard lock(mu_);
    return byKey_.size();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<const T>> byKey_;  // node-stable: pointers stay
};

}  // namespace gpurr::recorder
