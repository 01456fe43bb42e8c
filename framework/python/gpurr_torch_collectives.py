"""c10d's view of a program's collectives, for every backend (gloo included):
torch.distributed's collective functions wrapped so that each call becomes a
`collective` event of source `framework` (FORMAT.md): its name, the process
group's name, c10d's sequence number, rank and size in the group, the
program's line, and the digests of its tensors, those it sends hashed
before the call and those it receives after it completed. CUDA tensors are
hashed by the recorder on the current stream, where the backend takes them
from and leaves them, except on an NCCL group: its NCCL calls are recorded
with their digests. Installed by gpurr_torch_layer.install; the wrappers
call the original function unchanged and never let a failure of their own
reach the program.

An asynchronous call (async_op=True, isend, irecv) is recorded when it
returns, its outputs without digests: they are complete only at its wait().
A synchronous call is also kept by the recorder while it runs: one that
never returns (ranks that issued other collectives wait for good) is
written as it was described if the trace is flushed or closed first (a
signal ends the program), and one that raises after it reached the
backend (the backend's timeout, a mismatch it found: c10d numbered it) is
recorded all the same, what it received without digests. A call another wrapped call makes (torch's send calls isend) is
the outer call's: recorded once.

The object calls (broadcast_object_list, all_gather_object...) pickle their
objects into byte tensors and move those with the calls above. A pickled
tensor holds a host address (its storage's key) that differs from run to
run, so the collectives inside them are recorded without digests, those the
recorder's NCCL wrappers record included.

Collectives that C++ issues itself (DistributedDataParallel's gradient
buckets and its broadcast of the module's state) do not pass through these
functions. They do pass through c10d's dispatcher ops, where the op
observer's library (libgpurr_torch.so, torch_collectives.cpp) records them
when it is loaded: it asks _from_cpp for what c10d keeps in Python, and
leaves the calls the wrappers make to the wrappers.
"""
import collections
import ctypes
import functools
import inspect
import os
import sys
import threading

# name -> (CollectiveOp value, tensors sent, tensors received, root or peer
# argument, whether the root alone sends or receives). "tensor_list" and
# "scatter_list" hold lists.
_OTHER, _ALL_REDUCE, _REDUCE_SCATTER, _ALL_GATHER, _BROADCAST, _REDUCE, _SEND, _RECV = range(8)
_ALL_TO_ALL, _GATHER, _SCATTER, _BARRIER = 8, 9, 10, 11
_SPECS = {
    "all_reduce": (_ALL_REDUCE, ("tensor",), ("tensor",), None, None),
    "broadcast": (_BROADCAST, ("tensor",), ("tensor",), "src", "send"),
    "reduce": (_REDUCE, ("tensor",), ("tensor",), "dst", "recv"),
    "all_gather": (_ALL_GATHER, ("tensor",), ("tensor_list",), None, None),
    "all_gather_into_tensor": (_ALL_GATHER, ("input_tensor",), ("output_tensor",), None, None),
    "reduce_scatter": (_REDUCE_SCATTER, ("input_list",), ("output",), None, None),
    "reduce_scatter_tensor": (_REDUCE_SCATTER, ("input",), ("output",), None, None),
    "all_to_all_single": (_ALL_TO_ALL, ("input",), ("output",), None, None),
    "all_to_all": (_ALL_TO_ALL, ("input_tensor_list",), ("output_tensor_list",), None, None),
    "gather": (_GATHER, ("tensor",), ("gather_list",), "dst", "recv"),
    "scatter": (_SCATTER, ("scatter_list",), ("tensor",), "src", "send"),
    "send": (_SEND, ("tensor",), (), "dst", None),
    "recv": (_RECV, (), ("tensor",), "src", None),
    "isend": (_SEND, ("tensor",), (), "dst", None),
    "irecv": (_RECV, (), ("tensor",), "src", None),
    "barrier": (_BARRIER, (), (), None, None),
    "monitored_barrier": (_BARRIER, (), (), None, None),  # gloo's: names the ranks that did not reach it
}

# The calls that move pickled objects through the collectives above.
_OBJECT_CALLS = ("broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list",
                 "send_object_list", "recv_object_list")

_recorder = None
_local = threading.local()  # objects: object calls under way on this thread; inside: wrapped calls
_skipped = ()
_observer = None  # libgpurr_torch.so, when it records c10d's ops as C++ calls them
_keep_pending = None  # the recorder's gpurr_framework_collective_pending, where it has it
_keys = {}  # process group name -> communicator key


def _is_compiling():
    return False


def _tensors(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return [value]


def _ranges(tensors, hashed, cuda=False):
    """(address, size, digest) triples: CPU tensors' bytes hashed when
    `hashed`, the rest with digest 0; CUDA tensors listed (digest 0) when
    `cuda`."""
    out = []
    for t in tensors:
        if not (t.is_cpu or (cuda and t.is_cuda)):
            continue
        size = t.numel() * t.element_size()
        digest = 0
        if hashed and size and t.is_cpu:
            data = t if t.is_contiguous() else t.contiguous()
            digest = _recorder.gpurr_framework_hash_host(data.data_ptr(), size)
        out += [t.data_ptr(), size, digest]
    return out


def _device_hashes(tensors):
    """The CUDA tensors hashed by the recorder on the current stream: a
    handle for gpurr_framework_collective (0: none)."""
    import torch

    cuda = [t for t in tensors if t.is_cuda and t.is_contiguous()]
    if not cuda:
        return 0
    pairs = [x for t in cuda for x in (t.data_ptr(), t.numel() * t.element_size())]
    stream = torch.cuda.current_stream(cuda[0].device).cuda_stream
    return _recorder.gpurr_framework_hash_device(stream, (ctypes.c_uint64 * len(pairs))(*pairs), len(cuda))


def _cuda_hashed(group, tensors):
    """Whether the call's CUDA tensors are hashed here: it has some, and
    its group's backend for them is not NCCL (whose calls the recorder's
    NCCL wrappers record with their digests)."""
    if not any(t.is_cuda for t in tensors):
        return False
    import torch

    try:
        return group._get_backend(torch.device("cuda")).name() != "nccl"
    except Exception:  # noqa: BLE001  no backend for CUDA tensors
        return False


def _line():
    frame = sys._getframe(1)  # the frames of this file are skipped
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<") and not any(name.startswith(p) for p in _skipped):
            return name.encode(), frame.f_lineno
        frame = frame.f_back
    return None, 0


def _reduce_name(op):
    name = getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]
    return name.lower()


# One call as described before it runs: the recorder's arguments up to the
# tensors (`args`), the host tensors sent (triples), the handle of the CUDA
# tensors sent, the tensors it receives, whether its CUDA tensors are hashed
# here, the program's line, and whether it moves pickled objects (inside an
# object call: nothing hashed).
_Call = collections.namedtuple("_Call", "args inputs device_inputs outs cuda file line objects")


def _describe(dist, call_name, spec, a, group, rank, size, op, peer):
    """What the recorder is told of one call, all but what it receives, and
    the tensors it receives: taken before the call runs, so that what it
    sends is hashed as it was sent. `peer` is a global rank, or None."""
    kind, sent, received, _, root_only = spec
    peer = -1 if peer is None else int(peer)
    is_root = peer == dist.get_rank()
    ins = [t for n in sent for t in _tensors(a.get(n))]
    outs = [t for n in received for t in _tensors(a.get(n))]
    if root_only == "send" and not is_root:
        ins = []
    if root_only == "recv" and not is_root:
        outs = []
    try:
        sequence = group._get_sequence_number_for_group()
    except Exception:  # noqa: BLE001  a backend without sequence numbers
        sequence = -1
    first = (ins or outs or [None])[0]
    dtype = str(first.dtype).replace("torch.", "") if first is not None else ""
    count = first.numel() if first is not None else 0
    key = _key(dist, group)
    file, line = _line()
    objects = getattr(_local, "objects", 0) > 0
    cuda = not objects and _cuda_hashed(group, ins + outs)
    args = (call_name, kind, group.group_name.encode(), key, rank, size, sequence, dtype.encode(), count,
            op.encode(), peer)
    return _Call(args, _ranges(ins, not objects), _device_hashes(ins) if cuda else 0, outs, cuda, file, line, objects)


def _triples(ranges):
    """(address, size, digest) triples as the recorder takes them: an array
    and their count."""
    return (ctypes.c_uint64 * max(len(ranges), 1))(*ranges), len(ranges) // 3


def _record(call, asynchronous):
    """The call, once it has returned: what it received hashed unless it is
    asynchronous (complete only at its wait())."""
    inputs = call.inputs
    outputs = _ranges(call.outs, not asynchronous and not call.objects, call.cuda and asynchronous)
    device_outputs = _device_hashes(call.outs) if call.cuda and not asynchronous else 0
    try:
        _recorder.gpurr_framework_collective(*call.args, *_triples(inputs), *_triples(outputs), call.device_inputs,
                                             device_outputs, call.file, call.line)
    except Exception:
        if device_outputs:
            _recorder.gpurr_framework_hash_drop(device_outputs)
        raise


def _keep(call):
    """The recorder keeps a synchronous call while it runs
    (gpurr_framework_collective_pending), what it sends from device memory
    included: its ticket, 0 for none. Never raises."""
    if _keep_pending is None:
        return 0
    try:
        outputs = _ranges(call.outs, False, call.cuda)
        return _keep_pending(*call.args, *_triples(call.inputs), *_triples(outputs), call.device_inputs, call.file,
                             call.line)
    except Exception:  # noqa: BLE001  not kept: recorded once it returns
        return 0


def _reached(group, call):
    """Whether a call that raised reached the backend: c10d numbered it (a
    timeout, a mismatch the backend found), unlike one refused before (an
    argument c10d checks, which the program may catch on one rank alone)."""
    try:
        return call.args[6] < 0 or group._get_sequence_number_for_group() != call.args[6]
    except Exception:  # noqa: BLE001  a backend without sequence numbers
        return True


def _finish(call, ticket, asynchronous, reached=True):
    """Records a call that returned (or raised: `asynchronous`, what it
    received not hashed; none where it did not `reached` the backend),
    unless the recorder wrote what it kept of it (its device handle with
    it). Never raises: the handle is given back where no record took it
    (a second drop finds nothing)."""
    try:
        if ticket and not _recorder.gpurr_framework_collective_done(ticket):
            return
        if not reached:
            if call.device_inputs:
                _recorder.gpurr_framework_hash_drop(call.device_inputs)
            return
        _record(call, asynchronous)
    except Exception:  # noqa: BLE001
        if call.device_inputs:
            _recorder.gpurr_framework_hash_drop(call.device_inputs)


def _peer(dist, group, a, root_arg):
    """The call's root or peer as a global rank (`src`, `dst`), or from its
    rank in the group (`group_src`, `group_dst`); None when it has none."""
    if root_arg is None:
        return None
    if a.get(root_arg) is not None:
        return a[root_arg]
    in_group = a.get("group_" + root_arg)
    return dist.get_global_rank(group, in_group) if in_group is not None else None


def _wrap(dist, name, fn, spec):
    signature = inspect.signature(fn)
    call_name = name.encode()
    root_arg = spec[3]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _is_compiling() or getattr(_local, "inside", 0):  # the graph's; the outer call's
            return fn(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            a = bound.arguments
            group = a.get("group") or dist.distributed_c10d._get_default_group()
            op = _reduce_name(a["op"]) if "op" in a else ""
            described = _describe(dist, call_name, spec, a, group, dist.get_rank(group), dist.get_world_size(group),
                                  op, _peer(dist, group, a, root_arg))
            asynchronous = bool(a.get("async_op")) or name in ("isend", "irecv")
        except Exception:  # noqa: BLE001  never the program's failure
            return fn(*args, **kwargs)
        ticket = 0
        observer = _observer
        if observer is not None:
            observer.gpurr_torch_collective_wrapped(1)
        _local.inside = 1
        try:
            if not asynchronous:
                ticket = _keep(described)
            result = fn(*args, **kwargs)
        except BaseException:
            _finish(described, ticket, True, not asynchronous and _reached(group, described))
            raise
        finally:
            _local.inside = 0
            if observer is not None:
                observer.gpurr_torch_collective_wrapped(-1)
        _finish(described, ticket, asynchronous)
        return result

    return wrapper


def _wrap_objects(fn):
    """An object call: the collectives it makes carry pickled objects."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _local.objects = getattr(_local, "objects", 0) + 1
        _recorder.gpurr_framework_collectives_of_objects(1)
        try:
            return fn(*args, **kwargs)
        finally:
            _recorder.gpurr_framework_collectives_of_objects(-1)
            _local.objects -= 1

    return wrapper


def _key(dist, group):
    """The group's communicator key (its name and global ranks), kept by name."""
    key = _keys.get(group.group_name)
    if key is None:
        ranks = ",".join(map(str, dist.get_process_group_ranks(group)))
        key = _keys[group.group_name] = (group.group_name + "|" + ranks).encode()
    return key


def _from_cpp(dist, name, peer):
    """For torch_collectives.cpp, with the GIL, what c10d keeps in Python of
    a call C++ made on process group `name`: (communicator key, the global
    rank of `peer`, a rank in the group or -1, the program's file or None,
    line)."""
    key = _keys.get(name)
    if key is None or peer >= 0:
        group = dist.distributed_c10d._resolve_process_group(name)
        key = _key(dist, group)
        if peer >= 0:
            peer = dist.get_global_rank(group, peer)
    file, line = _line()
    return key, peer, file.decode() if file is not None else None, line


def install(recorder, skipped, observer=None):
    """Wraps torch.distributed's collectives, when the program's PyTorch has
    them and the recorder takes them; with `observer` (libgpurr_torch.so,
    loaded), also records the calls C++ makes itself."""
    global _recorder, _skipped, _is_compiling, _observer, _keep_pending
    if not hasattr(recorder, "gpurr_framework_collective"):
        return
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        return
    recorder.gpurr_framework_hash_host.restype = ctypes.c_uint64
    recorder.gpurr_framework_hash_host.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    u64p = ctypes.POINTER(ctypes.c_uint64)
    recorder.gpurr_framework_hash_device.restype = ctypes.c_uint64
    recorder.gpurr_framework_hash_device.argtypes = [ctypes.c_uint64, u64p, ctypes.c_uint32]
    recorder.gpurr_framework_hash_drop.restype = None
    recorder.gpurr_framework_hash_drop.argtypes = [ctypes.c_uint64]
    recorder.gpurr_framework_collectives_of_objects.restype = None
    recorder.gpurr_framework_collectives_of_objects.argtypes = [ctypes.c_int]
    recorder.gpurr_framework_collective.restype = None
    recorder.gpurr_framework_collective.argtypes = [
        ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32,
        ctypes.c_int64, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int32, u64p, ctypes.c_uint32,
        u64p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_uint32]
    if hasattr(recorder, "gpurr_framework_collective_pending"):
        recorder.gpurr_framework_collective_pending.restype = ctypes.c_uint64
        recorder.gpurr_framework_collective_pending.argtypes = (
            recorder.gpurr_framework_collective.argtypes[:16] + [ctypes.c_char_p, ctypes.c_uint32])
        recorder.gpurr_framework_collective_done.restype = ctypes.c_int
        recorder.gpurr_framework_collective_done.argtypes = [ctypes.c_uint64]
        _keep_pending = recorder.gpurr_framework_collective_pending
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling"):
        _is_compiling = compiler.is_compiling
    _recorder = recorder
    _skipped = tuple(skipped) + (os.path.dirname(os.path.abspath(__file__)) + os.sep,)
    c10d = dist.distributed_c10d

    def replace(name, wrap):
        fn = getattr(c10d, name, None)
        if fn is None:
            return
        wrapped = wrap(fn)
        setattr(c10d, name, wrapped)
        if getattr(dist, name, None) is fn:
            setattr(dist, name, wrapped)

    for name, spec in _SPECS.items():
        replace(name, functools.partial(_wrap, dist, name, spec=spec))
    for name in _OBJECT_CALLS:
        replace(name, _wrap_objects)
    if observer is not None and hasattr(observer, "gpurr_torch_collectives_install"):
        observer = ctypes.PyDLL(observer._name)  # the same library, called with the GIL held
        observer.gpurr_torch_collective_wrapped.argtypes = [ctypes.c_int]
        observer.gpurr_torch_collectives_install.argtypes = [ctypes.c_void_p, ctypes.py_object]
        if observer.gpurr_torch_collectives_install(recorder._handle,
                                                    functools.partial(_from_cpp, dist)) >= 0:
            _observer = observer
