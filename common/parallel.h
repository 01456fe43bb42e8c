// Runs f(0) ... f(n - 1) on several threads, each taking the next index:
// independent pieces of work (a directory's traces, a job's ranks) side by
// side. f puts its result by index, so that nothing depends on the timing.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <utility>
#include <vector>

namespace gpurr::parallel {

// On `threads` threads (the calling one among them).
template <typename F>
void onThreads(size_t n, unsigned threads, F&& f) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) f(i);
  };
  std::vector<std::thread> others;
  for (unsigned t = 1; t < std::min<size_t>(n, threads); ++t) others.emplace_back(work);
  work();
  for (std::thread& t : others) t.join();
}

// On as many threads as the machine has cores.
template <typename F>
void onEveryCore(size_t n, F&& f) {
  onThreads(n, std::max(1u, std::thread::hardware_concurrency()), std::forward<F>(f));
}

}  // namespace gpurr::parallel
