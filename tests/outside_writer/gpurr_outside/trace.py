"""Writes a gpurr trace directory (FORMAT.md sections 1 to 6)."""
import os
import subprocess
import tempfile

import capnp
import xxhash
import zstandard

capnp.remove_import_hook()

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_PATH = os.path.join(HERE, '..', '..', '..', 'trace_format', 'trace.capnp')
# trace.capnp imports /capnp/c++.capnp: pycapnp ships it in its package,
# libcapnp-dev in /usr/include.
_IMPORTS = [os.path.dirname(os.path.dirname(capnp.__file__)), '/usr/include']

MAGIC = 0x4b4c425252555047
FORMAT_VERSION = 1
# The newest additions the writer writes (FORMAT.md section 3): the
# `checksums` file of a trace that ended cleanly is compatVersion 13.
COMPAT_VERSION = 13
# The files `checksums` covers, in the order it lists them (FORMAT.md
# section 5: as `xxhsum -H2 header index` prints them).
CHECKSUMMED = ('header', 'index')
CHECKSUMS_LIMIT = 64 << 10    # FORMAT.md section 10


def load_schema(path=SCHEMA_PATH):
    return capnp.load(os.path.abspath(path), imports=[p for p in _IMPORTS if os.path.isdir(p)])


_schema = None


def schema():
    global _schema
    if _schema is None:
        _schema = load_schema()
    return _schema


def xxh3_128(data):
    """The blob id: XXH3-128 as `xxhsum -H2` prints it (high 64 bits first)."""
    out = subprocess.run(['xxhsum', '-H2', '-'], input=data, capture_output=True, check=True).stdout
    text = out.split()[0].decode()
    if text.startswith('XXH'):          # some versions print the algorithm first
        text = out.split()[1].decode()
    assert len(text) == 32, out
    return text


def checksum(data):
    """A file's XXH3-128 as `checksums` gives it (FORMAT.md section 5): 32
    lowercase hex digits, high 64 bits first."""
    return '%032x' % xxhash.xxh3_128_intdigest(bytes(data))


def checksums_text(path, names=CHECKSUMMED):
    """The `checksums` file for the named files of the trace at path: one
    line each, `<digest>  <name>` and a line feed."""
    lines = []
    for name in names:
        with open(os.path.join(path, name), 'rb') as f:
            lines.append('%s  %s\n' % (checksum(f.read()), name))
    return ''.join(lines).encode()


def byte_planes(data, k):
    """FORMAT.md section 6: byte j of every k-byte element, j = 0..k-1, then the tail."""
    n = len(data) // k * k
    return b''.join(data[j:n:k] for j in range(k)) + data[n:]


class TraceWriter:
    """Events are dicts in the shape of trace.capnp's Event, except that a
    launch names its function as `function: (module ordinal, mangled name)`;
    block-local function ids are assigned when the block is written."""

    def __init__(self, path, header, events_per_block=64, compat_version=COMPAT_VERSION,
                 schema_module=None):
        self.s = schema_module or schema()
        self.path = path
        self.events_per_block = events_per_block
        self.pending = []
        self.index = []
        self.offset = 0
        self.last_seq = None
        self.encodings = {}
        os.makedirs(path, mode=0o700, exist_ok=False)
        os.chmod(path, 0o700)
        os.makedirs(os.path.join(path, 'blobs'), mode=0o700)
        self._write_atomic('version', b'gpurr-trace %d\n' % FORMAT_VERSION)
        header = dict(header)
        header.setdefault('formatVersion', FORMAT_VERSION)
        header.setdefault('compatVersion', compat_version)
        self._write_atomic('header', self.s.Header.new_message(**header).to_bytes())
        self.events = open(os.path.join(path, 'events'), 'wb')
        os.chmod(os.path.join(path, 'events'), 0o600)

    def _write_atomic(self, name, data):
        fd, tmp = tempfile.mkstemp(dir=self.path)
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
        os.chmod(tmp, 0o600)
        os.rename(tmp, os.path.join(self.path, name))

    def blob(self, data, encoding='raw'):
        """Stores bytes in the blob store; returns the BlobRef as a dict."""
        data = bytes(data)
        ident = xxh3_128(data)
        d = os.path.join(self.path, 'blobs', ident[:2])
        os.makedirs(d, mode=0o700, exist_ok=True)
        f = os.path.join(d, ident)
        # The same bytes are stored once, in the encoding they were first
        # stored in: every reference to them names that encoding.
        encoding = self.encodings.setdefault(ident, encoding)
        if not os.path.exists(f):
            stored = {'raw': data, 'bytePlanes4': byte_planes(data, 4),
                      'bytePlanes2': byte_planes(data, 2)}[encoding]
            frame = zstandard.ZstdCompressor(level=3, write_content_size=True,
                                             write_checksum=True).compress(stored)
            with open(f, 'wb') as out:
                out.write(frame)
            os.chmod(f, 0o600)
        return {'idHigh': int(ident[:16], 16), 'idLow': int(ident[16:], 16),
                'size': len(data), 'encoding': encoding}

    def add(self, event):
        assert self.last_seq is None or event['seq'] > self.last_seq, 'seq must increase'
        self.last_seq = event['seq']
        self.pending.append(event)
        if len(self.pending) >= self.events_per_block:
            self.flush()

    def flush(self):
        if not self.pending:
            return
        functions = {}
        content = []
        launches = 0
        for ev in self.pending:
            ev = dict(ev)
            if 'launch' in ev:
                launches += 1
                launch = dict(ev['launch'])
                key = launch['function']
                if key not in functions:
                    functions[key] = len(functions)
                    content.append(self.s.Frame.new_message(function={
                        'id': functions[key], 'module': key[0], 'name': key[1]}).to_bytes())
                launch['function'] = functions[key]
                ev['launch'] = launch
            content.append(self.s.Frame.new_message(event=ev).to_bytes())
        raw = b''.join(content)
        frame = zstandard.ZstdCompressor(level=1, write_content_size=True,
                                         write_checksum=True).compress(raw)
        fields = {'magic': MAGIC, 'compressedSize': len(frame), 'uncompressedSize': len(raw),
                  'firstSeq': self.pending[0]['seq'], 'eventCount': len(self.pending),
                  'launchCount': launches, 'firstTimeNs': self.pending[0]['timeNs'],
                  'lastTimeNs': self.pending[-1]['timeNs']}
        header = self.s.BlockHeader.new_message(**fields).to_bytes()
        assert len(header) == 64, len(header)
        self.events.write(header)
        self.events.write(frame)
        entry = {k: v for k, v in fields.items() if k != 'magic'}
        entry['fileOffset'] = self.offset
        self.index.append(entry)
        self.offset += len(header) + len(frame)
        self.pending = []

    def close(self, write_index=True, host_regions=(), stopped_after_step=-1, layer_steps=None):
        """host_regions: (start, end) pairs of the process's readable host
        memory, for the index (FORMAT.md section 5); stopped_after_step: the
        training step after which the recorder stopped the program, -1 when
        it ended by itself; layer_steps: how the framework layer attributed
        the steps (a dict of LayerSteps' fields), None to leave it null.
        With the index (a recording that ended cleanly) goes `checksums`,
        written last (FORMAT.md sections 1 and 5); without it, neither."""
        self.flush()
        self.events.close()
        if write_index:
            regions = [{'start': s, 'end': e} for s, e in host_regions]
            index = self.s.Index.new_message(blocks=self.index, hostRegions=regions,
                                             stoppedAfterStep=stopped_after_step)
            if layer_steps is not None:
                index.layerSteps = layer_steps
            self._write_atomic('index', index.to_bytes())
            self._write_atomic('checksums', checksums_text(self.path))
