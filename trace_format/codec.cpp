// Value types <-> Cap'n Proto. Decoding reuses the caller's storage so that a
// reader scanning millions of events allocates almost nothing.
#include "trace_format/codec.h"

#include <fmt/format.h>

#include "trace_format/trace.h"

namespace gpurr::trace::codec {
namespace {

kj::StringPtr text(const std::string& s) { return kj::StringPtr(s.c_str(), s.size()); }

void assign(std::string& out, capnp::Text::Reader in) { out.assign(in.begin(), in.size()); }

std::string str(capnp::Text::Reader in) { return std::string(in.begin(), in.size()); }

capnp::Data::Reader data(const std::vector<uint8_t>& v) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(v.data()), v.size());
}

void assign(std::vector<uint8_t>& out, capnp::Data::Reader in) { out.assign(in.begin(), in.end()); }

template <typename E, typename S>
E castEnum(S v) {
  return static_cast<E>(static_cast<uint16_t>(v));
}

void encodeKeyValues(const std::vector<KeyValue>& in,
                     capnp::List<schema::KeyValue>::Builder out) {
  for (size_t i = 0; i < in.size(); ++i) {
    out[i].setKey(text(in[i].key));
    out[i].setValue(text(in[i].value));
  }
}

void decodeKeyValues(capnp::List<schema::KeyValue>::Reader in, std::vector<KeyValue>& out) {
  requireElementData(in);
  out.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    assign(out[i].key, in[i].getKey());
    assign(out[i].value, in[i].getValue());
  }
}

void encodeBlob(const BlobRef& in, schema::BlobRef::Builder out) {
  out.setIdHigh(in.id.high);
  out.setIdLow(in.id.low);
  out.setSize(in.size);
  out.setEncoding(castEnum<schema::BlobEncoding>(in.encoding));
}

BlobRef decodeBlob(schema::BlobRef::Reader in) {
  return BlobRef{{in.getIdHigh(), in.getIdLow()}, in.getSize(),
                 castEnum<BlobEncoding>(in.getEncoding())};
}

void encodeDim(const Dim3& in, schema::Dim3::Builder out) {
  out.setX(in.x);
  out.setY(in.y);
  out.setZ(in.z);
}

Dim3 decodeDim(schema::Dim3::Reader in) { return {in.getX(), in.getY(), in.getZ()}; }

void encodeRange(const DeviceRange& in, schema::DeviceRange::Builder out) {
  out.setAddress(in.address);
  out.setSize(in.size);
  out.setAllocation(in.allocation);
  out.setOffset(in.offset);
}

DeviceRange decodeRange(schema::DeviceRange::Reader in) {
  return {in.getAddress(), in.getSize(), in.getAllocation(), in.getOffset()};
}

// A bound a newer gpurr added reads as the allocation's: the widest.
RangeBound boundOf(schema::RangeBound b) {
  return b == schema::RangeBound::BLOCK ? RangeBound::kBlock : RangeBound::kAllocation;
}

void encodeDigests(const std::vector<RangeDigest>& in,
                   capnp::List<schema::RangeDigest>::Builder out) {
  for (size_t i = 0; i < in.size(); ++i) {
    const RangeDigest& r = in[i];
    auto o = out[i];
    o.setAddress(r.range.address);
    o.setSize(r.range.size);
    o.setAllocation(r.range.allocation);
    o.setOffset(r.range.offset);
    o.setBound(castEnum<schema::RangeBound>(r.range.bound));
    o.setDigest(r.digest);
    if (!r.chunkDigests.empty()) {
      auto chunks = o.initChunkDigests(r.chunkDigests.size());
      for (size_t c = 0; c < r.chunkDigests.size(); ++c) chunks.set(c, r.chunkDigests[c]);
    }
    if (r.snapshot) encodeBlob(*r.snapshot, o.initSnapshot());
  }
}

void decodeDigests(capnp::List<schema::RangeDigest>::Reader in, std::vector<RangeDigest>& out) {
  requireElementData(in);
  out.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    auto r = in[i];
    RangeDigest& o = out[i];
    o.range = {r.getAddress(), r.getSize(), r.getAllocation(), r.getOffset(), boundOf(r.getBound())};
    o.digest = r.getDigest();
    auto chunks = r.getChunkDigests();
    o.chunkDigests.resize(chunks.size());
    for (size_t c = 0; c < chunks.size(); ++c) o.chunkDigests[c] = chunks[c];
    if (r.hasSnapshot()) {
      o.snapshot = decodeBlob(r.getSnapshot());
    } else {
      o.snapshot.reset();
    }
  }
}

void encodeAnnotation(const Annotation& in, schema::Annotation::Builder out) {
  std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, AlgorithmChoice>) {
          auto g = out.initAlgorithm();
          g.setLibrary(text(a.library));
          g.setCall(text(a.call));
          g.setChoice(text(a.algorithm));
          encodeKeyValues(a.attributes, g.initAttributes(a.attributes.size()));
          auto c = g.initCandidates(a.candidates.size());
          for (size_t i = 0; i < a.candidates.size(); ++i) {
            c[i].setAlgorithm(text(a.candidates[i].algorithm));
            c[i].setTimeMs(a.candidates[i].timeMs);
          }
        } else if constexpr (std::is_same_v<T, RngState>) {
          auto g = out.initRng();
          g.setSource(text(a.source));
          g.setGenerator(text(a.generator));
          g.setSeed(a.seed);
          g.setOffset(a.offset);
          g.setParamOffset(a.paramOffset);
        } else if constexpr (std::is_same_v<T, FrameworkOp>) {
          out.setFrameworkOp(text(a.name));
        } else if constexpr (std::is_same_v<T, Note>) {
          out.setNote(text(a.text));
        } else {
          static_assert(std::is_same_v<T, DeterminismCheck>);
          auto g = out.initDeterminism();
          g.setRuns(a.runs);
          g.setDistinctResults(a.distinctResults);
        }
      },
      in);
}

Annotation decodeAnnotation(schema::Annotation::Reader in) {
  switch (in.which()) {
    case schema::Annotation::ALGORITHM: {
      auto g = in.getAlgorithm();
      AlgorithmChoice a{str(g.getLibrary()), str(g.getCall()), str(g.getChoice()), {}, {}};
      decodeKeyValues(g.getAttributes(), a.attributes);
      auto candidates = g.getCandidates();
      requireElementData(candidates);
      for (auto c : candidates) a.candidates.push_back({str(c.getAlgorithm()), c.getTimeMs()});
      return a;
    }
    case schema::Annotation::RNG: {
      auto g = in.getRng();
      return RngState{str(g.getSource()), str(g.getGenerator()), g.getSeed(), g.getOffset(),
                      g.getParamOffset()};
    }
    case schema::Annotation::FRAMEWORK_OP:
      return FrameworkOp{str(in.getFrameworkOp())};
    case schema::Annotation::NOTE:
      return Note{str(in.getNote())};
    case schema::Annotation::DETERMINISM: {
      auto g = in.getDeterminism();
      return DeterminismCheck{g.getRuns(), g.getDistinctResults()};
    }
  }
  // A kind added by a newer recorder: keep it visible rather than fail.
  return Note{fmt::format("annotation of unknown kind {}", static_cast<unsigned>(in.which()))};
}

void encodeLaunch(const KernelLaunch& in, uint32_t functionId, schema::KernelLaunch::Builder out) {
  out.setApi(castEnum<schema::LaunchApi>(in.api));
  out.setContext(in.context);
  out.setStream(in.stream);
  out.setFunction(functionId);
  encodeDim(in.grid, out.initGrid());
  encodeDim(in.block, out.initBlock());
  if (in.cluster != Dim3{0, 0, 0}) encodeDim(in.cluster, out.initCluster());
  out.setSharedMemBytes(in.sharedMemBytes);
  if (!in.attributes.empty()) {
    auto attrs = out.initAttributes(in.attributes.size());
    for (size_t i = 0; i < in.attributes.size(); ++i) {
      attrs[i].setId(in.attributes[i].id);
      attrs[i].setValue(data(in.attributes[i].value));
    }
  }
  out.setParams(data(in.params));
  auto layout = out.initParamLayout(in.paramLayout.size());
  for (size_t i = 0; i < in.paramLayout.size(); ++i) {
    layout[i].setOffset(in.paramLayout[i].offset);
    layout[i].setSize(in.paramLayout[i].size);
  }
  auto ptrs = out.initPointers(in.pointers.size());
  for (size_t i = 0; i < in.pointers.size(); ++i) {
    ptrs[i].setByteOffset(in.pointers[i].byteOffset);
    ptrs[i].setAllocation(in.pointers[i].allocation);
    ptrs[i].setOffset(in.pointers[i].offset);
  }
  encodeDigests(in.inputs, out.initInputs(in.inputs.size()));
  encodeDigests(in.outputs, out.initOutputs(in.outputs.size()));
  if (!in.reads.empty()) encodeDigests(in.reads, out.initReads(in.reads.size()));
  if (!in.annotations.empty()) {
    auto ann = out.initAnnotations(in.annotations.size());
    for (size_t i = 0; i < in.annotations.size(); ++i) encodeAnnotation(in.annotations[i], ann[i]);
  }
  out.setNotHashed(!in.hashed);
  out.setCaptured(in.captured);
  out.setCaptureId(in.captureId);
  out.setRecorderNs(in.recorderNs);
  out.setRecorderOps(in.recorderOps);
  out.setNumber(in.number);
}

void decodeLaunch(schema::KernelLaunch::Reader in, const std::vector<FunctionEntry>& functions,
                  KernelLaunch& out) {
  out.api = castEnum<LaunchApi>(in.getApi());
  out.context = in.getContext();
  out.stream = in.getStream();
  const uint32_t id = in.getFunction();
  if (id >= functions.size()) {
    throw TraceError(fmt::format("launch refers to function #{} but its block declares {}", id,
                                 functions.size()));
  }
  out.module = functions[id].module;
  out.function = functions[id].name;
  out.grid = decodeDim(in.getGrid());
  out.block = decodeDim(in.getBlock());
  out.cluster = in.hasCluster() ? decodeDim(in.getCluster()) : Dim3{0, 0, 0};
  out.sharedMemBytes = in.getSharedMemBytes();
  auto attrs = in.getAttributes();
  requireElementData(attrs);
  out.attributes.resize(attrs.size());
  for (size_t i = 0; i < attrs.size(); ++i) {
    out.attributes[i].id = attrs[i].getId();
    assign(out.attributes[i].value, attrs[i].getValue());
  }
  assign(out.params, in.getParams());
  auto layout = in.getParamLayout();
  requireElementData(layout);
  out.paramLayout.resize(layout.size());
  for (size_t i = 0; i < layout.size(); ++i) {
    out.paramLayout[i] = {layout[i].getOffset(), layout[i].getSize()};
  }
  auto ptrs = in.getPointers();
  requireElementData(ptrs);
  out.pointers.resize(ptrs.size());
  for (size_t i = 0; i < ptrs.size(); ++i) {
    out.pointers[i] = {ptrs[i].getByteOffset(), ptrs[i].getAllocation(), ptrs[i].getOffset()};
  }
  decodeDigests(in.getInputs(), out.inputs);
  decodeDigests(in.getOutputs(), out.outputs);
  decodeDigests(in.getReads(), out.reads);
  out.annotations.clear();
  auto annotations = in.getAnnotations();
  requireElementData(annotations);
  for (auto a : annotations) out.annotations.push_back(decodeAnnotation(a));
  out.hashed = !in.getNotHashed();
  out.captured = in.getCaptured();
  out.captureId = in.getCaptureId();
  out.recorderNs = in.getRecorderNs();
  out.recorderOps = in.getRecorderOps();
  out.number = in.getNumber();
}

void encodeCollective(const Collective& in, schema::Collective::Builder out) {
  out.setSource(castEnum<schema::CollectiveSource>(in.source));
  out.setCall(text(in.call));
  out.setOp(castEnum<schema::CollectiveOp>(in.op));
  out.setCommunicator(in.communicator);
  out.setRank(in.rank);
  out.setSize(in.size);
  out.setDataType(text(in.dataType));
  out.setCount(in.count);
  out.setReduceOp(text(in.reduceOp));
  out.setPeer(in.peer);
  out.setStream(in.stream);
  out.setSequence(in.sequence);
  out.setGroup(in.group);
  encodeDigests(in.inputs, out.initInputs(in.inputs.size()));
  encodeDigests(in.outputs, out.initOutputs(in.outputs.size()));
  out.setProcessGroup(text(in.processGroup));
  out.setFrameworkSequence(in.frameworkSequence);
}

void decodeCollective(schema::Collective::Reader in, Collective& out) {
  // Values a newer gpurr may add read as the nearest known ones.
  out.source = in.getSource() <= schema::CollectiveSource::FRAMEWORK ? castEnum<CollectiveSource>(in.getSource())
                                                                      : CollectiveSource::kFramework;
  out.call = str(in.getCall());
  out.op = in.getOp() <= schema::CollectiveOp::BARRIER ? castEnum<CollectiveOp>(in.getOp()) : CollectiveOp::kOther;
  out.communicator = in.getCommunicator();
  out.rank = in.getRank();
  out.size = in.getSize();
  out.dataType = str(in.getDataType());
  out.count = in.getCount();
  out.reduceOp = str(in.getReduceOp());
  out.peer = in.getPeer();
  out.stream = in.getStream();
  out.sequence = in.getSequence();
  out.group = in.getGroup();
  decodeDigests(in.getInputs(), out.inputs);
  decodeDigests(in.getOutputs(), out.outputs);
  out.processGroup = str(in.getProcessGroup());
  out.frameworkSequence = in.getFrameworkSequence();
}

// Makes `payload` hold a T, keeping the existing one (and its storage) when
// it already does.
template <typename T>
T& emplace(Payload& payload) {
  if (auto* p = std::get_if<T>(&payload)) return *p;
  return payload.emplace<T>();
}

}  // namespace

void encodeHeader(const Header& in, schema::Header::Builder out) {
  out.setFormatVersion(in.formatVersion);
  out.setCompatVersion(in.compatVersion);
  out.setToolVersion(text(in.toolVersion));
  auto cmd = out.initCommandLine(in.commandLine.size());
  for (size_t i = 0; i < in.commandLine.size(); ++i) cmd.set(i, text(in.commandLine[i]));
  out.setWorkingDirectory(text(in.workingDirectory));
  encodeKeyValues(in.environment, out.initEnvironment(in.environment.size()));
  out.setHostname(text(in.hostname));
  out.setPid(in.pid);
  out.setRank(in.rank);
  out.setStartTimeNs(in.startTimeNs);
  auto gpus = out.initGpus(in.gpus.size());
  for (size_t i = 0; i < in.gpus.size(); ++i) {
    const GpuInfo& g = in.gpus[i];
    gpus[i].setOrdinal(g.ordinal);
    gpus[i].setName(text(g.name));
    gpus[i].setUuid(text(g.uuid));
    gpus[i].setSmCount(g.smCount);
    gpus[i].setCcMajor(g.ccMajor);
    gpus[i].setCcMinor(g.ccMinor);
    gpus[i].setMemoryBytes(g.memoryBytes);
    gpus[i].setPciBusId(text(g.pciBusId));
  }
  out.setDriverVersion(in.driverVersion);
  out.setCudaRuntimeVersion(in.cudaRuntimeVersion);
  out.setCudnnVersion(in.cudnnVersion);
  out.setCublasVersion(in.cublasVersion);
  encodeKeyValues(in.libraries, out.initLibraries(in.libraries.size()));
  auto o = out.initOptions();
  const RecordingOptions& opt = in.options;
  o.setHashInputs(opt.hashInputs);
  o.setHashOutputs(opt.hashOutputs);
  o.setSync(opt.sync);
  o.setCaptureHostData(opt.captureHostData);
  o.setFull(opt.full);
  o.setHashChunkBytes(opt.hashChunkBytes);
  o.setLaunchRange(text(opt.launchRange));
  o.setKernelRegex(text(opt.kernelRegex));
  o.setSnapshot(text(opt.snapshot));
  o.setCheckDeterminism(opt.checkDeterminism);
  if (!opt.steps.empty()) o.setSteps(text(opt.steps));  // absent: all (older headers keep their bytes)
  out.setPointersResolved(in.pointersResolved);
}

Header decodeHeader(schema::Header::Reader in) {
  Header h;
  h.formatVersion = in.getFormatVersion();
  h.compatVersion = in.getCompatVersion();
  h.toolVersion = str(in.getToolVersion());
  for (auto arg : in.getCommandLine()) h.commandLine.push_back(str(arg));
  h.workingDirectory = str(in.getWorkingDirectory());
  decodeKeyValues(in.getEnvironment(), h.environment);
  h.hostname = str(in.getHostname());
  h.pid = in.getPid();
  h.rank = in.getRank();
  h.startTimeNs = in.getStartTimeNs();
  auto gpus = in.getGpus();
  requireElementData(gpus);
  for (auto g : gpus) {
    h.gpus.push_back({g.getOrdinal(), str(g.getName()), str(g.getUuid()), g.getSmCount(),
                      g.getCcMajor(), g.getCcMinor(), g.getMemoryBytes(), str(g.getPciBusId())});
  }
  h.driverVersion = in.getDriverVersion();
  h.cudaRuntimeVersion = in.getCudaRuntimeVersion();
  h.cudnnVersion = in.getCudnnVersion();
  h.cublasVersion = in.getCublasVersion();
  decodeKeyValues(in.getLibraries(), h.libraries);
  auto o = in.getOptions();
  h.options = {o.getHashInputs(),      o.getHashOutputs(),     o.getSync(),
               o.getCaptureHostData(), o.getFull(),            o.getHashChunkBytes(),
               str(o.getLaunchRange()), str(o.getKernelRegex()), str(o.getSnapshot()),
               o.getCheckDeterminism(),     str(o.getSteps())};
  h.pointersResolved = in.getPointersResolved();
  return h;
}

void encodeOrigin(const Origin& in, schema::Origin::Builder out) {
  out.setOp(text(in.op));
  auto stack = out.initOpStack(static_cast<unsigned>(in.opStack.size()));
  for (unsigned i = 0; i < in.opStack.size(); ++i) stack.set(i, text(in.opStack[i]));
  out.setPhase(castEnum<schema::Phase>(in.phase));
  out.setForwardOp(text(in.forwardOp));
  out.setModule(text(in.module));
  out.setFile(text(in.file));
  out.setLine(in.line);
  out.setStep(in.step);
  out.setStepLaunch(in.stepLaunch);
  out.setInPlace(castEnum<schema::InPlace>(in.inPlace));
  out.setBenchmarking(in.benchmarking);
  out.setByPlace(in.byPlace);
}

Origin decodeOrigin(schema::Origin::Reader in) {
  Origin o;
  o.op = str(in.getOp());
  for (auto t : in.getOpStack()) o.opStack.push_back(str(t));
  o.phase = in.getPhase() <= schema::Phase::BACKWARD ? castEnum<Phase>(in.getPhase()) : Phase::kUnknown;
  o.forwardOp = str(in.getForwardOp());
  o.module = str(in.getModule());
  o.file = str(in.getFile());
  o.line = in.getLine();
  o.step = in.getStep();
  o.stepLaunch = in.getStepLaunch();
  o.inPlace = in.getInPlace() <= schema::InPlace::YES ? castEnum<InPlace>(in.getInPlace()) : InPlace::kUnknown;
  o.benchmarking = in.getBenchmarking();
  o.byPlace = in.getByPlace();
  return o;
}

void encodeEvent(const Event& in, uint32_t functionId, schema::Event::Builder out) {
  out.setSeq(in.seq);
  out.setTimeNs(in.timeNs);
  out.setThread(in.thread);
  if (in.origin) encodeOrigin(*in.origin, out.initOrigin());
  std::visit(
      [&](const auto& p) {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, KernelLaunch>) {
          encodeLaunch(p, functionId, out.initLaunch());
        } else if constexpr (std::is_same_v<T, Memcpy>) {
          auto m = out.initMemcpy();
          m.setKind(castEnum<schema::MemcpyKind>(p.kind));
          m.setStream(p.stream);
          m.setAsync(p.async);
          m.setSize(p.size);
          encodeRange(p.dst, m.initDst());
          encodeRange(p.src, m.initSrc());
          m.setDigest(p.digest);
          if (p.data) encodeBlob(*p.data, m.initData());
          m.setCaptured(p.captured);
          m.setCaptureId(p.captureId);
        } else if constexpr (std::is_same_v<T, Memset>) {
          auto m = out.initMemset();
          m.setStream(p.stream);
          m.setAsync(p.async);
          encodeRange(p.dst, m.initDst());
          m.setValue(p.value);
          m.setElementSize(p.elementSize);
          m.setDigest(p.digest);
          m.setCaptured(p.captured);
          m.setCaptureId(p.captureId);
        } else if constexpr (std::is_same_v<T, Allocation>) {
          auto a = out.initAlloc();
          a.setOrdinal(p.ordinal);
          a.setAddress(p.address);
          a.setSize(p.size);
          a.setKind(castEnum<schema::AllocationKind>(p.kind));
          a.setDevice(p.device);
          a.setStream(p.stream);
        } else if constexpr (std::is_same_v<T, Free>) {
          auto f = out.initFree();
          f.setOrdinal(p.ordinal);
          f.setAddress(p.address);
        } else if constexpr (std::is_same_v<T, ModuleLoad>) {
          auto m = out.initModule();
          m.setOrdinal(p.ordinal);
          encodeBlob(p.cubin, m.initCubin());
          m.setArch(p.arch);
          m.setDigest(p.digest);
        } else if constexpr (std::is_same_v<T, Sync>) {
          auto s = out.initSync();
          s.setKind(castEnum<schema::SyncKind>(p.kind));
          s.setStream(p.stream);
          s.setEvent(p.event);
        } else if constexpr (std::is_same_v<T, Collective>) {
          encodeCollective(p, out.initCollective());
        } else if constexpr (std::is_same_v<T, EventsDropped>) {
          auto d = out.initDropped();
          d.setLaunches(p.byKind[0]);
          d.setMemcpys(p.byKind[1]);
          d.setMemsets(p.byKind[2]);
          d.setAllocs(p.byKind[3]);
          d.setFrees(p.byKind[4]);
          d.setModules(p.byKind[5]);
          d.setSyncs(p.byKind[6]);
          d.setGraphs(p.byKind[7]);
          d.setCollectives(p.byKind[8]);
          d.setFirstTimeNs(p.firstTimeNs);
          d.setLastTimeNs(p.lastTimeNs);
        } else {
          static_assert(std::is_same_v<T, GraphLaunch>);
          auto g = out.initGraph();
          g.setGraphExec(p.graphExec);
          g.setStream(p.stream);
          g.setNodeCount(p.nodeCount);
          encodeDigests(p.inputs, g.initInputs(p.inputs.size()));
          encodeDigests(p.outputs, g.initOutputs(p.outputs.size()));
          g.setCaptured(p.captured);
          g.setCaptureId(p.captureId);
        }
      },
      in.payload);
}

bool decodeEvent(schema::Event::Reader in, const std::vector<FunctionEntry>& functions, Event& out) {
  out.seq = in.getSeq();
  out.timeNs = in.getTimeNs();
  out.thread = in.getThread();
  out.origin = in.hasOrigin() ? std::optional<Origin>(decodeOrigin(in.getOrigin())) : std::nullopt;
  switch (in.which()) {
    case schema::Event::LAUNCH:
      decodeLaunch(in.getLaunch(), functions, emplace<KernelLaunch>(out.payload));
      return true;
    case schema::Event::MEMCPY: {
      auto m = in.getMemcpy();
      Memcpy& o = emplace<Memcpy>(out.payload);
      o.kind = castEnum<MemcpyKind>(m.getKind());
      o.stream = m.getStream();
      o.async = m.getAsync();
      o.size = m.getSize();
      o.dst = decodeRange(m.getDst());
      o.src = decodeRange(m.getSrc());
      o.digest = m.getDigest();
      o.data = m.hasData() ? std::optional<BlobRef>(decodeBlob(m.getData())) : std::nullopt;
      o.captured = m.getCaptured();
      o.captureId = m.getCaptureId();
      return true;
    }
    case schema::Event::MEMSET: {
      auto m = in.getMemset();
      out.payload = Memset{m.getStream(),      m.getAsync(),    decodeRange(m.getDst()),
                           m.getValue(),       m.getElementSize(), m.getDigest(),
                           m.getCaptured(),    m.getCaptureId()};
      return true;
    }
    case schema::Event::ALLOC: {
      auto a = in.getAlloc();
      out.payload = Allocation{a.getOrdinal(), a.getAddress(), a.getSize(),
                               castEnum<AllocationKind>(a.getKind()), a.getDevice(), a.getStream()};
      return true;
    }
    case schema::Event::FREE: {
      auto f = in.getFree();
      out.payload = Free{f.getOrdinal(), f.getAddress()};
      return true;
    }
    case schema::Event::MODULE: {
      auto m = in.getModule();
      out.payload = ModuleLoad{m.getOrdinal(), decodeBlob(m.getCubin()), m.getArch(), m.getDigest()};
      return true;
    }
    case schema::Event::SYNC: {
      auto s = in.getSync();
      out.payload = Sync{castEnum<SyncKind>(s.getKind()), s.getStream(), s.getEvent()};
      return true;
    }
    case schema::Event::COLLECTIVE:
      decodeCollective(in.getCollective(), emplace<Collective>(out.payload));
      return true;
    case schema::Event::GRAPH: {
      auto g = in.getGraph();
      GraphLaunch& o = emplace<GraphLaunch>(out.payload);
      o.graphExec = g.getGraphExec();
      o.stream = g.getStream();
      o.nodeCount = g.getNodeCount();
      decodeDigests(g.getInputs(), o.inputs);
      decodeDigests(g.getOutputs(), o.outputs);
      o.captured = g.getCaptured();
      o.captureId = g.getCaptureId();
      return true;
    }
    case schema::Event::DROPPED: {
      auto d = in.getDropped();
      EventsDropped& o = emplace<EventsDropped>(out.payload);
      o.byKind = {d.getLaunches(), d.getMemcpys(), d.getMemsets(), d.getAllocs(),
                  d.getFrees(),    d.getModules(), d.getSyncs(),   d.getGraphs(), d.getCollectives()};
      o.firstTimeNs = d.getFirstTimeNs();
      o.lastTimeNs = d.getLastTimeNs();
      return true;
    }
  }
  // A kind added by a newer gpurr (compatVersion): the caller skips it.
  return false;
}

void declareFunction(schema::FunctionDef::Reader f, std::vector<FunctionEntry>& functions) {
  if (f.getId() != functions.size()) {
    throw TraceError(fmt::format("function #{} declared out of order", f.getId()));
  }
  auto name = f.getName();
  functions.push_back({f.getModule(), std::string(name.begin(), name.size())});
}

}  // namespace gpurr::trace::codec
