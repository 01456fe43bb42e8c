"""c10d's view of a program's collectives, for every backend (gloo included):
torch.distributed's collective functions wrapped so that each call becomes a
`collective` event of source `framework` (FORMAT.md): its name, the process
group's name, c10d's sequence number, rank and size in the group, the
program's line, and the digests of its CPU tensors, those it sends hashed
before the call and those it receives after it completed (a CUDA tensor's
bytes are the recorded copies and NCCL collectives around it, so it has no
digest here). Installed by gpurr_torch_layer.install; the wrappers call the
original function unchanged and never let a failure of their own reach the
program.

An asynchronous call (async_op=True, isend, irecv) is recorded when it
returns, its outputs without digests: they are complete only at its wait().

Collectives that C++ issues itself (DistributedDataParallel's gradient
buckets and its broadcast of the module's state) do not pass through these
functions. They do pass through c10d's dispatcher ops (c10d::allreduce_ and
the rest), which is where c10d's ProcessGroup methods send every call: a
kernel of ours for those ops at the ADInplaceOrView key, which every call
reaches outside inference mode and which has no kernel of PyTorch's for
them, records each call and hands it on to the next key unchanged. A call
that one of the wrappers above made is left to the wrapper. The op returns
before the collective completes, so these are recorded as asynchronous
calls are.
"""
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
}

# c10d's dispatcher ops, as C++ calls them: name -> the same as _SPECS, with
# the ops' argument names (the root or peer is a rank in the group).
_OPS = {
    "allreduce_": (_ALL_REDUCE, ("tensors",), ("tensors",), None, None),
    "allreduce_coalesced_": (_ALL_REDUCE, ("tensors",), ("tensors",), None, None),
    "broadcast_": (_BROADCAST, ("tensors",), ("tensors",), "root_rank", "send"),
    "reduce_": (_REDUCE, ("tensors",), ("tensors",), "root_rank", "recv"),
    "allgather_": (_ALL_GATHER, ("input_tensors",), ("output_tensors",), None, None),
    "_allgather_base_": (_ALL_GATHER, ("input_tensor",), ("output_tensor",), None, None),
    "allgather_coalesced_": (_ALL_GATHER, ("input_list",), ("output_lists",), None, None),
    "allgather_into_tensor_coalesced_": (_ALL_GATHER, ("inputs",), ("outputs",), None, None),
    "reduce_scatter_": (_REDUCE_SCATTER, ("input_tensors",), ("output_tensors",), None, None),
    "_reduce_scatter_base_": (_REDUCE_SCATTER, ("input_tensor",), ("output_tensor",), None, None),
    "reduce_scatter_tensor_coalesced_": (_REDUCE_SCATTER, ("inputs",), ("outputs",), None, None),
    "alltoall_": (_ALL_TO_ALL, ("input_tensors",), ("output_tensors",), None, None),
    "alltoall_base_": (_ALL_TO_ALL, ("input",), ("output",), None, None),
    "gather_": (_GATHER, ("input_tensors",), ("output_tensors",), "root_rank", "recv"),
    "scatter_": (_SCATTER, ("input_tensors",), ("output_tensors",), "root_rank", "send"),
    "send": (_SEND, ("tensors",), (), "dst", None),
    "recv_": (_RECV, (), ("tensors",), "src", None),
    "barrier": (_BARRIER, (), (), None, None),
}

_recorder = None
_skipped = ()
_library = None  # the torch.library.Library holding the ops' kernels, kept alive
_wrapped = threading.local()  # .inside: a wrapper's call is under way on this thread


def _is_compiling():
    return False


def _tensors(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return [value]


def _ranges(tensors, hashed):
    """(address, size, digest) triples: CPU tensors' bytes hashed when
    `hashed`, the rest with digest 0."""
    out = []
    for t in tensors:
        if not t.is_cpu:
            continue
        size = t.numel() * t.element_size()
        data = t if t.is_contiguous() else t.contiguous()
        digest = _recorder.gpurr_framework_hash_host(data.data_ptr(), size) if hashed and size else 0
        out += [t.data_ptr(), size, digest]
    return out


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
    key = (group.group_name + "|" + ",".join(map(str, dist.get_process_group_ranks(group)))).encode()
    file, line = _line()
    return (call_name, kind, group.group_name.encode(), key, rank, size, sequence, dtype.encode(), count, op.encode(),
            peer, _ranges(ins, True), file, line), outs


def _record(described, outs, asynchronous):
    """The call, once it has returned: what it received hashed unless it is
    asynchronous (complete only at its wait())."""
    call_name, kind, group_name, key, rank, size, sequence, dtype, count, op, peer, inputs, file, line = described
    outputs = _ranges(outs, not asynchronous)
    _recorder.gpurr_framework_collective(
        call_name, kind, group_name, key, rank, size, sequence, dtype, count, op, peer,
        (ctypes.c_uint64 * max(len(inputs), 1))(*inputs), len(inputs) // 3,
        (ctypes.c_uint64 * max(len(outputs), 1))(*outputs), len(outputs) // 3, file, line)


def _wrap(dist, name, fn, spec):
    signature = inspect.signature(fn)
    call_name = name.encode()
    root_arg = spec[3]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _is_compiling():  # traced by torch.compile: its collectives are the graph's
            return fn(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            a = bound.arguments
            group = a.get("group") or dist.distributed_c10d._get_default_group()
            op = _reduce_name(a["op"]) if "op" in a else ""
            described, outs = _describe(dist, call_name, spec, a, group, dist.get_rank(group),
                                        dist.get_world_size(group), op, a.get(root_arg) if root_arg else None)
            asynchronous = bool(a.get("async_op")) or name in ("isend", "irecv")
        except Exception:  # noqa: BLE001  never the program's failure
            return fn(*args, **kwargs)
        inside, _wrapped.inside = getattr(_wrapped, "inside", False), True
        try:
            result = fn(*args, **kwargs)
        finally:
            _wrapped.inside = inside
        try:
            _record(described, outs, asynchronous)
        except Exception:  # noqa: BLE001
            pass
        return result

    return wrapper


def _plain(t):
    """A tensor that holds its bytes itself (not a fake, meta or subclass
    tensor of a tracer)."""
    import torch

    return type(t) in (torch.Tensor, torch.nn.Parameter) and t.device.type in ("cpu", "cuda")


def _kernel(torch, dist, name, spec):
    """The kernel recording the c10d op `name` as C++ called it."""
    op = getattr(torch.ops.c10d, name).default
    arguments = op._schema.arguments
    names = [x.name for x in arguments]
    defaults = {x.name: x.default_value for x in arguments if x.has_default_value()}
    call_name = ("c10d::" + name).encode()
    below = torch._C._after_ADInplaceOrView_keyset
    root_arg = spec[3]

    def kernel(keyset, *args, **kwargs):
        rest = keyset & below
        if getattr(_wrapped, "inside", False) or _is_compiling():
            return op.redispatch(rest, *args, **kwargs)
        try:
            a = dict(defaults)
            a.update(zip(names, args))
            a.update(kwargs)
            if not all(_plain(t) for n in spec[1] + spec[2] for t in _tensors(a.get(n))):
                return op.redispatch(rest, *args, **kwargs)
            group = dist.ProcessGroup.unbox(a["process_group"])
            reduce = a.get("reduce_op")
            reduce = dist.ReduceOp.RedOpType(reduce.op()).name.lower() if reduce is not None else ""
            peer = a.get(root_arg) if root_arg else None
            if peer is not None and peer >= 0:
                peer = dist.get_global_rank(group, peer)
            described, outs = _describe(dist, call_name, spec, a, group, group.rank(), group.size(), reduce, peer)
        except Exception:  # noqa: BLE001  never the program's failure
            return op.redispatch(rest, *args, **kwargs)
        result = op.redispatch(rest, *args, **kwargs)
        try:
            _record(described, outs, True)
        except Exception:  # noqa: BLE001
            pass
        return result

    return kernel


def _install_kernels(torch, dist):
    """Our kernels for c10d's ops, each where PyTorch has none of its own."""
    global _library
    library = torch.library.Library("c10d", "IMPL")
    for name, spec in _OPS.items():
        if not hasattr(torch.ops.c10d, name):
            continue
        if torch._C._dispatch_has_kernel_for_dispatch_key("c10d::" + name, "ADInplaceOrView"):
            continue
        library.impl(name, _kernel(torch, dist, name, spec), "ADInplaceOrView", with_keyset=True)
    _library = library


def install(recorder, skipped):
    """Wraps torch.distributed's collectives, when the program's PyTorch has
    them and the recorder takes them."""
    global _recorder, _skipped, _is_compiling
    if not hasattr(recorder, "gpurr_framework_collective"):
        return
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        return
    recorder.gpurr_framework_hash_host.restype = ctypes.c_uint64
    recorder.gpurr_framework_hash_host.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    u64p = ctypes.POINTER(ctypes.c_uint64)
    recorder.gpurr_framework_collective.restype = None
    recorder.gpurr_framework_collective.argtypes = [
        ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32,
        ctypes.c_int64, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int32, u64p, ctypes.c_uint32,
        u64p, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_uint32]
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling"):
        _is_compiling = compiler.is_compiling
    _recorder = recorder
    _skipped = tuple(skipped) + (os.path.dirname(os.path.abspath(__file__)) + os.sep,)
    c10d = dist.distributed_c10d
    for name, spec in _SPECS.items():
        fn = getattr(c10d, name, None)
        if fn is None:
            continue
        wrapped = _wrap(dist, name, fn, spec)
        setattr(c10d, name, wrapped)
        if getattr(dist, name, None) is fn:
            setattr(dist, name, wrapped)
    _install_kernels(torch, dist)
