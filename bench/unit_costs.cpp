// What each call that callback_bench counts per launch costs on this
// machine, so that its counts predict the recorder's time on the program's
// thread: a futex wake-up (a condition variable notified while its waiter
// sleeps: the trace thread's wake-up), a capture-state query
// (cuStreamGetCaptureInfo on a stream that is not capturing), a
// capture-mode exchange (cuThreadExchangeStreamCaptureMode, there and back
// counted as two), and an enqueue of the hash kernel (one 4 KiB range),
// plainly and under CUPTI with the recorder's driver and runtime callbacks
// enabled, empty (bench/empty_subscriber.cpp's set: what a hash launch costs
// inside the recorder, whose own calls CUPTI still reports). Host time per
// call on one thread: median and 90th percentile of `calls` calls.
//
//   unit_costs [calls (20000)]
//
// The futex row runs anywhere; the driver's need a GPU. Exit status 0, or 77
// after the futex row when there is no GPU, 1 when a driver call fails.
#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/device_hasher.h"
#include "recorder/callback_table.h"

using namespace gpurr;
using Clock = std::chrono::steady_clock;

namespace {

// Prints one row: the median and 90th percentile of `ns`, in microseconds.
void row(const char* what, std::vector<double> ns) {
  std::sort(ns.begin(), ns.end());
  const auto at = [&](double q) { return ns[static_cast<size_t>(q * static_cast<double>(ns.size() - 1))] / 1000; };
  std::printf("  %-58s median %7.3f us   90th percentile %7.3f us\n", what, at(0.5), at(0.9));
}

// `calls` timings of `call`, with `between` run untimed before each.
std::vector<double> timed(int calls, const std::function<void()>& call, const std::function<void()>& between = {}) {
  std::vector<double> ns;
  ns.reserve(calls);
  for (int i = 0; i < calls; ++i) {
    if (between) between();
    const auto t0 = Clock::now();
    call();
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  return ns;
}

// A thread asleep on a condition variable, woken once per notify.
void futexRows(int calls) {
  std::mutex mu;
  std::condition_variable cv;
  bool go = false, stop = false;
  std::atomic<int> woken{0};
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    while (!stop) {
      cv.wait(lock, [&] { return go || stop; });
      go = false;
      woken.fetch_add(1);
    }
  });
  int expected = 0;
  const int n = std::min(calls, 5000);
  // The waiter has gone back to sleep (50 us after its last wake-up) before each notify.
  std::vector<double> asleep = timed(
      n,
      [&] {
        {
          std::lock_guard lock(mu);
          go = true;
        }
        cv.notify_one();
      },
      [&] {
        while (woken.load() != expected) std::this_thread::yield();
        ++expected;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      });
  while (woken.load() != expected) std::this_thread::yield();
  row("futex wake-up (notify_one, the waiter asleep)", std::move(asleep));
  row("notify_one with no waiter", timed(n, [&] { cv.notify_one(); }));
  {
    std::lock_guard lock(mu);
    stop = true;
  }
  cv.notify_one();
  waiter.join();
}

void CUPTIAPI nothing(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::max(100, std::atoi(argv[1])) : 20000;
  std::printf("unit_costs: host time per call, %d calls each\n", calls);
  futexRows(calls);

  kernels::DriverApi api;
  const kernels::FirstDevice gpu = kernels::openFirstDevice(api);
  if (!gpu.ok) {
    std::printf("  driver calls: not measured (%s)\n", gpu.error.c_str());
    return gpu.absent ? 77 : 1;
  }
  bool failed = false;
  auto check = [&](CUresult r, const char* what) {
    if (r != CUDA_SUCCESS && !failed) {
      std::fprintf(stderr, "unit_costs: %s failed: %s\n", what, api.errorText(r).c_str());
      failed = true;
    }
  };
  std::string error;
  auto hasher = kernels::DeviceHasher::create(api, error);
  if (!hasher) {
    std::fprintf(stderr, "unit_costs: %s\n", error.c_str());
    return 1;
  }
  CUstream stream = nullptr;
  check(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  // As the recorder asks (CudaDevice::captureState).
  CUstreamCaptureStatus status{};
  cuuint64_t id = 0;
  row("capture-state query (cuStreamGetCaptureInfo, none open)", timed(calls, [&] {
        check(api.cuStreamGetCaptureInfo(stream, &status, &id, nullptr, nullptr, nullptr, nullptr),
              "cuStreamGetCaptureInfo");
      }));
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  row("capture-mode exchange (cuThreadExchangeStreamCaptureMode)", timed(calls, [&] {
        check(api.cuThreadExchangeStreamCaptureMode(&mode), "cuThreadExchangeStreamCaptureMode");
      }));

  // One range of 4 KiB, its plan uploaded once: each call is the launch alone.
  CUdeviceptr buffer = 0, table = 0, digests = 0;
  check(api.cuMemAlloc(&buffer, 4096), "cuMemAlloc");
  const std::vector<kernels::HashRequest> request = {{buffer, 4096}};
  const kernels::HashPlan plan = kernels::planHashBatch(request);
  check(api.cuMemAlloc(&table, plan.ranges.size() * sizeof(kernels::DeviceHashRange)), "cuMemAlloc");
  check(api.cuMemAlloc(&digests, plan.totalSlots * 8), "cuMemAlloc");
  check(api.cuMemcpyHtoD(table, plan.ranges.data(), plan.ranges.size() * sizeof(kernels::DeviceHashRange)),
        "cuMemcpyHtoD");
  int n = 0;
  auto hashLaunch = [&] {
    check(hasher->enqueue(stream, table, static_cast<uint32_t>(plan.ranges.size()), plan.totalSlots, digests),
          "the hash kernel's launch");
  };
  // Every 256 launches the stream drains, untimed: the queue never fills.
  auto drain = [&] {
    if (++n % 256 == 0) check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
  };
  timed(1000, hashLaunch, drain);  // warm-up
  row("hash kernel launch", timed(calls, hashLaunch, drain));

  CUpti_SubscriberHandle subscriber = nullptr;
  if (cuptiSubscribe(&subscriber, nothing, nullptr) != CUPTI_SUCCESS) {
    std::printf("  hash kernel launch under CUPTI: not measured (cuptiSubscribe failed: another subscriber?)\n");
  } else {
    for (CUpti_CallbackId cb : recorder::subscribedDriverCallbacks())
      cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cb);
    for (CUpti_CallbackId cb : recorder::subscribedRuntimeCallbacks())
      cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cb);
    timed(1000, hashLaunch, drain);
    row("hash kernel launch under CUPTI (the recorder's callbacks, empty)", timed(calls, hashLaunch, drain));
    cuptiUnsubscribe(subscriber);
  }
  check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
  hasher.reset();
  api.cuMemFree(buffer);
  api.cuMemFree(table);
  api.cuMemFree(digests);
  api.cuStreamDestroy(stream);
  api.cuDevicePrimaryCtxRelease(gpu.device);
  return failed ? 1 : 0;
}
