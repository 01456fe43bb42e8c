// Memory calls (see memory.h): allocations of every kind, frees, VMM
// mappings and their access, memory of other processes, module globals;
// each emits its Allocation / Free event.
#include "recorder/memory.h"

#include "recorder/callback_data.h"
#include "recorder/thread_local_ref.h"
#include "recorder/write_history.h"

namespace gpurr::recorder {

using trace::AllocationKind;

namespace {

// A thread's last answer of MemoryRecorder::deviceOf.
struct DeviceMemo {
  uint64_t context = 0, generation = 0;
  uint32_t device = 0;
};
thread_local DeviceMemo tlsDevice;

}  // namespace

MemoryRecorder::MemoryRecorder(std::mutex& mu, const RecorderOptions& options, Device& device, SessionOutput& out)
    : mu_(mu), options_(options), device_(device), out_(out) {}

void MemoryRecorder::contextDestroying(uint64_t context) {
  std::lock_guard lock(mu_);
  deviceByContext_.erase(context);
  contexts_.bump();
}

uint32_t MemoryRecorder::deviceOf(uint64_t context) {
  DeviceMemo& memo = threadLocalRef(tlsDevice);
  if (memo.context == context && memo.generation == contexts_.now()) return memo.device;
  const auto answer = [&](uint32_t device) {  // read under the lock, with the generation it is of
    memo = {context, contexts_.now(), device};
    return device;
  };
  {
    std::lock_guard lock(mu_);
    if (auto it = deviceByContext_.find(context); it != deviceByContext_.end()) return answer(it->second);
  }
  const uint32_t device = device_.currentDevice();  // the callback's context is current
  std::lock_guard lock(mu_);
  return answer(deviceByContext_.try_emplace(context, device).first->second);
}

void MemoryRecorder::addAllocation(uint64_t address, uint64_t size, AllocationKind kind, uint64_t stream,
                                  uint64_t context) {
  const uint32_t device = deviceOf(context);
  std::lock_guard lock(mu_);  // ordinals and emission in the same order
  std::vector<trace::Free> replaced;
  const uint32_t ordinal = allocations_.add(address, size, kind, device, stream, &replaced);
  writeHistory().forget(address, address + size);
  for (const trace::Free& f : replaced) out_.emitEvent(f);
  trace::Allocation a = *allocations_.at(address);
  a.ordinal = ordinal;
  out_.emitEvent(a);
}

void MemoryRecorder::removeAllocation(uint64_t address) {
  std::lock_guard lock(mu_);
  if (std::optional<trace::Allocation> a = allocations_.remove(address)) {
    writeHistory().forget(a->address, a->address + a->size);
    out_.emitEvent(trace::Free{a->ordinal, address});
  }
}

void MemoryRecorder::addImported(uint64_t address, uint64_t context, const char* call) {
  uint64_t base = 0, size = 0;
  if (!device_.addressRange(address, base, size) || address < base || address - base >= size) {
    out_.warnOnce(std::string("size:") + call, std::string("cannot find the size of memory opened with ") + call +
                                                   "; launches are not hashed in it");
    return;
  }
  addAllocation(address, base + size - address, AllocationKind::kOther, 0, context);
}

void MemoryRecorder::onExit(Handler h, const CUpti_CallbackData& cb) {
  if (!succeeded(cb)) return;
  switch (h) {
    case Handler::kMemAlloc: {
      const auto& p = params<cuMemAlloc_v2_params>(cb);
      if (p.dptr) addAllocation(*p.dptr, p.bytesize, AllocationKind::kDevice, 0, u64(cb.context));
      break;
    }
    case Handler::kMemAllocPitch: {
      const auto& p = params<cuMemAllocPitch_v2_params>(cb);
      if (p.dptr && p.pPitch) addAllocation(*p.dptr, *p.pPitch * p.Height, AllocationKind::kDevice, 0, u64(cb.context));
      break;
    }
    // Memory allocated on a stream being captured belongs to the graph
    // (cuda.h, cuMemAllocAsync): mapped only while the graph runs, so never
    // hashed as live memory; it is left out, and so is its free.
    case Handler::kMemAllocAsync: {
      const auto& p = params<cuMemAllocAsync_params>(cb);
      if (p.dptr && !device_.currentCapture(u64(p.hStream)).capture)
        addAllocation(*p.dptr, p.bytesize, AllocationKind::kAsync, u64(p.hStream), u64(cb.context));
      break;
    }
    case Handler::kMemAllocFromPoolAsync: {
      const auto& p = params<cuMemAllocFromPoolAsync_params>(cb);
      if (p.dptr && !device_.currentCapture(u64(p.hStream)).capture)
        addAllocation(*p.dptr, p.bytesize, AllocationKind::kAsync, u64(p.hStream), u64(cb.context));
      break;
    }
    case Handler::kMemAllocManaged: {
      const auto& p = params<cuMemAllocManaged_params>(cb);
      if (options_.full) out_.warnNotReplayable("managed allocations", "what the CPU writes into them");
      if (p.dptr) addAllocation(*p.dptr, p.bytesize, AllocationKind::kManaged, 0, u64(cb.context));
      break;
    }
    case Handler::kMemFree:
      removeAllocation(params<cuMemFree_v2_params>(cb).dptr);
      break;
    case Handler::kMemFreeAsync:
      removeAllocation(params<cuMemFreeAsync_params>(cb).dptr);
      break;
    case Handler::kMemHostAlloc: {
      // With unified addressing, pinned host memory has the same address on
      // the device, so kernels may be passed it directly.
      const auto& p = params<cuMemHostAlloc_params>(cb);
      if (p.pp && *p.pp) addAllocation(u64(*p.pp), p.bytesize, AllocationKind::kHostMapped, 0, u64(cb.context));
      break;
    }
    case Handler::kMemAllocHost: {
      const auto& p = params<cuMemAllocHost_v2_params>(cb);
      if (p.pp && *p.pp) addAllocation(u64(*p.pp), p.bytesize, AllocationKind::kHostMapped, 0, u64(cb.context));
      break;
    }
    case Handler::kMemHostRegister: {
      const auto& p = params<cuMemHostRegister_v2_params>(cb);
      addAllocation(u64(p.p), p.bytesize, AllocationKind::kHostMapped, 0, u64(cb.context));
      break;
    }
    case Handler::kMemHostUnregister:
      removeAllocation(u64(params<cuMemHostUnregister_params>(cb).p));
      break;
    case Handler::kMemFreeHost:
      removeAllocation(u64(params<cuMemFreeHost_params>(cb).p));
      break;
    case Handler::kAddressReserve: {
      const auto& p = params<cuMemAddressReserve_params>(cb);
      if (p.ptr) addAllocation(*p.ptr, p.size, AllocationKind::kVmm, 0, u64(cb.context));
      break;
    }
    case Handler::kAddressFree:
      removeAllocation(params<cuMemAddressFree_params>(cb).ptr);
      break;
    case Handler::kMemMap: {
      const auto& p = params<cuMemMap_params>(cb);
      std::lock_guard lock(mu_);
      allocations_.map(p.ptr, p.size);
      writeHistory().forget(p.ptr, p.ptr + p.size);  // other physical memory there now
      break;
    }
    case Handler::kMemUnmap: {
      const auto& p = params<cuMemUnmap_params>(cb);
      std::lock_guard lock(mu_);
      allocations_.unmap(p.ptr, p.size);
      writeHistory().forget(p.ptr, p.ptr + p.size);
      break;
    }
    case Handler::kMemSetAccess: {
      // A mapping is accessible only where cuMemSetAccess allowed it, per
      // location; only device locations matter to the device hash.
      const auto& p = params<cuMemSetAccess_params>(cb);
      if (p.desc == nullptr) break;
      std::lock_guard lock(mu_);
      for (size_t i = 0; i < p.count; ++i) {
        const CUmemAccessDesc& d = p.desc[i];
        if (d.location.type != CU_MEM_LOCATION_TYPE_DEVICE || d.location.id < 0) continue;
        allocations_.setAccess(p.ptr, p.size, static_cast<uint32_t>(d.location.id),
                               (d.flags & CU_MEM_ACCESS_FLAGS_PROT_READ) != 0);
      }
      break;
    }
    case Handler::kIpcOpenMemHandle: {
      // cuIpcOpenMemHandle and _v2 have the same parameters; the driver
      // returns the same pointer for a handle opened again (counted).
      const auto& p = params<cuIpcOpenMemHandle_v2_params>(cb);
      if (p.pdptr == nullptr || *p.pdptr == 0) break;
      {
        std::lock_guard lock(mu_);
        auto it = ipcOpens_.find(*p.pdptr);
        if (it != ipcOpens_.end() && allocations_.at(*p.pdptr) != nullptr) {
          ++it->second;
          break;
        }
        ipcOpens_.erase(*p.pdptr);
      }
      addImported(*p.pdptr, u64(cb.context), "cuIpcOpenMemHandle");
      std::lock_guard lock(mu_);
      if (allocations_.at(*p.pdptr) != nullptr) ipcOpens_[*p.pdptr] = 1;
      break;
    }
    case Handler::kIpcCloseMemHandle: {
      const uint64_t dptr = params<cuIpcCloseMemHandle_params>(cb).dptr;
      {
        std::lock_guard lock(mu_);
        auto it = ipcOpens_.find(dptr);
        if (it != ipcOpens_.end() && --it->second > 0) break;  // still open
        ipcOpens_.erase(dptr);
      }
      removeAllocation(dptr);
      break;
    }
    case Handler::kMemPoolImportPointer: {
      // Freed with cuMemFree / cuMemFreeAsync, as the exporter's allocation.
      const auto& p = params<cuMemPoolImportPointer_params>(cb);
      if (p.ptr_out != nullptr && *p.ptr_out != 0) addImported(*p.ptr_out, u64(cb.context), "cuMemPoolImportPointer");
      break;
    }
    case Handler::kModuleGetGlobal:
    case Handler::kLibraryGetGlobal: {
      // Both parameter structs start with (CUdeviceptr* dptr, size_t* bytes).
      const auto& p = params<cuModuleGetGlobal_v2_params>(cb);
      if (p.dptr == nullptr || p.bytes == nullptr || *p.dptr == 0) break;
      bool known;
      {
        std::lock_guard lock(mu_);
        known = allocations_.at(*p.dptr) != nullptr;
      }
      if (!known) addAllocation(*p.dptr, *p.bytes, AllocationKind::kModuleGlobal, 0, u64(cb.context));
      break;
    }
    default:
      break;
  }
}

trace::DeviceRange MemoryRecorder::deviceRange(uint64_t address, uint64_t size) {
  trace::DeviceRange r{address, size, 0, 0};
  std::lock_guard lock(mu_);
  if (std::optional<Resolved> res = allocations_.resolve(address)) {
    r.allocation = res->ordinal;
    r.offset = res->offset;
  }
  return r;
}

bool MemoryRecorder::readableIn(uint64_t context, const trace::DeviceRange& range) {
  const uint32_t device = deviceOf(context);
  std::lock_guard lock(mu_);
  return allocations_.readableFrom(range.address, range.size, device);
}

bool MemoryRecorder::isDevicePointer(uint64_t address) {
  // Pinned host memory is reachable from the device, but a copy from it is
  // still host input: it counts as host here.
  std::lock_guard lock(mu_);
  const std::optional<Resolved> r = allocations_.resolve(address);
  return r && r->kind != AllocationKind::kHostMapped;
}

}  // namespace gpurr::recorder
