// Copies, sets and synchronisations (see copies.h): each successful call's
// event, with the digest of what a copy or set wrote.
#include "recorder/copies.h"

#include "recorder/callback_data.h"
#include "recorder/write_history.h"
#include "trace_format/hash.h"

namespace gpurr::recorder {

CopyRecorder::CopyRecorder(const RecorderOptions& options, Device& device, SessionOutput& out,
                           MemoryRecorder& memory, HashRules& hashing)
    : options_(options), device_(device), out_(out), memory_(memory), hashing_(hashing) {}

void CopyRecorder::copyExit(Handler h, bool perThread, const CUpti_CallbackData& cb) {
  trace::Memcpy m;
  uint64_t dst = 0, src = 0;
  bool dstDevice = false, srcDevice = false;
  const void* hostSource = nullptr;
  // Enqueued into a graph's capture: listed, nothing hashed, kept or
  // forgotten. Every path below asks this once, and learns from the same
  // query whether the copy's hash may be enqueued.
  bool canEnqueue = false;
  auto emitIfCaptured = [&] {
    canEnqueue = markCaptured(device_, m, enqueueStream(m.stream, perThread)).canEnqueue;
    if (!m.captured) return false;
    out_.emitEvent(std::move(m));
    return true;
  };
  switch (h) {
    case Handler::kMemcpyHtoD: {
      const auto& p = params<cuMemcpyHtoD_v2_params>(cb);
      dst = p.dstDevice, src = u64(p.srcHost), m.size = p.ByteCount, dstDevice = true, hostSource = p.srcHost;
      break;
    }
    case Handler::kMemcpyHtoDAsync: {
      const auto& p = params<cuMemcpyHtoDAsync_v2_params>(cb);
      dst = p.dstDevice, src = u64(p.srcHost), m.size = p.ByteCount, dstDevice = true, hostSource = p.srcHost;
      m.stream = u64(p.hStream), m.async = true;
      break;
    }
    case Handler::kMemcpyDtoH: {
      const auto& p = params<cuMemcpyDtoH_v2_params>(cb);
      dst = u64(p.dstHost), src = p.srcDevice, m.size = p.ByteCount, srcDevice = true;
      break;
    }
    case Handler::kMemcpyDtoHAsync: {
      const auto& p = params<cuMemcpyDtoHAsync_v2_params>(cb);
      dst = u64(p.dstHost), src = p.srcDevice, m.size = p.ByteCount, srcDevice = true;
      m.stream = u64(p.hStream), m.async = true;
      break;
    }
    case Handler::kMemcpyDtoD: {
      const auto& p = params<cuMemcpyDtoD_v2_params>(cb);
      dst = p.dstDevice, src = p.srcDevice, m.size = p.ByteCount, dstDevice = srcDevice = true;
      break;
    }
    case Handler::kMemcpyDtoDAsync: {
      const auto& p = params<cuMemcpyDtoDAsync_v2_params>(cb);
      dst = p.dstDevice, src = p.srcDevice, m.size = p.ByteCount, dstDevice = srcDevice = true;
      m.stream = u64(p.hStream), m.async = true;
      break;
    }
    case Handler::kMemcpy:
    case Handler::kMemcpyAsync: {
      // Unified addressing: the direction follows from where the pointers lie.
      if (h == Handler::kMemcpy) {
        const auto& p = params<cuMemcpy_params>(cb);
        dst = p.dst, src = p.src, m.size = p.ByteCount;
      } else {
        const auto& p = params<cuMemcpyAsync_params>(cb);
        dst = p.dst, src = p.src, m.size = p.ByteCount, m.stream = u64(p.hStream), m.async = true;
      }
      dstDevice = memory_.isDevicePointer(dst);
      srcDevice = memory_.isDevicePointer(src);
      if (!srcDevice) hostSource = reinterpret_cast<const void*>(src);
      break;
    }
    case Handler::kMemcpyPeer:
    case Handler::kMemcpyPeerAsync: {
      // The destination lies in another context, where this thread cannot
      // enqueue the hash: recorded without a digest.
      if (h == Handler::kMemcpyPeer) {
        const auto& p = params<cuMemcpyPeer_params>(cb);
        dst = p.dstDevice, src = p.srcDevice, m.size = p.ByteCount;
      } else {
        const auto& p = params<cuMemcpyPeerAsync_params>(cb);
        dst = p.dstDevice, src = p.srcDevice, m.size = p.ByteCount, m.stream = u64(p.hStream), m.async = true;
      }
      m.kind = trace::MemcpyKind::kPeer;
      m.dst = memory_.deviceRange(dst, m.size);
      m.src = memory_.deviceRange(src, m.size);
      if (emitIfCaptured()) return;
      writeHistory().forget(dst, dst + m.size);  // written without a digest
      if (options_.full) out_.warnNotReplayable("peer copies", "what they write on the other device");
      out_.emitEvent(std::move(m));
      return;
    }
    default: {
      // 2D / 3D copies: recorded by kind and size; the written rows are not
      // one contiguous range, so no digest.
      const CUmemorytype* dstType = nullptr;
      const CUmemorytype* srcType = nullptr;
      uint64_t extent = 0;  // from `dst` past the last byte written
      if (h == Handler::kMemcpy2D || h == Handler::kMemcpy2DAsync) {
        const CUDA_MEMCPY2D* c = h == Handler::kMemcpy2D ? params<cuMemcpy2D_v2_params>(cb).pCopy
                                                          : params<cuMemcpy2DAsync_v2_params>(cb).pCopy;
        if (c == nullptr) return;
        if (h == Handler::kMemcpy2DAsync) m.stream = u64(params<cuMemcpy2DAsync_v2_params>(cb).hStream), m.async = true;
        m.size = uint64_t{c->WidthInBytes} * c->Height;
        extent = (uint64_t{c->dstY} + c->Height) * c->dstPitch + c->dstXInBytes + c->WidthInBytes;
        dst = c->dstMemoryType == CU_MEMORYTYPE_HOST ? u64(c->dstHost) : c->dstDevice;
        src = c->srcMemoryType == CU_MEMORYTYPE_HOST ? u64(c->srcHost) : c->srcDevice;
        dstType = &c->dstMemoryType, srcType = &c->srcMemoryType;
      } else {
        const CUDA_MEMCPY3D* c = h == Handler::kMemcpy3D ? params<cuMemcpy3D_v2_params>(cb).pCopy
                                                          : params<cuMemcpy3DAsync_v2_params>(cb).pCopy;
        if (c == nullptr) return;
        if (h == Handler::kMemcpy3DAsync) m.stream = u64(params<cuMemcpy3DAsync_v2_params>(cb).hStream), m.async = true;
        m.size = uint64_t{c->WidthInBytes} * c->Height * c->Depth;
        extent = ((uint64_t{c->dstZ} + c->Depth) * c->dstHeight + c->dstY + c->Height) * c->dstPitch +
                 c->dstXInBytes + c->WidthInBytes;
        dst = c->dstMemoryType == CU_MEMORYTYPE_HOST ? u64(c->dstHost) : c->dstDevice;
        src = c->srcMemoryType == CU_MEMORYTYPE_HOST ? u64(c->srcHost) : c->srcDevice;
        dstType = &c->dstMemoryType, srcType = &c->srcMemoryType;
      }
      auto isDev = [&](const CUmemorytype* t, uint64_t a) {
        return *t == CU_MEMORYTYPE_DEVICE || *t == CU_MEMORYTYPE_ARRAY ||
               (*t == CU_MEMORYTYPE_UNIFIED && memory_.isDevicePointer(a));
      };
      dstDevice = isDev(dstType, dst);
      srcDevice = isDev(srcType, src);
      m.kind = dstDevice ? (srcDevice ? trace::MemcpyKind::kDeviceToDevice : trace::MemcpyKind::kHostToDevice)
                         : (srcDevice ? trace::MemcpyKind::kDeviceToHost : trace::MemcpyKind::kHostToHost);
      m.dst = dstDevice ? memory_.deviceRange(dst, m.size) : trace::DeviceRange{dst, m.size, 0, 0};
      m.src = srcDevice ? memory_.deviceRange(src, m.size) : trace::DeviceRange{src, m.size, 0, 0};
      if (emitIfCaptured()) return;
      if (options_.full && dstDevice)
        out_.warnNotReplayable("2D and 3D copies to device memory", "the bytes they write");
      if (dstDevice) writeHistory().forget(dst, dst + extent);  // written without a digest
      out_.emitEvent(std::move(m));
      return;
    }
  }
  m.kind = dstDevice ? (srcDevice ? trace::MemcpyKind::kDeviceToDevice : trace::MemcpyKind::kHostToDevice)
                     : (srcDevice ? trace::MemcpyKind::kDeviceToHost : trace::MemcpyKind::kHostToHost);
  m.dst = dstDevice ? memory_.deviceRange(dst, m.size) : trace::DeviceRange{dst, m.size, 0, 0};
  m.src = srcDevice ? memory_.deviceRange(src, m.size) : trace::DeviceRange{src, m.size, 0, 0};
  if (emitIfCaptured()) return;

  SinkEntry entry;
  if (options_.captureHostData && m.kind == trace::MemcpyKind::kHostToDevice && hostSource != nullptr && m.size > 0) {
    const auto* b = static_cast<const uint8_t*>(hostSource);
    entry.blob.assign(b, b + m.size);
  }
  // The written bytes, after the copy in stream order: at the destination
  // when it is device memory, else (device to host) still at the source. A
  // synchronous copy between host and device is complete when it returns
  // (from pinned memory; from pageable memory at least staged), and the
  // program may then change those bytes from any stream: its hash is waited
  // for here. A device-to-device one is not synchronous with the host.
  const uint64_t stream = enqueueStream(m.stream, perThread);
  if (dstDevice || srcDevice) {
    const trace::DeviceRange written = dstDevice ? m.dst : m.src;
    if (m.size > 0 && canEnqueue && memory_.readableIn(u64(cb.context), written)) {
      entry.after = hashing_.hashRanges(u64(cb.context), stream, {written},
                                        !m.async && m.kind != trace::MemcpyKind::kDeviceToDevice);
      if (dstDevice) hashing_.touched(entry.after, stream);
    }
    if (dstDevice && !entry.after.pending) hashing_.forgotten({m.dst});  // written without a digest
  } else if (!m.async) {
    m.digest = hash::hashBuffer({reinterpret_cast<const uint8_t*>(dst), m.size});
  }
  entry.event = out_.newEvent(std::move(m));
  out_.emit(std::move(entry));
}


void CopyRecorder::setExit(Handler h, bool perThread, const CUpti_CallbackData& cb) {
  trace::Memset s;
  uint64_t dst = 0, bytes = 0;
  bool contiguous = true;
  switch (h) {
#define GPURR_MEMSET(handler, type, field, esize, stream_, async_)         \
  case Handler::handler: {                                                 \
    const auto& p = params<type>(cb);                                      \
    dst = p.dstDevice, s.value = p.field, s.elementSize = esize;           \
    bytes = uint64_t{p.N} * esize;                                         \
    s.stream = stream_, s.async = async_;                                  \
    break;                                                                 \
  }
    GPURR_MEMSET(kMemsetD8, cuMemsetD8_v2_params, uc, 1, 0, false)
    GPURR_MEMSET(kMemsetD16, cuMemsetD16_v2_params, us, 2, 0, false)
    GPURR_MEMSET(kMemsetD32, cuMemsetD32_v2_params, ui, 4, 0, false)
    GPURR_MEMSET(kMemsetD8Async, cuMemsetD8Async_params, uc, 1, u64(p.hStream), true)
    GPURR_MEMSET(kMemsetD16Async, cuMemsetD16Async_params, us, 2, u64(p.hStream), true)
    GPURR_MEMSET(kMemsetD32Async, cuMemsetD32Async_params, ui, 4, u64(p.hStream), true)
#undef GPURR_MEMSET
#define GPURR_MEMSET2D(handler, type, field, esize, stream_, async_)                              \
  case Handler::handler: {                                                                \
    const auto& p = params<type>(cb);                                                     \
    dst = p.dstDevice, s.value = p.field, s.elementSize = esize, contiguous = false;      \
    bytes = p.Height == 0 ? 0 : uint64_t{p.dstPitch} * (p.Height - 1) + uint64_t{p.Width} * esize; \
    s.stream = stream_, s.async = async_;                                                 \
    break;                                                                                \
  }
    GPURR_MEMSET2D(kMemsetD2D8, cuMemsetD2D8_v2_params, uc, 1, 0, false)
    GPURR_MEMSET2D(kMemsetD2D16, cuMemsetD2D16_v2_params, us, 2, 0, false)
    GPURR_MEMSET2D(kMemsetD2D32, cuMemsetD2D32_v2_params, ui, 4, 0, false)
    GPURR_MEMSET2D(kMemsetD2D8Async, cuMemsetD2D8Async_params, uc, 1, u64(p.hStream), true)
    GPURR_MEMSET2D(kMemsetD2D16Async, cuMemsetD2D16Async_params, us, 2, u64(p.hStream), true)
    GPURR_MEMSET2D(kMemsetD2D32Async, cuMemsetD2D32Async_params, ui, 4, u64(p.hStream), true)
#undef GPURR_MEMSET2D
    default:
      return;
  }
  s.dst = memory_.deviceRange(dst, bytes);
  const uint64_t stream = enqueueStream(s.stream, perThread);
  const bool canEnqueue = markCaptured(device_, s, stream).canEnqueue;
  if (s.captured) {
    out_.emitEvent(std::move(s));
    return;
  }
  if (options_.full && !contiguous) out_.warnNotReplayable("2D memsets", "their row pitch and width");
  SinkEntry entry;
  // A 2D set leaves the gaps between rows alone: no single-range digest.
  if (contiguous && bytes > 0 && canEnqueue && memory_.readableIn(u64(cb.context), s.dst)) {
    entry.after = hashing_.hashRanges(u64(cb.context), stream, {s.dst});
    hashing_.touched(entry.after, stream);
  }
  if (!entry.after.pending) hashing_.forgotten({s.dst});  // written without a digest
  entry.event = out_.newEvent(std::move(s));
  out_.emit(std::move(entry));
}


void CopyRecorder::syncExit(Handler h, bool perThread, const CUpti_CallbackData& cb) {
  (void)perThread;
  trace::Sync s;
  switch (h) {
    case Handler::kCtxSynchronize:
      s.kind = trace::SyncKind::kContextSynchronize;
      break;
    case Handler::kStreamSynchronize:
      s.kind = trace::SyncKind::kStreamSynchronize;
      s.stream = u64(params<cuStreamSynchronize_params>(cb).hStream);
      break;
    case Handler::kEventRecord:
      s.kind = trace::SyncKind::kEventRecord;
      s.event = u64(params<cuEventRecord_params>(cb).hEvent);
      s.stream = u64(params<cuEventRecord_params>(cb).hStream);
      break;
    case Handler::kEventRecordWithFlags:
      s.kind = trace::SyncKind::kEventRecord;
      s.event = u64(params<cuEventRecordWithFlags_params>(cb).hEvent);
      s.stream = u64(params<cuEventRecordWithFlags_params>(cb).hStream);
      break;
    case Handler::kEventSynchronize:
      s.kind = trace::SyncKind::kEventSynchronize;
      s.event = u64(params<cuEventSynchronize_params>(cb).hEvent);
      break;
    case Handler::kStreamWaitEvent:
      s.kind = trace::SyncKind::kStreamWaitEvent;
      s.stream = u64(params<cuStreamWaitEvent_params>(cb).hStream);
      s.event = u64(params<cuStreamWaitEvent_params>(cb).hEvent);
      break;
    default:
      return;
  }
  out_.emitEvent(s);
}


}  // namespace gpurr::recorder
