// c10d's collectives as C++ calls them, in libgpurr_torch.so: a kernel of
// ours for c10d's dispatcher ops (c10d::allreduce_ and the rest), where every
// ProcessGroup method sends its call, records each call that the Python
// layer's wrappers of torch.distributed (gpurr_torch_collectives.py) did not
// make: DistributedDataParallel's gradient buckets and its broadcast of the
// module's state, issued by its C++ Reducer. Registered at the
// ADInplaceOrView key, which every call reaches outside inference mode and
// where PyTorch has no kernel for these ops (an op that has one is left
// alone); the call goes on to the next key unchanged.
//
// The kernel works on the ops' boxed arguments in C++: a tensor handed to
// Python gets a Python object that its TensorImpl keeps, and that a
// backend's thread would then have to free with the GIL, even while the
// interpreter exits. It hashes what the call sends (CPU tensors here, CUDA
// tensors through the recorder on the current stream, where the backend
// takes them from, except on an NCCL group, whose NCCL calls are recorded
// with their digests), lists what it receives without digests (the op
// returns before the collective completes), and asks the layer's Python
// function only for what c10d keeps in Python: the communicator's key (the
// group's global ranks), the peer's global rank and the program's line.
#define PY_SSIZE_T_CLEAN  // PyArg_ParseTuple's "y#" takes a Py_ssize_t
#include <Python.h>
#include <dlfcn.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <string_view>
#include <string>
#include <vector>

#include "recorder/framework_api.h"

namespace {

// What an op sends and receives, by argument name: as _SPECS in
// gpurr_torch_collectives.py (the CollectiveOp values of FORMAT.md).
enum Root { kNoRoot, kRootSends, kRootReceives };
struct Spec {
  const char* name;
  int op;
  const char* sent;
  const char* received;
  const char* root;  // the root or peer, a rank in the group
  Root rootOnly;
};
constexpr int kAllReduce = 1, kReduceScatter = 2, kAllGather = 3, kBroadcast = 4, kReduce = 5, kSend = 6, kRecv = 7,
              kAllToAll = 8, kGather = 9, kScatter = 10, kBarrier = 11;
constexpr Spec kSpecs[] = {
    {"allreduce_", kAllReduce, "tensors", "tensors", nullptr, kNoRoot},
    {"allreduce_coalesced_", kAllReduce, "tensors", "tensors", nullptr, kNoRoot},
    {"broadcast_", kBroadcast, "tensors", "tensors", "root_rank", kRootSends},
    {"reduce_", kReduce, "tensors", "tensors", "root_rank", kRootReceives},
    {"allgather_", kAllGather, "input_tensors", "output_tensors", nullptr, kNoRoot},
    {"_allgather_base_", kAllGather, "input_tensor", "output_tensor", nullptr, kNoRoot},
    {"allgather_coalesced_", kAllGather, "input_list", "output_lists", nullptr, kNoRoot},
    {"allgather_into_tensor_coalesced_", kAllGather, "inputs", "outputs", nullptr, kNoRoot},
    {"reduce_scatter_", kReduceScatter, "input_tensors", "output_tensors", nullptr, kNoRoot},
    {"_reduce_scatter_base_", kReduceScatter, "input_tensor", "output_tensor", nullptr, kNoRoot},
    {"reduce_scatter_tensor_coalesced_", kReduceScatter, "inputs", "outputs", nullptr, kNoRoot},
    {"alltoall_", kAllToAll, "input_tensors", "output_tensors", nullptr, kNoRoot},
    {"alltoall_base_", kAllToAll, "input", "output", nullptr, kNoRoot},
    {"gather_", kGather, "input_tensors", "output_tensors", "root_rank", kRootReceives},
    {"scatter_", kScatter, "input_tensors", "output_tensors", "root_rank", kRootSends},
    {"send", kSend, "tensors", nullptr, "dst", kNoRoot},
    {"recv_", kRecv, nullptr, "tensors", "src", kNoRoot},
    {"barrier", kBarrier, nullptr, nullptr, nullptr, kNoRoot},
};

decltype(&gpurr_framework_collective) recordCollective = nullptr;
decltype(&gpurr_framework_hash_host) hashHost = nullptr;
decltype(&gpurr_framework_hash_device) hashDevice = nullptr;
decltype(&gpurr_framework_hash_drop) dropHashes = nullptr;
// The layer's function (group name, peer's rank in it) -> (communicator key,
// peer's global rank, file or None, line). Kept for the process's life.
std::atomic<PyObject*> describeGroup{nullptr};
// Calls of the layer's torch.distributed wrappers under way on this thread.
thread_local int wrapped = 0;

const Spec* specOf(const c10::OperatorHandle& op) {
  const std::string& name = op.operator_name().name;  // "c10d::allreduce_"
  for (const Spec& s : kSpecs) {
    if (name.size() == 6 + std::strlen(s.name) && name.compare(6, std::string::npos, s.name) == 0) return &s;
  }
  return nullptr;
}

void tensorsIn(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) tensorsIn(e, out);
  }
}

// torch's name of a dtype ("float32"), as str(dtype) without "torch.".
std::string dtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Bool: return "bool";
    case c10::ScalarType::ComplexFloat: return "complex64";
    case c10::ScalarType::ComplexDouble: return "complex128";
    case c10::ScalarType::Float8_e4m3fn: return "float8_e4m3fn";
    case c10::ScalarType::Float8_e5m2: return "float8_e5m2";
    default: {
      std::string s = c10::toString(t);
      for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    }
  }
}

// The name ReduceOp.RedOpType gives in Python, lower-case ("sum").
const char* reduceName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "sum";
    case c10d::ReduceOp::AVG: return "avg";
    case c10d::ReduceOp::PRODUCT: return "product";
    case c10d::ReduceOp::MIN: return "min";
    case c10d::ReduceOp::MAX: return "max";
    case c10d::ReduceOp::BAND: return "band";
    case c10d::ReduceOp::BOR: return "bor";
    case c10d::ReduceOp::BXOR: return "bxor";
    case c10d::ReduceOp::PREMUL_SUM: return "premul_sum";
    default: return "";
  }
}

// (address, size, digest) triples of the CPU tensors, hashed when `hashed`,
// and of the CUDA tensors when `device` (digest 0).
std::vector<uint64_t> ranges(const std::vector<at::Tensor>& tensors, bool hashed, bool device = false) {
  std::vector<uint64_t> out;
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !(t.is_cpu() || (device && t.is_cuda())) || !t.has_storage()) continue;
    const uint64_t size = t.numel() * t.element_size();
    const void* data = t.data_ptr();
    const uint64_t digest = hashed && t.is_cpu() && size > 0 && t.is_contiguous() ? hashHost(data, size) : 0;
    out.insert(out.end(), {reinterpret_cast<uint64_t>(data), size, digest});
  }
  return out;
}

// The CUDA tensors among `tensors` hashed by the recorder on their device's
// current stream: a handle (0: none hashed).
uint64_t hashedOnDevice(const std::vector<at::Tensor>& tensors) {
  std::vector<uint64_t> pairs;
  c10::Device device(c10::DeviceType::CPU);
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !t.is_cuda() || !t.has_storage() || !t.is_contiguous()) continue;
    device = t.device();
    const uint64_t size = t.numel() * t.element_size();
    pairs.insert(pairs.end(), {reinterpret_cast<uint64_t>(t.data_ptr()), size});
  }
  if (pairs.empty() || hashDevice == nullptr) return 0;
  const c10::Stream stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device);
  return hashDevice(reinterpret_cast<uint64_t>(stream.native_handle()), pairs.data(),
                    static_cast<uint32_t>(pairs.size() / 2));
}

// Whether the group's backend for CUDA tensors is other than NCCL's (whose
// calls the recorder's NCCL wrappers record with their digests).
bool cudaNotNccl(c10d::ProcessGroup& group) {
  try {
    return group.getBackend(c10::DeviceType::CUDA)->getBackendName() != "nccl";
  } catch (const std::exception&) {
    return false;
  }
}

// What c10d keeps in Python: from the layer's function, with the GIL.
struct FromPython {
  std::string key, file;
  int32_t peer = -1;
  uint32_t line = 0;
};
bool fromPython(const std::string& group, int64_t peer, FromPython& out) {
  PyObject* describe = describeGroup.load();
  if (describe == nullptr || !Py_IsInitialized() || _Py_IsFinalizing()) return false;
  const PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);  // the program's, kept as it was
  bool ok = false;
  if (PyObject* r = PyObject_CallFunction(describe, "sL", group.c_str(), static_cast<long long>(peer))) {
    const char *key = nullptr, *file = nullptr;
    Py_ssize_t keySize = 0;
    int globalPeer = -1;
    unsigned int line = 0;
    if (PyArg_ParseTuple(r, "y#izI", &key, &keySize, &globalPeer, &file, &line)) {
      out.key.assign(key, static_cast<size_t>(keySize));
      out.peer = globalPeer;
      out.file = file != nullptr ? file : "";
      out.line = line;
      ok = true;
    }
    Py_DecRef(r);
  }
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
  PyGILState_Release(gil);
  return ok;
}

// The object of TorchScript class `name` (a torch.classes one: its one
// slot holds it) that `v` holds, or null. Not IValue::toCustomClass, whose
// check compares this library's type_info with libtorch's.
template <typename T>
c10::intrusive_ptr<T> customClass(const c10::IValue& v, std::string_view name) {
  if (!v.isObject()) return {};
  const c10::intrusive_ptr<c10::ivalue::Object> object = v.toObject();
  const std::optional<c10::QualifiedName>& type = object->type()->name();
  if (!type || type->qualifiedName() != name || object->slots().size() != 1 || !object->getSlot(0).isCapsule()) {
    return {};
  }
  return c10::static_intrusive_pointer_cast<T>(object->getSlot(0).toCapsule());
}

int64_t argument(const c10::FunctionSchema& schema, const char* name) {
  if (name == nullptr) return -1;
  const std::optional<int> i = schema.argumentIndexWithName(name);
  return i ? *i : -1;
}

// One call as the recorder takes it, described before it runs (what it
// sends hashed then); recorded once it has returned.
struct Described {
  const Spec* spec = nullptr;
  std::string call, group, dtype, reduce;
  FromPython python;
  int32_t rank = -1, size = 0;
  int64_t sequence = -1;
  uint64_t count = 0;
  std::vector<uint64_t> inputs, outputs;
  uint64_t deviceInputs = 0;  // a handle of the recorder's
};

bool describe(const c10::OperatorHandle& op, const torch::jit::Stack& stack, Described& d) {
  d.spec = specOf(op);
  if (d.spec == nullptr) return false;
  const c10::FunctionSchema& schema = op.schema();
  const size_t n = schema.arguments().size();
  if (stack.size() < n) return false;
  const auto arg = [&](const char* name) -> const c10::IValue* {
    const int64_t i = argument(schema, name);
    return i < 0 ? nullptr : &stack[stack.size() - n + static_cast<size_t>(i)];
  };
  const c10::IValue* pg = arg("process_group");
  if (pg == nullptr) return false;
  const auto group = customClass<c10d::ProcessGroup>(*pg, "__torch__.torch.classes.c10d.ProcessGroup");
  if (!group) return false;
  std::vector<at::Tensor> sent, received;
  if (const c10::IValue* v = arg(d.spec->sent)) tensorsIn(*v, sent);
  if (const c10::IValue* v = arg(d.spec->received)) tensorsIn(*v, received);
  for (const std::vector<at::Tensor>* list : {&sent, &received}) {
    for (const at::Tensor& t : *list) {
      // A tracer's tensor (fake, meta, functional): not a call that runs.
      if (!t.defined() || !(t.is_cpu() || t.is_cuda()) || !t.has_storage()) return false;
    }
  }
  d.rank = group->getRank();
  d.size = group->getSize();
  d.group = group->getGroupName();
  int64_t peer = -1;
  if (const c10::IValue* v = arg(d.spec->root); v != nullptr && v->isInt()) peer = v->toInt();
  const bool root = peer == d.rank;
  if (d.spec->rootOnly == kRootSends && !root) sent.clear();
  if (d.spec->rootOnly == kRootReceives && !root) received.clear();
  try {
    d.sequence = static_cast<int64_t>(group->getSequenceNumberForGroup());
  } catch (const std::exception&) {
    d.sequence = -1;  // a backend without sequence numbers
  }
  const at::Tensor* first = !sent.empty() ? &sent.front() : !received.empty() ? &received.front() : nullptr;
  if (first != nullptr) d.dtype = dtypeName(first->scalar_type()), d.count = static_cast<uint64_t>(first->numel());
  if (const c10::IValue* v = arg("reduce_op")) {
    if (const auto op = customClass<c10d::ReduceOp>(*v, "__torch__.torch.classes.c10d.ReduceOp")) {
      d.reduce = reduceName(op->op_);
    }
  }
  if (!fromPython(d.group, peer, d.python)) return false;
  d.call = op.operator_name().name;
  d.inputs = ranges(sent, true);
  const auto isCuda = [](const at::Tensor& t) { return t.is_cuda(); };
  const bool cuda = (std::any_of(sent.begin(), sent.end(), isCuda) ||
                     std::any_of(received.begin(), received.end(), isCuda)) &&
                    cudaNotNccl(*group);
  d.outputs = ranges(received, false, cuda);
  if (cuda) d.deviceInputs = hashedOnDevice(sent);
  return true;
}

void record(const Described& d) {
  recordCollective(d.call.c_str(), d.spec->op, d.group.c_str(), d.python.key.c_str(), d.rank, d.size, d.sequence,
                   d.dtype.c_str(), d.count, d.reduce.c_str(), d.python.peer, d.inputs.data(),
                   static_cast<uint32_t>(d.inputs.size() / 3), d.outputs.data(),
                   static_cast<uint32_t>(d.outputs.size() / 3), d.deviceInputs, 0,
                   d.python.file.empty() ? nullptr : d.python.file.c_str(), d.python.line);
}

void kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const c10::DispatchKeySet next = keys & c10::after_ADInplaceOrView_keyset;
  Described d;
  bool described = false;
  if (wrapped == 0) {
    try {
      described = describe(op, *stack, d);
    } catch (const std::exception&) {
      described = false;  // never the program's failure
    }
  }
  try {
    op.redispatchBoxed(next, stack);
  } catch (...) {
    if (d.deviceInputs != 0) dropHashes(d.deviceInputs);
    throw;
  }
  if (described) record(d);
}

}  // namespace

// Registers the kernel for each c10d op that has no kernel at ADInplaceOrView
// yet. `recorder` is the recorder's dlopen handle, `describe` the layer's
// Python function (kept). Returns how many ops it took, or -1 when the
// recorder lacks the functions.
extern "C" __attribute__((visibility("default"))) int gpurr_torch_collectives_install(void* recorder,
                                                                                       PyObject* describe) {
  recordCollective = reinterpret_cast<decltype(recordCollective)>(dlsym(recorder, "gpurr_framework_collective"));
  hashHost = reinterpret_cast<decltype(hashHost)>(dlsym(recorder, "gpurr_framework_hash_host"));
  hashDevice = reinterpret_cast<decltype(hashDevice)>(dlsym(recorder, "gpurr_framework_hash_device"));
  dropHashes = reinterpret_cast<decltype(dropHashes)>(dlsym(recorder, "gpurr_framework_hash_drop"));
  if (recordCollective == nullptr || hashHost == nullptr || hashDevice == nullptr || dropHashes == nullptr) return -1;
  Py_IncRef(describe);
  if (PyObject* old = describeGroup.exchange(describe)) Py_DecRef(old);
  // Never destroyed: its registrations stay until the process ends.
  static torch::Library* library =
      new torch::Library(torch::Library::IMPL, "c10d", c10::DispatchKey::ADInplaceOrView, __FILE__, __LINE__);
  static int taken = -1;
  if (taken >= 0) return taken;
  taken = 0;
  for (const Spec& s : kSpecs) {
    const std::string name = std::string("c10d::") + s.name;
    const std::optional<c10::OperatorHandle> op = c10::Dispatcher::singleton().findOp({name, ""});
    if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::ADInplaceOrView)) continue;
    library->impl(s.name, torch::CppFunction::makeFromBoxedFunction<&kernel>());
    ++taken;
  }
  return taken;
}

// A call of the layer's torch.distributed wrappers begins (1) or ends (-1)
// on this thread: the kernel leaves the calls under it to the wrapper.
extern "C" __attribute__((visibility("default"))) void gpurr_torch_collective_wrapped(int delta) { wrapped += delta; }
