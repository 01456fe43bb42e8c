// libgpurr_torch.so: PyTorch's RecordFunction scopes (ops, autograd nodes,
// user ranges) reported to the recorder as they open and close, with the
// program's source line for each thread's outermost scope. Loaded by the
// framework layer (framework/python/gpurr_torch_layer.py) once torch is
// imported, and only into the PyTorch version it was built against: it uses
// RecordFunction's C++ interface, which has no stable ABI.
//
// One global callback, so every thread reports (autograd's device threads
// included) and it coexists with torch.profiler's own callbacks. It is
// enabled while the layer observes (gpurr_torch_observe: the first steps,
// and from an operation the recorder's template did not foresee on,
// onDiverged); disabled, it costs the program's ops nothing. Per scope:
// two calls into the recorder; for a thread's outermost scope issued from
// Python, for an op with only user ranges (or a Python autograd.Function)
// around it, and for an op directly inside a backward node that is a Python
// autograd.Function's or recomputes a forward, also the GIL and a walk up
// the Python frames to the first one outside PyTorch (cached per code
// object). Per op: its device tensor
// arguments, each marked with whether the op's schema writes it
// (Tensor(a!)), so that the recorder hashes after the op's launches only what
// they may write; and whether the op updates one of its arguments in place.
// The recorder may also read a thread's autograd sequence counter and grad
// mode through it (gpurr_framework_sequence_source, _grad_mode_source).
// The callback asks for the op's inputs: the dispatcher then boxes every
// op's arguments.
#include <Python.h>
#include <dlfcn.h>
#include <frameobject.h>

#include <ATen/SequenceNumber.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <string_view>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "recorder/framework_api.h"
#include "recorder/thread_local_ref.h"

namespace {

using OpenScope = decltype(&gpurr_framework_open_scope);
using CloseScope = decltype(&gpurr_framework_close_scope);
using OpOperands = decltype(&gpurr_framework_op_operands);

OpenScope openScope = nullptr;
CloseScope closeScope = nullptr;
OpOperands opOperands = nullptr;
decltype(&gpurr_framework_recomputing) recomputing = nullptr;

// This thread's number (as a scope's sequenceThread) and its autograd
// sequence counter: the next node it makes takes it (framework_api.h).
void sequenceNow(uint64_t* thread, int64_t* sequence) {
  *thread = at::RecordFunction::currentThreadId();
  *sequence = static_cast<int64_t>(at::sequence_number::peek());
}

// Whether this thread records gradients now (framework_api.h).
int gradModeNow() { return at::GradMode::is_enabled() ? 1 : 0; }

// libgpurr_torch_cuda.so's gpurr_torch_cuda_try_install, asked at each op
// until the caching allocator has started and it has answered (not 1).
std::atomic<int (*)(void*)> attachBlocks{nullptr};
void* recorderHandle = nullptr;
at::CallbackHandle handle = at::INVALID_CALLBACK_HANDLE;  // registered once, enabled while reporting
bool installed = false;  // gpurr_torch_install has reached the recorder (until uninstalled)

// Path prefixes of frames that are not the program's (torch, gpurr's layer).
std::vector<std::string> skippedPrefixes;
// Code object -> its file (interned, for the process's life), or nullptr
// when its frames are skipped, or kEngineEntry. Code objects are kept
// alive (one reference each) so an address never names two. Guarded by
// the GIL.
std::unordered_map<PyObject*, const char*> fileOfCode;
std::unordered_set<std::string> files;
// The frame that runs autograd's engine from Python (torch.autograd's
// _engine_run_backward, which backward() and grad() call): skipped, and
// where a line for an op inside a backward node is no longer looked for.
const char* const kEngineEntry = "<autograd engine>";

// Scopes open per thread, by RecordFunction's thread id (small numbers, in
// order of first use): a scope may end on another thread than the one it
// began on (async ops, RecordFunction::threadId), and counts for the latter.
constexpr size_t kThreads = 4096;
std::atomic<int> depths[kThreads];
std::atomic<int>& depthOf(uint64_t thread) { return depths[thread % kThreads]; }
// Of those, the scopes that are not user ranges: an op with none around it
// is one the program called, inside ranges alone at most (an optimizer's
// step range around the closure it runs), and gets its own line.
std::atomic<int> opDepths[kThreads];
std::atomic<int>& opDepthOf(uint64_t thread) { return opDepths[thread % kThreads]; }

// Returns the depth after.
int decrement(std::atomic<int>& depth) {
  int d = depth.load(std::memory_order_relaxed);
  while (d > 0 && !depth.compare_exchange_weak(d, d - 1)) {
  }
  return d > 0 ? d - 1 : 0;
}
// The scopes of this thread's backward nodes open, each with the op depth
// it began at (the ops directly inside it are one deeper) and whether the
// node runs the program's Python code (a Python autograd.Function's
// backward), or is one a thread was inside when observing began again
// (resumeNode).
struct OpenNode {
  int depth = 0;
  bool python = false;
  bool resumed = false;
};
thread_local std::vector<OpenNode> tlsNodes;

// Whether a backward node, named `name`, is a Python autograd.Function's
// (torch::autograd::PyNode, known by its dynamic type: libtorch_python
// exports no typeinfo to cast to), other than torch.compile's
// (CompiledFunctionBackward, whose code is generated).
bool pythonNode(const torch::autograd::Node* node, const char* name) {
  return node != nullptr && std::strcmp(typeid(*node).name(), "N5torch8autograd6PyNodeE") == 0 &&
         std::strcmp(name, "CompiledFunctionBackward") != 0;
}

// The backward node this thread was evaluating when observing began again,
// whose scopes began unobserved (a scope's end reaches only the callbacks
// its start did): reported as a node scope of its own from the thread's
// first op after, so that the ops left in it belong to the backward pass,
// and closed at the thread's first scope once it evaluates another node or
// none (at the scope that opens another: `opening`, which then opens no
// other). A backward pass run inside it (reentrant checkpointing's) ends it
// too: the ops left after that pass are not the node's.
struct ResumedNode {
  const torch::autograd::Node* node = nullptr;  // while open
  uint64_t sequence = 0;                        // its sequence number (an address may be reused)
  std::string name;
  uint64_t resumes = 0;  // `resumes` when this thread last looked
};
thread_local ResumedNode tlsResumed;
std::atomic<uint64_t> resumes{0};  // the times observing began again

void resumeNode(uint64_t thread, std::vector<OpenNode>& nodes, bool opening) {
  ResumedNode& r = gpurr::recorder::threadLocalRef(tlsResumed);
  const uint64_t now = resumes.load(std::memory_order_relaxed);
  if (r.node == nullptr && r.resumes == now) return;
  r.resumes = now;
  const std::shared_ptr<torch::autograd::Node> node = torch::autograd::get_current_node();
  if (r.node != nullptr) {
    if (node.get() == r.node && node->sequence_nr() == r.sequence) return;
    const auto it = std::find_if(nodes.rbegin(), nodes.rend(), [](const OpenNode& n) { return n.resumed; });
    if (it != nodes.rend()) nodes.erase(std::next(it).base());
    decrement(depthOf(thread));
    decrement(opDepthOf(thread));
    closeScope(&r);
    r.node = nullptr;
  }
  if (node == nullptr || !nodes.empty() || opening) return;
  r.node = node.get();
  r.sequence = node->sequence_nr();
  // A Python node's name takes the GIL (PyNode::name), as PyTorch's own
  // scope for the node does.
  r.name = Py_IsInitialized() ? node->name() : std::string("autograd node");
  nodes.push_back(
      {opDepthOf(thread).fetch_add(1, std::memory_order_relaxed), pythonNode(r.node, r.name.c_str()), true});
  depthOf(thread).fetch_add(1, std::memory_order_relaxed);
  openScope(&r, r.name.c_str(), 1, static_cast<int64_t>(r.sequence), node->thread_id(), nullptr, 0, 0);
}
// The context of a scope that counts as a range (onStart): its end leaves
// the op depth alone.
struct NotCounted : at::ObserverContext {};

// The engine's own scopes (autograd::engine::evaluate_function: ...).
bool engineScope(const char* name) { return std::strncmp(name, "autograd::engine::", 18) == 0; }

// Tests only (GPURR_TEST_CPU_OPERANDS): CPU tensors count as device tensors,
// so a CPU program's ops report operands.
bool cpuOperands = false;

const char* fileOf(PyCodeObject* code) {
  PyObject* key = reinterpret_cast<PyObject*>(code);
  if (auto it = fileOfCode.find(key); it != fileOfCode.end()) return it->second;
  // The op may be dispatched while an exception is set (a Python error being
  // handled): it is the program's, and stays as it was.
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);  // in every Python 3; 3.12 adds PyErr_GetRaisedException
  const char* file = nullptr;
  if (PyObject* name = PyObject_GetAttrString(key, "co_filename")) {
    if (const char* utf8 = PyUnicode_AsUTF8(name)) {
      bool skipped = utf8[0] == '<';  // <frozen importlib._bootstrap>, <string>
      for (const std::string& p : skippedPrefixes) skipped |= std::strncmp(utf8, p.c_str(), p.size()) == 0;
      if (!skipped) file = files.insert(utf8).first->c_str();
    }
    Py_DecRef(name);
  }
  if (PyObject* name = file == nullptr ? PyObject_GetAttrString(key, "co_name") : nullptr) {
    if (const char* utf8 = PyUnicode_AsUTF8(name); utf8 != nullptr && std::strcmp(utf8, "_engine_run_backward") == 0)
      file = kEngineEntry;
    Py_DecRef(name);
  }
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
  Py_IncRef(key);
  fileOfCode.emplace(key, file);
  return file;
}

// The innermost frame of this thread's Python stack outside PyTorch; with
// `inBackward` (an op inside a backward node: a forward recomputed by
// activation checkpointing), only one inside the engine's run, not the
// line that ran backward().
void sourceLine(const char*& file, uint32_t& line, bool inBackward = false) {
  if (!Py_IsInitialized() || PyGILState_GetThisThreadState() == nullptr) return;  // not a Python thread
  const PyGILState_STATE gil = PyGILState_Ensure();
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (frame != nullptr) Py_IncRef(reinterpret_cast<PyObject*>(frame));
  for (int hops = 0; frame != nullptr && hops < 64; ++hops) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const char* f = fileOf(code);
    Py_DecRef(reinterpret_cast<PyObject*>(code));
    if (f == kEngineEntry) {
      if (inBackward) break;
      f = nullptr;
    }
    if (f != nullptr) {
      file = f;
      line = static_cast<uint32_t>(PyFrame_GetLineNumber(frame));
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DecRef(reinterpret_cast<PyObject*>(frame));
    frame = back;
  }
  if (frame != nullptr) Py_DecRef(reinterpret_cast<PyObject*>(frame));
  PyGILState_Release(gil);
}

// Which arguments an op's schema writes, cached per thread by the name
// pointer (a dispatcher op's name lives in its schema; a scope named by a
// string has a new pointer each time and no schema, so the names are
// checked too).
struct OpSchema {
  std::string name, overload;
  bool known = false;        // the op has a schema
  std::vector<bool> writes;  // per argument
  // framework_api.h's in_place: 2 when it writes an argument that is no
  // out= one (Tensor(a!) self) or writes undeclared, 1 when it does not, 0
  // without a schema.
  int inPlace = 0;
};

// Ops whose schemas do not declare every argument they write: batch norm
// updates its running statistics in place (`Tensor? running_mean`, no `(a!)`;
// torch/_decomp/decompositions.py says so), cuDNN's RNN its dropout state.
// Every tensor argument of theirs counts as written, and they work in place.
bool writesUndeclared(std::string_view name) {
  static const std::unordered_set<std::string_view> ops = {
      "aten::batch_norm",
      "aten::_batch_norm_impl_index",
      "aten::native_batch_norm",
      "aten::cudnn_batch_norm",
      "aten::miopen_batch_norm",
      "aten::batch_norm_update_stats",
      "aten::batch_norm_gather_stats",
      "aten::batch_norm_gather_stats_with_counts",
      "aten::instance_norm",
      "aten::_cudnn_rnn",
  };
  return ops.count(name) > 0;
}

const OpSchema& schemaOf(const at::RecordFunction& fn) {
  thread_local std::unordered_map<const char*, OpSchema> tlsCache;
  std::unordered_map<const char*, OpSchema>& cache = gpurr::recorder::threadLocalRef(tlsCache);
  const char* name = fn.name();
  const char* overload = fn.overload_name();
  if (auto it = cache.find(name); it != cache.end() && it->second.name == name && it->second.overload == overload)
    return it->second;
  if (cache.size() >= 4096) cache.clear();
  OpSchema& s = cache[name];
  s = OpSchema{name, overload, false, {}, 0};
  if (std::optional<c10::FunctionSchema> schema = fn.operator_schema()) {
    s.known = true;
    const bool all = writesUndeclared(name);
    bool updates = all;
    for (const c10::Argument& a : schema->arguments()) {
      const bool writes = a.alias_info() && a.alias_info()->isWrite();
      s.writes.push_back(all || writes);
      updates |= writes && !a.is_out();
    }
    s.inPlace = updates ? 2 : 1;
  }
  return s;
}

// Reports the device tensors among an op's arguments, unless one argument
// could hide a tensor from this walk (an object, a tuple, a dict) or has no
// storage to point at.
void reportOperands(const at::RecordFunction& fn, const OpSchema& schema) {
  const c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
  if (!schema.known || inputs.size() != schema.writes.size()) return;
  struct Buffers {
    std::vector<uint64_t> addresses;
    std::vector<uint8_t> written;
  };
  thread_local Buffers tlsBuffers;
  Buffers& buffers = gpurr::recorder::threadLocalRef(tlsBuffers);
  std::vector<uint64_t>& addresses = buffers.addresses;
  std::vector<uint8_t>& written = buffers.written;
  addresses.clear();
  written.clear();
  auto add = [&](const c10::IValue& v, bool writes) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined() || !(t.is_cuda() || (cpuOperands && t.is_cpu()))) return true;
      if (!t.has_storage()) return false;
      const void* data = t.storage().data();  // the storage's start: a view's block too
      if (data == nullptr) return true;
      addresses.push_back(reinterpret_cast<uint64_t>(data));
      written.push_back(writes ? 1 : 0);
      return true;
    }
    return !(v.isObject() || v.isTuple() || v.isGenericDict() || v.isCapsule() || v.isPyObject());
  };
  try {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].isList()) {
        for (const c10::IValue& e : inputs[i].toListRef())
          if (!add(e, schema.writes[i])) return;
      } else if (!add(inputs[i], schema.writes[i])) {
        return;
      }
    }
  } catch (const std::exception&) {
    return;  // a storage without data to read (fake tensors): unknown
  }
  opOperands(&fn, addresses.data(), written.data(), static_cast<uint32_t>(addresses.size()));
}

// The layer's function that observes modules again (gpurr_torch_on_diverged),
// called at the next op of the thread whose op did not match the template,
// or by the interpreter on its main thread at its next chance.
std::atomic<PyObject*> layerObserves{nullptr};

// The divergence waiting for its thread's next op (0: none): a number of
// its own (kTicket and up) and the thread whose operation did not match
// (RecordFunction's id + 1, below kTicket). Its next op runs the layer's
// function first (runLayerHere), unless the interpreter's pending call,
// queued for that divergence, ran it before.
std::atomic<uint64_t> divergedOn{0};
constexpr uint64_t kTicket = uint64_t{1} << 32;
std::atomic<uint64_t> tickets{0};

// Runs the layer's function. Its failure is never the program's, but an
// exception that ends the program (Ctrl-C's, a signal handler's SystemExit)
// is: returned to the interpreter (`pending`: as the pending call, which
// raises it in the program), or, inside an op, Ctrl-C delivered again.
int runLayer(bool pending) {
  PyObject* f = layerObserves.load();
  if (f == nullptr) return 0;
  // An op may begin while the program handles a Python error: it stays.
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (PyObject* r = PyObject_CallNoArgs(f)) {
    Py_DecRef(r);
  } else if (!PyErr_ExceptionMatches(PyExc_Exception)) {
    if (pending && type == nullptr) return -1;
    const bool interrupted = PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) != 0;
    PyErr_Clear();
    if (interrupted) PyErr_SetInterrupt();
  } else {
    PyErr_Clear();
  }
  PyErr_Restore(type, value, traceback);
  return 0;
}

// The interpreter's pending call for divergence `queued` (divergedOn's
// value then): it no longer waits for its thread's next op (a later one
// does).
int callLayer(void* queued) {
  uint64_t waiting = reinterpret_cast<uintptr_t>(queued);
  divergedOn.compare_exchange_strong(waiting, 0);
  return runLayer(true);
}

// At an op's start, before its scope opens (no lock of the recorder's
// held): on the thread whose op did not match, the layer observes modules
// again, entering those whose calls run now, so that this op names them.
// The pending call then finds it done.
void runLayerHere(uint64_t thread) {
  uint64_t waiting = divergedOn.load();
  if (waiting % kTicket != thread + 1 || !divergedOn.compare_exchange_strong(waiting, 0)) return;
  if (!Py_IsInitialized() || PyGILState_GetThisThreadState() == nullptr) return;  // not a Python thread
  const PyGILState_STATE gil = PyGILState_Ensure();
  runLayer(false);
  PyGILState_Release(gil);
}

constexpr std::string_view kEvaluateFunction = "autograd::engine::evaluate_function: ";

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
  if (divergedOn.load(std::memory_order_relaxed) != 0) runLayerHere(fn.threadId());
  const at::RecordScope scope = fn.scope();
  int kind = scope == at::RecordScope::BACKWARD_FUNCTION ? 1 : scope == at::RecordScope::USER_SCOPE ? 2 : 0;
  const char* name = fn.name();
  int64_t sequence = fn.seqNr();
  uint64_t sequenceThread = kind == 1 ? fn.forwardThreadId() : fn.threadId();
  if (kind == 0 && std::strncmp(name, kEvaluateFunction.data(), kEvaluateFunction.size()) == 0) {
    // The engine's scope around a node's work: the node's hooks and the
    // sums of its incoming gradients run inside it but outside the node's
    // own scope, and belong to the backward pass too. A node scope, linked
    // to the forward op as the node's (the engine has made it current).
    kind = 1;
    const std::shared_ptr<torch::autograd::Node> node = torch::autograd::get_current_node();
    sequence = node != nullptr ? static_cast<int64_t>(node->sequence_nr()) : -1;  // AccumulateGrad's: -1
    sequenceThread = node != nullptr ? node->thread_id() : 0;
  }
  // The schema stays cached until this thread's next op: attaching the block
  // tracker, which may run ops, comes after.
  const OpSchema* schema = kind == 0 ? &schemaOf(fn) : nullptr;
  // A Python autograd.Function's forward (a scope of its class's name, with
  // a sequence number and no schema: activation checkpointing's reentrant
  // CheckpointFunction, a program's own) counts as a range: the ops its
  // Python code calls get their own lines.
  const bool function = schema != nullptr && !schema->known && sequence >= 0 && !engineScope(name);
  const uint64_t thread = fn.threadId();
  // Backward nodes open on this thread, by the op depth each began at.
  std::vector<OpenNode>& nodes = gpurr::recorder::threadLocalRef(tlsNodes);
  const bool here = thread == at::RecordFunction::currentThreadId();
  if (here) resumeNode(thread, nodes, kind == 1);
  const bool outermost = depthOf(thread).fetch_add(1, std::memory_order_relaxed) == 0;
  const int opDepth = kind == 2 || function ? -1 : opDepthOf(thread).fetch_add(1, std::memory_order_relaxed);
  const char* file = nullptr;
  uint32_t line = 0;
  // The outermost scope's line, and an op's with only ranges around it; not
  // for autograd's work, which takes its forward op's; for an op directly
  // inside a backward node that runs Python code (a Python
  // autograd.Function's backward) or with a module entered in it (a forward
  // recomputed), a line inside the engine's run.
  if (kind == 1) {
    if (here) {
      // The node evaluated is this scope's own (not one called directly
      // inside another's backward).
      const std::shared_ptr<torch::autograd::Node> current =
          scope == at::RecordScope::BACKWARD_FUNCTION ? torch::autograd::get_current_node() : nullptr;
      const bool python = current != nullptr && static_cast<int64_t>(current->sequence_nr()) == fn.seqNr() &&
                          pythonNode(current.get(), name);
      nodes.push_back({opDepth, python});
    }
  } else if (engineScope(name)) {
  } else if (outermost || (opDepth == 0 && kind == 0)) {
    sourceLine(file, line);
  } else if (kind == 0 && here && !nodes.empty() && opDepth == nodes.back().depth + 1 &&
             (nodes.back().python || (recomputing != nullptr && recomputing() != 0))) {
    sourceLine(file, line, true);  // the GIL only then, not for every backward op
  }
  openScope(&fn, name, kind, sequence, sequenceThread, file, line, schema != nullptr ? schema->inPlace : 0);
  if (schema != nullptr) reportOperands(fn, *schema);
  if (auto attach = attachBlocks.load(std::memory_order_relaxed); attach != nullptr && attach(recorderHandle) != 1)
    attachBlocks = nullptr;
  return function ? std::make_unique<NotCounted>() : nullptr;
}

void onEnd(const at::RecordFunction& fn, at::ObserverContext* context) {
  const uint64_t thread = fn.threadId();
  decrement(depthOf(thread));
  if (fn.scope() != at::RecordScope::USER_SCOPE && context == nullptr) {
    const int opDepth = decrement(opDepthOf(thread));
    // Back at the depth a backward node began at: the node ends.
    std::vector<OpenNode>& nodes = gpurr::recorder::threadLocalRef(tlsNodes);
    if (!nodes.empty() && !nodes.back().resumed && opDepth == nodes.back().depth &&
        thread == at::RecordFunction::currentThreadId())
      nodes.pop_back();
  }
  closeScope(&fn);
}

std::mutex observing;  // guards `handle` and `enabled`: the layer's thread and onDiverged's may both ask
bool enabled = false;

// A disabled callback costs the program's ops nothing, and keeps its place
// among the process's callbacks when enabled again.
void observe(bool on) {
  std::lock_guard lock(observing);
  if (!installed) return;
  if (handle == at::INVALID_CALLBACK_HANDLE) {
    if (!on) return;
    handle = at::addGlobalCallback(
        at::RecordFunctionCallback(onStart, onEnd)
            .needsInputs(true)
            .needsIds(true)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION, at::RecordScope::USER_SCOPE}));
    enabled = true;
    return;
  }
  if (on == enabled) return;
  if (on) {
    resumes.fetch_add(1, std::memory_order_relaxed);  // each thread looks for a node it is inside (resumeNode)
    at::reenableCallback(handle);
  } else {
    at::disableCallback(handle);
  }
  enabled = on;
}

// An operation did not match the recorder's template (framework_api.h):
// ops are observed again from the next one on, and modules from the next op
// of the thread it ran on, or else once the interpreter's main thread runs
// the layer's function (a pending call: an op on a thread without Python
// frames, or none after it). Inside an op, maybe without the GIL.
void onDiverged() {
  observe(true);
  if (layerObserves.load() == nullptr) return;
  const uint64_t thread = (at::RecordFunction::currentThreadId() + 1) % kTicket;
  const uint64_t divergence = (tickets.fetch_add(1) + 1) * kTicket + thread;
  divergedOn.store(divergence);
  Py_AddPendingCall(callLayer, reinterpret_cast<void*>(static_cast<uintptr_t>(divergence)));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const char* gpurr_torch_built_for(void) {
  return GPURR_TORCH_BUILT_VERSION;
}

// Starts reporting to the recorder `recorder` (a dlopen handle).
// `skipped` holds the path prefixes of frames that are not the program's,
// separated by '\n'. Returns 0, or a negative number when the recorder's
// functions are missing or of another version.
extern "C" __attribute__((visibility("default"))) int gpurr_torch_install(void* recorder, const char* skipped) {
  if (installed) return 0;
  auto version = reinterpret_cast<decltype(&gpurr_framework_api_version)>(dlsym(recorder, "gpurr_framework_api_version"));
  openScope = reinterpret_cast<OpenScope>(dlsym(recorder, "gpurr_framework_open_scope"));
  closeScope = reinterpret_cast<CloseScope>(dlsym(recorder, "gpurr_framework_close_scope"));
  opOperands = reinterpret_cast<OpOperands>(dlsym(recorder, "gpurr_framework_op_operands"));
  recomputing = reinterpret_cast<decltype(recomputing)>(dlsym(recorder, "gpurr_framework_recomputing"));
  if (version == nullptr || openScope == nullptr || closeScope == nullptr || opOperands == nullptr) return -1;
  if (version() != GPURR_FRAMEWORK_API_VERSION) return -2;
  if (auto source = reinterpret_cast<decltype(&gpurr_framework_sequence_source)>(
          dlsym(recorder, "gpurr_framework_sequence_source")))
    source(sequenceNow);
  if (auto source = reinterpret_cast<decltype(&gpurr_framework_grad_mode_source)>(
          dlsym(recorder, "gpurr_framework_grad_mode_source")))
    source(gradModeNow);
  recorderHandle = recorder;
  cpuOperands = std::getenv("GPURR_TEST_CPU_OPERANDS") != nullptr;
  for (const char* p = skipped; p != nullptr && *p != '\0';) {
    const char* end = std::strchr(p, '\n');
    skippedPrefixes.emplace_back(p, end == nullptr ? std::strlen(p) : static_cast<size_t>(end - p));
    p = end == nullptr ? nullptr : end + 1;
  }
  installed = true;
  observe(true);
  if (auto onDiverge = reinterpret_cast<decltype(&gpurr_framework_on_diverged)>(
          dlsym(recorder, "gpurr_framework_on_diverged")))
    onDiverge(onDiverged);
  return 0;
}

// `observe` (a Python callable, kept): what the interpreter runs after an
// operation did not match the recorder's template, to observe modules again.
extern "C" __attribute__((visibility("default"))) void gpurr_torch_on_diverged(PyObject* observe) {
  Py_IncRef(observe);
  if (PyObject* old = layerObserves.exchange(observe)) Py_DecRef(old);
}

// Stops (`on` 0) or starts again reporting scopes, between training steps:
// the layer's learning steps (docs/RECORDING.md, "What the layer costs").
// A scope open when reporting stops still reports its end.
extern "C" __attribute__((visibility("default"))) void gpurr_torch_observe(int on) {
  if (installed) observe(on != 0);
}

// From now on each op first asks `tryInstall` (gpurr_torch_cuda_try_install)
// to attach the allocator's block tracker, until it has answered.
extern "C" __attribute__((visibility("default"))) void gpurr_torch_watch_blocks(void* tryInstall) {
  attachBlocks = reinterpret_cast<int (*)(void*)>(tryInstall);
}

extern "C" __attribute__((visibility("default"))) void gpurr_torch_uninstall(void) {
  std::lock_guard lock(observing);
  if (handle == at::INVALID_CALLBACK_HANDLE) return;
  at::removeCallback(handle);
  handle = at::INVALID_CALLBACK_HANDLE;
  installed = false;  // for good: no more observing
}
