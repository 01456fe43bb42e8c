"""A simulated CUDA process as gpurr's recorder would see it: host threads,
streams, a caching allocator over driver allocations, kernel launches whose
memory contents are modelled byte for byte, and the events FORMAT.md says the
recorder writes for them."""
import random
import struct

import numpy as np

from . import bufhash

SMALL_SEGMENT = 2 << 20        # the caching allocator's segment for blocks up to 1 MiB
LARGE_SEGMENT = 20 << 20       # ... for blocks of 1 to 10 MiB; larger ones get a segment of their own
SMALL_LIMIT = 1 << 20
VMM_RESERVE = 1 << 30          # an expandable segment's reserved address space
VMM_PAGE = 2 << 20             # ... mapped 2 MiB at a time as it grows
ROUND = 512


class Alloc:
    """A driver allocation: one `alloc` event."""

    def __init__(self, prog, ordinal, address, size, kind, stream=0):
        self.prog, self.ordinal, self.address, self.size, self.kind = prog, ordinal, address, size, kind
        self.stream = stream
        self.blocks = []           # live caching-allocator blocks in it
        self.free_blocks = [(0, size)] if kind == 'device' else []
        self.mapped = 0            # vmm: bytes mapped from the start of the reservation
        self.pool = None
        self.live = True
        self._data = None

    @property
    def data(self):
        if self._data is None and self.kind == 'vmm':
            # Reserved address space: pages exist where mapped (grow fills them).
            self._data = np.zeros(self.size, dtype=np.uint8)
        if self._data is None:
            # Fresh memory holds whatever was there: different in every run
            # (or zeros in every process, where the driver scrubs it).
            if self.prog.fresh_zeros:
                self._data = np.zeros(self.size, dtype=np.uint8)
            else:
                g = np.random.default_rng([self.prog.seed, self.ordinal, 7])
                self._data = g.integers(0, 256, self.size, dtype=np.uint8)
        return self._data


# Which stream last touched each byte, as a small tag per stream handle (0:
# untouched, or stream -1: written without a digest).
_TAG = np.uint16
_TAGS = {-1: 0}


def _tag(stream):
    tag = _TAGS.setdefault(stream, len(_TAGS))
    assert tag <= np.iinfo(_TAG).max, 'more streams than tags'
    return tag


class Buf:
    """A tensor's storage: a caching-allocator block (bound `block`) or a
    whole driver allocation (bound `allocation`)."""

    def __init__(self, alloc, offset, size, bound, stream=None):
        self.alloc, self.offset, self.size, self.bound, self.stream = alloc, offset, size, bound, stream
        self.touched = np.zeros(size, dtype=_TAG)  # 0: untouched, else the tag of the stream that last touched it
        self.live = True

    @property
    def address(self):
        return self.alloc.address + self.offset

    def bytes(self, start=0, end=None):
        end = self.size if end is None else end
        return self.alloc.data[self.offset + start:self.offset + end]

    def f32(self):
        return self.bytes()[:self.size // 4 * 4].view(np.float32)

    def i64(self):
        return self.bytes()[:self.size // 8 * 8].view(np.int64)

    def put(self, arr, start=0):
        b = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
        assert start + b.size <= self.size
        self.alloc.data[self.offset + start:self.offset + start + b.size] = b


class Ptr:
    """A pointer parameter: a buffer, a byte offset into it, and what the
    launch's framework op does with the tensor (`r`, `w` or `rw`)."""

    def __init__(self, buf, role='rw', offset=0):
        self.buf, self.role, self.offset = buf, role, offset


def _origin(o):
    return None if o is None else dict(o)


class Program:
    """One recorded process. `seed` decides everything that differs between
    two runs of the same program without changing its results: addresses,
    stream and event handles, time, what fresh memory holds."""

    def __init__(self, seed, hash_inputs=False, expandable=False, chunk_bytes=65536, fresh_zeros=False):
        self.seed = seed
        self.fresh_zeros = fresh_zeros
        self.rng = random.Random(seed * 7919 + 13)
        self.hash_inputs = hash_inputs
        self.written_out_of_inputs = False  # with hash_inputs: a range a launch only writes is not in its inputs
        self.expandable = expandable
        self.chunk_bytes = chunk_bytes
        self.events = []
        self.allocs = []
        self.seq = 0
        self.time = 1000 + self.rng.randrange(1000)
        self.next_address = 0x7f0000000000 + self.rng.randrange(1, 64) * (1 << 30)
        self.vmm_next = 0x7e0000000000 + self.rng.randrange(1, 64) * (1 << 30)
        self.pools = {}             # (stream, large) -> [Alloc]
        self.modules = []
        self.module_stride = 1      # ordinals 1, 1 + stride, ...: FORMAT.md asks only that they be unique
        self.launch_count = 0
        self.capture_host_data = False
        self.step_launches = {}
        self.hooks = []             # called before every event: f(program, thread)
        self.snapshot = None        # f(kernel name, origin): keep the launch's bytes (--snapshot)
        self.snapshot_text = ''

    # ------------------------------------------------------------ events
    def emit(self, thread, kind, body, origin=None):
        for h in list(self.hooks):
            h(self, thread)
        self.seq += 1
        self.time += 200 + self.rng.randrange(300)
        ev = {'seq': self.seq, 'timeNs': self.time, 'thread': thread, kind: body}
        if origin is not None and kind != 'launch':
            origin = dict(origin, stepLaunch=self.step_launches.get(origin.get('step', -1), 0))
        if origin is not None:
            ev['origin'] = _origin(origin)
        self.events.append(ev)
        if kind == 'alloc':
            self.seq += 1           # seq may skip numbers (FORMAT.md section 4)
        return ev

    def handle(self):
        return 0x5500000000 + self.rng.randrange(1 << 24) * 16

    def module(self, thread, image, arch=90):
        ordinal = len(self.modules) * self.module_stride + 1
        self.modules.append(image)
        self.emit(thread, 'module', {'ordinal': ordinal, 'cubin': ('blob', image), 'arch': arch,
                                     'digest': bufhash.digest(image)})
        return ordinal

    # ------------------------------------------------------------ memory
    def driver_alloc(self, thread, size, kind='device', stream=0):
        ordinal = len(self.allocs) + 1
        if kind == 'vmm':
            address = self.vmm_next
            self.vmm_next += size
        else:
            self.next_address += (1 << 21) * (1 + self.rng.randrange(3))
            address = self.next_address
            self.next_address += (size + (1 << 21) - 1) // (1 << 21) * (1 << 21)
        a = Alloc(self, ordinal, address, size, kind, stream)
        self.allocs.append(a)
        self.emit(thread, 'alloc', {'ordinal': ordinal, 'address': address, 'size': size,
                                    'kind': kind, 'device': 0, 'stream': stream})
        return a

    def driver_free(self, thread, a):
        a.live = False
        self.emit(thread, 'free', {'ordinal': a.ordinal, 'address': a.address})

    def cuda_malloc(self, thread, size):
        """Memory outside the caching allocator (a library's own workspace)."""
        a = self.driver_alloc(thread, size)
        a.free_blocks = []
        return Buf(a, 0, size, 'allocation')

    def empty(self, thread, stream, nbytes):
        """The caching allocator: per-stream pools, best fit at the lowest
        address, blocks split from 2 MiB (small) or 20 MiB (large) segments,
        or from an expandable segment: one reservation of address space
        (one `vmm` allocation, FORMAT.md) per pool, into which the allocator
        maps 2 MiB pages as the pool grows (mappings make no event)."""
        size = (nbytes + ROUND - 1) // ROUND * ROUND
        large = size > SMALL_LIMIT
        pool = self.pools.setdefault((stream, large), [])
        best = None
        for seg in pool:
            for (off, n) in seg.free_blocks:
                if n >= size and (best is None or (n, seg.address + off) < (best[2], best[0].address + best[1])):
                    best = (seg, off, n)
        if best is None and self.expandable:
            if not pool:
                pool.append(self.driver_alloc(thread, VMM_RESERVE, 'vmm'))
            seg = pool[0]
            tail = [(o, n) for (o, n) in seg.free_blocks if o + n == seg.mapped]
            start = tail[0][0] if tail else seg.mapped
            grow = (start + size - seg.mapped + VMM_PAGE - 1) // VMM_PAGE * VMM_PAGE
            assert seg.mapped + grow <= seg.size, 'expandable segment full'
            g = np.random.default_rng([self.seed, seg.ordinal, seg.mapped, 7])
            seg.data[seg.mapped:seg.mapped + grow] = g.integers(0, 256, grow, dtype=np.uint8)
            if tail:
                seg.free_blocks.remove(tail[0])
            seg.mapped += grow
            seg.free_blocks.append((start, seg.mapped - start))
            best = (seg, start, seg.mapped - start)
        if best is None:
            if size > 10 * SMALL_LIMIT:
                seg = self.driver_alloc(thread, (size + SMALL_SEGMENT - 1) // SMALL_SEGMENT * SMALL_SEGMENT)
            else:
                seg = self.driver_alloc(thread, LARGE_SEGMENT if large else SMALL_SEGMENT)
            pool.append(seg)
            best = (seg, 0, seg.size)
        seg, off, n = best
        seg.free_blocks.remove((off, n))
        if n > size:
            seg.free_blocks.append((off + size, n - size))
        b = Buf(seg, off, nbytes, 'block', stream)
        b.rounded = size
        seg.blocks.append(b)
        return b

    def release(self, b):
        """A tensor freed: its block goes back to its segment's free list."""
        assert b.live and b.bound == 'block'
        b.live = False
        seg = b.alloc
        seg.blocks.remove(b)
        free = sorted(seg.free_blocks + [(b.offset, b.rounded)])
        merged = []
        for off, n in free:
            if merged and merged[-1][0] + merged[-1][1] == off:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((off, n))
        seg.free_blocks = merged

    def _locate(self, address):
        """(alloc, block or None) that a device pointer points into."""
        for a in self.allocs:
            if a.live and a.address <= address < a.address + a.size:
                for b in a.blocks:
                    if b.live and b.address <= address < b.address + b.size:
                        return a, b
                return a, None
        return None, None

    # ------------------------------------------------------------ hashing
    def _range(self, key, start):
        """A RangeDigest without digests for the range of `key` from `start`."""
        a, b = key
        end = (b.address + b.size) if b is not None else (a.address + a.size)
        r = {'address': start, 'size': end - start, 'allocation': a.ordinal,
             'offset': start - a.address}
        if b is not None:
            r['bound'] = 'block'
        return r

    def _bytes(self, key, r):
        a = key[0]
        return a.data[r['offset']:r['offset'] + r['size']]

    def _digest(self, data, r):
        chunks = bufhash.chunk_digests(data, self.chunk_bytes)
        r['digest'] = bufhash.fold(chunks, len(data))
        if 2 <= len(chunks) <= 256:
            r['chunkDigests'] = chunks

    def _touch(self, key, r, stream, mark=True):
        """Whether bytes of the range were untouched since handed out, or
        last touched on another stream (FORMAT.md, hashInputs)."""
        a, b = key
        if b is not None:
            lo = r['address'] - b.address
            mask = b.touched[lo:lo + r['size']]
        else:
            buf = self._whole.get(a.ordinal)
            if buf is None:
                buf = self._whole[a.ordinal] = np.zeros(a.size, dtype=_TAG)
            mask = buf[r['offset']:r['offset'] + r['size']]
        tag = _tag(stream)
        fresh = not (mask == tag).all()
        if mark:
            mask[:] = tag
        return fresh

    _whole = None

    def untouched(self, buf):
        """The buffer's bytes were written without a digest (a 2D copy, a
        launch whose hash failed): they count as untouched again
        (FORMAT.md, hashInputs)."""
        self._mark_written(buf, 0, buf.size, -1)

    def _mark_written(self, buf, start, n, stream):
        if buf.bound == 'block':
            buf.touched[start:start + n] = _tag(stream)
        else:
            if self._whole is None:
                self._whole = {}
            m = self._whole.setdefault(buf.alloc.ordinal, np.zeros(buf.alloc.size, dtype=_TAG))
            m[buf.offset + start:buf.offset + start + n] = _tag(stream)

    # ------------------------------------------------------------ operations
    def launch(self, thread, stream, module, name, grid, block, params, compute,
               annotations=(), origin=None, shared=0, hashed=True, in_op=True):
        """params: list of Ptr, or (format, value) scalars packed with
        struct, or ('philox', seed, offset) (PyTorch's PhiloxCudaState by
        value: seed, offset, then a 32-bit intragraph offset and a flag), or
        ('struct', bytes) (a struct by value, 8-byte aligned)."""
        if self._whole is None:
            self._whole = {}
        buf = bytearray()
        layout = []
        roles = {}
        annotations = [dict(x) for x in annotations]
        for p in params:
            if isinstance(p, Ptr):
                fmt, value, align = '<Q', p.buf.address + p.offset, 8
            elif p[0] == 'philox':
                fmt, value, align = '<QQIB', None, 8
            elif p[0] == 'struct':
                fmt, value, align = '%ds' % len(p[1]), p[1], 8
            else:
                fmt, value = '<' + p[0], p[1]
                align = struct.calcsize(fmt)
            while len(buf) % align:
                buf.append(0)
            off = len(buf)
            if value is None:
                buf += struct.pack(fmt, p[1], p[2], 0, 0)
                while len(buf) % 8:
                    buf.append(0)
                for an in annotations:
                    if 'rng' in an:
                        an['rng']['paramOffset'] = off
            else:
                buf += struct.pack(fmt, value)
            layout.append({'offset': off, 'size': len(buf) - off})
            if isinstance(p, Ptr):
                roles.setdefault(('ptr', off), p.role)
        while len(buf) % 8:
            buf.append(0)
        # Every aligned 8-byte word that points into a live allocation.
        pointers, keys = [], {}
        for off in range(0, len(buf) - 7, 8):
            (v,) = struct.unpack_from('<Q', buf, off)
            a, b = self._locate(v)
            if a is None:
                continue
            pointers.append({'byteOffset': off, 'allocation': a.ordinal, 'offset': v - a.address})
            key = (a, b)
            role = roles.get(('ptr', off), 'rw')
            lo, rs = keys.get(key, (v, set()))
            rs.add(role)
            keys[key] = (min(lo, v), rs)
        ranges = []
        for key, (lo, rs) in keys.items():
            r = self._range(key, lo)
            read_only = in_op and origin is not None and key[1] is not None and rs == {'r'}
            # A block the op was given no tensor in (the tensor it made):
            # not hashed before the launch, even at its first use.
            made = (in_op and origin is not None and key[1] is not None and rs == {'w'}
                    and getattr(key[1], 'made', False))
            ranges.append((r['address'], key, r, read_only, made, rs == {'w'}))
        ranges.sort(key=lambda x: x[0])
        inputs, outputs, reads = [], [], []
        # --snapshot: every range hashed before, kept in outputs, with its bytes
        snap = hashed and self.snapshot is not None and self.snapshot(name, origin)
        if hashed:
            for _, key, r, read_only, made, written_only in ranges:
                fresh = self._touch(key, r, stream)
                every = self.hash_inputs and not (self.written_out_of_inputs and written_only)
                if every or (fresh and not made) or snap:
                    ri = dict(r)
                    self._digest(self._bytes(key, r), ri)
                    if snap:
                        ri['snapshot'] = ('blob', self._bytes(key, r).tobytes())
                    inputs.append(ri)
        compute()
        if hashed:
            for _, key, r, read_only, _, _ in ranges:
                if snap:
                    ro = dict(r)
                    self._digest(self._bytes(key, r), ro)
                    ro['snapshot'] = ('blob', self._bytes(key, r).tobytes())
                    outputs.append(ro)
                elif read_only:
                    reads.append(dict(r, digest=0))
                else:
                    ro = dict(r)
                    self._digest(self._bytes(key, r), ro)
                    outputs.append(ro)
        body = {'api': 'launchKernel', 'context': 0x1000, 'stream': stream,
                'function': (module, name),
                'grid': dict(zip('xyz', grid)), 'block': dict(zip('xyz', block)),
                'sharedMemBytes': shared, 'params': bytes(buf), 'paramLayout': layout,
                'pointers': pointers, 'inputs': inputs, 'outputs': outputs, 'reads': reads,
                'annotations': annotations, 'notHashed': not hashed}
        if origin is not None:
            # kernel launches recorded since the origin's step began
            step = origin.get('step', -1)
            n = self.step_launches.get(step, 0)
            self.step_launches[step] = n + 1
            origin = dict(origin, stepLaunch=n)
        self.launch_count += 1
        return self.emit(thread, 'launch', body, origin)

    def _drange(self, buf, start=0, n=None):
        n = buf.size - start if n is None else n
        return {'address': buf.address + start, 'size': n, 'allocation': buf.alloc.ordinal,
                'offset': buf.offset + start}

    def h2d(self, thread, stream, buf, data, origin=None, capture=False):
        data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        buf.put(data)
        self._mark_written(buf, 0, data.size, stream)
        host = 0x600000000000 + self.rng.randrange(1 << 30) * 64
        body = {'kind': 'hostToDevice', 'stream': stream, 'async': True, 'size': int(data.size),
                'dst': self._drange(buf, 0, data.size),
                'src': {'address': host, 'size': int(data.size)},
                'digest': bufhash.digest(data)}
        if capture:
            body['data'] = ('blob', bytes(data))
        return self.emit(thread, 'memcpy', body, origin)

    def d2h(self, thread, stream, buf, origin=None):
        host = 0x600000000000 + self.rng.randrange(1 << 30) * 64
        body = {'kind': 'deviceToHost', 'stream': stream, 'async': False, 'size': buf.size,
                'dst': {'address': host, 'size': buf.size}, 'src': self._drange(buf),
                'digest': bufhash.digest(buf.bytes())}
        return self.emit(thread, 'memcpy', body, origin)

    def d2d(self, thread, stream, dst, src, origin=None):
        dst.put(src.bytes().copy())
        self._mark_written(dst, 0, src.size, stream)
        body = {'kind': 'deviceToDevice', 'stream': stream, 'async': True, 'size': src.size,
                'dst': self._drange(dst, 0, src.size), 'src': self._drange(src),
                'digest': bufhash.digest(dst.bytes(0, src.size))}
        return self.emit(thread, 'memcpy', body, origin)

    def memset(self, thread, stream, buf, value=0, origin=None):
        buf.bytes()[:] = value
        self._mark_written(buf, 0, buf.size, stream)
        body = {'stream': stream, 'async': True, 'dst': self._drange(buf), 'value': value,
                'elementSize': 1, 'digest': bufhash.digest(buf.bytes())}
        return self.emit(thread, 'memset', body, origin)

    def graph_launch(self, thread, stream, addresses, compute, node_count):
        """A CUDA graph launch whose nodes the recorder read (FORMAT.md
        `graph`): its ranges run from each device address its nodes take to
        the end of the allocation, hashed as a launch's are: inputs at their
        first use (every one with hash_inputs), every range after."""
        lowest = {}
        for v in addresses:
            a, _ = self._locate(v)
            if a is not None:
                lowest[a] = min(lowest.get(a, v), v)
        spans = sorted(((lo, a) for a, lo in lowest.items()), key=lambda x: x[0])
        inputs, outputs = [], []
        for lo, a in spans:
            r = self._range((a, None), lo)
            if self._touch_span(a, r, stream) or self.hash_inputs:
                ri = dict(r)
                self._digest(self._bytes((a, None), r), ri)
                inputs.append(ri)
        compute()
        for lo, a in spans:
            ro = self._range((a, None), lo)
            self._digest(self._bytes((a, None), ro), ro)
            outputs.append(ro)
        return self.emit(thread, 'graph', {'graphExec': self.handle(), 'stream': stream, 'nodeCount': node_count,
                                           'inputs': inputs, 'outputs': outputs})

    def _touch_span(self, a, r, stream):
        """_touch for a range of a whole allocation that may hold blocks:
        the bytes are one history, whichever way a launch reached them."""
        fresh = self._touch((a, None), r, stream)
        lo, hi = r['address'], r['address'] + r['size']
        for b in a.blocks:
            if b.live and b.address < hi and lo < b.address + b.size:
                s, e = max(lo, b.address) - b.address, min(hi, b.address + b.size) - b.address
                fresh |= not (b.touched[s:e] == _tag(stream)).all()
                b.touched[s:e] = _tag(stream)
        return fresh

    def captured(self, thread, stream, capture_id, kind, body, origin=None):
        """A copy, set or graph launch enqueued on a stream being captured into
        a CUDA graph (FORMAT.md: `captured`, compatVersion 5): it does not run
        now, so no byte changes, nothing is hashed and nothing is touched."""
        body = dict(body, stream=stream, captured=True, captureId=capture_id)
        if kind in ('memcpy', 'memset'):
            body['digest'] = 0
        return self.emit(thread, kind, body, origin)

    ELEMENT_SIZE = {'int8': 1, 'uint8': 1, 'float16': 2, 'bfloat16': 2, 'int32': 4, 'uint32': 4, 'float32': 4,
                    'int64': 8, 'uint64': 8, 'float64': 8}

    def collective(self, thread, stream, call, op, communicator, rank, size, sequence, buf, count, compute,
                   data_type='float32', reduce_op='sum', origin=None, asynchronous=False, peer=-1, sends=True,
                   receives=True, out=None, objects=False, completes=True):
        """A collective in place on `buf` (FORMAT.md `collective`, compatVersion
        9), as PyTorch issues an all-reduce through NCCL: its send buffer
        hashed before it runs (`inputs`), `compute()` writes what this rank
        receives, the receive buffer hashed after it (`outputs`); both ranges
        sized from `count` and the type's size. `asynchronous`: as c10d's
        view of a call that returns before the collective completes (source
        `framework`, process group "0"): what it receives has digest 0.
        `objects`: as c10d's view of an object collective's (pickled bytes,
        source `framework`): what it sends has digest 0 too. Not
        `completes`: a call that returned without what it receives (digest
        0), its ranks hanging there. A
        send (`receives` False) has no outputs, a receive (`sends` False) no
        inputs; `peer` is the other end's rank. `out`: the receive buffer,
        where it is not `buf`."""
        n = count * self.ELEMENT_SIZE[data_type]
        out = out or buf
        sent = dict(self._drange(buf, 0, n))
        self._digest(buf.bytes(0, n), sent)
        compute()
        self._mark_written(out, 0, n, stream)
        received = dict(self._drange(out, 0, n))
        if objects:
            asynchronous = True
            sent['digest'] = 0
        if asynchronous or not completes:
            received['digest'] = 0
        else:
            self._digest(out.bytes(0, n), received)
        body = {'source': 'framework' if asynchronous else 'nccl', 'call': call, 'op': op,
                'communicator': communicator, 'rank': rank, 'size': size,
                'dataType': data_type, 'count': count, 'reduceOp': reduce_op, 'peer': peer, 'stream': stream,
                'sequence': sequence, 'group': 0, 'inputs': [sent] if sends else [],
                'outputs': [received] if receives else []}
        if asynchronous:
            body.update(processGroup='0', frameworkSequence=sequence)
        return self.emit(thread, 'collective', body, origin)

    def sync(self, thread, kind, stream=0, event=0):
        return self.emit(thread, 'sync', {'kind': kind, 'stream': stream, 'event': event})

    # ------------------------------------------------------------ output
    rank = -1                       # the process's rank in the job (the header's `rank`), -1 unknown

    def header(self, env=None, command=('python3', 'train.py')):
        env = dict(env or {})
        extra = {} if self.rank < 0 else {'rank': self.rank}
        return {**extra,
            'toolVersion': 'outside-writer 1',
            'commandLine': list(command),
            'workingDirectory': '/home/user/project',
            'environment': [{'key': k, 'value': env[k]} for k in sorted(env)],
            'hostname': 'trainer-%d' % (self.seed % 3),
            'pid': 4000 + self.seed % 1000,
            'startTimeNs': 1764000000000000000 + self.seed * 1000000,
            'gpus': [{'ordinal': 0, 'name': 'NVIDIA H100 80GB HBM3', 'uuid': 'GPU-1b2c3d4e-0000-1111-2222-333344445555',
                      'smCount': 132, 'ccMajor': 9, 'ccMinor': 0, 'memoryBytes': 85045477376,
                      'pciBusId': '0000:19:00.0'}],
            'driverVersion': 13000, 'cudaRuntimeVersion': 13000,
            'cudnnVersion': 91400, 'cublasVersion': 130100,
            'libraries': [{'key': 'torch', 'value': '2.11.0'}],
            'options': {'hashInputs': self.hash_inputs, 'hashChunkBytes': self.chunk_bytes,
                        'snapshot': self.snapshot_text, 'captureHostData': self.capture_host_data},
        }

    def write(self, path, env=None, events_per_block=48, compat_version=None, schema_module=None,
              extra_events=(), write_index=True, command=('python3', 'train.py'), host_regions=()):
        from .trace import TraceWriter, COMPAT_VERSION
        w = TraceWriter(path, self.header(env, command), events_per_block=events_per_block,
                        compat_version=compat_version or COMPAT_VERSION, schema_module=schema_module)
        extra = sorted(extra_events, key=lambda e: e[0])
        for ev in self.events:
            while extra and extra[0][0] <= ev['seq']:
                w.add(extra.pop(0)[1])
            ev = dict(ev)
            for kind in ('module', 'memcpy'):
                if kind in ev:
                    body = dict(ev[kind])
                    for field in ('cubin', 'data'):
                        if isinstance(body.get(field), tuple):
                            body[field] = w.blob(body[field][1],
                                                 'raw' if field == 'cubin' else 'bytePlanes4')
                    ev[kind] = body
            if 'launch' in ev and any('snapshot' in r for r in ev['launch']['inputs'] + ev['launch']['outputs']):
                body = dict(ev['launch'])
                for field in ('inputs', 'outputs'):
                    body[field] = [dict(r, snapshot=w.blob(r['snapshot'][1], 'bytePlanes4' if i % 2 else 'raw'))
                                   if 'snapshot' in r else r for i, r in enumerate(body[field])]
                ev['launch'] = body
            w.add(ev)
        for e in extra:
            w.add(e[1])
        w.close(write_index, host_regions)
        return path
