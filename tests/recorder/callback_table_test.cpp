// The fixed driver callback table.
#include <catch2/catch.hpp>

#include "recorder/callback_table.h"

using namespace gpurr::recorder;

TEST_CASE("launch variants share a handler, ptsz variants are per-thread", "[recorder][table]") {
  auto e = driverHandler(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  CHECK(e.handler == Handler::kLaunchKernel);
  CHECK_FALSE(e.perThread);
  e = driverHandler(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz);
  CHECK(e.handler == Handler::kLaunchKernel);
  CHECK(e.perThread);
  CHECK(driverHandler(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz).handler == Handler::kLaunchKernelEx);
  CHECK(driverHandler(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel).handler == Handler::kLaunchCooperative);
  CHECK(driverHandler(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz).handler == Handler::kMemcpyHtoDAsync);
  CHECK(driverHandler(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2).handler == Handler::kMemAlloc);
  CHECK(driverHandler(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch).handler == Handler::kGraphLaunch);
  CHECK(driverHandler(CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess).handler == Handler::kMemSetAccess);
  CHECK(driverHandler(CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2).handler == Handler::kIpcOpenMemHandle);
  CHECK(driverHandler(CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle).handler == Handler::kIpcOpenMemHandle);
  CHECK(driverHandler(CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle).handler == Handler::kIpcCloseMemHandle);
  CHECK(driverHandler(CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportPointer).handler == Handler::kMemPoolImportPointer);
  CHECK(driverHandler(CUPTI_DRIVER_TRACE_CBID_cuDeviceGetName).handler == Handler::kNone);
  CHECK(driverHandler(0x7fffffff).handler == Handler::kNone);
}

TEST_CASE("every subscribed callback has a handler, once", "[recorder][table]") {
  const auto ids = subscribedDriverCallbacks();
  CHECK(ids.size() > 90);
  std::vector<CUpti_CallbackId> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  for (CUpti_CallbackId id : ids) {
    INFO("cbid " << id);
    CHECK(driverHandler(id).handler != Handler::kNone);
  }
}
