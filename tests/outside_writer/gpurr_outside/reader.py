"""Reads a gpurr trace directory (FORMAT.md sections 1 to 6) into the shapes trace.py writes.

Written from FORMAT.md and trace.capnp alone, like the writer: the header,
the blocks of `events` (block headers, zstd frames, Frame messages with their
FunctionDefs), the index with its host regions, the `checksums` of header
and index (FORMAT.md section 5: a damaged header is refused, a damaged or
missing index ignored), and the blob store. Events
come back as dicts in the shape TraceWriter.add takes: a launch names its
function as (module ordinal, mangled name), and each event carries the
number of the block it was read from under BLOCK, so `write` can lay the
events out in the same blocks again.
"""
import os
import re

import zstandard

from . import trace

BLOCK = '_block'
BLOCK_HEADER_BYTES = 64
KINDS = ('launch', 'memcpy', 'memset', 'alloc', 'free', 'module', 'sync', 'graph')


_CHECKSUM_LINE = re.compile(rb'([0-9a-f]{32})  ([^\n]+)\n')


class Trace:
    def __init__(self, path, header, events, host_regions, has_index, stopped_after_step=-1, layer_steps=None,
                 index_problem=None):
        self.path = path
        self.header = header              # Header as a dict
        self.events = events              # Event dicts, in file order
        self.host_regions = host_regions  # [(start, end)] from the index
        self.has_index = has_index
        self.stopped_after_step = stopped_after_step  # the index's stoppedAfterStep
        self.layer_steps = layer_steps  # the index's layerSteps (a dict), None when absent
        self.index_problem = index_problem  # why an index was ignored (then has_index is False), or None

    def blob(self, ref):
        """The decoded bytes of a BlobRef (a dict), their id checked."""
        ident = '%016x%016x' % (ref['idHigh'], ref['idLow'])
        with open(os.path.join(self.path, 'blobs', ident[:2], ident), 'rb') as f:
            stored = zstandard.ZstdDecompressor().decompress(f.read())
        k = {'raw': 1, 'bytePlanes4': 4, 'bytePlanes2': 2}[ref['encoding']]
        data = _unplane(stored, k) if k > 1 else stored
        if len(data) != ref['size'] or trace.xxh3_128(data) != ident:
            raise ValueError('blob %s does not hold the bytes its id names' % ident)
        return data


def kind(event):
    return next(k for k in KINDS if k in event)


def _unplane(data, k):
    """The inverse of trace.byte_planes."""
    n = len(data) // k * k
    per = n // k
    out = bytearray(n)
    for j in range(k):
        out[j:n:k] = data[j * per:(j + 1) * per]
    return bytes(out) + data[n:]


def checksums(path):
    """The trace's `checksums` as {name: [digest]}, {} when it has none; a
    line of another form, a name listed twice or no `header` makes the file
    damaged (FORMAT.md section 5)."""
    f = os.path.join(path, 'checksums')
    if not os.path.exists(f):
        return {}
    if os.path.getsize(f) > trace.CHECKSUMS_LIMIT:
        raise ValueError('%s: over %d bytes' % (f, trace.CHECKSUMS_LIMIT))
    with open(f, 'rb') as fh:
        data = fh.read()
    sums, at = {}, 0
    while at < len(data):
        m = _CHECKSUM_LINE.match(data, at)
        if m is None:
            raise ValueError('%s: damaged: line %d is not "<32 hex digits>  <file>"'
                             % (f, data.count(b'\n', 0, at) + 1))
        name = m.group(2).decode('utf-8', 'replace')
        if name in sums:
            raise ValueError('%s: damaged: line %d names %s again' % (f, data.count(b'\n', 0, at) + 1, name))
        sums[name] = [m.group(1).decode()]
        at = m.end()
    if 'header' not in sums:
        raise ValueError('%s: damaged: it lists no header' % f)
    return sums


def _message(s, struct, data):
    with struct.from_bytes(data, traversal_limit_in_words=1 << 30) as m:
        return m.to_dict()


def read(path, schema_module=None):
    s = schema_module or trace.schema()
    with open(os.path.join(path, 'version'), 'rb') as f:
        if f.read() != b'gpurr-trace %d\n' % trace.FORMAT_VERSION:
            raise ValueError('%s: not a gpurr trace of format %d' % (path, trace.FORMAT_VERSION))
    sums = checksums(path)     # names other than header and index are skipped
    with open(os.path.join(path, 'header'), 'rb') as f:
        data = f.read()
    if any(d != trace.checksum(data) for d in sums.get('header', [])):
        raise ValueError('%s: header damaged: its XXH3-128 is not the one checksums records' % path)
    header = _message(s, s.Header, data)
    with open(os.path.join(path, 'events'), 'rb') as f:
        data = f.read()
    events = []
    offset = 0
    block = 0
    while offset < len(data):
        bh = _message(s, s.BlockHeader, data[offset:offset + BLOCK_HEADER_BYTES])
        if bh['magic'] != trace.MAGIC:
            raise ValueError('%s: bad block magic at offset %d' % (path, offset))
        offset += BLOCK_HEADER_BYTES
        raw = zstandard.ZstdDecompressor().decompress(data[offset:offset + bh['compressedSize']])
        offset += bh['compressedSize']
        functions = {}
        count = 0
        for frame in s.Frame.read_multiple_bytes(raw, traversal_limit_in_words=1 << 30):
            f = frame.to_dict()
            if 'function' in f:
                fn = f['function']
                functions[fn['id']] = (fn['module'], fn['name'])
                continue
            ev = f['event']
            if 'launch' in ev:
                ev['launch']['function'] = functions[ev['launch']['function']]
            ev[BLOCK] = block
            events.append(ev)
            count += 1
        if count != bh['eventCount'] or (count and events[-count]['seq'] != bh['firstSeq']):
            raise ValueError('%s: block %d does not hold what its header says' % (path, block))
        block += 1
    host_regions = []
    stopped = -1
    layer_steps = None
    has_index = os.path.exists(os.path.join(path, 'index'))
    problem = None
    if has_index:
        with open(os.path.join(path, 'index'), 'rb') as f:
            data = f.read()
        if any(d != trace.checksum(data) for d in sums.get('index', [])):
            problem = 'its XXH3-128 is not the one checksums records'
    elif 'index' in sums:
        problem = 'missing, though checksums lists it'
    if problem:
        has_index = False     # ignored: the events were read from the blocks anyway
    if has_index:
        index = _message(s, s.Index, data)
        host_regions = [(r['start'], r['end']) for r in index.get('hostRegions', [])]
        stopped = index.get('stoppedAfterStep', -1)
        layer_steps = index.get('layerSteps')
    return Trace(path, header, events, host_regions, has_index, stopped, layer_steps,
                 problem and '%s: index ignored: %s' % (path, problem))


def write(t, path):
    """Writes a Trace (as read, or changed) with trace.TraceWriter: the same
    header, events in the blocks their BLOCK numbers say (an event without one
    joins the block before it), blobs copied, the index with host regions,
    the step after which the recorder stopped the program and how the
    framework layer attributed the steps."""
    w = trace.TraceWriter(path, t.header, events_per_block=1 << 62)
    block = None
    for ev in t.events:
        b = ev.get(BLOCK, block)
        if block is not None and b != block:
            w.flush()
        block = b
        w.add(_with_blobs(t, w, {k: v for k, v in ev.items() if k != BLOCK}))
    w.close(write_index=t.has_index, host_regions=t.host_regions, stopped_after_step=t.stopped_after_step,
            layer_steps=t.layer_steps)
    return path


def _with_blobs(t, w, obj):
    """Copies every blob an event refers to into the new trace's store."""
    if isinstance(obj, dict):
        if set(obj) == {'idHigh', 'idLow', 'size', 'encoding'}:
            if obj['size'] == 0 and obj['idHigh'] == 0 and obj['idLow'] == 0:
                return obj    # a module image not kept (FORMAT.md section 4)
            return w.blob(t.blob(obj), obj['encoding'])
        return {k: _with_blobs(t, w, v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_with_blobs(t, w, v) for v in obj]
    return obj
